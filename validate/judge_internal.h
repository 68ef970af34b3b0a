/* The judge's passes over one accumulator (validate/judge*.c): mla_judge
 * (judge.c) runs, per sequence and KV head, the scales pass
 * (judge_bounds.c), then per row the element pass (element bound, non-finite
 * classes, cosines: judge_bounds.c), the row's bias test (judge_bias.c) and
 * the lse pass; then the larger bias groups, the cosine limits and the
 * verdict. Private to validate/.
 *
 * Notation: u_b = 2^-8 is bf16's unit roundoff (round to nearest even with
 * an 8-bit significand: |fl(x) - x| <= 2^-8 |x| for normal x); u_32 = 2^-24
 * likewise for fp32. For a row r (one query token, one head) of sequence b:
 *   M_{b,c} = max |v_c| over every finite value the sequence can see (prefix
 *             values times v_scale, and draft values): the output and every
 *             split's partial output are convex combinations of these, so
 *             |O_c| <= M_{b,c} and |O_{s,c}| <= M_{b,c} wherever O_c is
 *             finite (a non-finite value makes o_c non-finite in every row
 *             that sees it, weight 0 included: 0 * inf = NaN);
 *   A_r     = sm_scale * max(k_scale, 1) * ||q_r||_2 * max_k ||k_k||_2, a
 *             Cauchy-Schwarz bound on sum_i |q_i k_i| * scale, the quantity
 *             whose fp32 dot-product error perturbs a score; the max runs
 *             over keys of finite norm: a key with an inf or NaN entry has a
 *             non-finite score, exactly -inf (weight exactly 0, no rounding
 *             to perturb) or one that makes the row NaN;
 *   N_r     = keys the row can see (prefix + drafts).
 * fp32 arithmetic perturbs each score by about sqrt(D) * A_r * u_32
 * (random-walk accumulation of D products), which moves the output by at
 * most twice that times M (weights change by delta_s * p, and |v - O| <= 2M);
 * the PV sum adds about sqrt(N_r) * u_32 * M. Together:
 *   gamma_r = (2 sqrt(D) A_r + sqrt(N_r)) * u_32                       (1)
 * Each bf16 rounding of a quantity bounded by M adds at most u_b * M to an
 * element: the bf16 partial of a split (SPEC 7: u_b max_s |O_s|), and P
 * rounded to bf16 before the PV product (u_b max |V|). The final output
 * rounding adds u_b |O|. Below the normal range a rounding's error is
 * absolute, at most eta (half the subnormal spacing): (E2) below. */
#ifndef MLA_JUDGE_INTERNAL_H
#define MLA_JUDGE_INTERNAL_H

#include "mla/reference.h"
#include "mla/validate.h"

#include <stddef.h>
#include <stdint.h>

#define U_B (1.0 / 256.0)        /* bf16 unit roundoff, 2^-8 */
#define U_32 (1.0 / 16777216.0)  /* fp32 unit roundoff, 2^-24 */

/* (E2) Half the spacing of the subnormals, the largest error of a rounding
 * to nearest even below the normal range: bf16 has fp32's exponent range
 * with 7 stored fraction bits, so its subnormals are spaced 2^-133; fp32's
 * 2^-149. Each rounding on a path may add it to an element whatever the
 * element's size (a subnormal output rounds to 0 from up to eta). */
#define ETA_B 0x1p-134
#define ETA_32 0x1p-150

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
 * (each adds a comparable term). The subnormal part (E2) adds, exactly as
 * the element floor of judge_bounds.c does, at most (1 + k) eta per element:
 * n ((1 + k) eta)^2 / sum (a^2 + b^2), nothing for normal outputs. */
#define COS_LIMIT_FP32 5e-6
#define COS_LIMIT_BF16 1e-5

/* Per-row limit: a row's cos_diff estimates the same relative rounding
 * noise from its Dv elements, so correct rows scatter around the tensor
 * value by a small factor (rows whose output is small next to their split
 * partials sit higher); 10x the tensor limit leaves that room yet rejects a
 * systematic error of 1.4% of a row's norm (bf16 partial path), about four
 * bf16 ulps, which a tensor-wide norm over thousands of rows would hide. */
#define ROW_COS_FACTOR 10.0

