// mla-bench: the GPU tiers at K3 TP8 (H 12, L 8) and DeepSeek-V3 TP8 (H 16,
// L 4) verify shapes, with the copy bandwidth and the bf16 GEMM rate measured
// in the same run (SPEC section 8). Each timing is the median of graph
// replays; a replay runs R calls over R distinct input sets so that the
// working set exceeds the 60 MB L2 (small shapes would otherwise be timed
// from cache). Writes bench.json and bench.md.
//
// Usage: mla-bench --help

#include "compat.h"
#include "mla/gpu.h"

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <algorithm>
#include <string>
#include <vector>

#ifndef MLA_GIT_COMMIT
#define MLA_GIT_COMMIT "unknown"
#endif

// Slot lists of the prefix (page size 1): tokens of shuffled 64-token
// pages (SPEC section 5; contiguous runs of 64) or one random permutation
// of all tokens (no two neighbours adjacent, the gather's worst case).
enum KvLayout { KV_PAGES64, KV_RANDOM };
static KvLayout g_kv_layout = KV_PAGES64;
static const char *kv_layout_name(KvLayout l)
{
    return l == KV_RANDOM ? "random" : "pages64";
}

#define CK(call)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_));  \
            exit(2);                                                                               \
        }                                                                                          \
    } while (0)

// Seeded random bf16 in [-1, 1) (never zeros: zeros hide unwritten outputs
// and run faster than real data).
__global__ void fill_bf16(uint16_t *p, size_t n, uint64_t seed, float gain)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed;
        x ^= x >> 31;
        x *= 0xBF58476D1CE4E5B9ull;
        x ^= x >> 29;
        const float f = ((float)(x >> 40) / (float)(1ull << 24) * 2.f - 1.f) * gain;
        uint32_t u = __float_as_uint(f);
        u += 0x7fffu + ((u >> 16) & 1u);
        p[i] = (uint16_t)(u >> 16);
    }
}

// Seeded random e4m3 codes of magnitude 2^-3 .. 2^2 (exponent fields 4..8:
// no NaN code and no zero of either flavour), each sign.
__global__ void fill_fp8(uint8_t *p, size_t n, uint64_t seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed;
        x ^= x >> 31;
        x *= 0xBF58476D1CE4E5B9ull;
        x ^= x >> 29;
        p[i] = (uint8_t)((x & 0x80u) | ((4u + (uint32_t)(x >> 8) % 5u) << 3) | ((x >> 16) & 7u));
    }
}

// Pool dtype of the timed calls (--kv).
static int g_kv_dtype = MLA_KV_BF16;

static void fill(void *p, size_t n, uint64_t seed, float gain)
{
    fill_bf16<<<1024, 256>>>((uint16_t *)p, n, seed, gain);
    CK(cudaGetLastError());
}

static double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

#include "bench/ceilings.h"

struct Ref {
    int heads, bs, prefix;
    double mla, perhead, flashmla, roofline;
};
// SPEC section 8 (same H200 and method).
static const Ref SPEC_REF[] = {
    {12, 1, 4096, 39.7, 150.9, 19.2, 1.2},       {12, 1, 65536, 380.0, 875.8, 49.3, 20.0},
    {12, 8, 16384, 569.7, 1322.3, 72.6, 39.9},   {12, 32, 1024, 181.2, 354.2, 30.3, 10.1},
    {12, 32, 4096, 584.4, 1303.4, 74.2, 40.0},   {12, 32, 16384, 2189.2, 4617.9, 263.0, 159.7},
    {12, 64, 16384, 4150.8, 8947.4, 523.0, 319.5}, {16, 1, 4096, 29.6, 83.4, 24.7, 1.1},
    {16, 8, 16384, 568.5, 1472.7, 53.8, 35.4},   {16, 32, 4096, 566.3, 1427.7, 54.0, 35.4},
    {16, 32, 16384, 2168.9, 5728.6, 175.9, 141.6}, {16, 64, 16384, 4479.4, 11510.2, 341.6, 283.2},
};
static const Ref *spec_ref(int heads, int bs, int prefix)
{
    for (const Ref &r : SPEC_REF)
        if (r.heads == heads && r.bs == bs && r.prefix == prefix)
            return &r;
    return nullptr;
}

// One timed case: bs sequences of `prefix` tokens each, or (lens non-empty:
// a ragged batch, --lens) sequence b with prefix lens[b]; then bs is
// lens.size() and prefix the mean rounded down (the record states the exact
// mean).
struct Case {
    int heads, q_len, bs, prefix;
    std::vector<int> lens;
    std::string lens_arg; // the --lens list as given
    int prefix_of(int b) const { return lens.empty() ? prefix : lens[b]; }
    long long kv_tokens() const
    {
        long long t = 0;
        for (int b = 0; b < bs; ++b)
            t += prefix_of(b);
        return t;
    }
    double mean_prefix() const { return bs ? (double)kv_tokens() / bs : 0.0; }
    int max_prefix() const
    {
        int m = 0;
        for (int b = 0; b < bs; ++b)
            m = std::max(m, prefix_of(b));
        return m;
    }
    int min_prefix() const
    {
        int m = bs ? prefix_of(0) : 0;
        for (int b = 1; b < bs; ++b)
            m = std::min(m, prefix_of(b));
        return m;
    }
};

