// Host API of the GPU tiers (include/mla/gpu.h): options, argument checks,
// decline rules, workspace sizes, the tier chain, parameter fills and the
// dispatch to the kernel launchers (launch.h). No allocation, no
// synchronization, no device reads, no environment: every decision is a
// function of the arguments' shapes and the options.
//
// Tier FAST: stage 1 (kernels/stage1_ws.h on NVIDIA for 64/96-row blocks of
// 576-wide heads, kernels/stage1_mma.h otherwise) writes bf16 partials per
// prefix split; stage 2 (kernels/stage2_merge.h) merges them with the
// draft block. Tier PERHEAD: the same two stages with the upstream per-head
// decomposition and fp32 partials. Tier GENERIC: kernels/generic.h.

#include "launch.h"
#include "mla/gpu.h"
#include "split_policy.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

using namespace mla_dev;

static_assert(MLA_GPU_PERHEAD_MAX_SPLITS == MLA_SP_PERHEAD_MAX_SPLITS, "one per-head cap");

#if defined(MLA_TARGET_NVIDIA)
static const mla_sp_target kTarget = MLA_SP_NVIDIA;
#else
// The arch's row blocking (config.h AmdStage1Arch). A compile that knows
// the arch (the wave64 emulator, emu/, builds this file per arch) takes
// its own; the host pass of a ROCm build has no arch macro and assumes
// gfx950 (a real ROCm host build must pick by the device's gcnArchName).
#if defined(__gfx942__) || defined(__gfx941__) || defined(__gfx940__) || defined(__gfx90a__)
static const mla_sp_target kTarget = MLA_SP_AMD_GFX942;
#else
static const mla_sp_target kTarget = MLA_SP_AMD_GFX950;
#endif
#endif

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

extern "C" const char *mla_gpu_fast_kernel_name(int k)
{
    switch (k) {
    case MLA_GPU_FAST_KERNEL_AUTO:
        return "auto";
    case MLA_GPU_FAST_KERNEL_WS:
        return "ws";
    case MLA_GPU_FAST_KERNEL_MMA:
        return "mma";
    case MLA_GPU_FAST_KERNEL_WS_PVG:
        return "ws-pvg";
    case MLA_GPU_FAST_KERNEL_WS_PP:
        return "ws-pp";
    case MLA_GPU_FAST_KERNEL_PAIR:
        return "pair";
    }
    return "unknown";
}

extern "C" int mla_gpu_fast_kernel_parse(const char *name)
{
    for (int k = MLA_GPU_FAST_KERNEL_AUTO; k <= MLA_GPU_FAST_KERNEL_PAIR; ++k)
        if (name && !strcmp(name, mla_gpu_fast_kernel_name(k)))
            return k;
    return -1;
}

extern "C" const char *mla_gpu_split_rule_name(int r)
{
    switch (r) {
    case MLA_GPU_SPLIT_RULE_ADAPTIVE:
        return "adaptive";
    case MLA_GPU_SPLIT_RULE_FIXED:
        return "fixed";
    }
    return "unknown";
}

extern "C" int mla_gpu_split_rule_parse(const char *name)
{
    for (int r = MLA_GPU_SPLIT_RULE_ADAPTIVE; r <= MLA_GPU_SPLIT_RULE_FIXED; ++r)
        if (name && !strcmp(name, mla_gpu_split_rule_name(r)))
            return r;
    return -1;
}

extern "C" mla_gpu_options mla_gpu_options_default(void)
{
    mla_gpu_options o;
    o.fast_kernel = MLA_GPU_FAST_KERNEL_AUTO;
    o.fast_rows = 64;
    o.fast_min_split = MLA_GPU_FAST_MIN_SPLIT;
    o.fast_split_rule = MLA_GPU_SPLIT_RULE_ADAPTIVE;
    o.fast_merge = MLA_GPU_MERGE_AUTO;
    return o;
}

