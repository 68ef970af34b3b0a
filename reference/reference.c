/* The fp32 reference (SPEC section 2) on OpenBLAS.
 *
 * Work unit: one sequence b, one KV head g, and a tile of its draft rows.
 * All query heads of the KV head's group times the tile's drafts form the M
 * rows of one GEMM (row r = draft i * heads_per_group + head), the way the
 * GPU kernel folds heads and drafts, so one gathered key block serves every
 * row. Keys are visited in blocks (prefix first, drafts last) with an online
 * softmax: a running max m and sum l per row and an accumulator rescaled
 * whenever m grows. Memory is bounded by one key block and one row tile,
 * whatever the prefix length.
 *
 * Determinism: every reduction here has a fixed order; the GEMMs are
 * OpenBLAS's, whose partition depends only on the shape and thread count. */
#include <cblas.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ref_internal.h"

/* The element-wise work between the GEMMs (bf16 conversion, exp, max, sum)
 * runs on one core while OpenBLAS's threads wait, so its speed decides how
 * close the reference gets to the GEMM rate. Where the toolchain can
 * dispatch at load time, the hot loops are built for AVX-512, AVX2 and the
 * baseline, and the best one the CPU has is used. Results do not depend on
 * the choice: ISO C mode contracts nothing into FMAs, every element sees
 * the same operations, and the reductions keep their eight fixed lanes. */
#if defined(__x86_64__) && defined(__GLIBC__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define REF_HOT __attribute__((target_clones("avx512f", "avx2", "default")))
#endif
#endif
#ifndef REF_HOT
#define REF_HOT
#endif
#if defined(__GNUC__)
#define REF_INLINE static inline __attribute__((always_inline))
#else
#define REF_INLINE static inline
#endif

/* 256 keys. At the K3 benchmark shape the reference's time is flat from
 * 128 to 1024 keys per block (193-208 ms, within this machine's noise; see
 * reports/bench-ref.md), so the block is sized for memory instead: its fp32
 * keys (576 KB at head_dim 576) stay in one core's L2 between the score and
 * value GEMMs, and the score tile is rows x 256. */
#define REF_KEY_BLOCK 256
/* Bounds the accumulator (row_tile x v_head_dim floats) on ragged inputs
 * with many drafts; the K3 shape (96 rows) is one tile. */
#define REF_ROW_TILE 1024

mla_ref_opts mla_ref_opts_default(void)
{
    mla_ref_opts o;
    o.key_block = REF_KEY_BLOCK;
    o.row_tile = REF_ROW_TILE;
    o.use_prefix = 1;
    o.use_drafts = 1;
    o.pstats = NULL;
    return o;
}

/* exp(x) for x <= 0, -inf or NaN: the only arguments online softmax forms
 * (a score minus a running max that is at least that score). Written out so
 * the compiler vectorises it; libm's expf, a call per element, took 93 us
 * per 96 x 256 block on the benchmark machine, ~30% of the block's GEMMs.
 * x = n ln2 + r with |r| <= ln2/2; exp(r) by its Taylor series to degree 7,
 * whose truncation error r^8/8! < 5.3e-9 is below 2^-24; measured worst
 * error 0.84 ulp over [-87, 0]. Below -87 the true value is under 2^-125,
 * negligible next to the row's largest weight 1, and the result is 0 (which
 * maps -inf to 0). NaN propagates. The range test is done on the bits:
 * a float comparison there counts as possibly trapping and keeps GCC from
 * vectorising the loop. */
REF_INLINE float ref_exp_nonpos(float x)
{
    const float log2e = 1.44269504088896341f;
    const float round_shift = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
    const float ln2_hi = 0.693145751953125f; /* 16 significant bits: n * ln2_hi is exact */
    const float ln2_lo = 1.428606765330187e-06f;
    float t = x * log2e + round_shift;
    float n = t - round_shift;
    float r = (x - n * ln2_hi) - n * ln2_lo;
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    uint32_t ti;
    memcpy(&ti, &t, sizeof ti);
    const uint32_t bits = (ti - 0x4B400000u + 127u) << 23; /* 2^n, n in [-126, 0] when kept */
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    float y = p * scale;
    uint32_t xb, yb;
    memcpy(&xb, &x, sizeof xb);
    const uint32_t ax = xb & 0x7fffffffu;
    /* keep |x| <= 87 (0x42AE0000) and NaN (above 0x7f800000) */
    const uint32_t keep = 0u - (uint32_t)((ax <= 0x42AE0000u) | (ax > 0x7f800000u));
    memcpy(&yb, &y, sizeof yb);
    yb &= keep;
    memcpy(&y, &yb, sizeof y);
    return y;
}

REF_INLINE void bf16_row_to_f32(float *dst, const mla_bf16 *src, int32_t n)
{
    for (int32_t d = 0; d < n; d++) {
        uint32_t u = (uint32_t)src[d] << 16;
        memcpy(&dst[d], &u, sizeof u);
    }
}

