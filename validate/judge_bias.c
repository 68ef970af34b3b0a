/* The judge's bias test: slopes of the output on its baseline per group,
 * and their thresholds (B0)-(B9), over the accumulator of judge_internal.h.
 */
#include "judge_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- Bias test (issue 18) ----
 * A correct kernel's errors are rounding noise: zero-mean (round to nearest
 * even), independent from element to element. A wrong scale or lse merge
 * for one head block, a sink on the wrong head, an lse shifted for one
 * sequence, or rounding by truncation instead of to nearest even is a
 * systematic bias: every element of one head / sequence / row is off by the
 * same factor, a few tenths of a percent, which no element bound (two bf16
 * ulps) and no tensor-wide norm sees.
 *
 * For a group G of elements (each (token, head) row; each (sequence, head);
 * each (draft row i, head) across sequences; each sequence; each head across
 * all sequences) the least-squares slope of o on the baseline r is
 *     s_G = sum o r / sum r^2,  s_G - 1 = sum delta r / sum r^2,  delta = o - r,
 * over the group's elements where both are finite. With independent errors
 * of standard deviation sigma_e, s_G - 1 has standard deviation
 *     sigma_G = sqrt(sum sigma_e^2 r_e^2) / sum r_e^2.                      (B1)
 * The path's rounding model gives sigma_e. The output rounding and each of
 * the path's k extra bf16 roundings (partials, P; path_bf16_terms) is a
 * relative error uniform in [-u, u] on a quantity of the output's size, RMS
 * u / sqrt(3) each, so
 *     sigma_model = u sqrt((1 + k) / 3) sqrt(sum r^4) / sum r^2
 *                 = u sqrt((1 + k) / 3) / sqrt(N_eff),  N_eff = (sum r^2)^2 / sum r^4,
 * with u = u_b for bf16 outputs and u_32 for the fp32 reference. Where a
 * path's roundings are larger than that model says (partials that cancel,
 * |O_s| >> |O|), the residuals delta' = delta - (s - 1) r show it; the
 * noise is then measured from them (a pure scale bias leaves the residuals
 * unchanged, so a biased kernel cannot hide behind it): the
 * heteroscedasticity-robust estimate of (B1), sqrt(sum r^2 delta'^2) / sum r^2,
 * and, since a row's roundings of P and of its partials are shared by its
 * elements, the same estimate clustered by row,
 * sqrt(sum_rows (sum_row r delta')^2) / sum r^2. sigma_G is the largest of
 * the three.
 *
 * The threshold is
 *     tau_G = Z sigma_G + t_P,G + (kc u_b + SAFETY gamma_G) sqrt(sum W_c^2 r^2) / sum r^2  (B2)
 * Z = 6: a correct kernel's |s - 1| passes 6 standard deviations with
 * probability 2e-9 (normal tail). The last term is the cancellation term of
 * the element bound, not multiplied by Z: each of kc roundings may be of a
 * partial much larger than the output; it shrinks as 1/sqrt(rows) for
 * larger groups. kc counts the bf16 partials (1 on their paths) and, only
 * where the reference's P statistics are missing, the rounding of P as well
 * (the pre-(B3) bound; the run says so). W_c bounds the rounded quantities:
 *   A_c = sum_k P_k |v_{k,c}| (P_k the final softmax weights, sinks in the
 *   denominator; prefix values with v_scale, draft keys included), from the
 *   reference's statistics (mla_reference_run_pstats, pstats[5] =
 *   sum_c A_c^2 r_c^2 per row), for any split plan: split s enters the
 *   output as y_{s,c} = w_s O_{s,c} = sum_{k in s} P_k v_{k,c} (w_s its
 *   merge weight exp(lse_s - lse)), rounding the partial O_s to bf16 moves
 *   the output by at most u_b |y_{s,c}|, and sum_s |y_{s,c}| <= A_c. A
 *   bf16-rounded P moves it by sum_k dP_k v_{k,c}, |dP_k| <= u_b P_k: also
 *   at most u_b A_c. The fp32 term (1) rides on the same W_c: a score
 *   perturbed by delta moves the output by sum_k P_k delta_k (v_{k,c} - O_c),
 *   at most delta (A_c + |O_c|) <= 2 delta A_c, and the fp32 PV sum's error
 *   is about sqrt(N) u_32 times the sum of |P_k v_{k,c}|, A_c again (its
 *   score part is the coherent one: a perturbed score shifts a whole row's
 *   weights, a correlated error no averaging removes; gamma_G is the
 *   group's largest gamma_r).
 *   M_c (the largest visible |v_c|, >= A_c) where the statistics are not
 *   given, and on the reference's own path, whose statistics come from the
 *   backend under test (the oracle is its baseline).
 *
 * P rounded to bf16 before the PV product (t_P,G, paths that do it). The
 * kernel forms p_k = exp(s_k - m) with the running max m of its block or
 * split, sums l = sum p_k in fp32, and multiplies fl(p_k) by V; with P_k the
 * final weight, the rounding errors dP_k (|dP_k| <= u_b P_k, independent
 * across keys, zero-mean under round to nearest even) move row r's output by
 * e = sum_k dP_k v_k, so with c_k = v_k . r
 *     |r|^2 (s_row - 1) = r . e = sum_k dP_k c_k.
 * (A kernel summing l from the rounded p_k gives e = sum_k dP_k (v_k - O)
 * instead: c_k - |r|^2 in place of c_k; we take the larger of the two.) The
 * key attaining the row's max score has p = exp(0) = 1, exact in bf16 (it
 * is the max of its block and split when processed), and drops out. A
 * group's slope error is sum_rows r.e / sum_G r^2; rows round their P
 * independently, so with
 *     V_row = max(sum P_k^2 c_k^2, sum P_k^2 (c_k - |r|^2)^2),
 *     T_row = max(sum P_k |c_k|,   sum P_k |c_k - |r|^2|),
 * computed by the fp32 reference from its own weights
 * (mla_reference_run_pstats), an RNE error uniform on [-a_k, a_k],
 * a_k <= u_b P_k, has variance <= u_b^2 P_k^2 / 3, and
 *     sigma_P,G = (u_b / sqrt 3) sqrt(sum_rows V_row) / sum_G r^2,       (B3)
 *     |s_G - 1|_P <= u_b sum_rows T_row / sum_G r^2   (always).          (B4)
 * A sum of independent zero-mean uniform terms is sub-Gaussian with its
 * variance as proxy: P(|X| > Z_P sigma) <= 2 exp(-Z_P^2 / 2). A case judges
 * n groups (rows, (sequence, head), (draft row, head), sequences, heads);
 * for a family-wise false-alarm probability alpha_P = 1e-3 per case,
 *     Z_P = sqrt(2 ln(2 n / alpha_P))      (5.3 for the bias test's 544),
 * and t_P,G = min(Z_P sigma_P,G, (B4)). (Distribution-free, Hoeffding with
 * only |dP_k| <= u_b P_k, would drop the 1/sqrt 3.) Where (B3) is used, the
 * model term of (B1) does not count the P rounding again.
 * The output rounding is not always independent noise: a row dominated by
 * one key is r ~ (1 - eps) v_max with v_max bf16-exact, and for eps below
 * half an ulp every element rounds back towards v_max -- a coherent slope
 * error up to ~eps, the same in any correct kernel (fp32 math included).
 * The a-priori P term used to cover it by accident; (B3) does not. So
 * every bf16-output path adds the slope of the reference's own bf16
 * rounding,
 *     t_R,G = |sum_G r (bf16(r) - r)| / sum_G r^2,                        (B5)
 * computed from the baseline alone (a biased kernel cannot move it); it is
 * ~sigma_model on diffuse rows and ~eps on peaked ones.
 * The same snapping in a bf16 *partial*: the split holding the row's max
 * key k* (weight P*, value v*) has O = (1 - eps) v* + (its other keys),
 * eps their share, which depends on the kernel's split plan (a split may
 * hold k* and a few light neighbours: eps ~ 0). Its rounding moves the
 * output coherently by P* (1 + |eps|) e(eps), e_c the rounding error of
 * (1 - eps) v*_c; the reference's statistics pass takes the worst |sum_c
 * r_c e_c| over |eps| <= 8 u_b for the row's actual values (pstats 11, 12;
 * past a few ulps the columns' mantissas dither it away: 0.5 u_b at eps =
 * u_b / 2, under 0.08 u_b past 4 u_b on N(0,1) values), and each bf16
 * partial adds, rows summed in absolute value,
 *     t_S,G = sum_rows max_eps |...| / sum_G r^2.                         (B6)
 * On diffuse rows P* is small and so is t_S; on a needle row it is ~P* u_b.
 * The column-weighted slope (B0). A row's sum r^2 rests on its largest
 * channels (the outlier channels: N_eff of the slope ~16 of 4096 elements on
 * K3), so the plain slope of a head or sequence averages few elements and
 * its output-rounding noise alone hides a 0.3% bias on long prefixes. The
 * groups larger than a row (sequence-head, draft-head, head, sequence) use
 *     s_G - 1 = sum g_c r delta / sum g_c r^2,  g_c = 1 / M_{b,c}^2,
 * M_{b,c} the largest |v_c| the sequence sees: a column's rounding errors
 * scale with its values, so each column counts about equally. Every term
 * (B1)-(B6) is the same derivation with r_c -> g_c r_c in the sums
 * (sum r^4 -> sum g^2 r^4, c_k -> v_k . (g r), ...), the reference's
 * statistics giving the weighted ones (pstats 6-10, 12).
 * A row is judged on both slopes, each against its own threshold, and
 * fails if either is past it (B7). Its plain slope rests on its largest
 * channels: on K3 data with outlier channels a row's N_eff = (sum r^2)^2 /
 * sum r^4 is ~4 of 512 elements, so Z times the model term alone is ~1% of
 * the slope and a 1% row scale passed (k3-splits, prefix 129, draft row 0,
 * head 3: tau 1.41e-2 on the model's path, 1.59e-2 on the GPU's). The
 * weighted slope of the same row counts each column about equally (N_eff in
 * the hundreds), and a scale of the whole row moves it exactly as much as
 * the plain one: tau 3.9e-3 / 5.2e-3 there. The plain slope is kept for a
 * bug confined to the large channels. Two tests of 6 sigma each at most
 * double a false alarm's probability (2e-9 per row).
 * A row's output rounding is bounded hard (B9), not as noise: within one
 * row it can be coherent (a row whose output is (1 - eps) times a bf16-exact
 * partial that dominates it rounds back onto it in every column, for any
 * split plan: the model on k3-scales, seeds 1-3, reached 0.60-0.84 of its
 * weighted row threshold that way, every large element one ulp up), and
 * |bf16(x) - x| <= h(x), half an ulp of the output format at x (eta below
 * the normal range), so its share of the slope is at most
 *     t_H = sum g |r| h(r) / sum g r^2   (<= u),
 * which also bounds (B5) on a row. The model term of a row then counts only
 * the path's other roundings (km, not 1 + km): what the kernel adds before
 * its final rounding. Larger groups keep (B1)/(B5): rows round
 * independently, and t_H would not shrink with the group.
 * Subnormal outputs (B8): round to nearest even has |fl(x) - x| <=
 * max(u |x|, eta), eta half the spacing of the format's subnormals (2^-134
 * bf16, 2^-150 fp32), so each rounding's variance is at most (u^2 r^2 +
 * eta^2) / 3 and the model term is
 *     u^2 sum g^2 r^4 + eta^2 sum g^2 r^2    in place of u^2 sum g^2 r^4,
 * the same for any normal output (eta^2 r^2 << u^2 r^4 there).
 * Nothing here is fitted to the shipped cases; docs/accuracy.md has the same
 * derivation. */