extern "C" mla_status mla_gpu_options_check(const mla_gpu_options *o, mla_error *err)
{
    if (!o)
        return MLA_OK; // NULL means the defaults
    if (o->fast_kernel < MLA_GPU_FAST_KERNEL_AUTO || o->fast_kernel > MLA_GPU_FAST_KERNEL_PAIR) {
        gpu_error(err, "mla_gpu_options: unknown fast_kernel %d (auto, ws, mma, ws-pvg, ws-pp or pair)",
                  o->fast_kernel);
        return MLA_ERR_INVALID;
    }
    if (o->fast_rows != 64 && o->fast_rows != 96) {
        gpu_error(err, "mla_gpu_options: fast_rows %d is neither 64 nor 96", o->fast_rows);
        return MLA_ERR_INVALID;
    }
    if (o->fast_min_split < 16) {
        gpu_error(err, "mla_gpu_options: fast_min_split %d is below 16 tokens", o->fast_min_split);
        return MLA_ERR_INVALID;
    }
    if (o->fast_split_rule != MLA_GPU_SPLIT_RULE_ADAPTIVE &&
        o->fast_split_rule != MLA_GPU_SPLIT_RULE_FIXED) {
        gpu_error(err, "mla_gpu_options: unknown fast_split_rule %d (adaptive or fixed)",
                  o->fast_split_rule);
        return MLA_ERR_INVALID;
    }
    if (o->fast_merge != MLA_GPU_MERGE_AUTO && o->fast_merge != MLA_GPU_MERGE_STAGE2) {
        gpu_error(err, "mla_gpu_options: unknown fast_merge %d (auto or stage2)", o->fast_merge);
        return MLA_ERR_INVALID;
    }
    return MLA_OK;
}

static bool aligned(const void *p, size_t n)
{
    return ((uintptr_t)p % n) == 0;
}

// Rows per fast stage-1 CTA and the stage-1 grid's split count.
static int fast_rows(const mla_shape *s, const mla_gpu_options &o)
{
    return mla_sp_fast_rows(s->num_heads * s->q_len, o.fast_rows == 96, kTarget);
}
static int fast_num_splits(const mla_shape *s, const mla_gpu_options &o)
{
    const int nrb = mla_sp_fast_row_blocks(s->num_heads * s->q_len, fast_rows(s, o));
    return mla_sp_fast_num_splits(s->num_seqs, nrb, MLA_GPU_FAST_TARGET_CTAS);
}
// The warp-specialized kernel (NVIDIA sm_90a) unrolls its k loop for 576
// columns and exists for 64- and 96-row blocks only; for fp8 pools, for 64
// rows only (config.h: no room for the fp8 staging next to a 96-row Q), so
// fp8 with fast_rows 96 runs the single-role kernel.
static bool fast_uses_ws(const mla_shape *s, const mla_gpu_options &o, bool fp8)
{
    if (kTarget != MLA_SP_NVIDIA || o.fast_kernel == MLA_GPU_FAST_KERNEL_MMA)
        return false;
    return (fp8 ? fast_rows(s, o) == 64 : fast_rows(s, o) >= 64) && s->head_dim == D_MAX;
}

static_assert((int)KV_BF16 == (int)MLA_KV_BF16 && (int)KV_E4M3FN == (int)MLA_KV_FP8_E4M3FN &&
                  (int)KV_E4M3FNUZ == (int)MLA_KV_FP8_E4M3FNUZ,
              "the kernels' KvFmt mirrors mla_kv_dtype");
static bool kv_is_fp8(const mla_gpu_args *a)
{
    return a->kv_dtype == MLA_KV_FP8_E4M3FN || a->kv_dtype == MLA_KV_FP8_E4M3FNUZ;
}
// The 64-row bf16 ws-pvg kernel (stage1_ws.h, PVG with SC: the softmax in
// the PV warpgroups): forced by fast_kernel ws-pvg; under auto where it
// measured faster than plain ws, splits of 2048 tokens or more on average
// (docs/perf-log.md, step 26: K3 bs 8 / 16k and bs 32 / 4k 3%, DSV3 bs 32
// and 64 / 16k 5-7%). Short splits (bs 1) keep plain ws, where it
// measured 1-2% slower.
static bool fast_uses_pvg(const mla_gpu_args *a, const mla_gpu_options &o, int num_splits)
{
    const mla_shape *s = &a->shape;
    if (kv_is_fp8(a) || fast_rows(s, o) != 64)
        return false;
    if (o.fast_kernel == MLA_GPU_FAST_KERNEL_WS_PVG)
        return true;
    if (o.fast_kernel != MLA_GPU_FAST_KERNEL_AUTO)
        return false;
    return (long long)a->num_kv_indices >= 2048LL * s->num_seqs * num_splits;
}
// The ping-pong stage 1 (stage1_pp.h: 64-row blocks, bf16 pools, head_dim
// 576 as every ws kernel): only when fast_kernel ws-pp asks for it (3-8%
// slower than auto's kernels at bs 8-64 on the H200 in its pair schedule;
// docs/perf-log.md step 40); elsewhere ws-pp runs
// plain ws, as ws-pvg does, so that a variant row of the backend table
// never declines what SPEC section 3 says to accept.
static bool fast_uses_pp(const mla_gpu_args *a, const mla_gpu_options &o)
{
    return o.fast_kernel == MLA_GPU_FAST_KERNEL_WS_PP && !kv_is_fp8(a) && fast_rows(&a->shape, o) == 64;
}