/* The same, returning non-zero if any element is inf or NaN (exponent all
 * ones: adding 0x0080 to the masked exponent then carries into bit 15). */
REF_INLINE uint32_t bf16_row_to_f32_nonfinite(float *dst, const mla_bf16 *src, int32_t n)
{
    uint32_t bad = 0;
    for (int32_t d = 0; d < n; d++) {
        bad |= (((uint32_t)src[d] & 0x7f80u) + 0x0080u) & 0x8000u;
        uint32_t u = (uint32_t)src[d] << 16;
        memcpy(&dst[d], &u, sizeof u);
    }
    return bad;
}

/* Eight interleaved partial sums: a fixed order (deterministic) that the
 * compiler can keep in vector registers, unlike one serial chain. */
REF_INLINE float sum_lanes(const float *x, int32_t n)
{
    float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int32_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++)
            lane[k] += x[i + k];
    for (; i < n; i++)
        lane[i & 7] += x[i];
    return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

/* Floats mapped to unsigned integers of the same order (negative values
 * reflected), so the max is an integer max: a float comparison counts as
 * possibly trapping and keeps GCC from vectorising the loop. A positive
 * NaN maps above +inf and wins; a negative one maps below -inf and loses,
 * but exp(NaN - m) still carries it into the weights, the sum and the
 * output, as in the oracle. */
REF_INLINE uint32_t order_key(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u ^ ((0u - (u >> 31)) | 0x80000000u);
}

REF_INLINE float max_lanes(const float *x, int32_t n)
{
    uint32_t lane[8];
    const uint32_t lowest = order_key(-INFINITY);
    for (int k = 0; k < 8; k++)
        lane[k] = lowest;
    int32_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) {
            const uint32_t v = order_key(x[i + k]);
            lane[k] = v > lane[k] ? v : lane[k];
        }
    for (; i < n; i++) {
        const uint32_t v = order_key(x[i]);
        lane[i & 7] = v > lane[i & 7] ? v : lane[i & 7];
    }
    uint32_t m = lane[0];
    for (int k = 1; k < 8; k++)
        m = lane[k] > m ? lane[k] : m;
    const uint32_t bits = m ^ (((m >> 31) - 1u) | 0x80000000u);
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

typedef struct {
    int32_t D, Dv, NB, hg;
    float *qf;  /* [M, D] queries of the tile */
    float *kf;  /* [NB, D] keys of the block (prefix values are its first Dv columns) */
    float *vf;  /* [NB, Dv] draft values of the block */
    float *s;   /* [M, NB] scores, then weights */
    float *acc; /* [M, Dv] unnormalised output */
    float *m;   /* [M] running max */
    float *l;   /* [M] running sum of exp(s - m) */
    int32_t *vis_lo, *vis_hi; /* [M] the block's visible keys of each row: [lo, hi) */
    /* P-rounding statistics pass (opts->pstats) only: */
    float *cw;   /* [M, NB] c_k = v_k . o_row */
    float *cwg;  /* [M, NB] c_k^g = v_k . (g o_row), the column-weighted c_k */
    float *accg; /* [M, Dv] g o_row */
    double *on2g; /* [M] |o_row|_g^2 = sum_c g_c o_c^2 */
    float *pinv; /* [M] final weight of exp(s - m): scale / denom, 0 for an empty row */
    double *ps;  /* [M, MLA_REF_PSTATS]: the row's statistics (include/mla/reference.h) */
    double *on2; /* [M] |o_row|^2 */
    float *va;   /* [NB, Dv] |v_k| of the block (non-finite values as 0) */
    float *aacc; /* [M, Dv] A_c = sum_k P_k |v_k,c| over the visible keys */
    float *vstar; /* [M, Dv] v*: the value of the row's max key, times value_alpha (its
                     weight is pinv; non-finite entries as 0) */
    unsigned char *hstar; /* [M] 1 once vstar holds the row's max key */
    float *gw;   /* [Dv] the bias test's column weights g_c = 1 / M_{b,c}^2 of the
                    sequence and KV head (0 where M is 0 or not finite) */
} ref_work;

/* The bias test's column weights (validate/judge.c (B0)): M_{b,c} = the
 * largest |v_c| the sequence can see (prefix values times v_scale, draft
 * values), computed as the judge computes it, and g_c = 1 / M_{b,c}^2. */
static void bias_column_weights(const mla_fixture *fx, int32_t b, int32_t g, float *gw)
{
    const mla_config *c = &fx->cfg;
    const int32_t Hkv = c->num_kv_heads, D = c->head_dim, Dv = c->v_head_dim;
    const int32_t P = mla_fixture_prefix(fx, b), L = mla_fixture_drafts(fx, b);
    const int64_t q0 = fx->qo_indptr[b], k0 = fx->kv_indptr[b];
    for (int32_t d = 0; d < Dv; d++) {
        double M = 0;
        for (int32_t t = 0; t < P; t++) {
            const size_t e = ((size_t)fx->kv_indices[k0 + t] * Hkv + g) * D + d;
            const float x = fx->kv_dtype == MLA_KV_BF16 ? mla_bf16_to_f32(fx->kv_buffer[e])
                                                        : mla_fp8_to_f32(fx->kv_dtype, fx->kv_fp8[e]);
            const double v = fabs(c->v_scale * x);
            if (v > M)
                M = v;
        }
        for (int32_t j = 0; j < L; j++) {
            const double v = fabs(mla_bf16_to_f32(fx->v_extend[((size_t)(q0 + j) * Hkv + g) * Dv + d]));
            if (v > M)
                M = v;
        }
        gw[d] = M > 0 && isfinite(M) ? (float)(1.0 / (M * M)) : 0.0f;
    }
}