static void bias_add_row(bias_acc *g, const bias_acc *row)
{
    g->b += row->b;
    g->a += row->a;
    g->w2 += row->w2;
    g->w3 += row->w3;
    g->r4 += row->r4;
    g->e2 += row->e2;
    g->cm += row->cm;
    g->ca2 += row->a * row->a;
    g->cab += row->a * row->b;
    g->cb2 += row->b * row->b;
    g->n += row->n;
    g->pv += row->pv;
    g->pt += row->pt;
    g->ro += row->ro;
    g->hr += row->hr;
    g->sn += row->sn;
    g->pmiss += row->pmiss;
    g->oa += row->oa;
    g->ob += row->ob;
    if (row->gamma > g->gamma)
        g->gamma = row->gamma;
}

/* One element into a row's sums, with column weight g (1 for the row's
 * plain slope, g_c = 1 / M_c^2 for the column-weighted one of (B0)): every
 * sum of (B1)-(B8) carries g once per r, as the derivation does. rnd is
 * r (bf16(r) - r) of (B5), Mc the column's M_c of (B2), eta the element's
 * subnormal floor (B8), h its output rounding's largest error (B9). */
void jg_bias_add_elem(bias_acc *a, double g, double r, double d, double rnd, double Mc,
                      double eta, double h)
{
    const double r2 = r * r, g2 = g * g;
    a->b += g * r2;
    a->a += g * r * d;
    a->w2 += g2 * r2 * d * d;
    a->w3 += g2 * r2 * r * d;
    a->r4 += g2 * r2 * r2;
    a->e2 += g2 * r2 * eta * eta;
    a->ro += g * rnd;
    a->hr += g * fabs(r) * h;
    if (isfinite(Mc))
        a->cm += g2 * Mc * Mc * r2;
    a->n++;
}

