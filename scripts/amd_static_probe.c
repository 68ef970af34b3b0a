/* Helper of scripts/amd_static.py (issue 41): what the static report reads
 * from our own C code instead of restating it in Python.
 *
 *   amd_static_probe plan seed|gfx942|gfx950 H L LENS
 *       The split plan of one batch (LENS: per-sequence prefixes, "N" or
 *       "NxM", comma-separated): the seed's (SPEC section 4, core/plan.c) or
 *       our fast tier's on that arch (mla_gpu_plan of the emulator's build of
 *       hip/api.hip for the grid, the needle library's split ranges for the
 *       per-sequence pieces: the same rules the kernels and the suite use).
 *       One JSON object on stdout.
 *   amd_static_probe emu gfx942|gfx950 H L BS P
 *       Runs our fast tier under the wave64 emulator (emu/) on a seeded
 *       diffuse case of BS sequences of prefix P and counts, per kernel
 *       launch, what its work-items execute: MFMAs by kind, barriers, global
 *       bytes read and written per buffer, LDS bytes read and written. The
 *       counters sit in front of the emulator's own hooks (the memory-check
 *       calls every load and store makes, mfma_step, barrier, launch,
 *       alloc), found by symbol interposition: this executable exports
 *       wrappers that count and forward to the library's definitions
 *       (dlsym RTLD_NEXT). One JSON object on stdout.
 *
 * Built by the target amd_static_probe (hip/amd.cmake, EXCLUDE_FROM_ALL),
 * which amd_static.py builds on demand. */
#define _GNU_SOURCE
#include "mla/fixture.h"
#include "mla/gpu.h"
#include "mla/gpu_fixture.h"
#include "mla/needle.h"
#include "mla/plan.h"
#include "mla_amd_emu.h"
#include "split_policy.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The emulator's per-arch builds of hip/api.hip (emu/CMakeLists.txt renames
 * mla_gpu_* to mla_emu_<arch>_gpu_*). */
mla_status mla_emu_gfx942_gpu_plan(const mla_gpu_args *a, mla_gpu_tier tier, const mla_gpu_options *opt,
                                   mla_gpu_run_info *info, mla_error *err);
mla_status mla_emu_gfx950_gpu_plan(const mla_gpu_args *a, mla_gpu_tier tier, const mla_gpu_options *opt,
                                   mla_gpu_run_info *info, mla_error *err);

static void usage(FILE *f)
{
    fprintf(f, "usage: amd_static_probe plan seed|gfx942|gfx950 H L LENS\n"
               "       amd_static_probe emu gfx942|gfx950 H L BS P\n"
               "  plan: the split plan of a batch of per-sequence prefixes LENS (\"65536,1024x31\")\n"
               "  emu:  dynamic counts of our fast tier under the wave64 emulator, per kernel launch\n");
}

static int parse_int(const char *s, const char *what, long lo, long hi, long *out)
{
    char *e;
    long v = strtol(s, &e, 10);
    if (!*s || *e || v < lo || v > hi) {
        fprintf(stderr, "amd_static_probe: %s '%s' is not an integer in %ld..%ld\n", what, s, lo, hi);
        return 0;
    }
    *out = v;
    return 1;
}

/* LENS -> prefixes (malloc'ed); number of sequences, 0 on a malformed list. */
static int parse_lens(const char *s, int32_t **out)
{
    int n = 0, cap = 16;
    int32_t *v = malloc(cap * sizeof *v);
    const char *p = s;
    while (v && *p) {
        char *e;
        long len = strtol(p, &e, 10), rep = 1;
        if (e == p || len < 0 || len > 1L << 30)
            break;
        p = e;
        if (*p == 'x') {
            rep = strtol(p + 1, &e, 10);
            if (e == p + 1 || rep < 1 || rep > 1 << 20)
                break;
            p = e;
        }
        for (long i = 0; i < rep; ++i) {
            if (n == cap) {
                int32_t *w = realloc(v, (cap *= 2) * sizeof *v);
                if (!w) {
                    free(v);
                    return 0;
                }
                v = w;
            }
            v[n++] = (int32_t)len;
        }
        if (*p == ',')
            ++p;
        else if (*p)
            break;
    }
    if (!v || *p || n == 0) {
        fprintf(stderr, "amd_static_probe: LENS '%s' is not a list of N or NxM\n", s);
        free(v);
        return 0;
    }
    *out = v;
    return n;
}

