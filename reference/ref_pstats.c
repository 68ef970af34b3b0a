/* The fp32 reference's bias-statistics pass (mla_reference_run_pstats,
 * include/mla/reference.h): per row the sums validate/judge_bias.c's
 * thresholds (B0), (B2), (B3) and (B6) need, from a second pass over the
 * same key blocks with the final output and weights. */
#include <cblas.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ref_work.h"

/* The power of two that brings the largest finite |x_d| to [1, 2): exact
 * scaling (unless an entry falls below the normal range, then negligible
 * next to the largest), so sums over the scaled row stay finite. */
static double pow2_scale(double amax)
{
    return amax > 0 && isfinite(amax) ? ldexp(1.0, -ilogb(amax)) : 1.0;
}

/* Row r of the tile before the pass: o_row and g o_row, scaled by powers of
 * two for the GEMMs, their squared norms, and the sums zeroed. */
void mla_ref_pstats_begin(ref_work *w, int32_t r, const float *orow)
{
    const int32_t Dv = w->Dv;
    double n2 = 0, n2g = 0, om = 0, gm = 0;
    for (int32_t d = 0; d < Dv; d++) {
        const double od = orow[d], gd = w->gw[d] * od;
        n2 += od * od;
        n2g += od * gd;
        if (isfinite(od)) {
            om = fmax(om, fabs(od));
            gm = fmax(gm, fabs(gd));
        }
    }
    const double os = pow2_scale(om), gs = pow2_scale(gm);
    float *acc = w->acc + (size_t)r * Dv, *grow = w->accg + (size_t)r * Dv;
    for (int32_t d = 0; d < Dv; d++) {
        acc[d] = (float)(orow[d] * os);
        grow[d] = (float)(w->gw[d] * orow[d] * gs);
    }
    w->osc[r] = os;
    w->gsc[r] = gs;
    w->on2[r] = n2;
    w->on2g[r] = n2g;
    for (int j = 0; j < MLA_REF_PSTATS; j++)
        w->ps[(size_t)r * MLA_REF_PSTATS + j] = 0;
}

/* The bias test's column weights (validate/judge.c (B0)): M_{b,c} = the
 * largest finite |v_c| the sequence can see (prefix values times v_scale,
 * draft values), computed as the judge computes it, and g_c = 1 / M_{b,c}^2,
 * in double: at v_scale 1e25, M^2 is past FLT_MAX. A non-finite value is
 * left out of M: a row that sees it with a positive weight has a non-finite
 * o_c, which the judge does not compare, and one that gives it weight 0
 * gets 0 * inf = NaN there (docs/accuracy.md, non-finite policy). */
void mla_ref_bias_weights(const mla_fixture *fx, int32_t b, int32_t g, double *gw)
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
            const double v = fabs((double)c->v_scale * x);
            if (isfinite(v) && v > M)
                M = v;
        }
        for (int32_t j = 0; j < L; j++) {
            const double v = fabs(mla_bf16_to_f32(fx->v_extend[((size_t)(q0 + j) * Hkv + g) * Dv + d]));
            if (isfinite(v) && v > M)
                M = v;
        }
        gw[d] = M > 0 ? 1.0 / (M * M) : 0.0;
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
static void snap_bound(const float *orow, const double *gw, const float *vs, double pstar,
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
            const double od = orow[d], gd = gw[d] * od;
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
void mla_ref_pstats_block(ref_work *w, int32_t M, int32_t N, const float *v, int32_t ldv,
                             float score_alpha, float value_alpha, const ref_vis *vis)
{
    const int32_t NB = w->NB;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, w->D, score_alpha, w->qf, w->D,
                w->kf, w->D, 0.0f, w->s, NB);
    /* c_k on the power-of-two-scaled rows (mla_ref_pstats_begin), times
     * value_alpha and unscaled in double: v_scale^2 |v| |o| passes FLT_MAX
     * from v_scale ~1e19 on, and the statistics must not depend on the
     * scale (docs/accuracy.md, scale invariance). */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, w->Dv, 1.0f, w->acc, w->Dv, v, ldv,
                0.0f, w->cw, NB);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, w->Dv, 1.0f, w->accg, w->Dv, v,
                ldv, 0.0f, w->cwg, NB);
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
        const double cs = (double)value_alpha / w->osc[r], cgs = (double)value_alpha / w->gsc[r];
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
            const double p2 = p * p, c = cs * cw[n];
            s0 += p2;
            s1 += p2 * c;
            s2 += p2 * c * c;
            ta += p * fabs(c);
            tb += p * fabs(c - on2);
            const double cg = cgs * cwg[n];
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

/* Row r after the pass: sum_c A_c^2 o_c^2 and sum_c A_c^2 (g_c o_c)^2 over
 * the columns where both are finite (the elements the judge compares), and
 * (B6)'s snap bound; the row's MLA_REF_PSTATS sums into out. */
void mla_ref_pstats_finish(ref_work *w, int32_t r, const float *orow, double *out)
{
    const int32_t Dv = w->Dv;
    const float *arow = w->aacc + (size_t)r * Dv;
    const float *vs = w->vstar + (size_t)r * Dv;
    const double pstar = w->pinv[r];
    double am = 0, amg = 0, sn = 0, sng = 0;
    for (int32_t d = 0; d < Dv; d++) {
        const double ad = arow[d], od = orow[d], gd = w->gw[d] * od;
        if (isfinite(ad) && isfinite(od)) {
            am += ad * ad * od * od;
            amg += ad * ad * gd * gd;
        }
    }
    if (w->hstar[r] && pstar > 0)
        snap_bound(orow, w->gw, vs, pstar, Dv, &sn, &sng);
    double *ps = w->ps + (size_t)r * MLA_REF_PSTATS;
    ps[5] = am;
    ps[10] = amg;
    ps[11] = sn;
    ps[12] = sng;
    memcpy(out, ps, MLA_REF_PSTATS * sizeof(double));
}