/* Visibility of one key source to one tile (SPEC section 2). Positions:
 * the query of draft i sits at P + i; prefix key t at t, draft key j at
 * P + j. */
typedef struct {
    int64_t qpos0;  /* position of the tile's first draft row */
    int64_t kpos0;  /* position of the block's first key */
    int32_t causal; /* keys after the query are hidden (draft keys under is_causal) */
    int32_t window; /* > 0: keys more than window before the query are hidden */
    float cap;      /* > 0: s <- cap * tanh(s / cap) */
} ref_vis;

/* The keys [*a, *b) of a block of N that row r of the tile sees: the
 * sliding window cuts from below, causality from above. */
static inline void visible_range(const ref_work *w, const ref_vis *vis, int32_t r, int32_t N,
                                 int64_t *a, int64_t *b)
{
    const int64_t qpos = vis->qpos0 + r / w->hg;
    *a = 0;
    *b = N;
    if (vis->window > 0) {
        const int64_t lo = qpos - vis->window - vis->kpos0;
        *a = lo < 0 ? 0 : (lo > N ? N : lo);
    }
    if (vis->causal) {
        const int64_t hi = qpos - vis->kpos0 + 1;
        *b = hi < 0 ? 0 : (hi > N ? N : hi);
    }
}

/* Online softmax update of the M rows of one key block: mask, cap, new
 * running max, weights exp(s - m) in place of the scores, running sum, and
 * the accumulator rescaled when the max grew. */
static REF_HOT void softmax_rows(ref_work *w, int32_t M, int32_t N, const ref_vis *vis)
{
    const int32_t Dv = w->Dv, NB = w->NB;
    for (int32_t r = 0; r < M; r++) {
        float *s = w->s + (size_t)r * NB;
        int64_t a, b;
        visible_range(w, vis, r, N, &a, &b);
        w->vis_lo[r] = (int32_t)a;
        w->vis_hi[r] = (int32_t)b;
        if (a >= b) {
            memset(s, 0, (size_t)N * sizeof *s);
            continue;
        }
        if (vis->cap > 0.0f)
            for (int64_t n = a; n < b; n++)
                s[n] = vis->cap * tanhf(s[n] / vis->cap);
        const float bm = max_lanes(s + a, (int32_t)(b - a));
        const float m_old = w->m[r];
        const float m_new = (bm > m_old || bm != bm) ? bm : m_old;
        /* m_new is finite here unless a score is NaN or inf (then the row
         * becomes NaN as the oracle's does); m_old = -inf gives corr = 0. */
        const float corr = ref_exp_nonpos(m_old - m_new);
        for (int64_t n = 0; n < a; n++)
            s[n] = 0.0f;
        for (int64_t n = a; n < b; n++)
            s[n] = ref_exp_nonpos(s[n] - m_new);
        for (int64_t n = b; n < N; n++)
            s[n] = 0.0f;
        w->l[r] = w->l[r] * corr + sum_lanes(s + a, (int32_t)(b - a));
        w->m[r] = m_new;
        if (corr != 1.0f) {
            float *acc = w->acc + (size_t)r * Dv;
            for (int32_t d = 0; d < Dv; d++)
                acc[d] *= corr;
        }
    }
}

/* One key block: S = score_alpha Q K^T, online softmax update of the rows,
 * acc += value_alpha P V. When the block's values hold an inf or NaN, a
 * GEMM would spread it to rows that cannot see that key (0 * inf = NaN), so
 * each row then takes only its visible keys, as the oracle does. */
static void ref_block(ref_work *w, int32_t M, int32_t N, const float *v, int32_t ldv,
                      float score_alpha, float value_alpha, const ref_vis *vis,
                      uint32_t v_nonfinite)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, w->D, score_alpha, w->qf, w->D,
                w->kf, w->D, 0.0f, w->s, w->NB);
    softmax_rows(w, M, N, vis);
    if (!v_nonfinite) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, w->Dv, N, value_alpha, w->s,
                    w->NB, v, ldv, 1.0f, w->acc, w->Dv);
        return;
    }
    for (int32_t r = 0; r < M; r++) {
        const int32_t lo = w->vis_lo[r], hi = w->vis_hi[r];
        if (lo < hi)
            cblas_sgemv(CblasRowMajor, CblasTrans, hi - lo, w->Dv, value_alpha,
                        v + (size_t)lo * ldv, ldv, w->s + (size_t)r * w->NB + lo, 1, 1.0f,
                        w->acc + (size_t)r * w->Dv, 1);
    }
}

