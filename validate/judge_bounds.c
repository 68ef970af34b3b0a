/* The judge's element, cosine and lse passes (SPEC section 7), and the
 * per-sequence scales they rest on; the derivations are in
 * judge_internal.h. */
#include "judge_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Extra bf16 roundings of M-bounded quantities on each path. */
int jg_path_bf16_terms(mla_path p)
{
    switch (p) {
    case MLA_PATH_BF16_PARTIALS: return 1;
    case MLA_PATH_BF16_P: return 1;
    case MLA_PATH_BF16_P_PARTIALS: return 2;
    default: return 0;
    }
}

/* 0 finite, 1 NaN, 2 +Inf, 3 -Inf. */
static int nonfinite_class(double x)
{
    if (isnan(x))
        return 1;
    if (isinf(x))
        return x > 0 ? 2 : 3;
    return 0;
}

/* bf16 ulp at the magnitude of x (the spacing of bf16 numbers there). */
static double bf16_ulp(double x)
{
    x = fabs(x);
    if (x < 1.1754943508222875e-38)
        return ldexp(1.0, -133); /* subnormal spacing */
    int e;
    frexp(x, &e); /* x = f * 2^e, f in [0.5, 1) */
    return ldexp(1.0, e - 8);
}

static int ulp_bucket(double err, double ulp)
{
    if (err == 0)
        return 0;
    double r = err / ulp;
    if (r <= 0.5) return 1;
    if (r <= 1) return 2;
    if (r <= 2) return 3;
    if (r <= 4) return 4;
    if (r <= 8) return 5;
    if (r <= 16) return 6;
    return 7;
}

static double rownorm(const mla_bf16 *x, int n)
{
    double s = 0;
    for (int i = 0; i < n; ++i) {
        double v = mla_bf16_to_f32(x[i]);
        s += v * v;
    }
    return sqrt(s);
}

/* M_{b,c} and the largest key norm over everything sequence b can see
 * (KV head hk), both over finite entries only (judge_internal.h). */
void jg_seq_scales(jg_state *s, int b, int hk)
{
    const mla_fixture *fx = s->fx;
    const mla_config *c = &fx->cfg;
    const int HK = c->num_kv_heads, D = c->head_dim, DV = c->v_head_dim;
    const int P = mla_fixture_prefix(fx, b), L = mla_fixture_drafts(fx, b);
    const int64_t q0 = fx->qo_indptr[b], k0 = fx->kv_indptr[b];
    double *Mh = s->M + (size_t)hk * DV;
    for (int ch = 0; ch < DV; ++ch)
        Mh[ch] = 0;
    double kmax = 0;
    for (int t = 0; t < P; ++t) {
        const mla_bf16 *row = s->kvpool + ((size_t)fx->kv_indices[k0 + t] * HK + hk) * D;
        for (int ch = 0; ch < DV; ++ch) {
            const double v = fabs((double)c->v_scale * mla_bf16_to_f32(row[ch]));
            if (isfinite(v) && v > Mh[ch])
                Mh[ch] = v;
        }
        const double kn = fabs((double)c->k_scale) * rownorm(row, D);
        if (isfinite(kn) && kn > kmax)
            kmax = kn;
    }
    for (int j = 0; j < L; ++j) {
        const mla_bf16 *vr = fx->v_extend + ((size_t)(q0 + j) * HK + hk) * DV;
        for (int ch = 0; ch < DV; ++ch) {
            const double v = fabs(mla_bf16_to_f32(vr[ch]));
            if (isfinite(v) && v > Mh[ch])
                Mh[ch] = v;
        }
        const double kn = rownorm(fx->k_extend + ((size_t)(q0 + j) * HK + hk) * D, D);
        if (isfinite(kn) && kn > kmax)
            kmax = kn;
    }
    s->kmax[hk] = kmax;
}

/* A_r, N_r and gamma_r (1) of a row. A row whose q has an inf or NaN has
 * non-finite scores only (its elements are not compared): its gamma is not
 * a bound of anything and stays out of gamma_max. */
