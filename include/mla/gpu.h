/* GPU backends of MLA target verify (SPEC sections 2-4), one C API for the
 * three tiers: the fast two-stage MLA kernel, the per-head split-KV baseline
 * and the generic fallback. Device pointers use element strides in SGLang's
 * layout; the last dimension of every tensor is contiguous. A call never
 * allocates, never synchronizes and reads no device data on the host, so it
 * can be captured into a CUDA/HIP graph. */
#ifndef MLA_GPU_H
#define MLA_GPU_H

#include "mla/common.h"
#include "mla/plan.h"

#include <stddef.h>

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
/* Default smallest prefix piece a fast split takes (the plan's block_n
 * argument of mla_plan_active_splits; upstream's BLOCK_N): two 32-token
 * tiles, below which loading 96 query rows per CTA outweighs the extra
 * parallelism. */
#define MLA_GPU_FAST_MIN_SPLIT 64
/* The per-head baseline uses at most 16 splits (SPEC section 4). */
#define MLA_GPU_PERHEAD_MAX_SPLITS 16

/* Stage-1 kernel of the fast tier (docs/gpu-design.md, "Tier FAST: two stages").
 * The kernels ever tried and dropped (the ping-pong and pair stage 1s,
 * 96-row CTAs, mma.sync at 576 columns on NVIDIA) live in git history under
 * the tag kernels-before-house2. */
typedef enum {
    MLA_GPU_FAST_KERNEL_AUTO = 0,  /* NVIDIA sm_90a with head_dim 576 and more than 32 rows: ws,
                                      or ws-pvsm for bf16 pools whose splits average 2048
                                      tokens or more; everything else: mma */
    MLA_GPU_FAST_KERNEL_WS = 1,    /* warp-specialized wgmma kernel, the softmax in the
                                      producer warpgroup; declines other shapes */
    MLA_GPU_FAST_KERNEL_MMA = 2,   /* single-role mma.sync / MFMA kernel: reported only (auto
                                      picks it where ws does not apply); not an option value */
    MLA_GPU_FAST_KERNEL_WS_PVSM = 3 /* ws, but every 64-row bf16 block runs the softmax in its
                                      PV warpgroups (the producer gathers and issues QK^T
                                      only; five stages) */
} mla_gpu_fast_kernel;

/* How the fast tier's smallest split is chosen. */
typedef enum {
    MLA_GPU_SPLIT_RULE_ADAPTIVE = 0, /* grows past fast_min_split when the merge would be long */
    MLA_GPU_SPLIT_RULE_FIXED = 1     /* exactly fast_min_split */
} mla_gpu_split_rule;

/* Whether the fast tier may skip its merge kernel. */
typedef enum {
    MLA_GPU_MERGE_AUTO = 0,  /* stage 1 writes o and lse itself when every sequence has one split
                                and stage 1 takes the draft block (ws-pvg, bf16 pools, dense o
                                and lse); stage 2 merges otherwise (docs/perf/2026-12-02-stage2-merge.md, "The merge without stage 2") */
    MLA_GPU_MERGE_STAGE2 = 1 /* always the merge kernel (stage 2) */
} mla_gpu_merge;

/* Variant choices of the GPU tiers. Every call that depends on them takes
 * them explicitly (NULL = mla_gpu_options_default()); the library reads no
 * environment. */
typedef struct {
    int fast_kernel;     /* mla_gpu_fast_kernel: AUTO, WS or WS_PVSM */
    int fast_min_split;  /* smallest fast split in tokens, >= 16 (default MLA_GPU_FAST_MIN_SPLIT) */
    int fast_split_rule; /* mla_gpu_split_rule */
    int fast_merge;      /* mla_gpu_merge */
} mla_gpu_options;

mla_gpu_options mla_gpu_options_default(void);

/* MLA_OK, or MLA_ERR_INVALID with the offending field in err (may be NULL). */
mla_status mla_gpu_options_check(const mla_gpu_options *opt, mla_error *err);

/* Names of the enum values ("auto", "ws", "mma", "ws-pvsm"; "adaptive", "fixed") and
 * their parsers (-1 for an unknown name). */
