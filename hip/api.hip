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
    case MLA_GPU_FAST_KERNEL_WS_PVSM:
        return "ws-pvsm";
    }
    return "unknown";
}

extern "C" int mla_gpu_fast_kernel_parse(const char *name)
{
    for (int k = MLA_GPU_FAST_KERNEL_AUTO; k <= MLA_GPU_FAST_KERNEL_WS_PVSM; ++k)
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
    o.fast_min_split = MLA_GPU_FAST_MIN_SPLIT;
    o.fast_split_rule = MLA_GPU_SPLIT_RULE_ADAPTIVE;
    o.fast_merge = MLA_GPU_MERGE_AUTO;
    return o;
}

extern "C" mla_status mla_gpu_options_check(const mla_gpu_options *o, mla_error *err)
{
    if (!o)
        return MLA_OK; // NULL means the defaults
    if (o->fast_kernel != MLA_GPU_FAST_KERNEL_AUTO && o->fast_kernel != MLA_GPU_FAST_KERNEL_WS &&
        o->fast_kernel != MLA_GPU_FAST_KERNEL_WS_PVSM) {
        mla_error_set(err, "mla_gpu_options: fast_kernel %d is no option (auto, ws or ws-pvsm)",
                      o->fast_kernel);
        return MLA_ERR_INVALID;
    }
    if (o->fast_min_split < 16) {
        mla_error_set(err, "mla_gpu_options: fast_min_split %d is below 16 tokens", o->fast_min_split);
        return MLA_ERR_INVALID;
    }
    if (o->fast_split_rule != MLA_GPU_SPLIT_RULE_ADAPTIVE &&
        o->fast_split_rule != MLA_GPU_SPLIT_RULE_FIXED) {
        mla_error_set(err, "mla_gpu_options: unknown fast_split_rule %d (adaptive or fixed)",
                  o->fast_split_rule);
        return MLA_ERR_INVALID;
    }
    if (o->fast_merge != MLA_GPU_MERGE_AUTO && o->fast_merge != MLA_GPU_MERGE_STAGE2) {
        mla_error_set(err, "mla_gpu_options: unknown fast_merge %d (auto or stage2)", o->fast_merge);
        return MLA_ERR_INVALID;
    }
    return MLA_OK;
}

static bool aligned(const void *p, size_t n)
{
    return ((uintptr_t)p % n) == 0;
}

// Rows per fast stage-1 CTA and the stage-1 grid's split count.
static int fast_rows(const mla_shape *s)
{
    return mla_sp_fast_rows(s->num_heads * s->q_len, kTarget);
}
// Most pieces one sequence of this shape can have, and most partial slots:
// the bounds stage 2's weights and the workspace are sized by (shape only).
static int fast_max_pieces(const mla_shape *s)
{
    return mla_sp_fast_max_pieces(s->num_seqs, s->num_heads, s->q_len, kTarget, MLA_GPU_FAST_TARGET_CTAS);
}
static int fast_max_slots(const mla_shape *s)
{
    return mla_sp_fast_max_slots(s->num_seqs, s->num_heads, s->q_len, kTarget, MLA_GPU_FAST_TARGET_CTAS);
}
// The fast tier's balanced partition of this batch (split_policy.h).
static mla_sp_fast_plan fast_plan(const mla_gpu_args *a, const mla_gpu_options &o)
{
    const mla_shape *s = &a->shape;
    mla_sp_fast_plan pl;
    mla_sp_fast_plan_make(s->num_seqs, s->num_heads, s->q_len, s->v_head_dim, a->num_kv_indices, o.fast_min_split,
                          o.fast_split_rule == MLA_GPU_SPLIT_RULE_ADAPTIVE, kTarget, MLA_GPU_FAST_TARGET_CTAS,
                          &pl);
    return pl;
}
// The warp-specialized kernel (NVIDIA sm_90a) unrolls its k loop for 576
// columns and takes 64-row blocks (more rows run as several blocks,
// split_policy.c); smaller blocks run the single-role kernel.
static bool fast_uses_ws(const mla_shape *s)
{
    return kTarget == MLA_SP_NVIDIA && fast_rows(s) == 64 && s->head_dim == D_MAX;
}