void jg_row_setup(jg_state *s, jg_row *r)
{
    const mla_fixture *fx = s->fx;
    const mla_config *c = &fx->cfg;
    const int H = c->num_heads, D = c->head_dim;
    const double qn = rownorm(fx->q + ((size_t)r->t * H + r->h) * D, D);
    r->A = fabs((double)c->sm_scale) * qn * s->kmax[r->hk];
    r->N = (double)mla_fixture_prefix(fx, r->b) + mla_fixture_drafts(fx, r->b);
    r->gamma = (2.0 * sqrt((double)D) * r->A + sqrt(r->N)) * U_32; /* (1) */
    if (isfinite(r->gamma) && r->gamma > s->gamma_max)
        s->gamma_max = r->gamma;
}

/* The element pass of one row: the unwritten and non-finite checks, the
 * element bound, the cosine sums, the row's bias sums (plain in racc,
 * column-weighted in rw) and its row cos_diff and relative error. */
void jg_row_elements(jg_state *s, const jg_row *r, bias_acc *racc, bias_acc *rw)
{
    const mla_judge_input *in = s->in;
    const mla_config *c = &s->fx->cfg;
    const int H = c->num_heads, DV = c->v_head_dim;
    const int64_t t = r->t;
    const int h = r->h;
    mla_metrics *m = s->m;
    const double *Mh = s->M + (size_t)r->hk * DV;
    const size_t rbase = ((size_t)t * H + h) * DV;
    const double gamma = isfinite(r->gamma) ? r->gamma : 0;
    /* (E2): the output's rounding and each of the path's k roundings may
     * each add eta; the fp32 reference's PV sum adds up to sqrt(N) of
     * its own, as in (1). */
    const double floor_abs =
        s->ref_path ? (1.0 + sqrt(r->N)) * s->eta : (1.0 + s->kterms) * s->eta;
    double rab = 0, ra2b2 = 0, rd2 = 0, rr2 = 0;
    double row_al2 = 0; /* largest allowed^2 of the row's elements */
    int64_t ncmp = 0;
    racc->gamma = gamma;
    for (int ch = 0; ch < DV; ++ch) {
        const size_t e = rbase + ch;
        const double rv = s->ref_path && in->oracle_o ? in->oracle_o[e] : in->ref_o[e];
        const double v = s->o[e];
        m->n_elems++;
        if (s->unwritten && s->unwritten[e]) {
            if (m->n_unwritten++ == 0 && !s->first_reason[0])
                snprintf(s->first_reason, sizeof s->first_reason,
                         "element (token %lld, head %d, col %d) never written", (long long)t, h,
                         ch);
            if (m->first_bad < 0)
                m->first_bad = (int64_t)e;
            continue;
        }
        if (!isfinite(v) && isfinite(rv)) {
            if (m->n_nan++ == 0 && !s->first_reason[0])
                snprintf(s->first_reason, sizeof s->first_reason,
                         "non-finite output %g at (token %lld, head %d, col %d)", v,
                         (long long)t, h, ch);
            if (m->first_bad < 0)
                m->first_bad = (int64_t)e;
            continue;
        }
        /* Non-finite policy: where the reference is NaN or +-Inf the output
         * must be of the same class; such elements take no part in the
         * finite statistics (err, cos, rows, bias), which run over the
         * compared (finite) elements only. */
        if (!isfinite(rv)) {
            m->n_ref_nonfinite++;
            if (nonfinite_class(v) != nonfinite_class(rv)) {
                if (m->n_nan++ == 0 && !s->first_reason[0])
                    snprintf(s->first_reason, sizeof s->first_reason,
                             "output %g where the reference is %g at (token %lld, head %d, col "
                             "%d)",
                             v, rv, (long long)t, h, ch);
                if (m->first_bad < 0)
                    m->first_bad = (int64_t)e;
            }
            continue;
        }
        m->n_compared++;
        ncmp++;
        const double err = fabs(v - rv);
        /* Elementwise abs-or-rel rule. The absolute part is the a-priori
         * bound: SAFETY x (bf16 roundings of M-bounded partials or P + fp32
         * terms (1) + the subnormal floor (E2)). */
        const double abs_bound = SAFETY * ((s->kterms * U_B + gamma) * Mh[ch] + floor_abs);
        const double allowed = fmax(abs_bound, s->rel_tol * fabs(rv));
        if (allowed * allowed > row_al2)
            row_al2 = allowed * allowed;
        const double ratio = allowed > 0 ? err / allowed : (err > 0 ? INFINITY : 0);
        if (ratio > m->worst_ratio)
            m->worst_ratio = ratio;
        if (err > allowed) {
            if (m->n_over++ == 0 && !s->first_reason[0])
                snprintf(s->first_reason, sizeof s->first_reason,
                         "|err| %.3g > allowed %.3g at (token %lld, head %d, col %d): got "
                         "%.6g, reference %.6g",
                         err, allowed, (long long)t, h, ch, v, rv);
            if (m->first_bad < 0)
                m->first_bad = (int64_t)e;
        }
        if (err > m->max_abs)
            m->max_abs = err;
        const double ulp = bf16_ulp(rv);
        if (err <= ulp)
            s->n_within++;
        m->ulp_hist[ulp_bucket(err, ulp)]++;
        rab += v * rv;
        ra2b2 += v * v + rv * rv;
        s->sum_d2 += (v - rv) * (v - rv);
        s->sum_r2 += rv * rv;
        rd2 += (v - rv) * (v - rv);
        rr2 += rv * rv;
        const double d = v - rv;
        const double rnd = rv * ((double)mla_bf16_to_f32(mla_f32_to_bf16((float)rv)) - rv);
        const double gw = Mh[ch] > 0 ? 1.0 / (Mh[ch] * Mh[ch]) : 0.0;
        /* (B9): half an ulp of the output format at r, u 2^(e-1) for
         * r = f 2^e, f in [0.5, 1); eta below the normal range. */
        int ex;
        frexp(rv, &ex);
        const double hc = fmax(ldexp(s->bm.u, ex - 1), s->eta);
        jg_bias_add_elem(racc, 1.0, rv, d, rnd, Mh[ch], floor_abs, hc);
        jg_bias_add_elem(rw, gw, rv, d, rnd, Mh[ch], floor_abs, hc);
        if (s->bm.oracle == 1) { /* noise report: s against the oracle */
            const double x = in->oracle_o[e];
            if (isfinite(x)) {
                racc->oa += x * (v - x);
                racc->ob += x * x;
                rw->oa += gw * x * (v - x);
                rw->ob += gw * x * x;
            }
        }
    }
    s->sum_ab += rab;
    s->sum_a2b2 += ra2b2;
    s->sum_floor2 += (double)ncmp * floor_abs * floor_abs;
    /* Per-row cos_diff and relative L2 error. */
    const double rcos = ra2b2 > 0 ? 1.0 - 2.0 * rab / ra2b2 : 0.0;
    if (rcos > s->worst_row_cos)
        s->worst_row_cos = rcos;
    const size_t ri = (size_t)t * H + h;
    s->row_cos[ri] = rcos;
    /* Row-limit floor: cos_diff = sum (a-b)^2 / sum (a^2+b^2) exactly, so
     * one element sitting at its element bound adds allowed^2 / sum
     * (a^2+b^2). A lone element at its bound (a cancelling output) is
     * legitimate and must not fail its row; with D_v = 512 this floor is
     * far below the row limit, with D_v = 1 it makes the row check the
     * element check, which is all one element can say. The subnormal floor
     * (E2) of every compared element adds n floor^2 / sum (a^2+b^2) to the
     * row limit (jg_finish_cos): nothing for a normal row. */
    s->row_floor[ri] = ra2b2 > 0 ? row_al2 / ra2b2 : 0.0;
    s->row_sub[ri] = ra2b2 > 0 ? (double)ncmp * floor_abs * floor_abs / ra2b2 : 0.0;
    const double rrel = rr2 > 0 ? sqrt(rd2 / rr2) : sqrt(rd2);
    if (rrel > m->worst_row_rel)
        m->worst_row_rel = rrel;
}