/* V_row of (B3) from the reference's sums s0 = sum P^2, s1 = sum P^2 c,
 * s2 = sum P^2 c^2 and b = |r|^2 (weighted: c^g and |r|_g^2): the larger of
 * the two normalizer conventions, sum P^2 c^2 and sum P^2 (c - |r|^2)^2. */
static double bias_pvar(double s0, double s1, double s2, double b)
{
    return fmax(s2, s2 - 2.0 * b * s1 + b * b * s0);
}

/* Slope and threshold (B2) of a group; 0 when the group has nothing to
 * judge (no finite element with r != 0). */
static int bias_eval(const bias_acc *g, const bias_model *bm, int row, double *slope,
                     double *tau)
{
    const double u = bm->u;
    const int k = bm->k;
    if (!(g->b > 0) || g->n == 0)
        return 0;
    const double d = g->a / g->b; /* s - 1 */
    const int stat = bm->kp && g->pmiss == 0;
    /* Where (B3) accounts for the rounding of P, (B1)'s model term does not
     * count it a second time. */
    const int km = stat ? k - bm->kp : k;
    /* (B1) with (B8)'s subnormal floor; a row's output rounding is bounded
     * apart, hard (B9), so its model counts only the km other roundings. */
    const double nr = row ? km : 1.0 + km;
    const double model = sqrt(nr / 3.0 * (u * u * g->r4 + g->e2)) / g->b;
    const double white = sqrt(fmax(0.0, g->w2 - 2.0 * d * g->w3 + d * d * g->r4)) / g->b;
    const double clus = sqrt(fmax(0.0, g->ca2 - 2.0 * d * g->cab + d * d * g->cb2)) / g->b;
    const double sigma = fmax(model, fmax(white, clus));
    *slope = 1.0 + d;
    /* (B3)/(B4) where every row of the group has its statistics; otherwise
     * the a-priori term (B2) for all kc roundings. */
    double tp = 0;
    if (stat) {
        const double sd = U_B / sqrt(3.0) * sqrt(fmax(0.0, g->pv)) / g->b; /* (B3) */
        const double hard = U_B * g->pt / g->b;                             /* (B4) */
        tp = fmin(bm->zp * sd, hard);
    }
    /* (B5) on every bf16-output path: the output rounding snaps peaked rows
     * whatever the path computed before it (u is u_b exactly there). */
    if (row)
        tp += g->hr / g->b; /* (B9), which bounds (B5) too */
    else if (bm->u == U_B)
        tp += fabs(g->ro) / g->b;
    const int kc = stat ? bm->kc - bm->kp : bm->kc;
    /* (B6): each bf16 partial may snap coherently; kc - kp of them. */
    const double tsnap = (bm->kc - bm->kp) * g->sn / g->b;
    *tau = BIAS_Z * sigma + tp + tsnap + (kc * U_B + SAFETY * g->gamma) * sqrt(g->cm) / g->b;
    return 1;
}