#include "bench/lens.h"

struct InputSet {
    void *q, *ke, *ve, *kv, *qo, *kvp, *idx, *o, *lse;
    mla_gpu_args a;
};

struct Record {
    std::string backend;
    Case c;
    double us, roof_us, spec_roof_us, gbps, tflops;
    const Ref *ref;
    int splits, min_split; // stage-1 prefix splits and smallest fast split (mla_gpu_plan)
};

static const int D = 576, DV = 512;

// Bytes the call must read: the prefix pool over the batch's real total
// (1 or 2 bytes an element) and the drafts' bf16 keys and values.
static double case_kv_bytes(const Case &c)
{
    return (double)c.kv_tokens() * D * mla_kv_dtype_size((mla_kv_dtype)g_kv_dtype) +
           (double)c.bs * c.q_len * D * 2;
}

// QK^T and PV of every sequence over its own P_b + L keys (SPEC 8).
static double case_flops(const Case &c)
{
    return 2.0 * c.heads * c.q_len * ((double)c.kv_tokens() + (double)c.bs * c.q_len) * (D + DV);
}

static void make_set(const Case &c, uint64_t seed, InputSet &s)
{
    const long long T = (long long)c.bs * c.q_len, KV = c.kv_tokens();
    // Every sequence owns whole 64-token pages (its last one part-filled),
    // as in a paged cache; a uniform batch whose prefix is a multiple of 64
    // gets the flat layout of earlier builds exactly.
    long long pool_pages = 0;
    for (int b = 0; b < c.bs; ++b)
        pool_pages += (c.prefix_of(b) + 63) / 64;
    const long long slots = pool_pages * 64 + 64;
    CK(cudaMalloc(&s.q, T * c.heads * D * 2));
    CK(cudaMalloc(&s.ke, T * D * 2));
    CK(cudaMalloc(&s.ve, T * DV * 2));
    const size_t kv_es = mla_kv_dtype_size((mla_kv_dtype)g_kv_dtype);
    CK(cudaMalloc(&s.kv, slots * D * kv_es));
    CK(cudaMalloc(&s.qo, (c.bs + 1) * 4));
    CK(cudaMalloc(&s.kvp, (c.bs + 1) * 4));
    CK(cudaMalloc(&s.idx, std::max(1LL, KV) * 8));
    CK(cudaMalloc(&s.o, T * c.heads * DV * 2));
    CK(cudaMalloc(&s.lse, T * c.heads * 4));
    fill(s.q, T * c.heads * D, seed * 5 + 1, 1.f);
    fill(s.ke, T * D, seed * 5 + 2, 1.f);
    fill(s.ve, T * DV, seed * 5 + 3, 1.f);
    if (g_kv_dtype == MLA_KV_BF16) {
        fill(s.kv, slots * D, seed * 5 + 4, 1.f);
    } else {
        fill_fp8<<<1024, 256>>>((uint8_t *)s.kv, slots * D, seed * 5 + 4);
        CK(cudaGetLastError());
    }
    std::vector<int> qo(c.bs + 1), kvp(c.bs + 1);
    for (int b = 0; b <= c.bs; ++b) {
        qo[b] = b * c.q_len;
        kvp[b] = b ? kvp[b - 1] + c.prefix_of(b - 1) : 0;
    }
    // Page size 1 slot lists (g_kv_layout): a shuffle of the 64-token pages
    // or of the tokens themselves.
    const long long unit = g_kv_layout == KV_RANDOM ? 1 : 64;
    const long long pages = g_kv_layout == KV_RANDOM ? KV : pool_pages;
    std::vector<long long> perm(pages);
    for (long long i = 0; i < pages; ++i)
        perm[i] = i;
    uint64_t r = seed * 0x9E3779B97F4A7C15ull + 1;
    for (long long i = pages - 1; i > 0; --i) {
        r ^= r << 13;
        r ^= r >> 7;
        r ^= r << 17;
        std::swap(perm[i], perm[r % (uint64_t)(i + 1)]);
    }
    std::vector<int64_t> idx(std::max(1LL, KV));
    for (long long b = 0, t = 0, base = 0; b < c.bs; ++b) {
        const int P = c.prefix_of((int)b);
        for (long long j = 0; j < P; ++j, ++t)
            idx[t] = perm[base + j / unit] * unit + j % unit;
        base += (P + unit - 1) / unit;
    }
    CK(cudaMemcpy(s.qo, qo.data(), qo.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(s.kvp, kvp.data(), kvp.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(s.idx, idx.data(), idx.size() * 8, cudaMemcpyHostToDevice));

    mla_gpu_args &a = s.a;
    memset(&a, 0, sizeof a);
    a.shape.num_seqs = c.bs;
    a.shape.num_heads = c.heads;
    a.shape.num_kv_heads = 1;
    a.shape.q_len = c.q_len;
    a.shape.num_q_tokens = T;
    a.shape.head_dim = a.shape.kv_dim = D;
    a.shape.v_head_dim = a.shape.v_extend_dim = DV;
    a.shape.is_causal = 1;
    a.shape.sliding_window = -1;
    a.shape.topk = 1;
    a.num_kv_indices = KV;
    a.sm_scale = 0.0721688f; // 192^-0.5, Kimi-K3
    a.k_scale = a.v_scale = 1.f;
    a.q = (const mla_bf16 *)s.q;
    a.q_stride_tok = (long long)c.heads * D;
    a.q_stride_head = D;
    a.k_extend = (const mla_bf16 *)s.ke;
    a.k_stride_tok = D;
    a.k_stride_head = D;
    a.v_extend = (const mla_bf16 *)s.ve;
    a.v_stride_tok = DV;
    a.v_stride_head = DV;
    a.kv_buffer = s.kv;
    a.kv_dtype = g_kv_dtype;
    a.kv_stride_slot = D;
    a.kv_stride_head = D;
    a.qo_indptr = (const int32_t *)s.qo;
    a.kv_indptr = (const int32_t *)s.kvp;
    a.kv_indices = (const int64_t *)s.idx;
    a.o = (mla_bf16 *)s.o;
    a.o_stride_tok = (long long)c.heads * DV;
    a.o_stride_head = DV;
    a.lse = (float *)s.lse;
    a.lse_stride_tok = c.heads;
}

static void free_set(InputSet &s)
{
    void *p[] = {s.q, s.ke, s.ve, s.kv, s.qo, s.kvp, s.idx, s.o, s.lse};
    for (void *x : p)
        CK(cudaFree(x));
}

// Median microseconds per call of `tier`, or -1 when it declines.
static mla_gpu_options g_opts; // variants chosen on the command line

static double time_tier(std::vector<InputSet> &sets, mla_gpu_tier tier, void *ws, size_t ws_b,
                        cudaStream_t st, int reps)
{
    mla_error err;
    // One eager call per set first: errors surface outside capture.
    for (InputSet &s : sets) {
        mla_status rs = mla_gpu_run(&s.a, tier, &g_opts, ws, ws_b, st, NULL, &err);
        if (rs == MLA_ERR_DECLINED)
            return -1;
        if (rs != MLA_OK) {
            fprintf(stderr, "mla_gpu_run(%s): %s\n", mla_gpu_tier_name(tier), err.msg);
            exit(2);
        }
    }
    CK(cudaStreamSynchronize(st));
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
    for (InputSet &s : sets)
        if (mla_gpu_run(&s.a, tier, &g_opts, ws, ws_b, st, NULL, &err) != MLA_OK) {
            fprintf(stderr, "capture: %s\n", err.msg);
            exit(2);
        }
    CK(cudaStreamEndCapture(st, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    for (int i = 0; i < 3; ++i)
        CK(cudaGraphLaunch(ge, st));
    std::vector<double> t;
    for (int i = 0; i < reps; ++i) {
        CK(cudaEventRecord(e0, st));
        CK(cudaGraphLaunch(ge, st));
        CK(cudaEventRecord(e1, st));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        t.push_back(ms * 1e3 / sets.size());
    }
    CK(cudaGetLastError());
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    CK(cudaGraphExecDestroy(ge));
    CK(cudaGraphDestroy(g));
    return median(t);
}

int main(int argc, char **argv)
{
    std::string out = "reports/h200";
    bool quick = false;
    std::string backends = "fast,perhead";
    bool ceilings = true;
    int only[4] = {0, 0, 0, 0};
    const char *case_list = nullptr; // "H,L,bs,prefix:H,L,bs,prefix:..." (A/B runs of variants)
    std::vector<std::string> lens_args;              // --lens, one ragged batch each
    std::vector<std::pair<int, int>> shapes;        // (H, L) the ragged batches are timed at
    bool list_only = false;                          // --list-cases
    g_opts = mla_gpu_options_default();
    bool rule_given = false;
    std::string variant_args; // the variant flags given, for the report's command line
    auto bad = [](const char *flag, const char *v) {
        fprintf(stderr, "mla-bench: bad value '%s' for %s (see --help)\n", v, flag);
        return 2;
    };
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: mla-bench [--out DIR] [--quick] [--backends fast,perhead,generic]\n"
                   "                 [--only H,L,bs,prefix] [--cases H,L,bs,P:H,L,bs,P...] [--no-ceilings]\n"
                   "                 [--kv-layout pages64|random] [--kv bf16|fp8_e4m3fn|fp8_e4m3fnuz]\n"
                   "                 [--fast-kernel auto|ws|ws-pvsm]\n"
                   "                 [--min-split N] [--split-rule adaptive|fixed]\n"
                   "                 [--merge auto|stage2]\n"
                   "                 [--lens LIST [--lens LIST...] [--only H,L | --shapes H,L:H,L...]]\n"
                   "                 [--list-cases]\n"
                   "Times the GPU tiers at Kimi-K3 TP8 (H 12, L 8; bs 1/8/32/64; prefix 1k-64k) and\n"
                   "DeepSeek-V3 TP8 (H 16, L 4) shapes: medians of CUDA-graph replays over input sets\n"
                   "rotated past the L2, beside the copy bandwidth and a cuBLAS bf16 GEMM rate measured\n"
                   "in the same run. Prints us, GB/s, TFLOP/s and %% of the roofline (SPEC section 8)\n"
                   "and writes DIR/bench.json and DIR/bench.md (default DIR reports/h200).\n"
                   "  --kv-layout L     prefix slot lists: pages64 (default; shuffled 64-token pages)\n"
                   "                    or random (every token placed at random)\n"
                   "  --kv T            pool dtype: bf16 (default) or fp8 codes (schema 1.1.0); the\n"
                   "                    roofline counts the pool's bytes at 1 byte per fp8 element\n"
                   "  --fast-kernel K   fast stage 1 of the 64-row blocks: auto (default), ws\n"
                   "                    (warp-specialized wgmma) or ws-pvsm (ws, the softmax in the\n"
                   "                    PV warps)\n"
                   "  --min-split N     smallest fast split in tokens (>= 16, default %d); implies\n"
                   "                    --split-rule fixed unless that is given\n"
                   "  --split-rule R    adaptive (default: longer splits when the merge would be\n"
                   "                    long) or fixed\n"
                   "  --merge M         auto (default: no merge kernel when stage 1 can write o\n"
                   "                    itself: one split, draft block in stage 1) or stage2\n"
                   "  --lens LIST       one ragged batch instead of the uniform grid: LIST is\n"
                   "                    comma-separated per-sequence prefixes, N or NxM (M sequences\n"
                   "                    of prefix N), as flashmla_bench's LENS (SPEC 8a), e.g.\n"
                   "                    65536,1024x31 (bs 32). bs is the count; the record adds\n"
                   "                    \"lens\" (LIST as given), prefix = the mean, prefix_min,\n"
                   "                    prefix_max, kv_tokens; bytes, flops and the roofline use the\n"
                   "                    per-sequence totals. Repeat --lens for several batches.\n"
                   "  --only H,L        with --lens: time each batch at this shape only\n"
                   "  --shapes S        with --lens: shapes H,L[:H,L...] (default 12,8:16,4); one\n"
                   "                    case per batch and shape\n"
                   "  --only H,L,bs,P   without --lens: this one uniform case\n"
                   "  --list-cases      print the cases (bs, prefixes, bytes, flops) and exit\n"
                   "                    without touching the GPU\n"
                   "Exit 77 when no GPU is present, 2 on a bad argument.\n",
                   MLA_GPU_FAST_MIN_SPLIT);
            return 0;
        }
        if (!strcmp(argv[i], "--kv-layout") && i + 1 < argc) {
            const char *v = argv[++i];
            if (!strcmp(v, "random"))
                g_kv_layout = KV_RANDOM;
            else if (!strcmp(v, "pages64"))
                g_kv_layout = KV_PAGES64;
            else
                return bad("--kv-layout", v);
            continue;
        }
        if (!strcmp(argv[i], "--kv") && i + 1 < argc) {
            const char *v = argv[++i];
            if (!strcmp(v, "bf16"))
                g_kv_dtype = MLA_KV_BF16;
            else if (!strcmp(v, "fp8_e4m3fn"))
                g_kv_dtype = MLA_KV_FP8_E4M3FN;
            else if (!strcmp(v, "fp8_e4m3fnuz"))
                g_kv_dtype = MLA_KV_FP8_E4M3FNUZ;
            else
                return bad("--kv", v);
            variant_args += std::string(" --kv ") + v;
            continue;
        }
        if (!strcmp(argv[i], "--fast-kernel") && i + 1 < argc) {
            const char *v = argv[++i];
            g_opts.fast_kernel = mla_gpu_fast_kernel_parse(v);
            if (g_opts.fast_kernel < 0)
                return bad("--fast-kernel", v);
            variant_args += std::string(" --fast-kernel ") + v;
            continue;
        }
        if (!strcmp(argv[i], "--min-split") && i + 1 < argc) {
            const char *v = argv[++i];
            g_opts.fast_min_split = atoi(v);
            if (g_opts.fast_min_split < 16)
                return bad("--min-split", v);
            if (!rule_given)
                g_opts.fast_split_rule = MLA_GPU_SPLIT_RULE_FIXED;
            variant_args += std::string(" --min-split ") + v;
            continue;
        }
        if (!strcmp(argv[i], "--merge") && i + 1 < argc) {
            const char *v = argv[++i];
            if (!strcmp(v, "auto"))
                g_opts.fast_merge = MLA_GPU_MERGE_AUTO;
            else if (!strcmp(v, "stage2"))
                g_opts.fast_merge = MLA_GPU_MERGE_STAGE2;
            else
                return bad("--merge", v);
            variant_args += std::string(" --merge ") + v;
            continue;
        }
        if (!strcmp(argv[i], "--split-rule") && i + 1 < argc) {
            const char *v = argv[++i];
            g_opts.fast_split_rule = mla_gpu_split_rule_parse(v);
            if (g_opts.fast_split_rule < 0)
                return bad("--split-rule", v);
            rule_given = true;
            variant_args += std::string(" --split-rule ") + v;
            continue;
        }
        if (!strcmp(argv[i], "--lens") && i + 1 < argc) {
            std::vector<int> l;
            std::string why_l;
            if (!parse_lens(argv[++i], l, why_l)) {
                fprintf(stderr, "mla-bench: bad --lens '%s': %s (want e.g. 65536,1024x31)\n", argv[i],
                        why_l.c_str());
                return 2;
            }
            lens_args.push_back(argv[i]);
            variant_args += std::string(" --lens ") + argv[i];
            continue;
        }
        if ((!strcmp(argv[i], "--shapes") || !strcmp(argv[i], "--only")) && i + 1 < argc) {
            const bool is_only = !strcmp(argv[i], "--only");
            const char *v = argv[++i];
            int x[4], n = 0;
            if (is_only && sscanf(v, "%d,%d,%d,%d%n", &x[0], &x[1], &x[2], &x[3], &n) == 4 && !v[n]) {
                if (x[0] < 1 || x[1] < 1 || x[2] < 1 || x[3] < 0)
                    return bad("--only", v);
                memcpy(only, x, sizeof only);
                continue;
            }
            // H,L[:H,L...]: the shapes of the --lens batches.
            if (is_only && strchr(v, ':'))
                return bad("--only", v);
            for (const char *q = v;;) {
                if (sscanf(q, "%d,%d%n", &x[0], &x[1], &n) != 2 || x[0] < 1 || x[1] < 1 ||
                    (q[n] && q[n] != ':'))
                    return bad(is_only ? "--only" : "--shapes", v);
                shapes.push_back({x[0], x[1]});
                if (!q[n])
                    break;
                q += n + 1;
            }
            continue;
        }
        if (!strcmp(argv[i], "--no-ceilings"))
            ceilings = false;
        else if (!strcmp(argv[i], "--list-cases"))
            list_only = true;
        else if (!strcmp(argv[i], "--cases") && i + 1 < argc)
            case_list = argv[++i];
        else if (!strcmp(argv[i], "--out") && i + 1 < argc)
            out = argv[++i];
        else if (!strcmp(argv[i], "--quick"))
            quick = true;
        else if (!strcmp(argv[i], "--backends") && i + 1 < argc)
            backends = argv[++i];
        else {
            fprintf(stderr, "mla-bench: unknown argument '%s' (or its value missing; see --help)\n", argv[i]);
            return 2;
        }
    }
    if (!shapes.empty() && lens_args.empty()) {
        fprintf(stderr, "mla-bench: --shapes and --only H,L pick the shapes of --lens batches: give --lens\n");
        return 2;
    }
    if (!lens_args.empty() && (only[0] || case_list)) {
        fprintf(stderr, "mla-bench: --lens times ragged batches: --cases and --only H,L,bs,P do not apply\n");
        return 2;
    }
    {
        mla_error oerr;
        if (mla_gpu_options_check(&g_opts, &oerr) != MLA_OK) {
            fprintf(stderr, "mla-bench: %s\n", oerr.msg);
            return 2;
        }
    }
    std::vector<Case> cases;
    const int bss[] = {1, 8, 32, 64};
    const int pfx[] = {1024, 4096, 16384, 65536};
    for (int b : bss)
        for (int p : pfx)
            if (!quick || (p <= 16384 && b <= 32))
                cases.push_back({12, 8, b, p, {}, ""});
    const Case ds[] = {{16, 4, 1, 4096, {}, ""},   {16, 4, 8, 16384, {}, ""}, {16, 4, 32, 4096, {}, ""},
                       {16, 4, 32, 16384, {}, ""}, {16, 4, 64, 16384, {}, ""}};
    for (const Case &c : ds)
        cases.push_back(c);
    if (only[0]) { // one case (H,L,bs,prefix), e.g. under a profiler
        cases.clear();
        cases.push_back({only[0], only[1], only[2], only[3], {}, ""});
    }
    if (case_list) {
        cases.clear();
        for (const char *p = case_list; p && *p;) {
            int v[4];
            if (sscanf(p, "%d,%d,%d,%d", &v[0], &v[1], &v[2], &v[3]) == 4 && v[0] > 0 && v[1] > 0 &&
                v[2] > 0 && v[3] >= 0)
                cases.push_back({v[0], v[1], v[2], v[3], {}, ""});
            p = strchr(p, ':');
            if (p)
                ++p;
        }
    }

    if (!lens_args.empty()) { // ragged batches, one case per (batch, shape)
        cases.clear();
        if (shapes.empty())
            shapes = {{12, 8}, {16, 4}};
        for (const std::string &l : lens_args)
            for (const auto &sh : shapes) {
                Case c{sh.first, sh.second, 0, 0, {}, l};
                std::string unused;
                parse_lens(l.c_str(), c.lens, unused); // checked while reading the arguments
                c.bs = (int)c.lens.size();
                c.prefix = (int)(c.kv_tokens() / c.bs);
                cases.push_back(c);
            }
    }
    if (list_only) {
        for (const Case &c : cases)
            printf("H %d L %d bs %d prefix mean %.10g min %d max %d kv_tokens %lld kv_bytes %.0f flop %.6g%s%s\n",
                   c.heads, c.q_len, c.bs, c.mean_prefix(), c.min_prefix(), c.max_prefix(), c.kv_tokens(),
                   case_kv_bytes(c), case_flops(c), c.lens.empty() ? "" : " lens ", c.lens_arg.c_str());
        return 0;
    }
    char why[256];
    if (!mla_gpu_available(why, sizeof why)) {
        printf("SKIP: %s\n", why);
        return 77;
    }
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    std::string gemm_note;
    const double bw = ceilings ? measure_copy_bw() : 4.27e12;
    const double rate = ceilings ? measure_gemm_rate(gemm_note) : 0;
    if (!ceilings)
        gemm_note = "ceilings not measured (--no-ceilings): SPEC values 4.27 TB/s, 686 TFLOP/s used";
    const double bw_use = bw, rate_use = rate > 0 ? rate : 686e12;
    printf("device %s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20);
    printf("copy bandwidth %.3f TB/s (read + write); %s: %.1f TFLOP/s\n", bw * 1e-12, gemm_note.c_str(),
           rate * 1e-12);
    printf("kv layout %s; fast kernel %s, min split %d, split rule %s, merge %s\n",
           kv_layout_name(g_kv_layout), mla_gpu_fast_kernel_name(g_opts.fast_kernel),
           g_opts.fast_min_split, mla_gpu_split_rule_name(g_opts.fast_split_rule),
           g_opts.fast_merge == MLA_GPU_MERGE_STAGE2 ? "stage2" : "auto");

    std::vector<std::pair<std::string, mla_gpu_tier>> tiers;
    if (backends.find("fast") != std::string::npos)
        tiers.push_back({"fast", MLA_GPU_TIER_FAST});
    if (backends.find("perhead") != std::string::npos)
        tiers.push_back({"perhead", MLA_GPU_TIER_PERHEAD});
    if (backends.find("generic") != std::string::npos)
        tiers.push_back({"generic", MLA_GPU_TIER_GENERIC});

    cudaStream_t st;
    CK(cudaStreamCreate(&st));
    std::vector<Record> recs;
    for (const Case &c : cases) {
        const double kv_bytes = case_kv_bytes(c), flops = case_flops(c);
        // Distinct input sets until the working set is 3x the L2.
        const double set_bytes = kv_bytes + (double)c.bs * c.q_len * c.heads * (D + DV) * 2;
        int R = (int)ceil(3.0 * prop.l2CacheSize / set_bytes);
        R = std::max(1, std::min(R, 192));
        std::vector<InputSet> sets(R);
        for (int i = 0; i < R; ++i)
            make_set(c, 1000 + i, sets[i]);
        size_t ws_b = 0;
        mla_error ws_err;
        if (mla_gpu_workspace_size(&sets[0].a.shape, MLA_GPU_TIER_AUTO, &g_opts, &ws_b, &ws_err) != MLA_OK) {
            fprintf(stderr, "mla-bench: %s\n", ws_err.msg);
            return 1;
        }
        void *ws = nullptr;
        CK(cudaMalloc(&ws, ws_b ? ws_b : 256));
        const double roof = std::max(kv_bytes / bw_use, flops / rate_use) * 1e6;
        const double spec_roof = std::max(kv_bytes / 4.27e12, flops / 686e12) * 1e6;
        for (auto &t : tiers) {
            if (t.second == MLA_GPU_TIER_GENERIC && (double)c.kv_tokens() > 8.0 * 4096)
                continue; // CUDA-core fallback: minutes at the large shapes, nothing to learn
            const double est_ms = t.second == MLA_GPU_TIER_FAST ? roof * 5e-3 : roof * 3e-2;
            int reps = est_ms * R > 50 ? 7 : est_ms * R > 5 ? 15 : 41;
            if (quick)
                reps = std::min(reps, 9);
            const double us = time_tier(sets, t.second, ws, ws_b, st, reps);
            if (us < 0)
                continue;
            mla_gpu_run_info info;
            mla_error perr;
            if (mla_gpu_plan(&sets[0].a, t.second, &g_opts, &info, &perr) != MLA_OK) {
                info.num_splits = info.min_split = -1;
                info.fast_kernel = MLA_GPU_FAST_KERNEL_AUTO;
            }
            Record r{t.first, c, us, roof, spec_roof, kv_bytes / (us * 1e-6) * 1e-9,
                     flops / (us * 1e-6) * 1e-12, c.lens.empty() ? spec_ref(c.heads, c.bs, c.prefix) : nullptr, info.num_splits,
                     info.min_split};
            recs.push_back(r);
            // The stage-1 kernel the fast tier ran (auto picks per shape).
            printf("%-8s H %2d L %d bs %2d prefix %6d%s: %9.1f us  %7.1f GB/s  %6.1f TFLOP/s  %5.1f%% of roofline %.1f us (R %d, splits %d%s%s)%s%s\n",
                   t.first.c_str(), c.heads, c.q_len, c.bs, c.prefix, c.lens.empty() ? "" : " (mean)", us,
                   r.gbps, r.tflops, 100.0 * roof / us, roof, R, r.splits,
                   t.second == MLA_GPU_TIER_FAST ? ", " : "",
                   t.second == MLA_GPU_TIER_FAST ? mla_gpu_fast_kernel_name(info.fast_kernel) : "",
                   c.lens.empty() ? "" : " lens ", c.lens_arg.c_str());
            fflush(stdout);
        }
        CK(cudaFree(ws));
        for (InputSet &s : sets)
            free_set(s);
    }

    // Speed bars (issue 5): fast >= 5x upstream verify_mla where the SPEC
    // roofline >= 40 us; fast >= 2x our per-head everywhere; our per-head
    // within 1.5x of upstream per-head, either way.
    auto find = [&](const std::string &b, const Case &c) -> const Record * {
        for (const Record &r : recs)
            if (r.backend == b && r.c.heads == c.heads && r.c.q_len == c.q_len && r.c.bs == c.bs &&
                r.c.prefix == c.prefix && r.c.lens_arg == c.lens_arg)
                return &r;
        return nullptr;
    };
    time_t now = time(nullptr);
    char date[64];
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    std::string jpath = out + "/bench.json", mpath = out + "/bench.md";
    FILE *jf = fopen(jpath.c_str(), "w");
    FILE *mf = fopen(mpath.c_str(), "w");
    if (!jf || !mf) {
        fprintf(stderr, "cannot write %s or %s\n", jpath.c_str(), mpath.c_str());
        return 2;
    }
    fprintf(jf, "{\n  \"commit\": \"%s\",\n  \"date\": \"%s\",\n  \"device\": \"%s\",\n", MLA_GIT_COMMIT,
            date, prop.name);
    fprintf(jf, "  \"command\": \"mla-bench%s%s --kv-layout %s\",\n", quick ? " --quick" : "",
            variant_args.c_str(), kv_layout_name(g_kv_layout));
    fprintf(jf, "  \"kv_layout\": \"%s\",\n", kv_layout_name(g_kv_layout));
    fprintf(jf, "  \"kv\": \"%s\",\n", g_kv_dtype == MLA_KV_BF16 ? "bf16"
                                         : g_kv_dtype == MLA_KV_FP8_E4M3FN ? "fp8_e4m3fn" : "fp8_e4m3fnuz");
    fprintf(jf, "  \"options\": {\"fast_kernel\": \"%s\", \"fast_min_split\": %d, \"fast_split_rule\": \"%s\", \"fast_merge\": \"%s\"},\n",
            mla_gpu_fast_kernel_name(g_opts.fast_kernel), g_opts.fast_min_split,
            mla_gpu_split_rule_name(g_opts.fast_split_rule),
            g_opts.fast_merge == MLA_GPU_MERGE_STAGE2 ? "stage2" : "auto");
    fprintf(jf, "  \"copy_bw_TBps\": %.4f,\n  \"gemm_TFLOPs\": %.2f,\n  \"gemm_note\": \"%s\",\n",
            bw * 1e-12, rate * 1e-12, gemm_note.c_str());
    fprintf(jf, "  \"records\": [\n");
    fprintf(mf, "# mla-bench on %s\n\ncommit %s, %s, `mla-bench%s%s --kv-layout %s`. Copy bandwidth %.3f TB/s (read + write), %s %.1f TFLOP/s.\n"
                "Medians of CUDA-graph replays over rotated input sets (working set >= 3x L2). Roofline = max(KV bytes / copy bw, flop / GEMM rate) with the rates measured in this run.\n\n",
            prop.name, MLA_GIT_COMMIT, date, quick ? " --quick" : "", variant_args.c_str(),
            kv_layout_name(g_kv_layout), bw * 1e-12, gemm_note.c_str(), rate * 1e-12);
    fprintf(mf, "| backend | H | L | bs | prefix | us | GB/s | TFLOP/s | %% roofline | roofline us | upstream MLA us | upstream per-head us | FlashMLA us | bars |\n");
    fprintf(mf, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    int bar_fail = 0, bar_checked = 0;
    for (size_t i = 0; i < recs.size(); ++i) {
        const Record &r = recs[i];
        std::string bars;
        if (r.backend == "fast") {
            const Record *ph = find("perhead", r.c);
            if (ph) {
                const bool ok = ph->us >= 2.0 * r.us;
                bars += ok ? "2x per-head ok" : "2x per-head MISSED";
                bar_fail += !ok;
                bar_checked++;
            }
            if (r.ref && r.ref->roofline >= 40.0) {
                const bool ok = r.ref->mla >= 5.0 * r.us;
                bars += ok ? "; 5x upstream ok" : "; 5x upstream MISSED";
                bar_fail += !ok;
                bar_checked++;
            }
        } else if (r.backend == "perhead" && r.ref) {
            // "Within 1.5x, either way": a baseline much faster than
            // upstream's would make the fast path's speedup over it look
            // smaller than upstream's, much slower would inflate it.
            const double ratio = r.us / r.ref->perhead;
            const bool ok = ratio <= 1.5 && ratio >= 1.0 / 1.5;
            char b[96];
            snprintf(b, sizeof b, "%s upstream per-head (%.2fx its time)",
                     ok ? "within 1.5x of" : ratio > 1.5 ? "over 1.5x slower than" : "over 1.5x faster than",
                     ratio);
            bars += b;
            bar_fail += !ok;
            bar_checked++;
        }
        fprintf(jf,
                "    {\"backend\": \"%s\", \"bs\": %d, \"heads\": %d, \"q_len\": %d, \"prefix\": %.10g, "
                "\"median_us\": %.2f, \"roofline_us\": %.2f, \"spec_roofline_us\": %.2f, \"GBps\": %.1f, "
                "\"TFLOPs\": %.1f, \"pct_roofline\": %.1f, \"num_splits\": %d, \"min_split\": %d",
                r.backend.c_str(), r.c.bs, r.c.heads, r.c.q_len, r.c.mean_prefix(), r.us, r.roof_us,
                r.spec_roof_us, r.gbps, r.tflops, 100.0 * r.roof_us / r.us, r.splits, r.min_split);
        // A ragged batch (--lens): the list as given and its spread, as
        // flashmla_bench's LENS records name them.
        if (!r.c.lens.empty())
            fprintf(jf, ", \"lens\": \"%s\", \"prefix_min\": %d, \"prefix_max\": %d, \"kv_tokens\": %lld",
                    r.c.lens_arg.c_str(), r.c.min_prefix(), r.c.max_prefix(), r.c.kv_tokens());
        if (r.ref)
            fprintf(jf, ", \"upstream_mla_us\": %.1f, \"upstream_perhead_us\": %.1f, \"flashmla_us\": %.1f",
                    r.ref->mla, r.ref->perhead, r.ref->flashmla);
        fprintf(jf, "}%s\n", i + 1 < recs.size() ? "," : "");
        char refs[128] = "| | | ";
        if (r.ref)
            snprintf(refs, sizeof refs, "| %.1f | %.1f | %.1f ", r.ref->mla, r.ref->perhead, r.ref->flashmla);
        char mean[32];
        snprintf(mean, sizeof mean, "%.10g", r.c.mean_prefix());
        const std::string pfx_cell = r.c.lens.empty() ? mean : "mean " + std::string(mean) + " (" + r.c.lens_arg + ")";
        fprintf(mf, "| %s | %d | %d | %d | %s | %.1f | %.0f | %.1f | %.1f | %.1f %s| %s |\n", r.backend.c_str(),
                r.c.heads, r.c.q_len, r.c.bs, pfx_cell.c_str(), r.us, r.gbps, r.tflops, 100.0 * r.roof_us / r.us,
                r.roof_us, refs, bars.c_str());
    }
    fprintf(jf, "  ],\n  \"bars_checked\": %d,\n  \"bars_missed\": %d\n}\n", bar_checked, bar_fail);
    fprintf(mf, "\nSpeed bars checked: %d, missed: %d.\n", bar_checked, bar_fail);
    fclose(jf);
    fclose(mf);
    printf("wrote %s and %s; speed bars checked %d, missed %d\n", jpath.c_str(), mpath.c_str(),
           bar_checked, bar_fail);
    return 0;
}
