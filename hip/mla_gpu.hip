// Host API of the GPU tiers (include/mla/gpu.h): decline rules, workspace
// sizes, the dispatch chain. No allocation, no synchronization, no device
// reads: every decision is a function of the arguments' shapes.

#include "mla_launch.h"

#include <stdarg.h>
#include <stdio.h>

static void gpu_error(mla_error *err, const char *fmt, ...)
{
    if (!err)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
}

extern "C" const char *mla_gpu_tier_name(mla_gpu_tier t)
{
    switch (t) {
    case MLA_GPU_TIER_AUTO:
        return "auto";
    case MLA_GPU_TIER_FAST:
        return "fast";
    case MLA_GPU_TIER_PERHEAD:
        return "perhead";
    case MLA_GPU_TIER_GENERIC:
        return "generic";
    }
    return "unknown";
}

static size_t align256(size_t x)
{
    return (x + 255) & ~(size_t)255;
}

// The fast tier's split count: enough (sequence x row block x split) CTAs to
// give each of the target's SMs one, never fewer than one split. Each
// sequence then uses mla_plan_active_splits(P, num_splits,
// MLA_GPU_FAST_MIN_SPLIT) of them with the plan's floor partition.
static int fast_num_splits(int bs, int nrb)
{
    const long long per = (long long)bs * nrb;
    long long s = MLA_GPU_FAST_TARGET_CTAS / (per > 0 ? per : 1);
    return s < 1 ? 1 : (int)s;
}

static int fast_row_blocks(const mla_shape *s)
{
    const int HL = s->num_heads * s->q_len;
    const int rows = mla_fast_rows(HL);
    return (HL + rows - 1) / rows;
}

// SPEC section 4: 4 / 8 / 16 splits for an average prefix below 4096, below
// 8192, else.
static int perhead_num_splits(const mla_gpu_args *a)
{
    const long long bs = a->shape.num_seqs > 0 ? a->shape.num_seqs : 1;
    const long long avg = a->num_kv_indices / bs;
    return avg < 4096 ? 4 : avg < 8192 ? 8 : MLA_GPU_PERHEAD_MAX_SPLITS;
}

// Bytes of partials for `ns` splits of element size `esize`; 0 on overflow.
static size_t partial_bytes(const mla_shape *s, int ns, size_t esize)
{
    const unsigned long long rows =
        (unsigned long long)s->num_seqs * (unsigned long long)ns * (unsigned long long)s->num_heads *
        (unsigned long long)s->q_len;
    unsigned long long o;
    if (__builtin_mul_overflow(rows, (unsigned long long)s->v_head_dim * esize, &o))
        return 0;
    return align256((size_t)o) + align256((size_t)(rows * 4));
}

// Shape-level reasons the split tiers decline (mla_can_handle plus the
// limits of the tensor-core tiles).
static const char *split_tier_shape_declines(const mla_shape *s, mla_gpu_tier tier)
{
    const char *why = mla_can_handle(s);
    if (why)
        return why;
    if (s->head_dim % 16 != 0 || s->head_dim > 576)
        return "head_dim is not a multiple of 16 up to 576 (tensor-core k16 steps, 576-wide smem rows)";
    if (s->v_head_dim % 64 != 0 || s->v_head_dim > 512)
        return "v_head_dim is not a multiple of 64 up to 512 (accumulator tiles, 64-column merge chunks)";
    if (s->num_seqs > 65535 || s->num_heads > 65535)
        return "batch or head count beyond the grid's y/z limit";
    if ((long long)s->num_heads * s->q_len > (1 << 24))
        return "num_heads * q_len too large";
    const long long ns = tier == MLA_GPU_TIER_FAST
                             ? fast_num_splits(s->num_seqs, fast_row_blocks(s))
                             : MLA_GPU_PERHEAD_MAX_SPLITS;
    if (mla_stage2_smem_bytes(s->q_len, (int)ns, s->head_dim) > 200 * 1024)
        return "q_len too large for the stage-2 shared-memory score block";
    return NULL;
}