const char *mla_gpu_fast_kernel_name(int k);
int mla_gpu_fast_kernel_parse(const char *name);
const char *mla_gpu_split_rule_name(int r);
int mla_gpu_split_rule_parse(const char *name);

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
    /* [slots, Hkv, D]; values are columns 0..Dv-1. Of type kv_dtype (the
     * last member): bf16, or fp8 e4m3fn / e4m3fnuz codes (one byte each,
     * schema 1.1.0), which every tier decodes exactly to bf16 before its
     * products. Strides in elements of that type. */
    const void *kv_buffer;
    int64_t kv_stride_slot, kv_stride_head;
    const int32_t *qo_indptr;  /* [num_seqs + 1] */
    const int32_t *kv_indptr;  /* [num_seqs + 1] */
    const int64_t *kv_indices; /* [num_kv_indices] */
    const float *sinks;        /* [H] or NULL */

    mla_bf16 *o; /* [tokens, H, Dv] */
    int64_t o_stride_tok, o_stride_head;
    float *lse; /* [tokens, H] or NULL; head stride 1 */
    int64_t lse_stride_tok;
    /* mla_kv_dtype (common.h) of kv_buffer: 0 = bf16. Last, so that callers
     * built against the bf16-only layout (zero-initialised) keep working. */
    int kv_dtype;
} mla_gpu_args;

/* Bytes of workspace `tier` needs for shape `s` under `opt` (AUTO: the most
 * any tier of the chain that accepts the shape needs), a pure function of
 * its arguments: MLA_OK with *bytes set (0: the tier needs none),
 * MLA_ERR_DECLINED when the tier declines the shape (reason in err), or
 * MLA_ERR_INVALID for a NULL argument or invalid options. */
mla_status mla_gpu_workspace_size(const mla_shape *s, mla_gpu_tier tier, const mla_gpu_options *opt,
                                  size_t *bytes, mla_error *err);

/* NULL when `tier` (FAST or PERHEAD) runs these arguments under `opt`,
 * otherwise the reason it declines. GENERIC and AUTO never decline (NULL). */
const char *mla_gpu_declines(const mla_gpu_args *a, mla_gpu_tier tier, const mla_gpu_options *opt);

/* What a call runs (or ran): the tier after the AUTO chain, the prefix
 * splits of its stage-1 grid (0 for GENERIC, which has no splits), the
 * fast tier's smallest split in tokens (0 otherwise), the query rows per
 * stage-1 CTA, and the fast tier's stage-1 kernel (WS, WS_PVSM or MMA, never
 * AUTO; AUTO for the other tiers). */
typedef struct {
    mla_gpu_tier tier;
    int num_splits;
    int min_split;
    int rows_per_cta;
    mla_gpu_fast_kernel fast_kernel;
} mla_gpu_run_info;

/* The plan of `tier` (AUTO: the tier the chain picks) for these arguments,
 * without launching anything: MLA_OK with *info filled, MLA_ERR_DECLINED
 * or MLA_ERR_INVALID as mla_gpu_run would return them. */
mla_status mla_gpu_plan(const mla_gpu_args *a, mla_gpu_tier tier, const mla_gpu_options *opt,
                        mla_gpu_run_info *info, mla_error *err);

/* Runs `tier` on `stream` (a cudaStream_t / hipStream_t, NULL = default)
 * with the variants of `opt` (NULL = defaults). Returns MLA_OK,
 * MLA_ERR_DECLINED (reason in err, nothing written), MLA_ERR_INVALID (bad
 * arguments or options, or too small a workspace) or MLA_ERR_RUNTIME (a
 * launch failed). *info (may be NULL) receives what ran. The workspace must
 * be 256-byte aligned. */
mla_status mla_gpu_run(const mla_gpu_args *a, mla_gpu_tier tier, const mla_gpu_options *opt,
                       void *workspace, size_t workspace_bytes, void *stream,
                       mla_gpu_run_info *info, mla_error *err);

/* 1 when a device is usable; 0 with a reason in `why` otherwise. */
int mla_gpu_available(char *why, size_t n);

#ifdef __cplusplus
}
#endif
#endif
