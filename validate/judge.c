/* The judge: metrics of one backend's output against its baseline and the
 * path-aware verdict of SPEC section 7.
 *
 * Every tolerance constant is defined once, here, with its derivation.
 * Notation: u_b = 2^-8 is bf16's unit roundoff (round to nearest even with
 * an 8-bit significand: |fl(x) - x| <= 2^-8 |x|); u_32 = 2^-24 likewise for
 * fp32. For a row r (one query token, one head) of sequence b:
 *   M_{b,c} = max |v_c| over every value the sequence can see (prefix values
 *             times v_scale, and draft values): the output and every split's
 *             partial output are convex combinations of these, so
 *             |O_c| <= M_{b,c} and |O_{s,c}| <= M_{b,c} (the bias test's
 *             cancellation term uses the tighter A_c where it can, (B2));
 *   A_r     = sm_scale * max(k_scale, 1) * ||q_r||_2 * max_k ||k_k||_2, a
 *             Cauchy-Schwarz bound on sum_i |q_i k_i| * scale, the quantity
 *             whose fp32 dot-product error perturbs a score;
 *   N_r     = keys the row can see (prefix + drafts).
 * fp32 arithmetic perturbs each score by about sqrt(D) * A_r * u_32
 * (random-walk accumulation of D products), which moves the output by at
 * most twice that times M (weights change by delta_s * p, and |v - O| <= 2M);
 * the PV sum adds about sqrt(N_r) * u_32 * M. Together:
 *   gamma_r = (2 sqrt(D) A_r + sqrt(N_r)) * u_32                       (1)
 * Each bf16 rounding of a quantity bounded by M adds at most u_b * M to an
 * element: the bf16 partial of a split (SPEC 7: u_b max_s |O_s|), and P
 * rounded to bf16 before the PV product (u_b max |V|). The final output
 * rounding adds u_b |O|. */
#include "mla/validate.h"
#include "mla/reference.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define U_B (1.0 / 256.0)        /* bf16 unit roundoff, 2^-8 */
#define U_32 (1.0 / 16777216.0)  /* fp32 unit roundoff, 2^-24 */

/* FlashAttention's practice: a kernel may be off by up to twice what a plain
 * implementation with the same roundings is off by. Applied to every
 * a-priori term below. */
#define SAFETY 2.0

/* FlashMLA's elementwise relative rule: |err| <= 2.01/128 |ref|, i.e. about
 * two bf16 ulps of the reference value (one ulp is at most 2^-7 relative),
 * room for the output rounding plus one more rounding of the same size. */
#define REL_TOL_BF16 (2.01 / 128.0)

/* For the fp32 reference against the fp64 oracle, the relative part is the
 * fp32 rounding of the output and of the final 1/l scaling, doubled by
 * SAFETY: 2 * 2 * u_32. */
#define REL_TOL_REF (4.0 * U_32)

/* Tensor-wide cos_diff limits (SPEC 7, FlashMLA): 5e-6 when the only bf16
 * rounding is the output's (bf16 RNE has a relative RMS error of about
 * 2^-9 / sqrt(3) * 1.4 ~ 1.6e-3, so cos_diff ~ (1.6e-3)^2 / 2 ~ 1.3e-6, with
 * room for fp32 terms), 1e-5 when partials or P are rounded to bf16 as well
 * (each adds a comparable term). */
#define COS_LIMIT_FP32 5e-6
#define COS_LIMIT_BF16 1e-5

/* Per-row limit: a row's cos_diff estimates the same relative rounding
 * noise from its Dv elements, so correct rows scatter around the tensor
 * value by a small factor (rows whose output is small next to their split
 * partials sit higher); 10x the tensor limit leaves that room yet rejects a
 * systematic error of 1.4% of a row's norm (bf16 partial path), about four
 * bf16 ulps, which a tensor-wide norm over thousands of rows would hide. */
#define ROW_COS_FACTOR 10.0