// The pair stage 1 (stage1_pair.h): fast_kernel pair on NVIDIA, bf16 pools,
// head_dim 576 and v_head_dim 512 (each CTA of the pair holds 256 of V's
// columns and the matching half of the rope), more than 32 and at most 96
// rows (one pass, wgmma N = 64 or 96). Elsewhere pair runs what auto runs.
// Only when fast_kernel pair asks for it: measured 1.12x auto's time at K3
// bs 32 / 16k and 1.5x at DSV3 (docs/perf-log.md step 37).
static bool fast_uses_pair(const mla_gpu_args *a, const mla_gpu_options &o)
{
    const mla_shape *s = &a->shape;
    const int hl = s->num_heads * s->q_len;
    return kTarget == MLA_SP_NVIDIA && o.fast_kernel == MLA_GPU_FAST_KERNEL_PAIR && !kv_is_fp8(a) &&
           s->head_dim == D_MAX && s->v_head_dim == DV_MAX && hl > 32 && hl <= 96;
}

// Shape-level reasons the split tiers decline (mla_can_handle plus the
// limits of the tensor-core tiles and of the chosen variant).
static const char *split_tier_shape_declines(const mla_shape *s, mla_gpu_tier tier,
                                             const mla_gpu_options &o)
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
    const long long ns = tier == MLA_GPU_TIER_FAST ? fast_num_splits(s, o) : MLA_GPU_PERHEAD_MAX_SPLITS;
    // The widest stage-2 block (one chunk of Dv <= 512).
    if (stage2_smem(s->q_len, (int)ns, s->head_dim, 512) > 200 * 1024)
        return "q_len too large for the stage-2 shared-memory score block";
    if (tier == MLA_GPU_TIER_FAST && o.fast_kernel == MLA_GPU_FAST_KERNEL_WS) {
        if (kTarget != MLA_SP_NVIDIA)
            return "fast_kernel ws is an NVIDIA sm_90a kernel";
        if (s->head_dim != D_MAX)
            return "fast_kernel ws needs head_dim 576";
        if (fast_rows(s, o) < 64)
            return "fast_kernel ws needs 64 or 96 rows per CTA (num_heads * q_len > 32)";
    }
    return NULL;
}

static const mla_gpu_options &opts_or_default(const mla_gpu_options *opt, mla_gpu_options &def)
{
    if (opt)
        return *opt;
    def = mla_gpu_options_default();
    return def;
}

static size_t partial_bytes(const mla_shape *s, int ns, size_t esize, size_t *lse_offset)
{
    return mla_sp_partial_bytes(s->num_seqs, ns, s->num_heads, s->q_len, s->v_head_dim, esize,
                                lse_offset);
}

extern "C" size_t mla_gpu_workspace_size(const mla_shape *s, mla_gpu_tier tier,
                                         const mla_gpu_options *opt)
{
    if (!s || mla_gpu_options_check(opt, NULL) != MLA_OK)
        return 0;
    mla_gpu_options def;
    const mla_gpu_options &o = opts_or_default(opt, def);
    switch (tier) {
    case MLA_GPU_TIER_FAST:
        if (split_tier_shape_declines(s, tier, o))
            return 0;
        return partial_bytes(s, fast_num_splits(s, o), 2, NULL);
    case MLA_GPU_TIER_PERHEAD:
        if (split_tier_shape_declines(s, tier, o))
            return 0;
        // The count depends on the prefix total, which a shape lacks: the
        // largest.
        return partial_bytes(s, MLA_GPU_PERHEAD_MAX_SPLITS, 4, NULL);
    case MLA_GPU_TIER_GENERIC:
        return 0;
    case MLA_GPU_TIER_AUTO: {
        const size_t f = mla_gpu_workspace_size(s, MLA_GPU_TIER_FAST, opt);
        const size_t p = mla_gpu_workspace_size(s, MLA_GPU_TIER_PERHEAD, opt);
        return f > p ? f : p;
    }
    }
    return 0;
}