/* The bias test (judge_bias.c, (B1)-(B8)). */
#define BIAS_Z 6.0
#define BIAS_ALPHA_P 1e-3 /* family-wise false-alarm budget of (B3), per case */

/* One group's sums (judge_bias.c). */
typedef struct {
    double b;      /* sum r^2 */
    double a;      /* sum r delta */
    double w2;     /* sum r^2 delta^2 */
    double w3;     /* sum r^3 delta */
    double r4;     /* sum r^4 */
    double e2;     /* sum r^2 eta_r^2: the subnormal part of the model term (B8) */
    double cm;     /* sum A_c^2 r^2 (reference statistics) or sum M_c^2 r^2 (B2) */
    double ca2;    /* sum over rows of (row's a)^2 */
    double cab;    /* sum over rows of a_row b_row */
    double cb2;    /* sum over rows of b_row^2 */
    double gamma;  /* largest gamma_r */
    double pv;     /* sum over rows of V_row (B3): the P-rounding variance of sum r delta */
    double pt;     /* sum over rows of T_row (B4): the hard bound of |sum r delta| / u_b */
    double ro;     /* sum r (bf16(r) - r): the reference's own output rounding (B5) */
    double hr;     /* sum |r| h, h the output rounding's largest error at r (B9) */
    double sn;     /* sum |r| S_c: a partial's coherent snap to the max key (B6) */
    int pmiss;     /* rows without a usable V_row: the a-priori term stands in (B2) */
    int64_t n;     /* elements */
    /* For the noise report only (mla_metrics.bias_level), not the verdict:
     * the slope against the fp64 oracle x, sum x (o - x) / sum x^2. */
    double oa;     /* sum x (o - x) */
    double ob;     /* sum x^2 */
} bias_acc;

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

/* The one accumulator every pass reads and adds to. */
typedef struct {
    const mla_judge_input *in;
    const mla_fixture *fx;
    mla_path path;
    int ref_path;
    const float *o, *lse;
    const unsigned char *unwritten;
    mla_metrics *m;
    int kterms;      /* extra bf16 roundings of the path (k) */
    double rel_tol;
    double eta;      /* (E2): the subnormal floor of one rounding of the output */
    const mla_bf16 *kvpool;
    mla_bf16 *kvwide;
    double *M;       /* [num_kv_heads, Dv] M_{b,c} of the current sequence */
    double *kmax;    /* [num_kv_heads] its largest finite key norm */
    /* tensor-wide sums */
    double sum_ab, sum_a2b2, sum_d2, sum_r2, sum_floor2, gamma_max;
    int64_t n_within;
    int64_t n_lse;   /* lse pairs judged */
    int64_t n_lse_finite; /* of them, both finite: what an lse can show on its own */
    double worst_row_cos;
    double *row_cos, *row_floor; /* [rows]: cos_diff, and one element at its bound */
    double *row_sub;             /* [rows]: the subnormal floor's share (E2) */
    /* bias groups (B0): (sequence, head), (draft row, head), sequence, head */
    int Lmax;
    bias_acc *g_sh, *g_dh, *g_s, *g_h;
    bias_model bm;
    int p_bf16;
    char first_reason[384];
    char bias_first[384];
} jg_state;

/* One row (token, head) of sequence b, draft row i. */
typedef struct {
    int b, i, h, hk;
    int64_t t;
    double A, N, gamma;
} jg_row;

/* judge_bounds.c */
int jg_path_bf16_terms(mla_path p);
void jg_seq_scales(jg_state *s, int b, int hk);
void jg_row_setup(jg_state *s, jg_row *r);
void jg_row_elements(jg_state *s, const jg_row *r, bias_acc *racc, bias_acc *rw);
void jg_row_lse(jg_state *s, const jg_row *r);
void jg_finish_cos(jg_state *s);

/* judge_bias.c */
void jg_bias_init(jg_state *s, size_t nrows, size_t nbs, size_t nbh);
void jg_bias_add_elem(bias_acc *a, double g, double r, double d, double rnd, double Mc,
                      double eta, double h);
void jg_row_bias(jg_state *s, const jg_row *r, bias_acc *racc, bias_acc *rw);
void jg_bias_groups(jg_state *s);

#endif
