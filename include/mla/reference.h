/* The CPU references (SPEC section 2): the fp32 reference on OpenBLAS and
 * the fp64 oracle. Both implement every feature (paged prefix, causal and
 * non-causal drafts, k/v scales, logit cap, sliding window, sinks, several
 * KV heads, ragged drafts, empty prefixes). */
#ifndef MLA_REFERENCE_H
#define MLA_REFERENCE_H

#include "mla/fixture.h"

#ifdef __cplusplus
extern "C" {
#endif

/* o: [num_q_tokens, num_heads, v_head_dim] fp32, unrounded.
 * lse: [num_q_tokens, num_heads] natural log; -inf for a row with no
 * visible key (its o is 0). Deterministic for a given thread count. */
mla_status mla_reference_run(const mla_fixture *fx, float *o, float *lse, mla_error *err);

/* Plain loops in double, same semantics, for measuring the reference. */
mla_status mla_oracle_run(const mla_fixture *fx, double *o, double *lse, mla_error *err);

/* Round an fp32 output to bf16 (round to nearest even, NaN/inf kept). */
void mla_round_bf16(const float *src, mla_bf16 *dst, size_t n);

#ifdef __cplusplus
}
#endif
#endif