static const char *declines(const mla_gpu_args *a, mla_gpu_tier tier, const mla_gpu_options &o)
{
    if (tier != MLA_GPU_TIER_FAST && tier != MLA_GPU_TIER_PERHEAD)
        return NULL;
    if (!a)
        return "no arguments";
    const char *why = split_tier_shape_declines(&a->shape, tier, o);
    if (why)
        return why;
    // 16-byte cp.async gathers of q and latent rows, 4-byte bf16 pairs
    // elsewhere.
    if (!aligned(a->q, 16) || a->q_stride_tok % 8 || a->q_stride_head % 8)
        return "q is not 16-byte aligned per row";
    // bf16: 8 elements per 16 bytes; fp8: 16 (the warp-specialized gather)
    if (!aligned(a->kv_buffer, 16) || a->kv_stride_slot % (kv_is_fp8(a) ? 16 : 8))
        return "kv_buffer is not 16-byte aligned per slot";
    if (tier == MLA_GPU_TIER_FAST && kv_is_fp8(a) && o.fast_kernel == MLA_GPU_FAST_KERNEL_WS &&
        !fast_uses_ws(&a->shape, o, true))
        return "fast_kernel ws reads fp8 pools with 64-row blocks only (fast_rows 64)";
    if (!aligned(a->k_extend, 16) || a->k_stride_tok % 8 || !aligned(a->v_extend, 16) ||
        a->v_stride_tok % 8)
        return "k_extend / v_extend rows are not 16-byte aligned";
    if (!aligned(a->o, 16) || a->o_stride_tok % 8 || a->o_stride_head % 8)
        return "o rows are not 16-byte aligned";
    return NULL;
}

extern "C" const char *mla_gpu_declines(const mla_gpu_args *a, mla_gpu_tier tier,
                                        const mla_gpu_options *opt)
{
    if (tier != MLA_GPU_TIER_FAST && tier != MLA_GPU_TIER_PERHEAD)
        return NULL;
    if (mla_gpu_options_check(opt, NULL) != MLA_OK)
        return "invalid options (mla_gpu_options_check says which field)";
    mla_gpu_options def;
    return declines(a, tier, opts_or_default(opt, def));
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
    if (a->kv_dtype != MLA_KV_BF16 && !kv_is_fp8(a)) {
        gpu_error(err, "mla_gpu_run: kv_dtype %d is no mla_kv_dtype (bf16 0, float8_e4m3fn 1, float8_e4m3fnuz 2)",
                  a->kv_dtype);
        return MLA_ERR_INVALID;
    }
    if (!a->q || !a->k_extend || !a->v_extend || !a->kv_buffer || !a->qo_indptr || !a->kv_indptr ||
        !a->o || (!a->kv_indices && a->num_kv_indices > 0) || (s->has_sinks && !a->sinks)) {
        gpu_error(err, "mla_gpu_run: a required device pointer is NULL");
        return MLA_ERR_INVALID;
    }
    return MLA_OK;
}


// What the launch of a split tier needs beyond the arguments: the plan and
// the workspace carved into partial outputs and lse.
struct SplitLaunch {
    const mla_gpu_args *g;
    mla_gpu_run_info info;
    int cw;          // stage-2 output columns per block
    bool ws;         // fast stage 1 on the warp-specialized kernel
    bool pvg;        // ... with the PV warpgroups gathering (fast_kernel ws-pvg)
    bool pp;         // ... as the ping-pong kernel (fast_kernel ws-pp)
    bool pair;       // ... as the pair kernel (fast_kernel pair)
    bool direct;     // stage 1 may write o and lse itself (fast_merge auto)
    void *part_o;    // bf16 (fast) or fp32 (per-head) partial outputs
    float *part_lse; // natural-log partial lse
    hipStream_t stream;
};

