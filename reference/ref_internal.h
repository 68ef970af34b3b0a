/* Internal interface of the CPU references, shared by reference.c,
 * oracle.c, their tests and the benchmark. Not part of the public API:
 * the knobs here exist so that tests can force small key blocks and row
 * tiles (exercising every block boundary on tiny cases) and attend to one
 * key source at a time (the prefix-only partial is what stage 1 of the GPU
 * kernel produces, and it is the only way a valid fixture yields rows with
 * no visible key). */
#ifndef MLA_REF_INTERNAL_H
#define MLA_REF_INTERNAL_H

#include "mla/reference.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int32_t key_block; /* keys per GEMM block, >= 1 */
    int32_t row_tile;  /* most query rows (heads x drafts) per GEMM, >= 1 */
    int32_t use_prefix; /* 1: attend to the prefix keys */
    int32_t use_drafts; /* 1: attend to the draft keys */
    double *pstats;     /* NULL, or [num_q_tokens, num_heads, MLA_REF_PSTATS]: the
                           bias-test statistics of mla_reference_run_pstats (one
                           extra pass) */
} mla_ref_opts;

/* Key block 256 and row tile 1024: see reference.c for why. */
mla_ref_opts mla_ref_opts_default(void);

mla_status mla_reference_run_opts(const mla_fixture *fx, const mla_ref_opts *opts, float *o,
                                  float *lse, mla_error *err);

/* What a row's error bound depends on (SPEC section 7), gathered by the
 * oracle while it has the visible keys at hand. */
typedef struct {
    double keys;  /* number of visible keys */
    double vmax;  /* largest |value| over visible keys, v_scale applied */
    double amax;  /* largest |scale| * sum_d |q_d k_d| over visible keys */
    double dot_err; /* largest |scale| * sqrt(sum_d S_d^2), S_d the partial sums
                       of q . k in order d = 0, 1, ...: the error scale of an
                       fp32 dot (see reference/tests/ref_test_util.c) */
    double smax;  /* largest |score| before the cap */
} mla_oracle_row_stats;

/* stats: [num_q_tokens, num_heads] or NULL. */
mla_status mla_oracle_run_opts(const mla_fixture *fx, int use_prefix, int use_drafts, double *o,
                               double *lse, mla_oracle_row_stats *stats, mla_error *err);

/* Shape and index checks both references run before touching any tensor,
 * so a malformed fixture is an error, never an out-of-bounds read. */
mla_status mla_ref_check_inputs(const mla_fixture *fx, mla_error *err);

#ifdef __cplusplus
}
#endif
#endif