/* ---- plan ---- */

static int run_plan(const char *arch, int H, int L, const char *lens)
{
    int32_t *pre;
    const int bs = parse_lens(lens, &pre);
    if (!bs)
        return 2;
    mla_split_plan sp;
    if (!strcmp(arch, "seed"))
        sp = MLA_SPLITS_SEED;
    else if (!strcmp(arch, "gfx942"))
        sp = MLA_SPLITS_GPU_FAST_GFX942;
    else if (!strcmp(arch, "gfx950"))
        sp = MLA_SPLITS_GPU_FAST_GFX950;
    else {
        fprintf(stderr, "amd_static_probe: plan for '%s': seed, gfx942 or gfx950\n", arch);
        return 2;
    }
    /* A shape-only fixture: the plans read the config, the token counts and
     * the indptrs, never a tensor. */
    static mla_bf16 dummy[8];
    static int64_t dummy_idx[1];
    mla_fixture fx;
    memset(&fx, 0, sizeof fx);
    fx.cfg.num_seqs = bs;
    fx.cfg.num_heads = H;
    fx.cfg.num_kv_heads = 1;
    fx.cfg.q_len = L;
    fx.cfg.head_dim = 576;
    fx.cfg.v_head_dim = 512;
    fx.cfg.sm_scale = 0.0721688f;
    fx.cfg.k_scale = fx.cfg.v_scale = 1.f;
    fx.cfg.is_causal = 1;
    fx.cfg.sliding_window = -1;
    fx.cfg.topk = 1;
    fx.qo_indptr = malloc((bs + 1) * sizeof(int32_t));
    fx.kv_indptr = malloc((bs + 1) * sizeof(int32_t));
    if (!fx.qo_indptr || !fx.kv_indptr)
        return 1;
    fx.qo_indptr[0] = fx.kv_indptr[0] = 0;
    for (int b = 0; b < bs; ++b) {
        fx.qo_indptr[b + 1] = fx.qo_indptr[b] + L;
        fx.kv_indptr[b + 1] = fx.kv_indptr[b] + pre[b];
    }
    fx.num_q_tokens = (int64_t)bs * L;
    fx.num_kv_indices = fx.kv_indptr[bs];
    fx.pool_slots = fx.num_kv_indices;
    fx.q = fx.k_extend = fx.v_extend = fx.kv_buffer = dummy;
    fx.kv_indices = dummy_idx;

    int rows, row_blocks, num_splits, min_split = 0;
    if (sp == MLA_SPLITS_SEED) {
        mla_shape sh;
        mla_plan plan;
        mla_error err;
        mla_shape_from_fixture(&fx, &sh);
        mla_block_config blk = mla_block_config_default();
        if (mla_plan_make(&sh, &blk, &plan, &err) != MLA_OK) {
            fprintf(stderr, "amd_static_probe: the seed plan declines: %s\n", err.msg);
            return 1;
        }
        rows = 0; /* BLOCK_H x L_pad: the Triton launch's, computed by amd_static.py */
        row_blocks = plan.n_head_blocks;
        num_splits = plan.num_splits;
        min_split = plan.blk.block_n;
    } else {
        mla_gpu_args a;
        mla_gpu_run_info info;
        mla_error err;
        mla_gpu_args_from_fixture(&fx, dummy, NULL, &a);
        const mla_status st = sp == MLA_SPLITS_GPU_FAST_GFX942
                                  ? mla_emu_gfx942_gpu_plan(&a, MLA_GPU_TIER_FAST, NULL, &info, &err)
                                  : mla_emu_gfx950_gpu_plan(&a, MLA_GPU_TIER_FAST, NULL, &info, &err);
        if (st != MLA_OK) {
            fprintf(stderr, "amd_static_probe: our fast tier on %s declines: %s\n", arch, err.msg);
            return 1;
        }
        rows = info.rows_per_cta;
        row_blocks = mla_sp_fast_row_blocks(H * L, rows);
        num_splits = info.num_splits;
        min_split = info.min_split;
    }
    printf("{\"plan\": \"%s\", \"H\": %d, \"L\": %d, \"bs\": %d, \"rows_per_cta\": %d, \"row_blocks\": %d, "
           "\"num_splits\": %d, \"min_split\": %d, \"pieces\": [",
           mla_split_plan_name(sp), H, L, bs, rows, row_blocks, num_splits, min_split);
    int first = 1;
    for (int b = 0; b < bs; ++b) {
        int32_t beg[4096], end[4096];
        const int32_t n = mla_needle_split_ranges(sp, &fx, b, beg, end, 4096);
        if (n > 4096) {
            fprintf(stderr, "amd_static_probe: sequence %d has %d splits (more than 4096)\n", b, n);
            return 1;
        }
        for (int k = 0; k < n; ++k) {
            printf("%s[%d, %d, %d]", first ? "" : ", ", b, beg[k], end[k]);
            first = 0;
        }
    }
    printf("]}\n");
    free(fx.qo_indptr);
    free(fx.kv_indptr);
    free(pre);
    return 0;
}