/* Judges one group of `level` (mla_bias_level): records the worst ratio,
 * the first failure and the level's noise figures. */
static void bias_judge(const bias_acc *g, const bias_model *bm, int level, const char *name,
                       mla_metrics *m, char *first, size_t first_n)
{
    double slope, tau;
    if (!bias_eval(g, bm, level == MLA_BIAS_ROW, &slope, &tau))
        return;
    m->n_bias_groups++;
    {
        const double dev = fabs(slope - 1.0);
        const double r = tau > 0 ? dev / tau : (dev > 0 ? INFINITY : 0);
        double dev_o = -1;
        if (bm->oracle == 2)
            dev_o = dev;
        else if (bm->oracle == 1 && g->ob > 0)
            dev_o = fabs(g->oa / g->ob);
        mla_bias_level_stats *lv = &m->bias_level[level];
        if (lv->n++ == 0 || dev > lv->dev) {
            lv->dev = dev;
            lv->tau = tau;
            snprintf(lv->group, sizeof lv->group, "%s", name);
        }
        if (r > lv->ratio)
            lv->ratio = r;
        if (dev_o > lv->dev_oracle)
            lv->dev_oracle = dev_o;
    }
    if (bm->kp && g->pmiss)
        m->n_bias_apriori_p++;
    const double ratio = tau > 0 ? fabs(slope - 1.0) / tau : (slope != 1.0 ? INFINITY : 0);
    if (ratio > m->bias_ratio || m->bias_group[0] == '\0') {
        m->bias_ratio = ratio;
        m->bias_slope = slope;
        m->bias_threshold = tau;
        snprintf(m->bias_group, sizeof m->bias_group, "%s", name);
    }
    if (ratio > 1.0 && m->n_bias_over++ == 0)
        snprintf(first, first_n, "biased %s: slope %.6f, |s-1| %.3g > threshold %.3g", name,
                 slope, fabs(slope - 1.0), tau);
}

