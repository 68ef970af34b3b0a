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

/* The same, and per (token, head) row the statistics of the bias test
 * (validate/judge.c, (B0), (B2), (B3) and (B6)): with P_k the row's final softmax
 * weight of visible key k (sinks in the denominator only), c_k = v_k . o_row
 * (v_k with v_scale for prefix keys; o_row the fp32 output this call
 * returns), and for the column-weighted slope of the larger groups
 * c_k^g = v_k . (g o_row), |o_row|_g^2 = sum_c g_c o_c^2 with
 * g_c = 1 / M_{b,c}^2 (M_{b,c} the largest |v_c| the row's sequence can see,
 * prefix values times v_scale and draft values; g_c = 0 where M is 0 or not
 * finite), pstats[MLA_REF_PSTATS (t H + h) + j] is
 *     j = 0: sum_k P_k^2,  j = 1: sum_k P_k^2 c_k,  j = 2: sum_k P_k^2 c_k^2,
 *     j = 3: sum_k P_k |c_k|,  j = 4: sum_k P_k |c_k - |o_row|^2|,
 *     j = 6..9: j = 1..4 with c_k^g and |o_row|_g^2
 *            (j = 0..4 and 6..9 leave out the row's max key, whose weight
 *            exp(0) = 1 a kernel does not round),
 *     j = 5: sum_c A_c^2 o_c^2, j = 10: sum_c A_c^2 g_c^2 o_c^2, with
 *            A_c = sum_k P_k |v_{k,c}| over every visible key, summed over the
 *            columns where A_c and o_c are finite,
 *     j = 11: max over eps of P* (1 + |eps|) |sum_c o_c e_c(eps)|, and
 *     j = 12: the same with g_c o_c, where k* is the row's max key (value
 *            v*, with v_scale for a prefix key; final weight P*) and e_c(eps)
 *            the bf16 rounding error of (1 - eps) v*_c, |eps| <= 8 u_b: the
 *            coherent error of a partial dominated by k* (judge.c (B6)),
 * accumulated in double over the same weights and values the output used
 * (the c_k and A_c come from fp32 GEMMs: relative error ~ D_v u_32 and
 * ~ N u_32 on sums of non-negative terms, immaterial for a tolerance). A
 * second pass over the keys, about the reference's own cost again. 0 for a
 * row with no visible key; NaN where the row is NaN. */
#define MLA_REF_PSTATS 13
mla_status mla_reference_run_pstats(const mla_fixture *fx, float *o, float *lse, double *pstats,
                                    mla_error *err);

/* Plain loops in double, same semantics, for measuring the reference. */
mla_status mla_oracle_run(const mla_fixture *fx, double *o, double *lse, mla_error *err);

/* Round an fp32 output to bf16 (round to nearest even, NaN/inf kept). */
void mla_round_bf16(const float *src, mla_bf16 *dst, size_t n);

#ifdef __cplusplus
}
#endif
#endif