extern "C" size_t mla_gpu_workspace_size(const mla_shape *s, mla_gpu_tier tier)
{
    if (!s)
        return 0;
    switch (tier) {
    case MLA_GPU_TIER_FAST:
        if (split_tier_shape_declines(s, tier))
            return 0;
        return partial_bytes(s, fast_num_splits(s->num_seqs, fast_row_blocks(s)), 2);
    case MLA_GPU_TIER_PERHEAD:
        if (split_tier_shape_declines(s, tier))
            return 0;
        return partial_bytes(s, MLA_GPU_PERHEAD_MAX_SPLITS, 4);
    case MLA_GPU_TIER_GENERIC:
        return 0;
    case MLA_GPU_TIER_AUTO: {
        const size_t f = mla_gpu_workspace_size(s, MLA_GPU_TIER_FAST);
        const size_t p = mla_gpu_workspace_size(s, MLA_GPU_TIER_PERHEAD);
        return f > p ? f : p;
    }
    }
    return 0;
}

static bool aligned(const void *p, size_t n)
{
    return ((uintptr_t)p % n) == 0;
}

extern "C" const char *mla_gpu_declines(const mla_gpu_args *a, mla_gpu_tier tier)
{
    if (tier != MLA_GPU_TIER_FAST && tier != MLA_GPU_TIER_PERHEAD)
        return NULL;
    if (!a)
        return "no arguments";
    const char *why = split_tier_shape_declines(&a->shape, tier);
    if (why)
        return why;
    // 16-byte cp.async gathers of q and latent rows, 4-byte bf16 pairs
    // elsewhere.
    if (!aligned(a->q, 16) || a->q_stride_tok % 8 || a->q_stride_head % 8)
        return "q is not 16-byte aligned per row";
    if (!aligned(a->kv_buffer, 16) || a->kv_stride_slot % 8)
        return "kv_buffer is not 16-byte aligned per slot";
    if (!aligned(a->k_extend, 16) || a->k_stride_tok % 8 || !aligned(a->v_extend, 16) ||
        a->v_stride_tok % 8)
        return "k_extend / v_extend rows are not 16-byte aligned";
    if (!aligned(a->o, 16) || a->o_stride_tok % 8 || a->o_stride_head % 8)
        return "o rows are not 16-byte aligned";
    return NULL;
}

static mla_status check_args(const mla_gpu_args *a, mla_error *err)
{
    if (!a) {
        gpu_error(err, "mla_gpu_run: no arguments");
        return MLA_ERR_INVALID;
    }
    const mla_shape *s = &a->shape;
    // An empty batch is valid (nothing to do); only the split tiers decline it.
    if (s->num_seqs < 0 || (s->num_seqs == 0 && s->num_q_tokens != 0) || s->num_heads < 1 || s->num_kv_heads < 1 ||
        s->num_heads % s->num_kv_heads != 0 || s->head_dim < 1 || s->v_head_dim < 1 ||
        s->num_q_tokens < 0) {
        gpu_error(err, "mla_gpu_run: invalid shape (bs %d, heads %d/%d, dims %d/%d, tokens %lld)",
                  s->num_seqs, s->num_heads, s->num_kv_heads, s->head_dim, s->v_head_dim,
                  (long long)s->num_q_tokens);
        return MLA_ERR_INVALID;
    }
    if (s->v_head_dim > s->kv_dim) {
        gpu_error(err, "mla_gpu_run: v_head_dim %d exceeds the kv pool width %d", s->v_head_dim,
                  s->kv_dim);
        return MLA_ERR_INVALID;
    }
    if (!a->q || !a->k_extend || !a->v_extend || !a->kv_buffer || !a->qo_indptr || !a->kv_indptr ||
        !a->o || (!a->kv_indices && a->num_kv_indices > 0) || (s->has_sinks && !a->sinks)) {
        gpu_error(err, "mla_gpu_run: a required device pointer is NULL");
        return MLA_ERR_INVALID;
    }
    return MLA_OK;
}