/* lse: scores perturbed by sqrt(D) A u_32 each, the sum by sqrt(N) u_32,
 * the final log by |lse| u_32. Judged wherever the backend gives it,
 * whatever the output's elements showed. */
void jg_row_lse(jg_state *s, const jg_row *r)
{
    if (!s->lse)
        return;
    const mla_judge_input *in = s->in;
    const int H = s->fx->cfg.num_heads, D = s->fx->cfg.head_dim;
    mla_metrics *m = s->m;
    const size_t li = (size_t)r->t * H + r->h;
    const double lr = s->ref_path && in->oracle_lse ? in->oracle_lse[li] : in->ref_lse[li];
    const double lv = s->lse[li];
    double dl;
    if (!isfinite(lr) || !isfinite(lv)) /* same class, or a failure */
        dl = nonfinite_class(lr) == nonfinite_class(lv) ? 0 : INFINITY;
    else
        dl = fabs(lv - lr);
    s->n_lse++;
    s->n_lse_finite += isfinite(lr) && isfinite(lv);
    const double lallowed = SAFETY * (sqrt((double)D) * r->A + sqrt(r->N) + fabs(lr)) * U_32;
    if (dl > m->lse_max_abs)
        m->lse_max_abs = dl;
    /* A row with a non-finite q has a non-finite lse on both sides (or a
     * class failure, dl inf): its allowance, inf, never turns a match into
     * a failure. */
    const double lratio = dl == 0 ? 0 : !isfinite(dl) ? INFINITY
                                    : lallowed > 0    ? dl / lallowed
                                                      : INFINITY;
    if (lratio > m->lse_ratio)
        m->lse_ratio = lratio;
}