/* pstats j = 11, 12 (judge.c (B6)): the largest coherent slope error the
 * bf16 rounding of a partial dominated by the row's max key k* can make,
 * over the unknown split plan. That partial is O = (1 - eps) v* + (the other
 * keys of its split), eps their share; when eps is below about an ulp the
 * rounding snaps O back towards v* in every column at once, an error along
 * the output, not noise. Which eps a kernel meets depends on its split
 * plan (a split may hold k* and a few light neighbours), so take the worst
 * over eps in [-8u, 8u] (u = 2^-8; past a few ulps the columns' mantissas
 * dither the error away: measured on N(0,1) values, 0.5u at eps = u/2, below
 * 0.08u past 4u), of |sum_c o_c e_c(eps)| with e_c the rounding error of
 * (1 - eps) v*_c, times the partial's weight P* (1 + |eps|); the same with
 * g_c o_c. Exact for the values at hand: no mantissa distribution assumed
 * inside the range. */
static void snap_bound(const float *orow, const float *grow, const float *vs, double pstar,
                       int32_t Dv, double *sn, double *sng)
{
    enum { STEPS = 192 }; /* eps = i u / 24, |i| <= STEPS: 8u */
    const double u = 1.0 / 256.0;
    double best = 0, bestg = 0;
    for (int i = -STEPS; i <= STEPS; i++) {
        if (i == 0)
            continue;
        const double eps = i * u / 24.0;
        double a = 0, ag = 0;
        for (int32_t d = 0; d < Dv; d++) {
            const double od = orow[d], gd = grow[d];
            if (!isfinite(od) || vs[d] == 0.0f)
                continue;
            const float x = (float)((1.0 - eps) * vs[d]);
            const double e = (double)mla_bf16_to_f32(mla_f32_to_bf16(x)) - (double)x;
            if (!isfinite(e)) /* (1 - eps) v* or its rounding past FLT_MAX */
                continue;
            a += od * e;
            if (isfinite(gd))
                ag += gd * e;
        }
        const double wgt = pstar * (1.0 + fabs(eps));
        best = fmax(best, wgt * fabs(a));
        bestg = fmax(bestg, wgt * fabs(ag));
    }
    *sn = best;
    *sng = bestg;
}

/* Statistics pass over one key block, after the tile's output is final
 * (w->acc then holds o_row, w->m the row's final max): the same scores,
 * mask and cap as softmax_rows, the final weights P_k = exp(s_k - m) * pinv,
 * c_k = value_alpha v_k . o_row by one GEMM (a non-finite value only spoils
 * its own column, and only visible columns are read), and the double sums
 * of P^2, P^2 c, P^2 c^2 over the visible keys. Then, in place of the
 * scores, the final weights of every visible key (the max key included; 0
 * elsewhere) and A += |value_alpha| P |V| by one more GEMM: the P-weighted
 * mean absolute value per column that bounds the bf16 partials' rounding
 * (validate/judge.c, (B2)). A non-finite value enters |V| as 0: a row that
 * sees it has a non-finite o_c, which the judge leaves out anyway, and a
 * row that does not must not get 0 * inf = NaN. */