static void fill_common(const SplitLaunch &a, Stage1Params &p1, Stage2Params &p2)
{
    const mla_gpu_args &g = *a.g;
    const int H = g.shape.num_heads, L = g.shape.q_len;
    p1.q = g.q;
    p1.q_st = g.q_stride_tok;
    p1.q_sh = g.q_stride_head;
    p1.kv_fmt = g.kv_dtype; // KvFmt mirrors mla_kv_dtype
    p1.kv = (const bf16_t *)g.kv_buffer; // fp8: codes, read as bytes
    p1.kv_ss = g.kv_stride_slot;
    p1.qo_indptr = g.qo_indptr;
    p1.kv_indptr = g.kv_indptr;
    p1.kv_indices = g.kv_indices;
    p1.H = H;
    p1.L = L;
    p1.HL = H * L;
    p1.D = g.shape.head_dim;
    p1.Dv = g.shape.v_head_dim;
    p1.num_splits = a.info.num_splits;
    p1.scale_log2 = g.sm_scale * g.k_scale * LOG2E;
    p1.v_scale = g.v_scale;
    p1.part_o = a.part_o;
    p1.part_lse = a.part_lse;

    p2.q = g.q;
    p2.q_st = g.q_stride_tok;
    p2.q_sh = g.q_stride_head;
    p2.k_ext = g.k_extend;
    p2.k_st = g.k_stride_tok;
    p2.v_ext = g.v_extend;
    p2.v_st = g.v_stride_tok;
    p2.qo_indptr = g.qo_indptr;
    p2.kv_indptr = g.kv_indptr;
    p2.H = H;
    p2.L = L;
    p2.HL = H * L;
    p2.D = p1.D;
    p2.Dv = p1.Dv;
    p2.num_splits = a.info.num_splits;
    p2.cw = a.cw;
    p2.s1_draft = 0;
    p2.sm_scale = g.sm_scale;
    p2.part_o = a.part_o;
    p2.part_lse = a.part_lse;
    p2.o = g.o;
    p2.o_st = g.o_stride_tok;
    p2.o_sh = g.o_stride_head;
    p2.lse = g.lse;
    p2.lse_st = g.lse_stride_tok;
}

