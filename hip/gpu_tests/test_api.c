/* Host-side checks of the GPU API that need no device: options validation,
 * the plan each tier reports (mla_gpu_plan: split counts it really runs),
 * workspace sizes as pure functions of their arguments, and declines.
 * Device pointers are placeholders that are never dereferenced: nothing
 * here launches. */
#include "mla/gpu.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

static int failures;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                   \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

/* K3 TP8 verify: 12 heads, 8 drafts, 576 / 512, bs sequences of prefix P. */
static mla_gpu_args k3_args(int bs, long long P)
{
    mla_gpu_args a;
    memset(&a, 0, sizeof a);
    mla_shape *s = &a.shape;
    s->num_seqs = bs;
    s->num_heads = 12;
    s->num_kv_heads = 1;
    s->q_len = 8;
    s->num_q_tokens = (int64_t)bs * 8;
    s->head_dim = s->kv_dim = 576;
    s->v_head_dim = s->v_extend_dim = 512;
    s->is_causal = 1;
    s->sliding_window = -1; /* off (0 is rejected) */
    s->topk = 1;
    a.num_kv_indices = bs * P;
    a.sm_scale = 0.0721688f;
    a.k_scale = a.v_scale = 1.f;
    /* 256-byte aligned placeholders, never dereferenced. */
    void *fake = (void *)(uintptr_t)0x100000;
    a.q = a.k_extend = a.v_extend = a.kv_buffer = (const mla_bf16 *)fake;
    a.o = (mla_bf16 *)fake;
    a.qo_indptr = a.kv_indptr = (const int32_t *)fake;
    a.kv_indices = (const int64_t *)fake;
    a.q_stride_tok = 12 * 576;
    a.q_stride_head = 576;
    a.k_stride_tok = a.kv_stride_slot = 576;
    a.v_stride_tok = 512;
    a.o_stride_tok = 12 * 512;
    a.o_stride_head = 512;
    return a;
}

/* DeepSeek-V3 at TP8: 16 heads x 4 drafts, one 64-row block. */
static mla_gpu_args dsv3_args(int bs, long long P)
{
    mla_gpu_args a = k3_args(bs, P);
    a.shape.num_heads = 16;
    a.shape.q_len = 4;
    a.shape.num_q_tokens = (int64_t)bs * 4;
    a.q_stride_tok = 16 * 576;
    return a;
}

/* The stage-1 kernel mla_gpu_plan reports for `a` under `fast_kernel`
 * (AUTO: the default options) on `tier`, against `want`. */
static void expect_kernel(const mla_gpu_args *a, mla_gpu_tier tier, mla_gpu_fast_kernel fast_kernel,
                          mla_gpu_fast_kernel want, const char *what)
{
    mla_gpu_options o = mla_gpu_options_default();
    o.fast_kernel = fast_kernel;
    mla_gpu_run_info info;
    mla_error err;
    memset(&err, 0, sizeof err);
    const mla_status st = mla_gpu_plan(a, tier, &o, &info, &err);
    CHECK(st == MLA_OK && info.fast_kernel == want, "%s: status %d kernel %d (want %d) %s", what, (int)st,
          st == MLA_OK ? (int)info.fast_kernel : -1, (int)want, err.msg);
}

/* mla_gpu_workspace_size's bytes, or (size_t)-1 when it does not return
 * MLA_OK. */
static size_t ws_bytes(const mla_shape *s, mla_gpu_tier tier, const mla_gpu_options *o)
{
    size_t b = 0;
    mla_error err;
    return mla_gpu_workspace_size(s, tier, o, &b, &err) == MLA_OK ? b : (size_t)-1;
}