static void ref_pstats_block(ref_work *w, int32_t M, int32_t N, const float *v, int32_t ldv,
                             float score_alpha, float value_alpha, const ref_vis *vis)
{
    const int32_t NB = w->NB;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, w->D, score_alpha, w->qf, w->D,
                w->kf, w->D, 0.0f, w->s, NB);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, w->Dv, value_alpha, w->acc, w->Dv,
                v, ldv, 0.0f, w->cw, NB);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, w->Dv, value_alpha, w->accg, w->Dv,
                v, ldv, 0.0f, w->cwg, NB);
    for (int32_t r = 0; r < M; r++) {
        float *s = w->s + (size_t)r * NB;
        if (w->pinv[r] == 0.0f) {
            memset(s, 0, (size_t)N * sizeof *s);
            continue;
        }
        const float *cw = w->cw + (size_t)r * NB, *cwg = w->cwg + (size_t)r * NB;
        int64_t a, b;
        visible_range(w, vis, r, N, &a, &b);
        double s0 = 0, s1 = 0, s2 = 0, ta = 0, tb = 0, s1g = 0, s2g = 0, tag = 0, tbg = 0;
        const double on2 = w->on2[r], on2g = w->on2g[r];
        for (int64_t n = 0; n < a; n++)
            s[n] = 0.0f;
        for (int64_t n = b; n < N; n++)
            s[n] = 0.0f;
        for (int64_t n = a; n < b; n++) {
            float sc = s[n];
            if (vis->cap > 0.0f)
                sc = vis->cap * tanhf(sc / vis->cap);
            const float e = ref_exp_nonpos(sc - w->m[r]);
            s[n] = e * w->pinv[r]; /* the final weight, for A */
            /* The row's max key: exp(0) = 1 is exact in bf16, and a kernel
             * that subtracts the running max gives it exactly that weight
             * (it is the max of its block and split when processed). */
            if (e == 1.0f) {
                if (!w->hstar[r]) { /* the first of tied max keys will do */
                    float *vs = w->vstar + (size_t)r * w->Dv;
                    const float *src = v + (size_t)n * ldv;
                    for (int32_t d = 0; d < w->Dv; d++) {
                        const float x = value_alpha * src[d];
                        vs[d] = fabsf(x) <= FLT_MAX ? x : 0.0f;
                    }
                    w->hstar[r] = 1;
                }
                continue;
            }
            const double p = (double)e * (double)w->pinv[r];
            const double p2 = p * p, c = cw[n];
            s0 += p2;
            s1 += p2 * c;
            s2 += p2 * c * c;
            ta += p * fabs(c);
            tb += p * fabs(c - on2);
            const double cg = cwg[n];
            s1g += p2 * cg;
            s2g += p2 * cg * cg;
            tag += p * fabs(cg);
            tbg += p * fabs(cg - on2g);
        }
        double *ps = w->ps + (size_t)r * MLA_REF_PSTATS;
        ps[0] += s0;
        ps[1] += s1;
        ps[2] += s2;
        ps[3] += ta;
        ps[4] += tb;
        ps[6] += s1g;
        ps[7] += s2g;
        ps[8] += tag;
        ps[9] += tbg;
    }
    const int32_t Dv = w->Dv;
    for (int32_t n = 0; n < N; n++) {
        const float *src = v + (size_t)n * ldv;
        float *dst = w->va + (size_t)n * Dv;
        for (int32_t d = 0; d < Dv; d++) {
            const float x = fabsf(src[d]);
            dst[d] = x <= FLT_MAX ? x : 0.0f; /* inf and NaN as 0 */
        }
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, Dv, N, fabsf(value_alpha), w->s,
                NB, w->va, Dv, 1.0f, w->aacc, Dv);
}

/* Gathers and converts the prefix keys of one block (values are their first
 * Dv columns); returns non-zero if a value is inf or NaN. (Software
 * prefetch of the rows ahead measured no gain, with 64-slot pages or with
 * single scattered slots: the hardware prefetcher follows each row.) */
static REF_HOT uint32_t gather_prefix(float *kf, const mla_bf16 *pool, const int64_t *slots,
                                      int32_t N, int32_t D, int32_t Dv, int32_t Hkv, int32_t g)
{
    uint32_t bad = 0;
    for (int32_t n = 0; n < N; n++) {
        const mla_bf16 *src = pool + ((size_t)slots[n] * Hkv + g) * D;
        float *dst = kf + (size_t)n * D;
        bad |= bf16_row_to_f32_nonfinite(dst, src, Dv);
        bf16_row_to_f32(dst + Dv, src + Dv, D - Dv);
    }
    return bad;
}

/* gather_prefix for an fp8 pool (schema 1.1.0): decodes the codes exactly
 * into the same fp32 tile; k_scale and v_scale are applied by the caller,
 * as for bf16 pools. */
static REF_HOT uint32_t gather_prefix_fp8(float *kf, const uint8_t *pool, mla_kv_dtype t,
                                          const int64_t *slots, int32_t N, int32_t D, int32_t Dv,
                                          int32_t Hkv, int32_t g)
{
    uint32_t bad = 0;
    for (int32_t n = 0; n < N; n++) {
        const uint8_t *src = pool + ((size_t)slots[n] * Hkv + g) * D;
        float *dst = kf + (size_t)n * D;
        for (int32_t d = 0; d < D; d++)
            dst[d] = mla_fp8_to_f32(t, src[d]);
        for (int32_t d = 0; d < Dv; d++) /* no infinities in e4m3: NaN codes only */
            bad |= dst[d] != dst[d];
    }
    return bad;
}

/* a * b elements of `size` bytes; clears *ok on overflow or failure. */
static void *alloc_array(size_t a, size_t b, size_t size, int *ok)
{
    size_t n;
    if (!*ok || !mla_mul3_size(a, b, size, &n)) {
        *ok = 0;
        return NULL;
    }
    void *p = malloc(n ? n : 1);
    if (!p)
        *ok = 0;
    return p;
}