static hipError_t launch_fast(const SplitLaunch &a)
{
    Stage1Params p1;
    Stage2Params p2;
    fill_common(a, p1, p2);
    p1.split_mode = p2.split_mode = 0;
    p1.row_mode = 0;
    p1.min_split = p2.min_split = a.info.min_split;
    const int bs = a.g->shape.num_seqs;
    const int rows = a.info.rows_per_cta;
    dim3 grid(a.info.num_splits, (p1.HL + rows - 1) / rows, bs);
    hipError_t e;
#if defined(MLA_TARGET_NVIDIA)
    if (a.pair) {
        // One cluster of two CTAs per split, all rows in one pass; the
        // draft block goes through stage 2.
        const dim3 pg(2 * a.info.num_splits, 1, bs);
        e = rows == 96 ? launch_stage1_pair<96>(p1, pg, a.stream) : launch_stage1_pair<64>(p1, pg, a.stream);
        if (e != hipSuccess)
            return e;
        return launch_stage2<bf16_t>(p2, bs, a.stream, true);
    }
    // ws-pvg's stage 1 takes the draft block into each sequence's last
    // split (Stage1Draft): stage 2 then merges the splits only, its blocks
    // do no draft products after stage 1's CTAs leave the SMs (about 5 us of
    // K3 bs 8 / 16k, docs/perf-log.md step 29). Not with scaled pools: the
    // drafts take neither k_scale nor v_scale (SPEC section 2).
    const mla_gpu_args &g = *a.g;
    Stage1Draft dr = {g.k_extend, g.v_extend, g.k_stride_tok, g.v_stride_tok, 0};
    // Dv == 512: the kernel reads 512 columns of each v_extend row, whose
    // rows are Dv wide (narrower values go through stage 2, which reads its
    // own columns: k3-dv256).
    dr.on = rows == 64 && a.ws && a.pvg && p1.kv_fmt == KV_BF16 && g.k_scale == 1.f && g.v_scale == 1.f &&
            p1.L <= 8 /* ws_draft_pv_exact: at most 8 drafts */ && p1.Dv == DV_MAX;
    p2.s1_draft = dr.on;
    // One split for every sequence (the plan's count, a function of the
    // shape) and the draft block in stage 1: stage 2 would copy each
    // partial into o bit for bit (one weight of exactly 1; 0 and -inf, or
    // NaN, carried as they are), so stage 1 writes its partial and lse
    // straight into o and lse and no stage 2 runs. Its partial row b H L +
    // i H + h (split 0 of [b][s][r = i H + h]) is o's row (q0 + i) H + h
    // when o and lse are dense ([tokens][H][Dv], [tokens][H]) and q_len
    // declares every sequence's rows (q0 = qo_indptr[b] = b L).
    const bool direct = dr.on && a.direct && a.info.num_splits == 1 && g.o_stride_head == p1.Dv &&
                        g.o_stride_tok == (int64_t)p1.H * p1.Dv && (!g.lse || g.lse_stride_tok == p1.H);
    if (direct) {
        p1.part_o = g.o;
        if (g.lse)
            p1.part_lse = g.lse;
    }
    if (rows == 16)
        e = launch_stage1_mma<1, 4, 1, bf16_t, 0>(p1, grid, a.stream);
    else if (rows == 32)
        e = launch_stage1_mma<2, 4, 1, bf16_t, 0>(p1, grid, a.stream);
    else if (rows == 64)
        e = !a.ws ? launch_stage1_mma<4, 8, 2, bf16_t, 0>(p1, grid, a.stream)
            : a.pp                 ? launch_stage1_pp(p1, grid, a.stream)
            : p1.kv_fmt != KV_BF16 ? launch_stage1_ws<4, 8, true, false>(p1, dr, grid, a.stream)
            : a.pvg                ? launch_stage1_ws<4, 8, false, true>(p1, dr, grid, a.stream)
                                   : launch_stage1_ws<4, 8, false, false>(p1, dr, grid, a.stream);
    else
        e = a.ws ? launch_stage1_ws<6, 8, false, false>(p1, dr, grid, a.stream)
                 : launch_stage1_mma<6, 12, 3, bf16_t, 0>(p1, grid, a.stream);
#elif defined(__gfx942__) || defined(__gfx941__) || defined(__gfx940__) || defined(__gfx90a__)
    (void)rows; // gfx942's plan: 32-row blocks only (split_policy.c)
    e = launch_stage1_mma<2, 8, 1, bf16_t, 0>(p1, grid, a.stream);
#else
    if (rows <= 32)
        e = launch_stage1_mma<2, 8, 1, bf16_t, 0>(p1, grid, a.stream);
    else
        e = launch_stage1_mma<4, 8, 2, bf16_t, 0>(p1, grid, a.stream); // gfx950: 64-row blocks
#endif
    if (e != hipSuccess)
        return e;
#if defined(MLA_TARGET_NVIDIA)
    if (direct)
        return hipSuccess;
#endif
    // The fast tier overlaps stage 2's prologue with stage 1 (PDL); the
    // per-head baseline keeps upstream's two plain launches.
    return launch_stage2<bf16_t>(p2, bs, a.stream, true);
}

// The per-head baseline's S dot runs over the 576 columns padded to the next
// power of two, 1024 (SPEC section 4: upstream's verify_splitkv loads the
// head dim with BLOCK_DMODEL = next_pow2(576) and a mask, then one tl.dot);
// the zero columns cost what they cost upstream: 64 instead of 36 k16 steps
// and 1024-wide tiles in shared memory. (NVIDIA; the AMD build keeps 576.)
static hipError_t launch_perhead(const SplitLaunch &a)
{
    Stage1Params p1;
    Stage2Params p2;
    fill_common(a, p1, p2);
    p1.split_mode = p2.split_mode = 1;
    p1.min_split = p2.min_split = 1;
    p1.row_mode = 1;
    const int bs = a.g->shape.num_seqs;
    const int rows = a.info.rows_per_cta;
    dim3 grid(a.info.num_splits, p1.H * ((p1.L + rows - 1) / rows), bs);
    hipError_t e;
#if defined(MLA_TARGET_NVIDIA)
    e = launch_stage1_mma<1, 4, 1, float, 1024>(p1, grid, a.stream);
#else
    e = launch_stage1_mma<2, 8, 1, float, 0>(p1, grid, a.stream);
#endif
    if (e != hipSuccess)
        return e;
    return launch_stage2<float>(p2, bs, a.stream, false);
}