/* ---- emu: counters in front of the emulator's hooks ---- */

enum { MAX_LAUNCH = 8, MAX_BUF = 16, MFMA_KINDS = 3 };
typedef struct {
    char name[160];
    unsigned grid[3], block[3];
    size_t lds;
    unsigned long long mfma[MFMA_KINDS], barrier;
    unsigned long long lds_rd, lds_wr, other_rd, other_wr;
    unsigned long long g_rd[MAX_BUF], g_wr[MAX_BUF];
} launch_count;
static struct {
    const char *name;
    uintptr_t lo, hi;
} g_buf[MAX_BUF];
static int g_nbuf;
static launch_count g_launch[MAX_LAUNCH];
static int g_nlaunch, g_cur = -1;
static uintptr_t g_lds_lo, g_lds_hi;

static void *real(const char *sym)
{
    void *f = dlsym(RTLD_NEXT, sym);
    if (!f) {
        fprintf(stderr, "amd_static_probe: the emulator has no '%s' (emu/ changed its runtime: update "
                        "scripts/amd_static_probe.c)\n", sym);
        exit(1);
    }
    return f;
}

static void count(const void *p, size_t n, int w)
{
    if (g_cur < 0)
        return;
    launch_count *c = &g_launch[g_cur];
    const uintptr_t a = (uintptr_t)p;
    if (a >= g_lds_lo && a < g_lds_hi) {
        *(w ? &c->lds_wr : &c->lds_rd) += n;
        return;
    }
    for (int i = 0; i < g_nbuf; ++i)
        if (a >= g_buf[i].lo && a < g_buf[i].hi) {
            (w ? c->g_wr : c->g_rd)[i] += n;
            return;
        }
    *(w ? &c->other_wr : &c->other_rd) += n; /* kernel arguments, private memory */
}