const char *mla_spec_decline_reason(const mla_fixture *fx)
{
    const mla_config *c = &fx->cfg;
    if (fx->sinks)
        return "sinks present";
    if (c->sliding_window > 0)
        return "sliding window";
    if (c->logit_cap > 0)
        return "logit cap";
    if (!c->is_causal)
        return "not causal";
    if (c->num_kv_heads != 1)
        return "more than one KV head";
    if (c->num_seqs < 1)
        return "bs < 1";
    if (c->q_len < 1)
        return "q_len < 1 (ragged draft counts)";
    if (fx->num_q_tokens != (int64_t)c->num_seqs * c->q_len)
        return "ragged draft counts";
    if (c->topk != 1)
        return "topk != 1";
    return NULL;
}

const char *mla_path_name(mla_path p)
{
    switch (p) {
    case MLA_PATH_REFERENCE: return "fp32 reference (vs fp64 oracle)";
    case MLA_PATH_FP32: return "fp32 math, bf16 out";
    case MLA_PATH_BF16_PARTIALS: return "bf16 partials, bf16 out";
    case MLA_PATH_BF16_P: return "P in bf16, fp32 partials, bf16 out";
    case MLA_PATH_BF16_P_PARTIALS: return "P in bf16, bf16 partials, bf16 out";
    case MLA_PATH_COUNT: break;
    }
    return "?";
}

const char *mla_bias_level_name(int level)
{
    static const char *const names[MLA_BIAS_LEVELS] = {"row", "sequence-head", "draft-head",
                                                        "head", "sequence"};
    return level >= 0 && level < MLA_BIAS_LEVELS ? names[level] : "?";
}

const char *mla_verdict_name(mla_verdict v)
{
    switch (v) {
    case MLA_VERDICT_PASS: return "PASS";
    case MLA_VERDICT_FAIL: return "FAIL";
    case MLA_VERDICT_DECLINED: return "DECLINED";
    case MLA_VERDICT_NA: return "N/A";
    case MLA_VERDICT_ERROR: return "ERROR";
    }
    return "?";
}

/* Extra bf16 roundings of M-bounded quantities on each path. */
static int path_bf16_terms(mla_path p)
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
 * statistics giving the weighted ones (pstats 6-10, 12); a row is judged on
 * its plain slope. Nothing here is fitted to the shipped cases;
 * docs/accuracy.md has the same derivation. */
#define BIAS_Z 6.0
#define BIAS_ALPHA_P 1e-3 /* family-wise false-alarm budget of (B3), per case */

typedef struct {
    double b;      /* sum r^2 */
    double a;      /* sum r delta */
    double w2;     /* sum r^2 delta^2 */
    double w3;     /* sum r^3 delta */
    double r4;     /* sum r^4 */
    double cm;     /* sum A_c^2 r^2 (reference statistics) or sum M_c^2 r^2 (B2) */
    double ca2;    /* sum over rows of (row's a)^2 */
    double cab;    /* sum over rows of a_row b_row */
    double cb2;    /* sum over rows of b_row^2 */
    double gamma;  /* largest gamma_r */
    double pv;     /* sum over rows of V_row (B3): the P-rounding variance of sum r delta */
    double pt;     /* sum over rows of T_row (B4): the hard bound of |sum r delta| / u_b */
    double ro;     /* sum r (bf16(r) - r): the reference's own output rounding (B5) */
    double sn;     /* sum |r| S_c: a partial's coherent snap to the max key (B6) */
    int pmiss;     /* rows without a usable V_row: the a-priori term stands in (B2) */
    int64_t n;     /* elements */
    /* For the noise report only (mla_metrics.bias_level), not the verdict:
     * the slope against the fp64 oracle x, sum x (o - x) / sum x^2. */
    double oa;     /* sum x (o - x) */
    double ob;     /* sum x^2 */
} bias_acc;