static hipError_t run_generic(const mla_gpu_args &g, hipStream_t stream)
{
    GenericParams p;
    p.q = g.q;
    p.q_st = g.q_stride_tok;
    p.q_sh = g.q_stride_head;
    p.k_ext = g.k_extend;
    p.k_st = g.k_stride_tok;
    p.k_sh = g.k_stride_head;
    p.v_ext = g.v_extend;
    p.v_st = g.v_stride_tok;
    p.v_sh = g.v_stride_head;
    p.kv_fmt = g.kv_dtype;
    p.kv = (const bf16_t *)g.kv_buffer; // fp8: codes, read as bytes
    p.kv_ss = g.kv_stride_slot;
    p.kv_sh = g.kv_stride_head;
    p.qo_indptr = g.qo_indptr;
    p.kv_indptr = g.kv_indptr;
    p.kv_indices = g.kv_indices;
    p.sinks = g.sinks;
    p.num_seqs = g.shape.num_seqs;
    p.H = g.shape.num_heads;
    p.Hkv = g.shape.num_kv_heads;
    p.D = g.shape.head_dim;
    p.Dv = g.shape.v_head_dim;
    p.is_causal = g.shape.is_causal;
    p.sliding_window = g.shape.sliding_window;
    p.sm_scale = g.sm_scale;
    p.k_scale = g.k_scale;
    p.v_scale = g.v_scale;
    p.logit_cap = g.shape.logit_cap;
    p.o = g.o;
    p.o_st = g.o_stride_tok;
    p.o_sh = g.o_stride_head;
    p.lse = g.lse;
    p.lse_st = g.lse_stride_tok;
    return launch_generic(p, (unsigned)g.shape.num_q_tokens, stream);
}

static mla_status launched(hipError_t e, const char *what, mla_error *err)
{
    if (e == hipSuccess)
        return MLA_OK;
    gpu_error(err, "%s launch failed: %s", what, hipGetErrorString(e));
    return MLA_ERR_RUNTIME;
}

extern "C" mla_status mla_gpu_plan(const mla_gpu_args *a, mla_gpu_tier tier,
                                   const mla_gpu_options *opt, mla_gpu_run_info *info,
                                   mla_error *err)
{
    mla_status st = check_args(a, err);
    if (st != MLA_OK)
        return st;
    st = mla_gpu_options_check(opt, err);
    if (st != MLA_OK)
        return st;
    mla_gpu_options def;
    const mla_gpu_options &o = opts_or_default(opt, def);
    if (tier == MLA_GPU_TIER_AUTO) {
        if (!declines(a, MLA_GPU_TIER_FAST, o))
            tier = MLA_GPU_TIER_FAST;
        else if (!declines(a, MLA_GPU_TIER_PERHEAD, o))
            tier = MLA_GPU_TIER_PERHEAD;
        else
            tier = MLA_GPU_TIER_GENERIC;
    }
    if (tier != MLA_GPU_TIER_FAST && tier != MLA_GPU_TIER_PERHEAD && tier != MLA_GPU_TIER_GENERIC) {
        gpu_error(err, "mla_gpu_run: unknown tier %d", (int)tier);
        return MLA_ERR_INVALID;
    }
    const char *why = declines(a, tier, o);
    if (why) {
        gpu_error(err, "%s tier declines: %s", mla_gpu_tier_name(tier), why);
        return MLA_ERR_DECLINED;
    }
    const mla_shape *s = &a->shape;
    mla_gpu_run_info r;
    r.tier = tier;
    r.num_splits = r.min_split = r.rows_per_cta = 0;
    r.fast_kernel = MLA_GPU_FAST_KERNEL_AUTO;
    if (tier == MLA_GPU_TIER_GENERIC) {
        if (s->num_q_tokens > 0x7fffffffLL || s->num_heads > 65535) {
            gpu_error(err, "generic tier: %lld tokens x %d heads exceeds the grid",
                      (long long)s->num_q_tokens, s->num_heads);
            return MLA_ERR_INVALID;
        }
        if (generic_smem(s->head_dim, s->v_head_dim) > 220 * 1024) {
            gpu_error(err, "generic tier: head_dim %d / v_head_dim %d exceed shared memory",
                      s->head_dim, s->v_head_dim);
            return MLA_ERR_INVALID;
        }
        r.rows_per_cta = 1;
    } else if (tier == MLA_GPU_TIER_FAST) {
        r.num_splits = fast_num_splits(s, o);
        r.rows_per_cta = fast_rows(s, o);
        if (fast_uses_pair(a, o)) {
            // Two CTAs per split, as two 64-row blocks would take.
            r.num_splits = mla_sp_fast_num_splits(s->num_seqs, 2, MLA_GPU_FAST_TARGET_CTAS);
            r.rows_per_cta = s->num_heads * s->q_len <= 64 ? 64 : 96;
        }
        const int cw = mla_sp_stage2_cols(s->v_head_dim, s->num_seqs, s->num_heads,
                                          MLA_GPU_FAST_TARGET_CTAS);
        r.min_split = mla_sp_fast_min_split(o.fast_min_split,
                                            o.fast_split_rule == MLA_GPU_SPLIT_RULE_ADAPTIVE,
                                            a->num_kv_indices, s->num_seqs, r.num_splits,
                                            s->q_len, cw);
        r.fast_kernel = fast_uses_pair(a, o)                 ? MLA_GPU_FAST_KERNEL_PAIR
                        : !fast_uses_ws(s, o, kv_is_fp8(a))        ? MLA_GPU_FAST_KERNEL_MMA
                        : fast_uses_pp(a, o)                ? MLA_GPU_FAST_KERNEL_WS_PP
                        : fast_uses_pvg(a, o, r.num_splits) ? MLA_GPU_FAST_KERNEL_WS_PVG
                                                            : MLA_GPU_FAST_KERNEL_WS;
    } else {
        r.num_splits = mla_sp_perhead_num_splits(s->num_seqs, a->num_kv_indices);
        r.rows_per_cta = kTarget == MLA_SP_NVIDIA ? 16 : 32;
    }
    if (info)
        *info = r;
    return MLA_OK;
}