/* The path's model and the groups (B0), before the first row. */
void jg_bias_init(jg_state *s, size_t nrows, size_t nbs, size_t nbh)
{
    const mla_fixture *fx = s->fx;
    s->Lmax = 0;
    for (int b = 0; b < fx->cfg.num_seqs; ++b)
        if (mla_fixture_drafts(fx, b) > s->Lmax)
            s->Lmax = mla_fixture_drafts(fx, b);
    s->g_sh = calloc(nbs * nbh + 1, sizeof *s->g_sh);
    s->g_dh = calloc((size_t)s->Lmax * nbh + 1, sizeof *s->g_dh);
    s->g_s = calloc(nbs + 1, sizeof *s->g_s);
    s->g_h = calloc(nbh + 1, sizeof *s->g_h);
    /* The bf16 partials keep the cancellation term (B2), with A_c where the
     * reference's statistics are given: their per-element roundings are in
     * principle measured by the residuals, but a row whose sum r^2 rests on
     * a few channels gives that estimate few degrees of freedom (tried: a
     * correct model reached 0.996 of its threshold on k3-scales with no
     * partials' term). The rounding of P gets (B3)/(B4) from the reference's
     * statistics where they are given, else the same a-priori term. */
    s->p_bf16 = s->path == MLA_PATH_BF16_P || s->path == MLA_PATH_BF16_P_PARTIALS;
    /* rows are judged on two slopes (B7) */
    const double n_groups = 2.0 * (double)nrows + (double)(nbs * nbh) +
                            (double)s->Lmax * (double)nbh + (double)nbs + (double)nbh;
    const bias_model bm = {s->ref_path ? U_32 : U_B, s->kterms, s->kterms, s->p_bf16,
                           sqrt(2.0 * log(2.0 * fmax(n_groups, 1.0) / BIAS_ALPHA_P)),
                           !s->in->oracle_o ? 0 : s->ref_path ? 2 : 1};
    s->bm = bm;
    for (int l = 0; l < MLA_BIAS_LEVELS; ++l)
        s->m->bias_level[l].dev_oracle = -1;
}

/* The row's statistics from the reference (B2)-(B6), its two slopes judged
 * (B7), and its weighted sums added to its larger groups (B0). */