int main(void)
{
    mla_error err;
    mla_gpu_options o = mla_gpu_options_default();
    CHECK(mla_gpu_options_check(&o, &err) == MLA_OK, "defaults valid");
    CHECK(mla_gpu_options_check(NULL, &err) == MLA_OK, "NULL = defaults");
    mla_gpu_options bad = o;
    bad.fast_kernel = 7;
    CHECK(mla_gpu_options_check(&bad, &err) == MLA_ERR_INVALID && strstr(err.msg, "fast_kernel"),
          "unknown kernel: %s", err.msg);
    bad.fast_kernel = MLA_GPU_FAST_KERNEL_MMA; /* reported, never an option */
    CHECK(mla_gpu_options_check(&bad, &err) == MLA_ERR_INVALID && strstr(err.msg, "fast_kernel"),
          "mma is no option: %s", err.msg);
    bad = o;
    bad.fast_min_split = 8;
    CHECK(mla_gpu_options_check(&bad, &err) == MLA_ERR_INVALID, "min split 8");
    bad = o;
    bad.fast_split_rule = 2;
    CHECK(mla_gpu_options_check(&bad, &err) == MLA_ERR_INVALID, "rule 2");
    CHECK(mla_gpu_fast_kernel_parse("ws") == MLA_GPU_FAST_KERNEL_WS, "parse ws");
    CHECK(mla_gpu_fast_kernel_parse("ws-pvsm") == MLA_GPU_FAST_KERNEL_WS_PVSM, "parse ws-pvsm");
    CHECK(mla_gpu_fast_kernel_parse("ws-pp") == -1 && mla_gpu_fast_kernel_parse("pair") == -1,
          "the deleted kernels are gone");
    CHECK(mla_gpu_split_rule_parse("fixed") == MLA_GPU_SPLIT_RULE_FIXED, "parse fixed");
    bad = o;
    bad.fast_merge = 2;
    CHECK(mla_gpu_options_check(&bad, &err) == MLA_ERR_INVALID && strstr(err.msg, "fast_merge"),
          "merge 2: %s", err.msg);
    CHECK(mla_gpu_options_default().fast_merge == MLA_GPU_MERGE_AUTO, "merge default");

    /* Unknown options are an error, never a silent other kernel; the
     * workspace query tells invalid options from a decline. */
    mla_gpu_args a = k3_args(32, 4096);
    mla_gpu_run_info info;
    bad = o;
    bad.fast_kernel = 9;
    CHECK(mla_gpu_plan(&a, MLA_GPU_TIER_FAST, &bad, &info, &err) == MLA_ERR_INVALID, "plan bad opts");
    size_t wb = 1;
    CHECK(mla_gpu_workspace_size(&a.shape, MLA_GPU_TIER_FAST, &bad, &wb, &err) == MLA_ERR_INVALID && wb == 0 &&
              strstr(err.msg, "fast_kernel"),
          "workspace bad opts: %s", err.msg);
    CHECK(mla_gpu_workspace_size(NULL, MLA_GPU_TIER_FAST, NULL, &wb, &err) == MLA_ERR_INVALID, "no shape");
    mla_gpu_args nc = a;
    nc.shape.is_causal = 0;
    CHECK(mla_gpu_workspace_size(&nc.shape, MLA_GPU_TIER_FAST, NULL, &wb, &err) == MLA_ERR_DECLINED && wb == 0 &&
              strstr(err.msg, "causal"),
          "workspace of a declined shape: %s", err.msg);
    CHECK(mla_gpu_workspace_size(&nc.shape, MLA_GPU_TIER_AUTO, NULL, &wb, &err) == MLA_OK && wb == 0,
          "auto on a shape only the generic tier takes: none");

    /* K3 bs 32 / 4k: two 64-row blocks, 132 / 64 = 2 splits a sequence: 64
     * chunks of 2048 tokens, so auto runs the ws-pvsm kernel
     * (docs/perf/2026-12-01-ws-pvg.md, "The softmax moved to the PV warpgroups"). */
    CHECK(mla_gpu_plan(&a, MLA_GPU_TIER_AUTO, NULL, &info, &err) == MLA_OK, "%s", err.msg);
    CHECK(info.tier == MLA_GPU_TIER_FAST && info.num_splits == 64 && info.rows_per_cta == 64 &&
              info.fast_kernel == MLA_GPU_FAST_KERNEL_WS_PVSM,
          "auto: tier %d chunks %d rows %d kernel %d", info.tier, info.num_splits, info.rows_per_cta,
          (int)info.fast_kernel);
    expect_kernel(&a, MLA_GPU_TIER_FAST, MLA_GPU_FAST_KERNEL_WS, MLA_GPU_FAST_KERNEL_WS, "forced ws");
    /* Auto keeps plain ws for chunks averaging under 2048 tokens (K3 bs 32
     * / 2k: 64 chunks of 1024; bs 1 / 4k; DSV3 bs 1 / 4k) and runs ws-pvsm
     * for one 64-row block too (DSV3: 16 heads x 4 drafts, bs 32 / 16k);
     * ws-pvsm forces it everywhere. */
    a = k3_args(32, 2048);
    expect_kernel(&a, MLA_GPU_TIER_FAST, MLA_GPU_FAST_KERNEL_AUTO, MLA_GPU_FAST_KERNEL_WS, "K3 bs 32 / 2k");
    a = k3_args(1, 4096);
    expect_kernel(&a, MLA_GPU_TIER_FAST, MLA_GPU_FAST_KERNEL_AUTO, MLA_GPU_FAST_KERNEL_WS, "K3 bs 1 / 4k");
    expect_kernel(&a, MLA_GPU_TIER_FAST, MLA_GPU_FAST_KERNEL_WS_PVSM, MLA_GPU_FAST_KERNEL_WS_PVSM,
                  "K3 bs 1 / 4k, forced ws-pvsm");
    a = dsv3_args(32, 16384);
    expect_kernel(&a, MLA_GPU_TIER_FAST, MLA_GPU_FAST_KERNEL_AUTO, MLA_GPU_FAST_KERNEL_WS_PVSM, "DSV3 bs 32 / 16k");
    expect_kernel(&a, MLA_GPU_TIER_PERHEAD, MLA_GPU_FAST_KERNEL_AUTO, MLA_GPU_FAST_KERNEL_AUTO, "per-head tier");
    CHECK(mla_gpu_plan(&a, MLA_GPU_TIER_FAST, NULL, &info, &err) == MLA_OK && info.rows_per_cta == 64,
          "DSV3 bs 32 / 16k: one 64-row block, rows %d", info.rows_per_cta);
    a = dsv3_args(1, 4096);
    expect_kernel(&a, MLA_GPU_TIER_FAST, MLA_GPU_FAST_KERNEL_AUTO, MLA_GPU_FAST_KERNEL_WS, "DSV3 bs 1 / 4k");
    /* 24 rows: the single-role kernel, whatever auto or the options say. */
    a = k3_args(32, 4096);
    a.shape.q_len = 2;
    a.shape.num_q_tokens = 32 * 2;
    expect_kernel(&a, MLA_GPU_TIER_FAST, MLA_GPU_FAST_KERNEL_AUTO, MLA_GPU_FAST_KERNEL_MMA, "24 rows");

    /* The per-head tier runs 4 splits below an average prefix of 4096 (not
     * the upstream plan's count), the generic tier none. */
    a = k3_args(4, 2048);
    CHECK(mla_gpu_plan(&a, MLA_GPU_TIER_PERHEAD, NULL, &info, &err) == MLA_OK, "%s", err.msg);
    CHECK(info.num_splits == 4 && info.min_split == 0, "perhead splits %d", info.num_splits);
    a = k3_args(4, 8192);
    CHECK(mla_gpu_plan(&a, MLA_GPU_TIER_PERHEAD, NULL, &info, &err) == MLA_OK && info.num_splits == 16,
          "perhead 8k: %d", info.num_splits);
    CHECK(mla_gpu_plan(&a, MLA_GPU_TIER_GENERIC, NULL, &info, &err) == MLA_OK && info.num_splits == 0,
          "generic splits %d", info.num_splits);

    /* bs 1 / 4k: the adaptive rule lengthens the smallest split (fewer,
     * longer chunks: 32 of 128 tokens), fixed keeps 64 (64 chunks). */
    a = k3_args(1, 4096);
    CHECK(mla_gpu_plan(&a, MLA_GPU_TIER_FAST, NULL, &info, &err) == MLA_OK && info.min_split == 128 &&
              info.num_splits == 32,
          "adaptive min split %d, chunks %d", info.min_split, info.num_splits);
    o.fast_split_rule = MLA_GPU_SPLIT_RULE_FIXED;
    CHECK(mla_gpu_plan(&a, MLA_GPU_TIER_FAST, &o, &info, &err) == MLA_OK && info.min_split == 64 &&
              info.num_splits == 64,
          "fixed min split %d, chunks %d", info.min_split, info.num_splits);
    o = mla_gpu_options_default();

    /* ws asked for where it cannot run: a decline with the reason, not the
     * mma kernel. */
    a = k3_args(8, 4096);
    a.shape.num_heads = 2;
    a.shape.q_len = 8; /* 16 rows */
    a.q_stride_tok = 2 * 576;
    a.o_stride_tok = 2 * 512;
    o.fast_kernel = MLA_GPU_FAST_KERNEL_WS;
    const char *why = mla_gpu_declines(&a, MLA_GPU_TIER_FAST, &o);
    CHECK(why && strstr(why, "ws"), "ws on 16 rows: %s", why ? why : "(runs)");
    CHECK(mla_gpu_declines(&a, MLA_GPU_TIER_FAST, NULL) == NULL, "auto runs 16 rows");
    o = mla_gpu_options_default();

    /* fp8 pools: the 64-row ws kernel reads them (ws-pvsm's softmax is a
     * bf16 kernel: fp8 keeps ws); a kv_dtype outside mla_kv_dtype is
     * invalid; fp8 rows need 16 codes per 16 bytes. */
    a = k3_args(8, 4096);
    a.kv_dtype = MLA_KV_FP8_E4M3FN;
    CHECK(mla_gpu_declines(&a, MLA_GPU_TIER_FAST, NULL) == NULL, "fp8 on the default fast path");
    expect_kernel(&a, MLA_GPU_TIER_FAST, MLA_GPU_FAST_KERNEL_WS_PVSM, MLA_GPU_FAST_KERNEL_WS, "fp8, ws-pvsm");
    CHECK(mla_gpu_declines(&a, MLA_GPU_TIER_PERHEAD, NULL) == NULL, "fp8 per-head");
    a.kv_stride_slot = 584; /* a multiple of 8, not of 16 */
    why = mla_gpu_declines(&a, MLA_GPU_TIER_FAST, NULL);
    CHECK(why && strstr(why, "kv_buffer"), "fp8 stride 584: %s", why ? why : "(runs)");
    a.kv_stride_slot = 576;
    a.kv_dtype = 7;
    CHECK(mla_gpu_plan(&a, MLA_GPU_TIER_FAST, NULL, &info, &err) == MLA_ERR_INVALID &&
              strstr(err.msg, "kv_dtype"),
          "kv_dtype 7: %s", err.msg);

    /* Workspace: a pure function of (shape, tier, options), enough for the
     * balanced partition of any batch of that shape. */
    a = k3_args(16, 4096);
    const size_t w1 = ws_bytes(&a.shape, MLA_GPU_TIER_AUTO, NULL);
    const size_t w2 = ws_bytes(&a.shape, MLA_GPU_TIER_AUTO, NULL);
    CHECK(w1 == w2 && w1 > 0 && w1 != (size_t)-1, "workspace %zu %zu", w1, w2);
    CHECK(ws_bytes(&a.shape, MLA_GPU_TIER_GENERIC, NULL) == 0, "generic none");
    /* 16 sequences, two row blocks: 132 / 32 = 4 splits a sequence, 64
     * chunks, 64 + 15 slots of 96 rows x 512 bf16 plus their lse. */
    const size_t slots = 64 + 15, rows = slots * 96;
    CHECK(ws_bytes(&a.shape, MLA_GPU_TIER_FAST, NULL) ==
              ((rows * 512 * 2 + 255) & ~(size_t)255) + ((rows * 4 + 255) & ~(size_t)255),
          "fast workspace %zu", ws_bytes(&a.shape, MLA_GPU_TIER_FAST, NULL));

    if (failures) {
        fprintf(stderr, "test_api: %d failure(s)\n", failures);
        return 1;
    }
    printf("test_api: ok\n");
    return 0;
}
