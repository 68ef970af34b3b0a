/* The AMD kernels of hip/mla_kernels.hip end to end under the emulator
 * (mla_amd_emu_run), both archs, against an fp64 reference of SPEC section
 * 2 computed here: the fast tier at K3 (H 12, L 8: the 96-row stage 1),
 * DeepSeek (H 16, L 4: 64 rows) and a small shape (32 rows), the per-head
 * and generic tiers, empty and ragged-remainder prefixes, and a decline.
 * Launches whose LDS request exceeds the arch's limit must fail as on the
 * hardware; with MLA_AMD_EMU_RELAX_LDS they run, to check the kernel logic. */
#include "mla_amd_emu.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;
#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                                            \
            printf(__VA_ARGS__);                                                                   \
            printf("\n");                                                                          \
            ++failures;                                                                            \
        }                                                                                          \
    } while (0)

enum { D = 576, DV = 512 };

static mla_bf16 to_bf(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (mla_bf16)(u >> 16);
}
static float bf(mla_bf16 b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static unsigned rng = 12345u;
static float urand(void)
{
    rng = rng * 1664525u + 1013904223u;
    return (float)((rng >> 8) & 0xffff) / 32768.f - 1.f;
}

typedef struct {
    int H, L, bs;
    const int *P;
    mla_gpu_args a;
    int64_t slots;
    mla_bf16 *q, *ke, *ve, *kv, *o;
    int32_t *qo, *kvp;
    int64_t *idx;
    float *lse;
    double *ref_o, *ref_lse;
} Case;

static void make_case(Case *c, int H, int L, int bs, const int *P)
{
    memset(c, 0, sizeof *c);
    c->H = H;
    c->L = L;
    c->bs = bs;
    c->P = P;
    const int T = bs * L;
    int64_t total = 0;
    for (int b = 0; b < bs; ++b)
        total += P[b];
    c->slots = total + 7; /* unreferenced slots hold NaN: never read */
    c->q = malloc(sizeof(mla_bf16) * T * H * D);
    c->ke = malloc(sizeof(mla_bf16) * T * D);
    c->ve = malloc(sizeof(mla_bf16) * T * DV);
    c->kv = malloc(sizeof(mla_bf16) * c->slots * D);
    c->o = malloc(sizeof(mla_bf16) * T * H * DV);
    c->lse = malloc(sizeof(float) * T * H);
    c->qo = malloc(sizeof(int32_t) * (bs + 1));
    c->kvp = malloc(sizeof(int32_t) * (bs + 1));
    c->idx = malloc(sizeof(int64_t) * (total ? total : 1));
    c->ref_o = malloc(sizeof(double) * T * H * DV);
    c->ref_lse = malloc(sizeof(double) * T * H);
    for (long i = 0; i < (long)T * H * D; ++i)
        c->q[i] = to_bf(urand());
    for (long i = 0; i < (long)T * D; ++i)
        c->ke[i] = to_bf(urand());
    for (long i = 0; i < (long)T * DV; ++i)
        c->ve[i] = to_bf(urand());
    for (long i = 0; i < (long)c->slots * D; ++i)
        c->kv[i] = 0x7fc0; /* NaN */
    /* Shuffled slots: a permutation of 0..total+6 with stride 5 (coprime to
     * most sizes; checked below). */
    int64_t s = 3;
    for (int64_t t = 0; t < total; ++t) {
        s = (s + 5) % c->slots;
        c->idx[t] = s;
    }
    for (int64_t t = 0; t < total; ++t)
        for (int d = 0; d < D; ++d)
            c->kv[c->idx[t] * D + d] = to_bf(urand());
    c->qo[0] = c->kvp[0] = 0;
    for (int b = 0; b < bs; ++b) {
        c->qo[b + 1] = c->qo[b] + L;
        c->kvp[b + 1] = c->kvp[b] + P[b];
    }
    mla_gpu_args *a = &c->a;
    a->shape.num_seqs = bs;
    a->shape.num_heads = H;
    a->shape.num_kv_heads = 1;
    a->shape.q_len = L;
    a->shape.num_q_tokens = T;
    a->shape.head_dim = D;
    a->shape.kv_dim = D;
    a->shape.v_head_dim = DV;
    a->shape.v_extend_dim = DV;
    a->shape.is_causal = 1;
    a->shape.sliding_window = -1;
    a->shape.topk = 1;
    a->num_kv_indices = total;
    a->sm_scale = 0.0721688f;
    a->k_scale = 1.f;
    a->v_scale = 1.f;
    a->q = c->q;
    a->q_stride_tok = (int64_t)H * D;
    a->q_stride_head = D;
    a->k_extend = c->ke;
    a->k_stride_tok = D;
    a->k_stride_head = D;
    a->v_extend = c->ve;
    a->v_stride_tok = DV;
    a->v_stride_head = DV;
    a->kv_buffer = c->kv;
    a->kv_stride_slot = D;
    a->kv_stride_head = D;
    a->qo_indptr = c->qo;
    a->kv_indptr = c->kvp;
    a->kv_indices = c->idx;
    a->o = c->o;
    a->o_stride_tok = (int64_t)H * DV;
    a->o_stride_head = DV;
    a->lse = c->lse;
    a->lse_stride_tok = H;

    /* fp64 reference (SPEC section 2, causal, no optional features) */
    int maxk = 0;
    for (int b = 0; b < bs; ++b)
        if (P[b] + L > maxk)
            maxk = P[b] + L;
    double *sc = malloc(sizeof(double) * maxk);
    for (int b = 0; b < bs; ++b)
        for (int i = 0; i < L; ++i)
            for (int h = 0; h < H; ++h) {
                const int row = c->qo[b] + i;
                const mla_bf16 *qr = c->q + ((long)row * H + h) * D;
                const int nk = P[b] + i + 1;
                double m = -INFINITY;
                for (int k = 0; k < nk; ++k) {
                    const mla_bf16 *kr = k < P[b] ? c->kv + c->idx[c->kvp[b] + k] * D : c->ke + (long)(c->qo[b] + k - P[b]) * D;
                    double dot = 0;
                    for (int d = 0; d < D; ++d)
                        dot += (double)bf(qr[d]) * bf(kr[d]);
                    sc[k] = dot * a->sm_scale;
                    if (sc[k] > m)
                        m = sc[k];
                }
                double sum = 0;
                for (int k = 0; k < nk; ++k)
                    sum += exp(sc[k] - m);
                double *orow = c->ref_o + ((long)row * H + h) * DV;
                for (int d = 0; d < DV; ++d)
                    orow[d] = 0;
                for (int k = 0; k < nk; ++k) {
                    const double w = exp(sc[k] - m) / sum;
                    const mla_bf16 *vr = k < P[b] ? c->kv + c->idx[c->kvp[b] + k] * D : c->ve + (long)(c->qo[b] + k - P[b]) * DV;
                    for (int d = 0; d < DV; ++d)
                        orow[d] += w * bf(vr[d]);
                }
                c->ref_lse[(long)row * H + h] = m + log(sum);
            }
    free(sc);
}

static void free_case(Case *c)
{
    free(c->q);
    free(c->ke);
    free(c->ve);
    free(c->kv);
    free(c->o);
    free(c->lse);
    free(c->qo);
    free(c->kvp);
    free(c->idx);
    free(c->ref_o);
    free(c->ref_lse);
}

/* Worst error per row relative to the row's largest |o|: bf16 partials, P
 * in bf16 and a bf16 output give a few 2^-8 at most (SPEC section 7). */
static double worst(const Case *c, double *lse_err)
{
    const long rows = (long)c->bs * c->L * c->H;
    double w = 0, le = 0;
    for (long r = 0; r < rows; ++r) {
        double mx = 1e-6;
        for (int d = 0; d < DV; ++d)
            if (fabs(c->ref_o[r * DV + d]) > mx)
                mx = fabs(c->ref_o[r * DV + d]);
        for (int d = 0; d < DV; ++d) {
            const double e = fabs(bf(c->o[r * DV + d]) - c->ref_o[r * DV + d]) / mx;
            if (!(e <= w))
                w = isnan(e) ? INFINITY : e;
        }
        const double l = fabs(c->lse[r] - c->ref_lse[r]);
        if (!(l <= le))
            le = isnan(l) ? INFINITY : l;
    }
    *lse_err = le;
    return w;
}

static const char *arch_name(mla_amd_emu_arch a)
{
    return a == MLA_AMD_EMU_GFX950 ? "gfx950" : "gfx942";
}

/* expect_lds_fail: the plain launch must fail with the LDS-limit fault. */
static void run_case(const char *name, int H, int L, int bs, const int *P, mla_gpu_tier tier, mla_amd_emu_arch arch,
                     int expect_lds_fail)
{
    Case c;
    make_case(&c, H, L, bs, P);
    mla_amd_emu_info info;
    mla_error err;
    memset(&err, 0, sizeof err);
    mla_status st = mla_amd_emu_run(&c.a, c.slots, tier, arch, 0, &info, &err);
    if (expect_lds_fail) {
        CHECK(st == MLA_ERR_RUNTIME && info.fault == 12 /* FAULT_CONFIG */, "%s %s: expected the LDS-limit failure, got %d: %s",
              name, arch_name(arch), (int)st, err.msg);
        printf("%-34s %s: launch fails as on hardware: %s\n", name, arch_name(arch), err.msg);
        st = mla_amd_emu_run(&c.a, c.slots, tier, arch, MLA_AMD_EMU_RELAX_LDS, &info, &err);
    }
    double le = 0, w = 0;
    if (st == MLA_OK)
        w = worst(&c, &le);
    CHECK(st == MLA_OK, "%s %s: status %d: %s", name, arch_name(arch), (int)st, err.msg);
    CHECK(st != MLA_OK || (w < 0.03 && le < 2e-3), "%s %s: worst row-relative error %.3g, lse error %.3g", name,
          arch_name(arch), w, le);
    printf("%-34s %s%s: %s, worst |o - ref| / max|o_row| %.2e, |lse - ref| %.2e\n    %s\n", name, arch_name(arch),
           expect_lds_fail ? " (LDS limit relaxed)" : "", st == MLA_OK ? "ok" : "FAILED", w, le, info.launches);
    free_case(&c);
}

int main(void)
{
    static const int p_small[2] = {0, 37};
    static const int p_k3[1] = {200};
    static const int p_ds[2] = {130, 64};
    static const int p_gen[2] = {5, 0};
    for (int ai = 0; ai < 2; ++ai) {
        const mla_amd_emu_arch arch = ai ? MLA_AMD_EMU_GFX950 : MLA_AMD_EMU_GFX942;
        const int g950 = arch == MLA_AMD_EMU_GFX950;
        /* Stage-1 LDS: 32 rows 119680 B, 64 rows 164608 B, 96 rows 209536 B
         * (mla_kernels.hip stage1_smem): over gfx942's 64 KiB every time,
         * over gfx950's 160 KiB from 64 rows on. */
        run_case("fast H4 L2 bs2 P{0,37}", 4, 2, 2, p_small, MLA_GPU_TIER_FAST, arch, !g950);
        run_case("fast K3 H12 L8 bs1 P200", 12, 8, 1, p_k3, MLA_GPU_TIER_FAST, arch, 1);
        run_case("fast DeepSeek H16 L4 bs2 P{130,64}", 16, 4, 2, p_ds, MLA_GPU_TIER_FAST, arch, 1);
        run_case("perhead H4 L2 bs2 P{0,37}", 4, 2, 2, p_small, MLA_GPU_TIER_PERHEAD, arch, !g950);
        run_case("generic H3 L3 bs2 P{5,0}", 3, 3, 2, p_gen, MLA_GPU_TIER_GENERIC, arch, 0);
    }
    {
        Case c;
        make_case(&c, 4, 2, 2, p_small);
        c.a.shape.logit_cap = 30.f;
        mla_error err;
        mla_amd_emu_info info;
        memset(&err, 0, sizeof err);
        const mla_status st = mla_amd_emu_run(&c.a, c.slots, MLA_GPU_TIER_FAST, MLA_AMD_EMU_GFX950, 0, &info, &err);
        CHECK(st == MLA_ERR_DECLINED, "logit_cap: fast tier must decline, got %d", (int)st);
        printf("fast tier with logit_cap: %s (%s)\n", st == MLA_ERR_DECLINED ? "declined" : "NOT declined", err.msg);
        free_case(&c);
    }
    {
        /* A pool declared one slot too short for the indices: the gather of
         * the highest slot must fault with the buffer and work-item named. */
        Case c;
        make_case(&c, 4, 2, 2, p_small);
        int64_t hi = 0;
        for (int64_t t = 0; t < c.a.num_kv_indices; ++t)
            if (c.idx[t] > hi)
                hi = c.idx[t];
        mla_error err;
        mla_amd_emu_info info;
        memset(&err, 0, sizeof err);
        const mla_status st = mla_amd_emu_run(&c.a, hi, MLA_GPU_TIER_FAST, MLA_AMD_EMU_GFX950, 0, &info, &err);
        CHECK(st == MLA_ERR_RUNTIME && info.fault == 1 && strstr(err.msg, "kv_buffer"),
              "short pool: expected a global out-of-bounds fault on kv_buffer, got %d: %s", (int)st, err.msg);
        printf("kv pool one slot short: %s\n", err.msg);
        free_case(&c);
    }
    printf(failures ? "FAILED (%d)\n" : "all passed\n", failures);
    return failures ? 1 : 0;
}