/* Tensor cos_diff, its limits, and the rows over theirs. */
void jg_finish_cos(jg_state *s)
{
    mla_metrics *m = s->m;
    const int H = s->fx->cfg.num_heads;
    m->nmse = s->sum_r2 > 0 ? s->sum_d2 / s->sum_r2 : s->sum_d2;
    m->cos_diff = s->sum_a2b2 > 0 ? 1.0 - 2.0 * s->sum_ab / s->sum_a2b2 : 0.0;
    m->worst_row_cos = s->worst_row_cos;
    m->within_1ulp = m->n_compared ? (double)s->n_within / (double)m->n_compared : 0.0;
    /* The reference's own cos limit follows from (1): a relative error of
     * gamma gives cos_diff ~ gamma^2 / 2; SAFETY^2 for margin. */
    const double base =
        s->ref_path ? fmax(SAFETY * SAFETY * s->gamma_max * s->gamma_max / 2.0, 1e-14)
                    : (s->kterms ? COS_LIMIT_BF16 : COS_LIMIT_FP32);
    m->cos_limit = base + (s->sum_a2b2 > 0 ? s->sum_floor2 / s->sum_a2b2 : 0.0); /* (E2) */
    m->row_cos_limit = ROW_COS_FACTOR * base;
    for (int64_t t = 0; t < s->fx->num_q_tokens; ++t)
        for (int h = 0; h < H; ++h) {
            const size_t ri = (size_t)t * H + h;
            const double lim = fmax(m->row_cos_limit + s->row_sub[ri], s->row_floor[ri]);
            if (s->row_cos[ri] > lim && m->n_rows_over++ == 0 && !s->first_reason[0])
                snprintf(s->first_reason, sizeof s->first_reason,
                         "row (token %lld, head %d) cos_diff %.3g > row limit %.3g",
                         (long long)t, h, s->row_cos[ri], lim);
        }
}