/* A memory-check hook of the emulator: count, then forward to its own. */
#define WRAP(NAME, W, NBYTES)                                                                      \
    void NAME(void *p)                                                                             \
    {                                                                                              \
        static void (*f)(void *);                                                                  \
        if (!f)                                                                                    \
            f = (void (*)(void *))real(#NAME);                                                     \
        count(p, NBYTES, W);                                                                       \
        f(p);                                                                                      \
    }
#define HOOK(N)                                                                                    \
    WRAP(__tsan_read##N, 0, N)                                                                     \
    WRAP(__tsan_write##N, 1, N)                                                                    \
    WRAP(__tsan_unaligned_read##N, 0, N)                                                           \
    WRAP(__tsan_unaligned_write##N, 1, N)
HOOK(1)
HOOK(2)
HOOK(4)
HOOK(8)
HOOK(16)

#define WRAP_RANGE(NAME, W)                                                                        \
    void NAME(void *p, unsigned long n)                                                            \
    {                                                                                              \
        static void (*f)(void *, unsigned long);                                                   \
        if (!f)                                                                                    \
            f = (void (*)(void *, unsigned long))real(#NAME);                                      \
        count(p, n, W);                                                                            \
        f(p, n);                                                                                   \
    }
WRAP_RANGE(__tsan_read_range, 0)
WRAP_RANGE(__tsan_write_range, 1)

/* mla_emu::mfma_step(int, const void *, const void *, const float *, float *):
 * one call per lane of the wave. */
void _ZN7mla_emu9mfma_stepEiPKvS1_PKfPf(int kind, const void *a, const void *b, const float *c, float *d)
{
    static void (*f)(int, const void *, const void *, const float *, float *);
    if (!f)
        f = (void (*)(int, const void *, const void *, const float *, float *))real(
            "_ZN7mla_emu9mfma_stepEiPKvS1_PKfPf");
    if (g_cur >= 0 && kind >= 0 && kind < MFMA_KINDS)
        g_launch[g_cur].mfma[kind]++;
    f(kind, a, b, c, d);
}

/* mla_emu::barrier(const char *, int): one call per work-item. */
void _ZN7mla_emu7barrierEPKci(const char *file, int line)
{
    static void (*f)(const char *, int);
    if (!f)
        f = (void (*)(const char *, int))real("_ZN7mla_emu7barrierEPKci");
    if (g_cur >= 0)
        g_launch[g_cur].barrier++;
    f(file, line);
}

/* mla_emu::alloc(size_t, int, const char *): the buffers, by name. */
void *_ZN7mla_emu5allocEmiPKc(size_t bytes, int flags, const char *name)
{
    static void *(*f)(size_t, int, const char *);
    if (!f)
        f = (void *(*)(size_t, int, const char *))real("_ZN7mla_emu5allocEmiPKc");
    void *p = f(bytes, flags, name);
    if (p && g_nbuf < MAX_BUF) {
        g_buf[g_nbuf].name = name ? name : "?";
        g_buf[g_nbuf].lo = (uintptr_t)p;
        g_buf[g_nbuf].hi = (uintptr_t)p + bytes;
        ++g_nbuf;
    }
    return p;
}

/* mla_emu::launch(Arch, Dim3, Dim3, size_t, void (*)(const void *), const
 * void *, size_t, const char *, char *, size_t); Dim3 is three unsigned. */
typedef struct {
    unsigned x, y, z;
} dim3_t;
int _ZN7mla_emu6launchENS_4ArchENS_4Dim3ES1_mPFvPKvES3_mPKcPcm(int arch, dim3_t grid, dim3_t block, size_t lds,
                                                              void (*entry)(const void *), const void *args,
                                                              size_t args_size, const char *name, char *msg,
                                                              size_t msg_len)
{
    static int (*f)(int, dim3_t, dim3_t, size_t, void (*)(const void *), const void *, size_t, const char *,
                    char *, size_t);
    if (!f)
        f = (int (*)(int, dim3_t, dim3_t, size_t, void (*)(const void *), const void *, size_t, const char *,
                     char *, size_t))real("_ZN7mla_emu6launchENS_4ArchENS_4Dim3ES1_mPFvPKvES3_mPKcPcm");
    if (g_nlaunch < MAX_LAUNCH) {
        launch_count *c = &g_launch[g_nlaunch];
        snprintf(c->name, sizeof c->name, "%s", name ? name : "?");
        c->grid[0] = grid.x, c->grid[1] = grid.y, c->grid[2] = grid.z;
        c->block[0] = block.x, c->block[1] = block.y, c->block[2] = block.z;
        c->lds = lds;
        g_cur = g_nlaunch++;
    }
    const int r = f(arch, grid, block, lds, entry, args, args_size, name, msg, msg_len);
    g_cur = -1;
    return r;
}

static int run_emu(const char *arch, int H, int L, int bs, int P)
{
    const mla_amd_emu_arch a = !strcmp(arch, "gfx942")   ? MLA_AMD_EMU_GFX942
                               : !strcmp(arch, "gfx950") ? MLA_AMD_EMU_GFX950
                                                         : (mla_amd_emu_arch)0;
    if (!a) {
        fprintf(stderr, "amd_static_probe: emu on '%s': gfx942 or gfx950\n", arch);
        return 2;
    }
    const unsigned char *arena = dlsym(RTLD_DEFAULT, "mla_emu_lds_arena");
    if (!arena) {
        fprintf(stderr, "amd_static_probe: the emulator's LDS arena (mla_emu_lds_arena) is not exported\n");
        return 1;
    }
    g_lds_lo = (uintptr_t)arena;
    g_lds_hi = g_lds_lo + 256 * 1024; /* emu/src/runtime.cpp LDS_ARENA: above every arch's limit */
    mla_fixture fx;
    mla_error err;
    const uint64_t seed = 41;
    if (mla_needle_make(H, L, bs, P, 0, seed, &fx, &err) != MLA_OK) {
        fprintf(stderr, "amd_static_probe: case H %d L %d bs %d P %d: %s\n", H, L, bs, P, err.msg);
        return 1;
    }
    const size_t rows = (size_t)fx.num_q_tokens * H;
    mla_bf16 *o = malloc(rows * fx.cfg.v_head_dim * sizeof *o);
    float *lse = malloc(rows * sizeof *lse);
    if (!o || !lse)
        return 1;
    const mla_status st = mla_amd_emu_backend_run(&fx, MLA_GPU_TIER_FAST, a, 0, o, lse, &err);
    if (st != MLA_OK) {
        fprintf(stderr, "amd_static_probe: emulated fast tier on %s: %s\n", arch, err.msg);
        return 1;
    }
    printf("{\"arch\": \"%s\", \"H\": %d, \"L\": %d, \"bs\": %d, \"prefix\": %d, \"seed\": %llu, \"launches\": [", arch,
           H, L, bs, P, (unsigned long long)seed);
    for (int i = 0; i < g_nlaunch; ++i) {
        const launch_count *c = &g_launch[i];
        printf("%s\n  {\"kernel\": \"%s\", \"grid\": [%u, %u, %u], \"block\": [%u, %u, %u], \"lds_bytes\": %zu, "
               "\"mfma_lane_steps\": {\"32x32x8_bf16_1k\": %llu, \"32x32x16_bf16\": %llu}, "
               "\"barrier_calls\": %llu, \"lds_read\": %llu, \"lds_written\": %llu, \"other_read\": %llu, "
               "\"other_written\": %llu, \"global_read\": {",
               i ? "," : "", c->name, c->grid[0], c->grid[1], c->grid[2], c->block[0], c->block[1], c->block[2],
               c->lds, c->mfma[1], c->mfma[2], c->barrier, c->lds_rd, c->lds_wr, c->other_rd, c->other_wr);
        int first = 1;
        for (int b = 0; b < g_nbuf; ++b)
            if (c->g_rd[b]) {
                printf("%s\"%s\": %llu", first ? "" : ", ", g_buf[b].name, c->g_rd[b]);
                first = 0;
            }
        printf("}, \"global_written\": {");
        first = 1;
        for (int b = 0; b < g_nbuf; ++b)
            if (c->g_wr[b]) {
                printf("%s\"%s\": %llu", first ? "" : ", ", g_buf[b].name, c->g_wr[b]);
                first = 0;
            }
        printf("}}");
    }
    printf("]}\n");
    free(o);
    free(lse);
    mla_fixture_free(&fx);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        usage(stdout);
        return 0;
    }
    long H, L, bs, P;
    if (argc == 6 && !strcmp(argv[1], "plan")) {
        if (!parse_int(argv[3], "H", 1, 256, &H) || !parse_int(argv[4], "L", 1, 64, &L))
            return 2;
        return run_plan(argv[2], (int)H, (int)L, argv[5]);
    }
    if (argc == 7 && !strcmp(argv[1], "emu")) {
        if (!parse_int(argv[3], "H", 1, 256, &H) || !parse_int(argv[4], "L", 1, 64, &L) ||
            !parse_int(argv[5], "BS", 1, 4096, &bs) || !parse_int(argv[6], "P", 0, 1 << 20, &P))
            return 2;
        return run_emu(argv[2], (int)H, (int)L, (int)bs, (int)P);
    }
    usage(stderr);
    return 2;
}
