/* GPU backends of MLA target verify (SPEC sections 2-4), one C API for the
 * three tiers: the fast two-stage MLA kernel, the per-head split-KV baseline
 * and the generic fallback. Device pointers use element strides in SGLang's
 * layout; the last dimension of every tensor is contiguous. A call never
 * allocates, never synchronizes and reads no device data on the host, so it
 * can be captured into a CUDA/HIP graph. */
#ifndef MLA_GPU_H
#define MLA_GPU_H

#include "mla/common.h"
#include "mla/fixture.h"
#include "mla/plan.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    MLA_GPU_TIER_AUTO = 0,    /* fast -> per-head -> generic */
    MLA_GPU_TIER_FAST = 1,    /* two-stage MLA kernel; may decline */
    MLA_GPU_TIER_PERHEAD = 2, /* per-head split-KV baseline; may decline */
    MLA_GPU_TIER_GENERIC = 3  /* every feature of SPEC section 2; never declines valid input */
} mla_gpu_tier;

const char *mla_gpu_tier_name(mla_gpu_tier t);

/* The fast path sizes its split count for this many resident CTAs (one per
 * SM on an H200). A constant, not a device query, so that the workspace size
 * and the launch are functions of shapes alone. */
#define MLA_GPU_FAST_TARGET_CTAS 132
/* Smallest prefix piece a fast split takes (the plan's block_n argument of
 * mla_plan_active_splits; upstream's BLOCK_N): two 32-token tiles, below
 * which loading 96 query rows per CTA outweighs the extra parallelism. */
#define MLA_GPU_FAST_MIN_SPLIT 64
/* The per-head baseline uses at most 16 splits (SPEC section 4). */
#define MLA_GPU_PERHEAD_MAX_SPLITS 16

typedef struct {
    /* Shapes (plan.h). num_q_tokens is the row count of q; q_len > 0 for the
     * fast and per-head tiers. */
    mla_shape shape;
    /* kv_indptr[num_seqs] as the host knows it (SGLang computes it from
     * seq_lens on the CPU); only the per-head tier's split count reads it. */
    int64_t num_kv_indices;
    float sm_scale, k_scale, v_scale;

    const mla_bf16 *q; /* [tokens, H, D] */
    int64_t q_stride_tok, q_stride_head;
    const mla_bf16 *k_extend; /* [tokens, Hkv, D] */
    int64_t k_stride_tok, k_stride_head;
    const mla_bf16 *v_extend; /* [tokens, Hkv, Dv] */
    int64_t v_stride_tok, v_stride_head;
    const mla_bf16 *kv_buffer; /* [slots, Hkv, D]; values are columns 0..Dv-1 */
    int64_t kv_stride_slot, kv_stride_head;
    const int32_t *qo_indptr;  /* [num_seqs + 1] */
    const int32_t *kv_indptr;  /* [num_seqs + 1] */
    const int64_t *kv_indices; /* [num_kv_indices] */
    const float *sinks;        /* [H] or NULL */

    mla_bf16 *o; /* [tokens, H, Dv] */
    int64_t o_stride_tok, o_stride_head;
    float *lse; /* [tokens, H] or NULL; head stride 1 */
    int64_t lse_stride_tok;
} mla_gpu_args;

/* Bytes of workspace `tier` needs for shape `s` (AUTO: the most any tier of
 * the chain needs). Shape-only; 0 when the tier needs none or declines. */
size_t mla_gpu_workspace_size(const mla_shape *s, mla_gpu_tier tier);

/* NULL when `tier` (FAST or PERHEAD) runs these arguments, otherwise the
 * reason it declines. GENERIC and AUTO never decline (NULL). */
const char *mla_gpu_declines(const mla_gpu_args *a, mla_gpu_tier tier);

/* Runs `tier` on `stream` (a cudaStream_t / hipStream_t, NULL = default).
 * Returns MLA_OK, MLA_ERR_DECLINED (reason in err, nothing written),
 * MLA_ERR_INVALID (bad arguments or too small a workspace) or
 * MLA_ERR_RUNTIME (a launch failed). *ran (may be NULL) receives the tier
 * that ran. The workspace must be 256-byte aligned. */
mla_status mla_gpu_run(const mla_gpu_args *a, mla_gpu_tier tier, void *workspace,
                       size_t workspace_bytes, void *stream, mla_gpu_tier *ran, mla_error *err);

/* ---- Validator contract (hip/gpu_backend.c) ---- */

/* 1 when a device is usable; 0 with a reason in `why` otherwise. */
int mla_gpu_available(char *why, size_t n);

/* Uploads the fixture, runs `tier` (an mla_gpu_tier) into NaN-poisoned
 * outputs framed by sentinel guards, synchronizes and copies o (and lse when
 * lse_host is not NULL) back. A decline returns MLA_ERR_DECLINED with the
 * reason after checking the output is still all poison; a touched guard or
 * a declining tier that wrote output returns MLA_ERR_RUNTIME. */
mla_status mla_gpu_backend_run(const mla_fixture *fx, int tier, mla_bf16 *o_host,
                               float *lse_host, mla_error *err);

#ifdef __cplusplus
}
#endif
#endif