static mla_status launched(hipError_t e, const char *what, mla_error *err)
{
    if (e == hipSuccess)
        return MLA_OK;
    gpu_error(err, "%s launch failed: %s", what, hipGetErrorString(e));
    return MLA_ERR_RUNTIME;
}

extern "C" mla_status mla_gpu_run(const mla_gpu_args *a, mla_gpu_tier tier, void *workspace,
                                  size_t workspace_bytes, void *stream, mla_gpu_tier *ran,
                                  mla_error *err)
{
    mla_status st = check_args(a, err);
    if (st != MLA_OK)
        return st;
    if (tier == MLA_GPU_TIER_AUTO) {
        if (!mla_gpu_declines(a, MLA_GPU_TIER_FAST))
            tier = MLA_GPU_TIER_FAST;
        else if (!mla_gpu_declines(a, MLA_GPU_TIER_PERHEAD))
            tier = MLA_GPU_TIER_PERHEAD;
        else
            tier = MLA_GPU_TIER_GENERIC;
    }
    if (tier != MLA_GPU_TIER_FAST && tier != MLA_GPU_TIER_PERHEAD && tier != MLA_GPU_TIER_GENERIC) {
        gpu_error(err, "mla_gpu_run: unknown tier %d", (int)tier);
        return MLA_ERR_INVALID;
    }
    const char *why = mla_gpu_declines(a, tier);
    if (why) {
        gpu_error(err, "%s tier declines: %s", mla_gpu_tier_name(tier), why);
        return MLA_ERR_DECLINED;
    }
    if (ran)
        *ran = tier;

    if (tier == MLA_GPU_TIER_GENERIC) {
        const mla_shape *s = &a->shape;
        if (s->num_q_tokens == 0 || s->num_seqs == 0)
            return MLA_OK;
        if (s->num_q_tokens > 0x7fffffffLL || s->num_heads > 65535) {
            gpu_error(err, "generic tier: %lld tokens x %d heads exceeds the grid",
                      (long long)s->num_q_tokens, s->num_heads);
            return MLA_ERR_INVALID;
        }
        if (mla_generic_smem_bytes(s->head_dim, s->v_head_dim) > 220 * 1024) {
            gpu_error(err, "generic tier: head_dim %d / v_head_dim %d exceed shared memory",
                      s->head_dim, s->v_head_dim);
            return MLA_ERR_INVALID;
        }
        return launched(mla_launch_generic(*a, stream), "generic", err);
    }

    const mla_shape *s = &a->shape;
    const int ns = tier == MLA_GPU_TIER_FAST ? fast_num_splits(s->num_seqs, fast_row_blocks(s))
                                             : perhead_num_splits(a);
    const size_t esize = tier == MLA_GPU_TIER_FAST ? 2 : 4;
    const size_t need = partial_bytes(s, ns, esize);
    if (need == 0 || need > workspace_bytes || !workspace || !aligned(workspace, 256)) {
        gpu_error(err, "%s tier: workspace of %zu bytes at %p is too small or misaligned (needs %zu, 256-byte aligned)",
                  mla_gpu_tier_name(tier), workspace_bytes, workspace, need);
        return MLA_ERR_INVALID;
    }
    const size_t rows = (size_t)s->num_seqs * ns * s->num_heads * s->q_len;
    mla_launch_args la;
    la.g = a;
    la.num_splits = ns;
    la.part_o = workspace;
    la.part_lse = (float *)((char *)workspace + align256(rows * s->v_head_dim * esize));
    la.stream = stream;
    if (tier == MLA_GPU_TIER_FAST)
        return launched(mla_launch_fast(la), "fast", err);
    return launched(mla_launch_perhead(la), "perhead", err);
}