mla_status mla_reference_run_opts(const mla_fixture *fx, const mla_ref_opts *opts, float *o,
                                  float *lse, mla_error *err)
{
    mla_status st = mla_ref_check_inputs(fx, err);
    if (st != MLA_OK)
        return st;
    if (!opts || opts->key_block < 1 || opts->row_tile < 1) {
        mla_error_set(err, "reference options: key_block and row_tile must be >= 1");
        return MLA_ERR_INVALID;
    }
    if (!o && fx->num_q_tokens > 0) {
        mla_error_set(err, "output o is NULL");
        return MLA_ERR_INVALID;
    }
    const mla_config *c = &fx->cfg;
    const int32_t H = c->num_heads, Hkv = c->num_kv_heads, D = c->head_dim, Dv = c->v_head_dim;
    const int32_t hg = H / Hkv, NB = opts->key_block;
    const int32_t window = c->sliding_window > 0 ? c->sliding_window : 0;
    const float cap = c->logit_cap > 0.0f ? c->logit_cap : 0.0f;
    const float prefix_alpha = c->sm_scale * c->k_scale;

    int32_t max_drafts = 0;
    for (int32_t b = 0; b < c->num_seqs; b++) {
        int32_t L = mla_fixture_drafts(fx, b);
        max_drafts = L > max_drafts ? L : max_drafts;
    }
    int32_t tile_drafts = opts->row_tile / hg;
    if (tile_drafts < 1)
        tile_drafts = 1;
    if (tile_drafts > max_drafts)
        tile_drafts = max_drafts;
    const size_t Mmax = (size_t)tile_drafts * (size_t)hg;

    ref_work w;
    memset(&w, 0, sizeof w);
    w.D = D;
    w.Dv = Dv;
    w.NB = NB;
    w.hg = hg;
    int ok = 1;
    w.qf = alloc_array(Mmax, (size_t)D, sizeof(float), &ok);
    w.kf = alloc_array((size_t)NB, (size_t)D, sizeof(float), &ok);
    w.vf = alloc_array((size_t)NB, (size_t)Dv, sizeof(float), &ok);
    w.s = alloc_array(Mmax, (size_t)NB, sizeof(float), &ok);
    w.acc = alloc_array(Mmax, (size_t)Dv, sizeof(float), &ok);
    w.m = alloc_array(Mmax, 1, sizeof(float), &ok);
    w.l = alloc_array(Mmax, 1, sizeof(float), &ok);
    w.vis_lo = alloc_array(Mmax, 1, sizeof(int32_t), &ok);
    w.vis_hi = alloc_array(Mmax, 1, sizeof(int32_t), &ok);
    if (opts->pstats) {
        w.cw = alloc_array(Mmax, (size_t)NB, sizeof(float), &ok);
        w.cwg = alloc_array(Mmax, (size_t)NB, sizeof(float), &ok);
        w.accg = alloc_array(Mmax, (size_t)Dv, sizeof(float), &ok);
        w.on2g = alloc_array(Mmax, 1, sizeof(double), &ok);
        w.pinv = alloc_array(Mmax, 1, sizeof(float), &ok);
        w.ps = alloc_array(Mmax, MLA_REF_PSTATS, sizeof(double), &ok);
        w.on2 = alloc_array(Mmax, 1, sizeof(double), &ok);
        w.va = alloc_array((size_t)NB, (size_t)Dv, sizeof(float), &ok);
        w.aacc = alloc_array(Mmax, (size_t)Dv, sizeof(float), &ok);
        w.vstar = alloc_array(Mmax, (size_t)Dv, sizeof(float), &ok);
        w.hstar = alloc_array(Mmax, 1, 1, &ok);
        w.gw = alloc_array(1, (size_t)Dv, sizeof(float), &ok);
    }
    if (!ok) {
        mla_error_set(err, "reference: cannot allocate work buffers (%zu rows, key block %d)",
                      Mmax, (int)NB);
        st = MLA_ERR_NOMEM;
        goto done;
    }

    for (int32_t b = 0; b < c->num_seqs; b++) {
        const int32_t L = mla_fixture_drafts(fx, b), P = mla_fixture_prefix(fx, b);
        const int64_t qo = fx->qo_indptr[b];
        const int64_t *slots = fx->kv_indices + fx->kv_indptr[b];
        for (int32_t g = 0; g < Hkv; g++) {
            if (opts->pstats)
                bias_column_weights(fx, b, g, w.gw);
            for (int32_t i0 = 0; i0 < L; i0 += tile_drafts) {
                const int32_t i1 = i0 + tile_drafts < L ? i0 + tile_drafts : L;
                const int32_t M = (i1 - i0) * hg;
                for (int32_t r = 0; r < M; r++) {
                    const int64_t tok = qo + i0 + r / hg;
                    const int32_t h = g * hg + r % hg;
                    bf16_row_to_f32(w.qf + (size_t)r * D, fx->q + ((size_t)tok * H + h) * D, D);
                    w.m[r] = -INFINITY;
                    w.l[r] = 0.0f;
                }
                memset(w.acc, 0, (size_t)M * Dv * sizeof(float));

                ref_vis vis;
                vis.qpos0 = (int64_t)P + i0;
                vis.window = window;
                vis.cap = cap;
                if (opts->use_prefix && P > 0) {
                    /* Keys before the first row's window are hidden from every
                     * row of the tile: never gathered. */
                    int64_t t_lo = window > 0 ? (int64_t)P + i0 - window : 0;
                    if (t_lo < 0)
                        t_lo = 0;
                    vis.causal = 0; /* prefix keys all precede the queries */
                    for (int64_t t0 = t_lo; t0 < P; t0 += NB) {
                        const int32_t N = (int32_t)(P - t0 < NB ? P - t0 : NB);
                        const uint32_t bad =
                            fx->kv_dtype == MLA_KV_BF16
                                ? gather_prefix(w.kf, fx->kv_buffer, slots + t0, N, D, Dv, Hkv, g)
                                : gather_prefix_fp8(w.kf, fx->kv_fp8, fx->kv_dtype, slots + t0, N,
                                                    D, Dv, Hkv, g);
                        vis.kpos0 = t0;
                        ref_block(&w, M, N, w.kf, D, prefix_alpha, c->v_scale, &vis, bad);
                    }
                }
                if (opts->use_drafts) {
                    int64_t j_lo = window > 0 ? (int64_t)i0 - window : 0;
                    if (j_lo < 0)
                        j_lo = 0;
                    const int64_t j_hi = c->is_causal ? i1 : L;
                    vis.causal = c->is_causal != 0;
                    for (int64_t j0 = j_lo; j0 < j_hi; j0 += NB) {
                        const int32_t N = (int32_t)(j_hi - j0 < NB ? j_hi - j0 : NB);
                        uint32_t bad = 0;
                        for (int32_t n = 0; n < N; n++) {
                            const size_t tok = (size_t)(qo + j0 + n);
                            bf16_row_to_f32(w.kf + (size_t)n * D,
                                            fx->k_extend + (tok * Hkv + g) * D, D);
                            bad |= bf16_row_to_f32_nonfinite(
                                w.vf + (size_t)n * Dv, fx->v_extend + (tok * Hkv + g) * Dv, Dv);
                        }
                        vis.kpos0 = (int64_t)P + j0;
                        ref_block(&w, M, N, w.vf, Dv, c->sm_scale, 1.0f, &vis, bad);
                    }
                }

                for (int32_t r = 0; r < M; r++) {
                    const int64_t tok = qo + i0 + r / hg;
                    const int32_t h = g * hg + r % hg;
                    float *orow = o + ((size_t)tok * H + h) * Dv;
                    const float *acc = w.acc + (size_t)r * Dv;
                    const float m = w.m[r];
                    /* No visible key: SPEC section 2 fixes o = 0, lse = -inf
                     * (with or without a sink), and nothing is divided. (A
                     * row whose scores were all NaN also keeps m = -inf, but
                     * its l is NaN, and NaN is what it outputs.) */
                    if (w.pinv)
                        w.pinv[r] = 0.0f;
                    if (m == -INFINITY && w.l[r] == 0.0f) {
                        memset(orow, 0, (size_t)Dv * sizeof *orow);
                        if (lse)
                            lse[(size_t)tok * H + h] = -INFINITY;
                        continue;
                    }
                    float scale = 1.0f, denom = w.l[r], mm = m;
                    if (fx->sinks) {
                        /* The sink joins the denominator only; shift by the
                         * larger of m and the sink so neither exp overflows. */
                        const float sk = fx->sinks[h];
                        mm = (sk > m || sk != sk) ? sk : m;
                        scale = expf(m - mm);
                        denom = w.l[r] * scale + expf(sk - mm);
                    }
                    /* denom >= 1 without a sink (the max key contributes
                     * exp(0)), and >= 1 with one (the larger of the two does). */
                    for (int32_t d = 0; d < Dv; d++)
                        orow[d] = acc[d] * scale / denom;
                    if (lse)
                        lse[(size_t)tok * H + h] = mm + logf(denom);
                    if (w.pinv)
                        w.pinv[r] = scale / denom;
                }
                if (opts->pstats) {
                    /* Second pass over the same blocks with the final o and
                     * weights (ref_pstats_block). */
                    for (int32_t r = 0; r < M; r++) {
                        const int64_t tok = qo + i0 + r / hg;
                        const int32_t h = g * hg + r % hg;
                        const float *orow = o + ((size_t)tok * H + h) * Dv;
                        /* Both slopes' statistics: the row's own
                         * (unweighted) and its groups' column-weighted
                         * ones (judge.c (B0)): accg holds g o. */
                        memcpy(w.acc + (size_t)r * Dv, orow, (size_t)Dv * sizeof(float));
                        float *grow = w.accg + (size_t)r * Dv;
                        double n2 = 0, n2g = 0;
                        for (int32_t d = 0; d < Dv; d++) {
                            grow[d] = w.gw[d] * orow[d];
                            n2 += (double)orow[d] * orow[d];
                            n2g += (double)orow[d] * grow[d];
                        }
                        w.on2[r] = n2;
                        w.on2g[r] = n2g;
                        for (int j = 0; j < MLA_REF_PSTATS; j++)
                            w.ps[(size_t)r * MLA_REF_PSTATS + j] = 0;
                    }
                    memset(w.aacc, 0, (size_t)M * Dv * sizeof(float));
                    memset(w.hstar, 0, (size_t)M);
                    if (opts->use_prefix && P > 0) {
                        int64_t t_lo = window > 0 ? (int64_t)P + i0 - window : 0;
                        if (t_lo < 0)
                            t_lo = 0;
                        vis.causal = 0;
                        for (int64_t t0 = t_lo; t0 < P; t0 += NB) {
                            const int32_t N = (int32_t)(P - t0 < NB ? P - t0 : NB);
                            if (fx->kv_dtype == MLA_KV_BF16)
                                gather_prefix(w.kf, fx->kv_buffer, slots + t0, N, D, Dv, Hkv, g);
                            else
                                gather_prefix_fp8(w.kf, fx->kv_fp8, fx->kv_dtype, slots + t0, N, D,
                                                  Dv, Hkv, g);
                            vis.kpos0 = t0;
                            ref_pstats_block(&w, M, N, w.kf, D, prefix_alpha, c->v_scale, &vis);
                        }
                    }
                    if (opts->use_drafts) {
                        int64_t j_lo = window > 0 ? (int64_t)i0 - window : 0;
                        if (j_lo < 0)
                            j_lo = 0;
                        const int64_t j_hi = c->is_causal ? i1 : L;
                        vis.causal = c->is_causal != 0;
                        for (int64_t j0 = j_lo; j0 < j_hi; j0 += NB) {
                            const int32_t N = (int32_t)(j_hi - j0 < NB ? j_hi - j0 : NB);
                            for (int32_t n = 0; n < N; n++) {
                                const size_t tok = (size_t)(qo + j0 + n);
                                bf16_row_to_f32(w.kf + (size_t)n * D,
                                                fx->k_extend + (tok * Hkv + g) * D, D);
                                bf16_row_to_f32(w.vf + (size_t)n * Dv,
                                                fx->v_extend + (tok * Hkv + g) * Dv, Dv);
                            }
                            vis.kpos0 = (int64_t)P + j0;
                            ref_pstats_block(&w, M, N, w.vf, Dv, c->sm_scale, 1.0f, &vis);
                        }
                    }
                    for (int32_t r = 0; r < M; r++) {
                        const int64_t tok = qo + i0 + r / hg;
                        const int32_t h = g * hg + r % hg;
                        /* sum_c A_c^2 o_c^2 and sum_c A_c^2 (g_c o_c)^2
                         * over the columns where both are finite (the
                         * elements the judge compares). */
                        const float *orow = w.acc + (size_t)r * Dv, *grow = w.accg + (size_t)r * Dv;
                        const float *arow = w.aacc + (size_t)r * Dv;
                        const float *vs = w.vstar + (size_t)r * Dv;
                        const double pstar = w.pinv[r];
                        const int snap = w.hstar[r] && pstar > 0;
                        double am = 0, amg = 0, sn = 0, sng = 0;
                        for (int32_t d = 0; d < Dv; d++) {
                            const double ad = arow[d], od = orow[d], gd = grow[d];
                            if (isfinite(ad) && isfinite(od)) {
                                am += ad * ad * od * od;
                                if (isfinite(gd))
                                    amg += ad * ad * gd * gd;
                            }
                        }
                        if (snap)
                            snap_bound(orow, grow, vs, pstar, Dv, &sn, &sng);
                        w.ps[(size_t)r * MLA_REF_PSTATS + 5] = am;
                        w.ps[(size_t)r * MLA_REF_PSTATS + 10] = amg;
                        w.ps[(size_t)r * MLA_REF_PSTATS + 11] = sn;
                        w.ps[(size_t)r * MLA_REF_PSTATS + 12] = sng;
                        memcpy(opts->pstats + ((size_t)tok * H + h) * MLA_REF_PSTATS,
                               w.ps + (size_t)r * MLA_REF_PSTATS, MLA_REF_PSTATS * sizeof(double));
                    }
                }
            }
        }
    }
    st = MLA_OK;
done:
    free(w.qf);
    free(w.kf);
    free(w.vf);
    free(w.s);
    free(w.acc);
    free(w.m);
    free(w.l);
    free(w.vis_lo);
    free(w.vis_hi);
    free(w.cw);
    free(w.cwg);
    free(w.accg);
    free(w.on2g);
    free(w.pinv);
    free(w.ps);
    free(w.on2);
    free(w.va);
    free(w.aacc);
    free(w.vstar);
    free(w.hstar);
    free(w.gw);
    return st;
}

mla_status mla_reference_run(const mla_fixture *fx, float *o, float *lse, mla_error *err)
{
    const mla_ref_opts opts = mla_ref_opts_default();
    return mla_reference_run_opts(fx, &opts, o, lse, err);
}

mla_status mla_reference_run_pstats(const mla_fixture *fx, float *o, float *lse, double *pstats,
                                    mla_error *err)
{
    mla_ref_opts opts = mla_ref_opts_default();
    opts.pstats = pstats;
    return mla_reference_run_opts(fx, &opts, o, lse, err);
}

void mla_round_bf16(const float *src, mla_bf16 *dst, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = mla_f32_to_bf16(src[i]);
}