static void bias_add_row(bias_acc *g, const bias_acc *row)
{
    g->b += row->b;
    g->a += row->a;
    g->w2 += row->w2;
    g->w3 += row->w3;
    g->r4 += row->r4;
    g->cm += row->cm;
    g->ca2 += row->a * row->a;
    g->cab += row->a * row->b;
    g->cb2 += row->b * row->b;
    g->n += row->n;
    g->pv += row->pv;
    g->pt += row->pt;
    g->ro += row->ro;
    g->sn += row->sn;
    g->pmiss += row->pmiss;
    g->oa += row->oa;
    g->ob += row->ob;
    if (row->gamma > g->gamma)
        g->gamma = row->gamma;
}

/* One element into a row's sums, with column weight g (1 for the row's
 * plain slope, g_c = 1 / M_c^2 for the column-weighted one of (B0)): every
 * sum of (B1)-(B5) carries g once per r, as the derivation does. rnd is
 * r (bf16(r) - r) of (B5), Mc the column's M_c of (B2). */
static void bias_add_elem(bias_acc *a, double g, double r, double d, double rnd, double Mc)
{
    const double r2 = r * r, g2 = g * g;
    a->b += g * r2;
    a->a += g * r * d;
    a->w2 += g2 * r2 * d * d;
    a->w3 += g2 * r2 * r * d;
    a->r4 += g2 * r2 * r2;
    a->ro += g * rnd;
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
/* The path's rounding model for (B1)/(B2): output unit roundoff u, k extra
 * bf16 roundings in the model term, kc of them in the cancellation term. */
typedef struct {
    double u;
    int k, kc;
    int kp;    /* 1: the path rounds P to bf16 (its term is (B3) where V_row is known) */
    double zp; /* Z_P of (B3) for this case's number of groups */
    int oracle; /* the noise report's slope against the oracle: 0 none, 1 from oa / ob,
                   2 the baseline is the oracle (the reference's own path) */
} bias_model;

static int bias_eval(const bias_acc *g, const bias_model *bm, double *slope, double *tau)
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
    const double model = u * sqrt((1.0 + km) / 3.0) * sqrt(g->r4) / g->b;
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
    if (bm->u == U_B)
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
    if (!bias_eval(g, bm, &slope, &tau))
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

mla_verdict mla_judge(const mla_judge_input *in, mla_path path, const float *o,
                      const unsigned char *unwritten, const float *lse, mla_metrics *m,
                      char *reason, size_t reason_n)
{
    const mla_fixture *fx = in->fx;
    const mla_config *c = &fx->cfg;
    const int H = c->num_heads, HK = c->num_kv_heads, D = c->head_dim, DV = c->v_head_dim;
    const int group = H / HK;
    const int ref_path = path == MLA_PATH_REFERENCE;
    mla_verdict verdict = MLA_VERDICT_PASS;
    memset(m, 0, sizeof *m);
    m->lse_max_abs = -1;
    m->first_bad = -1;
    reason[0] = '\0';

    const int kterms = path_bf16_terms(path);
    const double cos_limit_path =
        ref_path ? 0 : (kterms ? COS_LIMIT_BF16 : COS_LIMIT_FP32);
    const double rel_tol = ref_path ? REL_TOL_REF : REL_TOL_BF16;
    m->rel_tol = rel_tol;
    m->abs_frac = SAFETY * (kterms * U_B);

    double *M = malloc((size_t)HK * DV * sizeof *M);
    /* fp8 pools (schema 1.1.0): bf16 rows for M_c and the key norms, exact */
    const mla_bf16 *kvpool = NULL;
    mla_bf16 *kvwide = NULL;
    mla_error kverr;
    if (!M || mla_fixture_kv_bf16(fx, &kvpool, &kvwide, &kverr) != MLA_OK) {
        free(M);
        snprintf(reason, reason_n, "judge: out of memory");
        return MLA_VERDICT_ERROR;
    }
    double sum_ab = 0, sum_a2b2 = 0, sum_d2 = 0, sum_r2 = 0, gamma_max = 0;
    int64_t n_within = 0;
    double worst_row_cos = 0;
    char first_reason[384] = "";

    /* Bias groups (B2): (sequence, head), (draft row, head), sequence, head;
     * the (token, head) rows are judged as they are met. */
    int Lmax = 0;
    for (int b = 0; b < c->num_seqs; ++b)
        if (mla_fixture_drafts(fx, b) > Lmax)
            Lmax = mla_fixture_drafts(fx, b);
    const size_t nbs = (size_t)c->num_seqs, nbh = (size_t)H;
    bias_acc *g_sh = calloc(nbs * nbh + 1, sizeof *g_sh);
    bias_acc *g_dh = calloc((size_t)Lmax * nbh + 1, sizeof *g_dh);
    bias_acc *g_s = calloc(nbs + 1, sizeof *g_s);
    bias_acc *g_h = calloc(nbh + 1, sizeof *g_h);
    const size_t nrows = (size_t)fx->num_q_tokens * nbh;
    double *row_cos = calloc(nrows + 1, sizeof *row_cos);
    double *row_floor = calloc(nrows + 1, sizeof *row_floor);
    if (!g_sh || !g_dh || !g_s || !g_h || !row_cos || !row_floor) {
        free(M), free(g_sh), free(g_dh), free(g_s), free(g_h), free(row_cos), free(row_floor);
        free(kvwide);
        snprintf(reason, reason_n, "judge: out of memory");
        return MLA_VERDICT_ERROR;
    }
    /* Unit roundoff of the output (B1): bf16 outputs, or the fp32 reference
     * judged against the oracle. */
    /* The bf16 partials keep the cancellation term (B2), with A_c where the
     * reference's statistics are given: their per-element roundings are in
     * principle measured by the residuals, but a row whose sum r^2 rests on
     * a few channels gives that estimate few degrees of freedom (tried: a
     * correct model reached 0.996 of its threshold on k3-scales with no
     * partials' term). The rounding of P gets (B3)/(B4) from the reference's
     * statistics where they are given, else the same a-priori term. */
    const int p_bf16 = path == MLA_PATH_BF16_P || path == MLA_PATH_BF16_P_PARTIALS;
    const double n_groups = (double)nrows + (double)(nbs * nbh) + (double)Lmax * (double)nbh +
                            (double)nbs + (double)nbh;
    const bias_model bm = {ref_path ? U_32 : U_B, kterms, kterms, p_bf16,
                           sqrt(2.0 * log(2.0 * fmax(n_groups, 1.0) / BIAS_ALPHA_P)),
                           !in->oracle_o ? 0 : ref_path ? 2 : 1};
    for (int l = 0; l < MLA_BIAS_LEVELS; ++l)
        m->bias_level[l].dev_oracle = -1;
    char bias_first[384] = "";

    for (int b = 0; b < c->num_seqs; ++b) {
        const int P = mla_fixture_prefix(fx, b), L = mla_fixture_drafts(fx, b);
        const int64_t q0 = fx->qo_indptr[b], k0 = fx->kv_indptr[b];
        for (int hk = 0; hk < HK; ++hk) {
            /* M_{b,c} and the largest key norm over everything the sequence
             * can see. */
            double *Mh = M + (size_t)hk * DV;
            for (int ch = 0; ch < DV; ++ch)
                Mh[ch] = 0;
            double kmax = 0;
            for (int t = 0; t < P; ++t) {
                const mla_bf16 *row =
                    kvpool + ((size_t)fx->kv_indices[k0 + t] * HK + hk) * D;
                for (int ch = 0; ch < DV; ++ch) {
                    double v = fabs(c->v_scale * mla_bf16_to_f32(row[ch]));
                    if (v > Mh[ch])
                        Mh[ch] = v;
                }
                double kn = fabs(c->k_scale) * rownorm(row, D);
                if (kn > kmax)
                    kmax = kn;
            }
            for (int j = 0; j < L; ++j) {
                const mla_bf16 *vr = fx->v_extend + ((size_t)(q0 + j) * HK + hk) * DV;
                for (int ch = 0; ch < DV; ++ch) {
                    double v = fabs(mla_bf16_to_f32(vr[ch]));
                    if (v > Mh[ch])
                        Mh[ch] = v;
                }
                double kn = rownorm(fx->k_extend + ((size_t)(q0 + j) * HK + hk) * D, D);
                if (kn > kmax)
                    kmax = kn;
            }

            for (int i = 0; i < L; ++i)
                for (int hh = 0; hh < group; ++hh) {
                    const int h = hk * group + hh;
                    const int64_t t = q0 + i;
                    const size_t rbase = ((size_t)t * H + h) * DV;
                    const double qn = rownorm(fx->q + ((size_t)t * H + h) * D, D);
                    const double A = fabs(c->sm_scale) * qn * kmax;
                    const double N = (double)P + L;
                    const double gamma = (2.0 * sqrt((double)D) * A + sqrt(N)) * U_32; /* (1) */
                    if (gamma > gamma_max)
                        gamma_max = gamma;
                    double rab = 0, ra2b2 = 0;
                    double row_al2 = 0; /* largest allowed^2 of the row's elements */
                    bias_acc racc = {0};
                    /* The same sums with the column weights g = 1 / M_c^2
                     * (B0): what the row adds to its larger groups. */
                    bias_acc rw = {0};
                    racc.gamma = isfinite(gamma) ? gamma : 0;
                    for (int ch = 0; ch < DV; ++ch) {
                        const size_t e = rbase + ch;
                        const double r = ref_path && in->oracle_o ? in->oracle_o[e] : in->ref_o[e];
                        const double v = o[e];
                        m->n_elems++;
                        if (unwritten && unwritten[e]) {
                            if (m->n_unwritten++ == 0 && !first_reason[0])
                                snprintf(first_reason, sizeof first_reason,
                                         "element (token %lld, head %d, col %d) never written",
                                         (long long)t, h, ch);
                            if (m->first_bad < 0)
                                m->first_bad = (int64_t)e;
                            continue;
                        }
                        if (!isfinite(v) && isfinite(r)) {
                            if (m->n_nan++ == 0 && !first_reason[0])
                                snprintf(first_reason, sizeof first_reason,
                                         "non-finite output %g at (token %lld, head %d, col %d)",
                                         v, (long long)t, h, ch);
                            if (m->first_bad < 0)
                                m->first_bad = (int64_t)e;
                            continue;
                        }
                        /* Non-finite policy: where the reference is NaN or
                         * +-Inf the output must be of the same class; such
                         * elements take no part in the finite statistics
                         * (err, cos, rows, bias), which run over the
                         * compared (finite) elements only. */
                        if (!isfinite(r)) {
                            m->n_ref_nonfinite++;
                            if (nonfinite_class(v) != nonfinite_class(r)) {
                                if (m->n_nan++ == 0 && !first_reason[0])
                                    snprintf(first_reason, sizeof first_reason,
                                             "output %g where the reference is %g at (token %lld, "
                                             "head %d, col %d)",
                                             v, r, (long long)t, h, ch);
                                if (m->first_bad < 0)
                                    m->first_bad = (int64_t)e;
                            }
                            continue;
                        }
                        m->n_compared++;
                        const double err = fabs(v - r);
                        /* Elementwise abs-or-rel rule. The absolute part is
                         * the a-priori bound: SAFETY x (bf16 roundings of
                         * M-bounded partials or P + fp32 terms (1)). */
                        const double abs_bound =
                            SAFETY * (kterms * U_B + gamma) * Mh[ch];
                        const double allowed = fmax(abs_bound, rel_tol * fabs(r));
                        if (allowed * allowed > row_al2)
                            row_al2 = allowed * allowed;
                        const double ratio = allowed > 0 ? err / allowed : (err > 0 ? INFINITY : 0);
                        if (ratio > m->worst_ratio)
                            m->worst_ratio = ratio;
                        if (err > allowed) {
                            if (m->n_over++ == 0 && !first_reason[0])
                                snprintf(first_reason, sizeof first_reason,
                                         "|err| %.3g > allowed %.3g at (token %lld, head %d, "
                                         "col %d): got %.6g, reference %.6g",
                                         err, allowed, (long long)t, h, ch, v, r);
                            if (m->first_bad < 0)
                                m->first_bad = (int64_t)e;
                        }
                        if (err > m->max_abs)
                            m->max_abs = err;
                        const double ulp = bf16_ulp(r);
                        if (err <= ulp)
                            n_within++;
                        m->ulp_hist[ulp_bucket(err, ulp)]++;
                        rab += v * r;
                        ra2b2 += v * v + r * r;
                        sum_d2 += (v - r) * (v - r);
                        sum_r2 += r * r;
                        if (isfinite(v) && isfinite(r)) {
                            const double d = v - r;
                            const double rnd =
                                r * ((double)mla_bf16_to_f32(mla_f32_to_bf16((float)r)) - r);
                            const double gw =
                                isfinite(Mh[ch]) && Mh[ch] > 0 ? 1.0 / (Mh[ch] * Mh[ch]) : 0.0;
                            bias_add_elem(&racc, 1.0, r, d, rnd, Mh[ch]);
                            bias_add_elem(&rw, gw, r, d, rnd, Mh[ch]);
                            if (bm.oracle == 1) { /* noise report: s against the oracle */
                                const double x = in->oracle_o[e];
                                if (isfinite(x)) {
                                    racc.oa += x * (v - x);
                                    racc.ob += x * x;
                                    rw.oa += gw * x * (v - x);
                                    rw.ob += gw * x * x;
                                }
                            }
                        }
                    }
                    /* (B2)'s cancellation term with A_c in place of M_c
                     * where the baseline's statistics are given; not on the
                     * reference's own path, whose statistics come from the
                     * backend under test. */
                    if (in->ref_pstats && !ref_path) {
                        const double *ps = in->ref_pstats + ((size_t)t * H + h) * MLA_REF_PSTATS;
                        if (isfinite(ps[5]) && ps[5] >= 0)
                            racc.cm = ps[5];
                        if (isfinite(ps[10]) && ps[10] >= 0)
                            rw.cm = ps[10];
                        if (isfinite(ps[11]) && ps[11] >= 0)
                            racc.sn = ps[11];
                        if (isfinite(ps[12]) && ps[12] >= 0)
                            rw.sn = ps[12];
                    }
                    rw.gamma = racc.gamma;
                    if (p_bf16) {
                        /* V_row and T_row of (B3)/(B4), plain and weighted
                         * (c_k^g, |r|_g^2 = rw.b); a row without them
                         * falls back to the a-priori term. */
                        double V = NAN, Vg = NAN;
                        if (in->ref_pstats) {
                            const double *ps = in->ref_pstats + ((size_t)t * H + h) * MLA_REF_PSTATS;
                            V = bias_pvar(ps[0], ps[1], ps[2], racc.b);
                            racc.pt = fmax(ps[3], ps[4]);
                            Vg = bias_pvar(ps[0], ps[6], ps[7], rw.b);
                            rw.pt = fmax(ps[8], ps[9]);
                        }
                        racc.pmiss = !(isfinite(V) && isfinite(racc.pt));
                        rw.pmiss = !(isfinite(Vg) && isfinite(rw.pt));
                        racc.pv = racc.pmiss ? 0 : V;
                        rw.pv = rw.pmiss ? 0 : Vg;
                    }
                    {
                        char gname[64];
                        snprintf(gname, sizeof gname, "row (token %lld, head %d)", (long long)t,
                                 h);
                        bias_judge(&racc, &bm, MLA_BIAS_ROW, gname, m, bias_first,
                                   sizeof bias_first);
                        bias_add_row(&g_sh[(size_t)b * nbh + h], &rw);
                        bias_add_row(&g_dh[(size_t)i * nbh + h], &rw);
                        bias_add_row(&g_s[b], &rw);
                        bias_add_row(&g_h[h], &rw);
                    }
                    sum_ab += rab;
                    sum_a2b2 += ra2b2;
                    /* Per-row cos_diff and relative L2 error. */
                    const double rcos = ra2b2 > 0 ? 1.0 - 2.0 * rab / ra2b2 : 0.0;
                    if (rcos > worst_row_cos)
                        worst_row_cos = rcos;
                    row_cos[(size_t)t * H + h] = rcos;
                    /* Row-limit floor: cos_diff = sum (a-b)^2 / sum (a^2+b^2)
                     * exactly, so one element sitting at its element bound
                     * adds allowed^2 / sum (a^2+b^2). A lone element at its
                     * bound (a cancelling output) is legitimate and must not
                     * fail its row; with D_v = 512 this floor is far below
                     * the row limit, with D_v = 1 it makes the row check the
                     * element check, which is all one element can say. */
                    row_floor[(size_t)t * H + h] = ra2b2 > 0 ? row_al2 / ra2b2 : 0.0;
                    double rd2 = 0, rr2 = 0;
                    for (int ch = 0; ch < DV; ++ch) {
                        const size_t e = rbase + ch;
                        if (unwritten && unwritten[e])
                            continue;
                        const double r =
                            ref_path && in->oracle_o ? in->oracle_o[e] : in->ref_o[e];
                        const double d = o[e] - r;
                        if (isfinite(d)) {
                            rd2 += d * d;
                            rr2 += r * r;
                        }
                    }
                    const double rrel = rr2 > 0 ? sqrt(rd2 / rr2) : sqrt(rd2);
                    if (rrel > m->worst_row_rel)
                        m->worst_row_rel = rrel;
                    /* lse: scores perturbed by sqrt(D) A u_32 each, the sum
                     * by sqrt(N) u_32, the final log by |lse| u_32. */
                    if (lse) {
                        const size_t li = (size_t)t * H + h;
                        const double lr = ref_path && in->oracle_lse ? in->oracle_lse[li]
                                                                      : in->ref_lse[li];
                        const double lv = lse[li];
                        double dl;
                        if (!isfinite(lr) || !isfinite(lv)) /* same class, or a failure */
                            dl = nonfinite_class(lr) == nonfinite_class(lv) ? 0 : INFINITY;
                        else
                            dl = fabs(lv - lr);
                        const double lallowed =
                            SAFETY * (sqrt((double)D) * A + sqrt(N) + fabs(lr)) * U_32;
                        if (dl > m->lse_max_abs)
                            m->lse_max_abs = dl;
                        const double lratio =
                            dl == 0 ? 0
                            : (isfinite(dl) && isfinite(lallowed) && lallowed > 0) ? dl / lallowed
                                                                                    : INFINITY;
                        if (lratio > m->lse_ratio)
                            m->lse_ratio = lratio;
                    }
                }
        }
    }
    free(M);
    free(kvwide);
    {
        char gname[64];
        for (int b = 0; b < c->num_seqs; ++b)
            for (int h = 0; h < H; ++h) {
                snprintf(gname, sizeof gname, "sequence %d head %d", b, h);
                bias_judge(&g_sh[(size_t)b * nbh + h], &bm, MLA_BIAS_SEQ_HEAD, gname, m,
                           bias_first,
                           sizeof bias_first);
            }
        for (int i = 0; i < Lmax; ++i)
            for (int h = 0; h < H; ++h) {
                snprintf(gname, sizeof gname, "draft row %d head %d", i, h);
                bias_judge(&g_dh[(size_t)i * nbh + h], &bm, MLA_BIAS_DRAFT_HEAD, gname, m,
                           bias_first,
                           sizeof bias_first);
            }
        for (int b = 0; b < c->num_seqs; ++b) {
            snprintf(gname, sizeof gname, "sequence %d", b);
            bias_judge(&g_s[b], &bm, MLA_BIAS_SEQ, gname, m, bias_first, sizeof bias_first);
        }
        for (int h = 0; h < H; ++h) {
            snprintf(gname, sizeof gname, "head %d", h);
            bias_judge(&g_h[h], &bm, MLA_BIAS_HEAD, gname, m, bias_first, sizeof bias_first);
        }
    }
    free(g_sh), free(g_dh), free(g_s), free(g_h);

    m->nmse = sum_r2 > 0 ? sum_d2 / sum_r2 : sum_d2;
    m->cos_diff = sum_a2b2 > 0 ? 1.0 - 2.0 * sum_ab / sum_a2b2 : 0.0;
    m->worst_row_cos = worst_row_cos;
    m->within_1ulp = m->n_compared ? (double)n_within / (double)m->n_compared : 0.0;
    /* The reference's own cos limit follows from (1): a relative error of
     * gamma gives cos_diff ~ gamma^2 / 2; SAFETY^2 for margin. */
    m->cos_limit = ref_path ? fmax(SAFETY * SAFETY * gamma_max * gamma_max / 2.0, 1e-14)
                            : cos_limit_path;
    m->row_cos_limit = ROW_COS_FACTOR * m->cos_limit;

    /* Rows over the per-row limit (the limit is known only now). */
    for (int64_t t = 0; t < fx->num_q_tokens; ++t)
        for (int h = 0; h < H; ++h) {
            const size_t ri = (size_t)t * H + h;
            const double lim = fmax(m->row_cos_limit, row_floor[ri]);
            if (row_cos[ri] > lim && m->n_rows_over++ == 0 && !first_reason[0])
                snprintf(first_reason, sizeof first_reason,
                         "row (token %lld, head %d) cos_diff %.3g > row limit %.3g",
                         (long long)t, h, row_cos[ri], lim);
        }
    free(row_cos);
    free(row_floor);

    if (m->n_unwritten || m->n_nan || m->n_over || m->n_rows_over) {
        verdict = MLA_VERDICT_FAIL;
        snprintf(reason, reason_n, "%s (%lld unwritten, %lld non-finite, %lld over bound, %lld "
                 "rows over limit)",
                 first_reason, (long long)m->n_unwritten, (long long)m->n_nan,
                 (long long)m->n_over, (long long)m->n_rows_over);
    } else if (m->n_compared == 0) {
        /* Nothing finite to compare: not a pass (no accuracy was shown). */
        verdict = MLA_VERDICT_NA;
        if (m->n_elems == 0)
            snprintf(reason, reason_n, "nothing to judge: the case has no output elements");
        else
            snprintf(reason, reason_n,
                     "nothing to judge: all %lld reference elements are NaN/Inf (the output "
                     "matches their classes)",
                     (long long)m->n_elems);
    } else if (sum_a2b2 == 0) {
        /* Every compared element is 0 in both: a degenerate case (an extreme
         * scale flushed everything to zero) shows nothing about accuracy. */
        verdict = MLA_VERDICT_NA;
        snprintf(reason, reason_n,
                 "degenerate: all %lld compared elements are 0 in the reference and the output",
                 (long long)m->n_compared);
    } else if (m->n_bias_over) {
        /* Before cos_diff: a bias is the more specific diagnosis (a
         * truncating kernel also raises cos_diff). Names the group furthest
         * past its threshold. */
        verdict = MLA_VERDICT_FAIL;
        snprintf(reason, reason_n,
                 "biased %s: slope %.6f, |s-1| %.3g > threshold %.3g (%lld of %lld bias groups "
                 "past their threshold)",
                 m->bias_group, m->bias_slope, fabs(m->bias_slope - 1.0), m->bias_threshold,
                 (long long)m->n_bias_over, (long long)m->n_bias_groups);
    } else if (m->cos_diff > m->cos_limit) {
        verdict = MLA_VERDICT_FAIL;
        snprintf(reason, reason_n, "cos_diff %.3g > limit %.3g for path '%s'", m->cos_diff,
                 m->cos_limit, mla_path_name(path));
    } else if (lse && m->lse_ratio > 1.0) {
        verdict = MLA_VERDICT_FAIL;
        snprintf(reason, reason_n, "lse error %.3g exceeds its bound (ratio %.3g)",
                 m->lse_max_abs, m->lse_ratio);
    }
    return verdict;
}