static_assert((int)KV_BF16 == (int)MLA_KV_BF16 && (int)KV_E4M3FN == (int)MLA_KV_FP8_E4M3FN &&
                  (int)KV_E4M3FNUZ == (int)MLA_KV_FP8_E4M3FNUZ,
              "the kernels' KvFmt mirrors mla_kv_dtype");
static bool kv_is_fp8(const mla_gpu_args *a)
{
    return a->kv_dtype == MLA_KV_FP8_E4M3FN || a->kv_dtype == MLA_KV_FP8_E4M3FNUZ;
}
// The ws-pvsm kernel (stage1_ws.h with the softmax in the PV warpgroups,
// bf16 pools): forced by fast_kernel ws-pvsm; under auto where it measured
// faster than plain ws, chunks of 2048 tokens or more on average
// (docs/perf/2026-12-01-ws-pvg.md "The softmax moved to the PV warpgroups": 3-7% on K3 bs 8 /
// 16k, bs 32 / 4k and DSV3 bs 32-64 / 16k). Short splits keep plain ws,
// where it measured 1-2% slower.
static bool fast_uses_pvsm(const mla_gpu_args *a, const mla_gpu_options &o, int chunks)
{
    const mla_shape *s = &a->shape;
    if (kv_is_fp8(a) || !fast_uses_ws(s))
        return false;
    if (o.fast_kernel == MLA_GPU_FAST_KERNEL_WS_PVSM)
        return true;
    if (o.fast_kernel != MLA_GPU_FAST_KERNEL_AUTO)
        return false;
    return (long long)a->num_kv_indices >= 2048LL * chunks;
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
    const long long ns = tier == MLA_GPU_TIER_FAST ? fast_max_pieces(s) : MLA_GPU_PERHEAD_MAX_SPLITS;
    // The widest stage-2 block (one chunk of Dv <= 512).
    if (stage2_smem(s->q_len, (int)ns, s->head_dim, 512) > 200 * 1024)
        return "q_len too large for the stage-2 shared-memory score block";
    // fast_kernel ws asks for that kernel and declines where it cannot run;
    // ws-pvsm asks for the softmax in the PV warps wherever the ws kernel
    // runs and leaves every other shape to auto's kernel, so that its row
    // of the backend table never declines what SPEC section 3 accepts.
    if (tier == MLA_GPU_TIER_FAST && o.fast_kernel == MLA_GPU_FAST_KERNEL_WS) {
        if (kTarget != MLA_SP_NVIDIA)
            return "fast_kernel ws is an NVIDIA sm_90a kernel";
        if (s->head_dim != D_MAX)
            return "fast_kernel ws needs head_dim 576";
        if (fast_rows(s) < 64)
            return "fast_kernel ws needs 64-row blocks (num_heads * q_len > 32)";
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

// Bytes of `slots` partial slots of H L rows (esize bytes an element) and
// their lse.
static size_t partial_bytes(const mla_shape *s, int slots, size_t esize, size_t *lse_offset)
{
    return mla_sp_partial_bytes(1, slots, s->num_heads, s->q_len, s->v_head_dim, esize, lse_offset);
}

extern "C" mla_status mla_gpu_workspace_size(const mla_shape *s, mla_gpu_tier tier,
                                             const mla_gpu_options *opt, size_t *bytes, mla_error *err)
{
    if (bytes)
        *bytes = 0;
    if (!s || !bytes) {
        mla_error_set(err, "mla_gpu_workspace_size: %s is NULL", !s ? "shape" : "bytes");
        return MLA_ERR_INVALID;
    }
    mla_status st = mla_gpu_options_check(opt, err);
    if (st != MLA_OK)
        return st;
    mla_gpu_options def;
    const mla_gpu_options &o = opts_or_default(opt, def);
    switch (tier) {
    case MLA_GPU_TIER_FAST:
    case MLA_GPU_TIER_PERHEAD: {
        const char *why = split_tier_shape_declines(s, tier, o);
        if (why) {
            mla_error_set(err, "%s tier declines: %s", mla_gpu_tier_name(tier), why);
            return MLA_ERR_DECLINED;
        }
        // Per-head: the count depends on the prefix total, which a shape
        // lacks: the largest.
        *bytes = tier == MLA_GPU_TIER_FAST ? partial_bytes(s, fast_max_slots(s), 2, NULL)
                                           : partial_bytes(s, MLA_GPU_PERHEAD_MAX_SPLITS * s->num_seqs, 4, NULL);
        if (*bytes == 0) {
            mla_error_set(err, "%s tier: the workspace size of this shape overflows", mla_gpu_tier_name(tier));
            return MLA_ERR_INVALID;
        }
        return MLA_OK;
    }
    case MLA_GPU_TIER_GENERIC:
        return MLA_OK;
    case MLA_GPU_TIER_AUTO: {
        // The most any tier the chain may pick needs; a declining tier
        // needs nothing.
        size_t f = 0, p = 0;
        st = mla_gpu_workspace_size(s, MLA_GPU_TIER_FAST, opt, &f, err);
        if (st != MLA_OK && st != MLA_ERR_DECLINED)
            return st;
        st = mla_gpu_workspace_size(s, MLA_GPU_TIER_PERHEAD, opt, &p, err);
        if (st != MLA_OK && st != MLA_ERR_DECLINED)
            return st;
        *bytes = f > p ? f : p;
        return MLA_OK;
    }
    }
    mla_error_set(err, "mla_gpu_workspace_size: unknown tier %d", (int)tier);
    return MLA_ERR_INVALID;
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
        mla_error_set(err, "mla_gpu_run: no arguments");
        return MLA_ERR_INVALID;
    }
    const mla_shape *s = &a->shape;
    // An empty batch is valid (nothing to do); only the split tiers decline it.
    if (s->num_seqs < 0 || (s->num_seqs == 0 && s->num_q_tokens != 0) || s->num_heads < 1 || s->num_kv_heads < 1 ||
        s->num_heads % s->num_kv_heads != 0 || s->head_dim < 1 || s->v_head_dim < 1 ||
        s->num_q_tokens < 0) {
        mla_error_set(err, "mla_gpu_run: invalid shape (bs %d, heads %d/%d, dims %d/%d, tokens %lld)",
                  s->num_seqs, s->num_heads, s->num_kv_heads, s->head_dim, s->v_head_dim,
                  (long long)s->num_q_tokens);
        return MLA_ERR_INVALID;
    }
    // SPEC section 6: -1 is off, W >= 1 a window; 0 means nothing (SGLang's
    // "<= 0 is off" is mapped to -1 where calls are captured), so it is
    // rejected here as the reader, the reference and the model reject it.
    if (s->sliding_window == 0 || s->sliding_window < -1) {
        mla_error_set(err, "mla_gpu_run: sliding_window %d is neither -1 (off) nor a window W >= 1",
                      s->sliding_window);
        return MLA_ERR_INVALID;
    }
    if (s->v_head_dim > s->kv_dim) {
        mla_error_set(err, "mla_gpu_run: v_head_dim %d exceeds the kv pool width %d", s->v_head_dim,
                  s->kv_dim);
        return MLA_ERR_INVALID;
    }
    if (a->kv_dtype != MLA_KV_BF16 && !kv_is_fp8(a)) {
        mla_error_set(err, "mla_gpu_run: kv_dtype %d is no mla_kv_dtype (bf16 0, float8_e4m3fn 1, float8_e4m3fnuz 2)",
                  a->kv_dtype);
        return MLA_ERR_INVALID;
    }
    if (!a->q || !a->k_extend || !a->v_extend || !a->kv_buffer || !a->qo_indptr || !a->kv_indptr ||
        !a->o || (!a->kv_indices && a->num_kv_indices > 0) || (s->has_sinks && !a->sinks)) {
        mla_error_set(err, "mla_gpu_run: a required device pointer is NULL");
        return MLA_ERR_INVALID;
    }
    return MLA_OK;
}


// What the launch of a split tier needs beyond the arguments: the plan and
// the workspace carved into partial outputs and lse.
enum class FastStage1 { MMA, WS, WS_PVSM };
struct SplitLaunch {
    const mla_gpu_args *g;
    mla_gpu_run_info info;
    mla_sp_fast_plan plan; // fast tier only
    FastStage1 kernel;     // fast tier only
    bool direct;           // stage 1 may write o and lse itself (fast_merge auto)
    void *part_o;          // bf16 (fast) or fp32 (per-head) partial outputs
    float *part_lse;       // natural-log partial lse
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
    p1.D = g.shape.head_dim;
    p1.Dv = g.shape.v_head_dim;
    p1.num_seqs = g.shape.num_seqs;
    p1.num_splits = a.info.num_splits;
    p1.work = 0;
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
    p2.num_seqs = p1.num_seqs;
    p2.num_splits = a.info.num_splits;
    p2.max_pieces = a.info.num_splits;
    p2.work = 0;
    p2.s1_draft = 0;
    p2.s1_direct = 0;
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
    p1.mode = p2.mode = S1_FAST;
    p1.work = p2.work = a.plan.work;
    p2.max_pieces = fast_max_pieces(&a.g->shape);
    p2.cw = a.plan.cw;
    const int bs = a.g->shape.num_seqs;
    const int rows = a.info.rows_per_cta;
    // Grid (chunk, row block): each CTA takes the pieces of its chunk
    // (PieceWalk, stage1_common.h); on AMD one CTA per partial slot, each
    // with at most one piece (PieceWalk::slot_piece).
#if defined(MLA_TARGET_NVIDIA)
    dim3 grid(a.plan.chunks, a.plan.row_blocks, 1);
#else
    dim3 grid(a.plan.slots, a.plan.row_blocks, 1);
#endif
    hipError_t e;
#if defined(MLA_TARGET_NVIDIA)
    // ws-pvsm's stage 1 takes the draft block into each sequence's last
    // piece (Stage1Draft): stage 2 then merges the pieces only, its blocks
    // do no draft products after stage 1's CTAs leave the SMs
    // (docs/perf/2026-12-02-draft-fold.md, "The draft tile in stage 1's last split"). Not with scaled pools:
    // the drafts take neither k_scale nor v_scale (SPEC section 2). Dv ==
    // 512: the kernel reads 512 columns of each v_extend row (narrower
    // values go through stage 2, which reads its own columns: k3-dv256).
    const mla_gpu_args &g = *a.g;
    Stage1Draft dr = {g.k_extend, g.v_extend, g.k_stride_tok, g.v_stride_tok, g.o, g.lse, 0, 0};
    dr.on = a.kernel == FastStage1::WS_PVSM && g.k_scale == 1.f && g.v_scale == 1.f &&
            p1.L <= 8 /* ws_draft_pv_exact: at most 8 drafts */ && p1.Dv == DV_MAX;
    p2.s1_draft = dr.on;
    // A sequence with one piece and the draft block in stage 1: stage 2
    // would copy that piece into o bit for bit (one weight of exactly 1; 0
    // and -inf, or NaN, carried as they are), so stage 1 writes it straight
    // into o and lse, and stage 2 skips the sequence. Its partial row
    // r = i H + h is o's row (b L + i) H + h when o and lse are dense
    // ([tokens][H][Dv], [tokens][H]) and q_len declares every sequence's rows.
    dr.direct = dr.on && a.direct && g.o_stride_head == p1.Dv && g.o_stride_tok == (int64_t)p1.H * p1.Dv &&
                (!g.lse || g.lse_stride_tok == p1.H);
    p2.s1_direct = dr.direct;
    if (rows == 16)
        e = launch_stage1_mma<1, 4, 1, bf16_t, 0>(p1, grid, a.stream);
    else if (rows == 32)
        e = launch_stage1_mma<2, 4, 1, bf16_t, 0>(p1, grid, a.stream);
    else
        e = a.kernel == FastStage1::MMA    ? launch_stage1_mma<4, 8, 2, bf16_t, 0>(p1, grid, a.stream)
            : p1.kv_fmt != KV_BF16         ? launch_stage1_ws<true, false>(p1, dr, grid, a.stream)
            : a.kernel == FastStage1::WS_PVSM ? launch_stage1_ws<false, true>(p1, dr, grid, a.stream)
                                              : launch_stage1_ws<false, false>(p1, dr, grid, a.stream);
    if (e != hipSuccess)
        return e;
    // One chunk holding the one sequence: its only piece wrote o itself.
    if (dr.direct && a.plan.chunks == 1 && bs == 1)
        return hipSuccess;
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
    p1.mode = p2.mode = S1_PERHEAD;
    p2.cw = mla_sp_stage2_cols(p2.Dv, p2.num_seqs, p2.H, MLA_GPU_FAST_TARGET_CTAS);
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
    mla_error_set(err, "%s launch failed: %s", what, hipGetErrorString(e));
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
        mla_error_set(err, "mla_gpu_run: unknown tier %d", (int)tier);
        return MLA_ERR_INVALID;
    }
    const char *why = declines(a, tier, o);
    if (why) {
        mla_error_set(err, "%s tier declines: %s", mla_gpu_tier_name(tier), why);
        return MLA_ERR_DECLINED;
    }
    const mla_shape *s = &a->shape;
    mla_gpu_run_info r;
    r.tier = tier;
    r.num_splits = r.min_split = r.rows_per_cta = 0;
    r.fast_kernel = MLA_GPU_FAST_KERNEL_AUTO;
    if (tier == MLA_GPU_TIER_GENERIC) {
        if (s->num_q_tokens > 0x7fffffffLL || s->num_heads > 65535) {
            mla_error_set(err, "generic tier: %lld tokens x %d heads exceeds the grid",
                      (long long)s->num_q_tokens, s->num_heads);
            return MLA_ERR_INVALID;
        }
        if (generic_smem(s->head_dim, s->v_head_dim) > 220 * 1024) {
            mla_error_set(err, "generic tier: head_dim %d / v_head_dim %d exceed shared memory",
                      s->head_dim, s->v_head_dim);
            return MLA_ERR_INVALID;
        }
        r.rows_per_cta = 1;
    } else if (tier == MLA_GPU_TIER_FAST) {
        const mla_sp_fast_plan pl = fast_plan(a, o);
        r.num_splits = pl.chunks;
        r.rows_per_cta = pl.rows;
        r.min_split = pl.min_split;
        r.fast_kernel = !fast_uses_ws(s)                  ? MLA_GPU_FAST_KERNEL_MMA
                        : fast_uses_pvsm(a, o, pl.chunks) ? MLA_GPU_FAST_KERNEL_WS_PVSM
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
    SplitLaunch la;
    la.g = a;
    la.info = r;
    if (fast) {
        la.plan = fast_plan(a, o);
        la.kernel = r.fast_kernel == MLA_GPU_FAST_KERNEL_MMA       ? FastStage1::MMA
                    : r.fast_kernel == MLA_GPU_FAST_KERNEL_WS_PVSM ? FastStage1::WS_PVSM
                                                                   : FastStage1::WS;
    }
    size_t lse_offset = 0;
    const size_t need = fast ? partial_bytes(s, la.plan.slots, 2, &lse_offset)
                             : partial_bytes(s, r.num_splits * s->num_seqs, 4, &lse_offset);
    if (need == 0 || need > workspace_bytes || !workspace || !aligned(workspace, 256)) {
        mla_error_set(err, "%s tier: workspace of %zu bytes at %p is too small or misaligned (needs %zu, 256-byte aligned)",
                      mla_gpu_tier_name(r.tier), workspace_bytes, workspace, need);
        return MLA_ERR_INVALID;
    }
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