void jg_row_bias(jg_state *s, const jg_row *r, bias_acc *racc, bias_acc *rw)
{
    const mla_judge_input *in = s->in;
    const int H = s->fx->cfg.num_heads;
    const double *ps =
        in->ref_pstats ? in->ref_pstats + ((size_t)r->t * H + r->h) * MLA_REF_PSTATS : NULL;
    /* (B2)'s cancellation term with A_c in place of M_c where the
     * baseline's statistics are given; not on the reference's own path,
     * whose statistics come from the backend under test. */
    if (ps && !s->ref_path) {
        if (isfinite(ps[5]) && ps[5] >= 0)
            racc->cm = ps[5];
        if (isfinite(ps[10]) && ps[10] >= 0)
            rw->cm = ps[10];
        if (isfinite(ps[11]) && ps[11] >= 0)
            racc->sn = ps[11];
        if (isfinite(ps[12]) && ps[12] >= 0)
            rw->sn = ps[12];
    }
    rw->gamma = racc->gamma;
    if (s->p_bf16) {
        /* V_row and T_row of (B3)/(B4), plain and weighted (c_k^g,
         * |r|_g^2 = rw.b); a row without them falls back to the a-priori
         * term. */
        double V = NAN, Vg = NAN;
        if (ps) {
            V = bias_pvar(ps[0], ps[1], ps[2], racc->b);
            racc->pt = fmax(ps[3], ps[4]);
            Vg = bias_pvar(ps[0], ps[6], ps[7], rw->b);
            rw->pt = fmax(ps[8], ps[9]);
        }
        racc->pmiss = !(isfinite(V) && isfinite(racc->pt));
        rw->pmiss = !(isfinite(Vg) && isfinite(rw->pt));
        racc->pv = racc->pmiss ? 0 : V;
        rw->pv = rw->pmiss ? 0 : Vg;
    }
    char gname[64];
    snprintf(gname, sizeof gname, "row (token %lld, head %d)", (long long)r->t, r->h);
    bias_judge(racc, &s->bm, MLA_BIAS_ROW, gname, s->m, s->bias_first, sizeof s->bias_first);
    snprintf(gname, sizeof gname, "row (token %lld, head %d), column-weighted", (long long)r->t,
             r->h);
    bias_judge(rw, &s->bm, MLA_BIAS_ROW, gname, s->m, s->bias_first, sizeof s->bias_first);
    const size_t nbh = (size_t)H;
    bias_add_row(&s->g_sh[(size_t)r->b * nbh + r->h], rw);
    bias_add_row(&s->g_dh[(size_t)r->i * nbh + r->h], rw);
    bias_add_row(&s->g_s[r->b], rw);
    bias_add_row(&s->g_h[r->h], rw);
}

/* The groups larger than a row, after the last row; frees them. */
void jg_bias_groups(jg_state *s)
{
    const int H = s->fx->cfg.num_heads, B = s->fx->cfg.num_seqs;
    const size_t nbh = (size_t)H;
    char gname[64];
    if (s->g_sh && s->g_dh && s->g_s && s->g_h) {
        for (int b = 0; b < B; ++b)
            for (int h = 0; h < H; ++h) {
                snprintf(gname, sizeof gname, "sequence %d head %d", b, h);
                bias_judge(&s->g_sh[(size_t)b * nbh + h], &s->bm, MLA_BIAS_SEQ_HEAD, gname,
                           s->m, s->bias_first, sizeof s->bias_first);
            }
        for (int i = 0; i < s->Lmax; ++i)
            for (int h = 0; h < H; ++h) {
                snprintf(gname, sizeof gname, "draft row %d head %d", i, h);
                bias_judge(&s->g_dh[(size_t)i * nbh + h], &s->bm, MLA_BIAS_DRAFT_HEAD, gname,
                           s->m, s->bias_first, sizeof s->bias_first);
            }
        for (int b = 0; b < B; ++b) {
            snprintf(gname, sizeof gname, "sequence %d", b);
            bias_judge(&s->g_s[b], &s->bm, MLA_BIAS_SEQ, gname, s->m, s->bias_first,
                       sizeof s->bias_first);
        }
        for (int h = 0; h < H; ++h) {
            snprintf(gname, sizeof gname, "head %d", h);
            bias_judge(&s->g_h[h], &s->bm, MLA_BIAS_HEAD, gname, s->m, s->bias_first,
                       sizeof s->bias_first);
        }
    }
    free(s->g_sh), free(s->g_dh), free(s->g_s), free(s->g_h);
    s->g_sh = s->g_dh = s->g_s = s->g_h = NULL;
}