extern "C" mla_status mla_gpu_run(const mla_gpu_args *a, mla_gpu_tier tier,
                                  const mla_gpu_options *opt, void *workspace,
                                  size_t workspace_bytes, void *stream, mla_gpu_run_info *info,
                                  mla_error *err)
{
    mla_gpu_run_info r;
    mla_status st = mla_gpu_plan(a, tier, opt, &r, err);
    if (st != MLA_OK)
        return st;
    if (info)
        *info = r;
    const mla_shape *s = &a->shape;
    if (r.tier == MLA_GPU_TIER_GENERIC) {
        if (s->num_q_tokens == 0 || s->num_seqs == 0)
            return MLA_OK;
        return launched(run_generic(*a, (hipStream_t)stream), "generic", err);
    }

    mla_gpu_options def;
    const mla_gpu_options &o = opts_or_default(opt, def);
    const bool fast = r.tier == MLA_GPU_TIER_FAST;
    const size_t esize = fast ? 2 : 4;
    size_t lse_offset = 0;
    const size_t need = partial_bytes(s, r.num_splits, esize, &lse_offset);
    if (need == 0 || need > workspace_bytes || !workspace || !aligned(workspace, 256)) {
        gpu_error(err, "%s tier: workspace of %zu bytes at %p is too small or misaligned (needs %zu, 256-byte aligned)",
                  mla_gpu_tier_name(r.tier), workspace_bytes, workspace, need);
        return MLA_ERR_INVALID;
    }
    SplitLaunch la;
    la.g = a;
    la.info = r;
    la.cw = mla_sp_stage2_cols(s->v_head_dim, s->num_seqs, s->num_heads, MLA_GPU_FAST_TARGET_CTAS);
    la.ws = fast && r.fast_kernel != MLA_GPU_FAST_KERNEL_MMA;
    la.pvg = fast && r.fast_kernel == MLA_GPU_FAST_KERNEL_WS_PVG;
    la.pp = fast && r.fast_kernel == MLA_GPU_FAST_KERNEL_WS_PP;
    la.pair = fast && r.fast_kernel == MLA_GPU_FAST_KERNEL_PAIR;
    la.part_o = workspace;
    la.part_lse = (float *)((char *)workspace + lse_offset);
    la.direct = fast && o.fast_merge == MLA_GPU_MERGE_AUTO;
    la.stream = (hipStream_t)stream;
    if (fast)
        return launched(launch_fast(la), "fast", err);
    return launched(launch_perhead(la), "perhead", err);
}

extern "C" int mla_gpu_available(char *why, size_t n)
{
    int count = 0;
    hipError_t e = hipGetDeviceCount(&count);
    if (e != hipSuccess || count < 1) {
        if (why && n)
            snprintf(why, n, "no GPU: %s",
                     e != hipSuccess ? hipGetErrorString(e) : "no device present");
        // Clear the sticky error of a failed probe.
        (void)hipGetLastError();
        return 0;
    }
    if (why && n)
        snprintf(why, n, "%d device(s)", count);
    return 1;
}
