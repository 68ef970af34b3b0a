/* The fp32 reference's work buffers and the helpers that its forward pass
 * (reference.c) and its bias-statistics pass (ref_pstats.c) share. Private
 * to reference/. */
#ifndef MLA_REF_WORK_H
#define MLA_REF_WORK_H

#include <stdint.h>
#include <string.h>

#include "ref_internal.h"

#if defined(__GNUC__)
#define REF_INLINE static inline __attribute__((always_inline))
#else
#define REF_INLINE static inline
#endif

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
    float *accg; /* [M, Dv] g o_row, times gsc[r] */
    double *osc; /* [M] the power of two acc's row r (o_row) is scaled by for the GEMMs */
    double *gsc; /* [M] the same for accg's row r: the sums stay finite for any v_scale */
    double *on2g; /* [M] |o_row|_g^2 = sum_c g_c o_c^2 */
    float *pinv; /* [M] final weight of exp(s - m): scale / denom, 0 for an empty row */
    double *ps;  /* [M, MLA_REF_PSTATS]: the row's statistics (include/mla/reference.h) */
    double *on2; /* [M] |o_row|^2 */
    float *va;   /* [NB, Dv] |v_k| of the block (non-finite values as 0) */
    float *aacc; /* [M, Dv] A_c = sum_k P_k |v_k,c| over the visible keys */
    float *vstar; /* [M, Dv] v*: the value of the row's max key, times value_alpha (its
                     weight is pinv; non-finite entries as 0) */
    unsigned char *hstar; /* [M] 1 once vstar holds the row's max key */
    double *gw;  /* [Dv] the bias test's column weights g_c = 1 / M_{b,c}^2 of the
                    sequence and KV head (0 where M is 0 or not finite) */
} ref_work;

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

/* The statistics pass (ref_pstats.c, include/mla/reference.h's pstats). */
void mla_ref_bias_weights(const mla_fixture *fx, int32_t b, int32_t g, double *gw);
void mla_ref_pstats_begin(ref_work *w, int32_t r, const float *orow);
void mla_ref_pstats_block(ref_work *w, int32_t M, int32_t N, const float *v, int32_t ldv,
                          float score_alpha, float value_alpha, const ref_vis *vis);
void mla_ref_pstats_finish(ref_work *w, int32_t r, const float *orow, double *out);

#endif
