/* Tiny cases whose outputs are written down by hand: scores chosen to be
 * exact small numbers, visibility decided case by case, and the expected
 * o and lse in closed form (softmax of two to four known scores). Both the
 * fp32 reference (at several key block sizes) and the fp64 oracle must
 * reproduce them. head_dim 4, v_head_dim 2: values are the first two
 * columns of each pool row (absorbed MLA). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref_test_util.h"

#define D 4
#define DV 2
#define MAXK 8

/* Tolerances against the closed forms, relative to the row's largest
 * |value| (o) and to 1 + |lse| (lse). fp32 reference: every score here is a
 * sum of at most four exact products of size <= 8, so it is exact or off by
 * one rounding (~4u relative to |s| <= 8); exp, the online rescale, the sums
 * of at most four weights and the final division add about ten more
 * roundings: error below (2 * 8 * 4 + 10) u ~ 74u; 128u leaves room and is
 * still 1/2^17, far below any defect (a wrong key moves o by O(1)). fp64
 * oracle: the same count at double's u = 2^-53. */
static const double TOL32 = 128.0 * 0x1.0p-24;
static const double TOL64 = 128.0 * 0x1.0p-53;

static int failures;

/* ---- building fixtures by hand ---- */

typedef struct {
    int32_t bs, H, Hkv, causal, window;
    float sm, ks, vs, cap;
    int32_t drafts[4], prefix[4];
    const float *q;    /* [tokens, H, D] */
    const float *kext; /* [tokens, Hkv, D] */
    const float *vext; /* [tokens, Hkv, DV] */
    const float *pool; /* [slots, Hkv, D] */
    int64_t slots;
    const int64_t *idx;
    const float *sinks;
} hand;

static mla_bf16 exact_bf16(float x)
{
    mla_bf16 b = mla_f32_to_bf16(x);
    if (!(mla_bf16_to_f32(b) == x) && !(isnan(x))) {
        printf("test bug: %g is not a bf16 value\n", (double)x);
        exit(2);
    }
    return b;
}

static mla_bf16 *to_bf16(const float *src, size_t n)
{
    mla_bf16 *d = malloc(n * sizeof *d + 1);
    if (!d)
        exit(2);
    for (size_t i = 0; i < n; i++)
        d[i] = exact_bf16(src[i]);
    return d;
}

static void build(const hand *h, mla_fixture *fx)
{
    memset(fx, 0, sizeof *fx);
    mla_config *c = &fx->cfg;
    c->num_seqs = h->bs;
    c->num_heads = h->H;
    c->num_kv_heads = h->Hkv;
    c->head_dim = D;
    c->v_head_dim = DV;
    c->sm_scale = h->sm;
    c->k_scale = h->ks;
    c->v_scale = h->vs;
    c->is_causal = h->causal;
    c->logit_cap = h->cap;
    c->sliding_window = h->window;
    c->topk = 1;
    fx->qo_indptr = calloc((size_t)h->bs + 1, sizeof(int32_t));
    fx->kv_indptr = calloc((size_t)h->bs + 1, sizeof(int32_t));
    if (!fx->qo_indptr || !fx->kv_indptr)
        exit(2);
    for (int b = 0; b < h->bs; b++) {
        fx->qo_indptr[b + 1] = fx->qo_indptr[b] + h->drafts[b];
        fx->kv_indptr[b + 1] = fx->kv_indptr[b] + h->prefix[b];
    }
    c->q_len = 0;
    fx->num_q_tokens = fx->qo_indptr[h->bs];
    fx->num_kv_indices = fx->kv_indptr[h->bs];
    fx->pool_slots = h->slots;
    const size_t T = (size_t)fx->num_q_tokens;
    fx->q = to_bf16(h->q, T * h->H * D);
    fx->k_extend = to_bf16(h->kext, T * h->Hkv * D);
    fx->v_extend = to_bf16(h->vext, T * h->Hkv * DV);
    fx->kv_buffer = to_bf16(h->pool, (size_t)h->slots * h->Hkv * D);
    fx->kv_indices = malloc((size_t)fx->num_kv_indices * sizeof(int64_t) + 1);
    if (!fx->kv_indices)
        exit(2);
    if (fx->num_kv_indices)
        memcpy(fx->kv_indices, h->idx, (size_t)fx->num_kv_indices * sizeof(int64_t));
    if (h->sinks) {
        fx->sinks = malloc((size_t)h->H * sizeof(float));
        if (!fx->sinks)
            exit(2);
        memcpy(fx->sinks, h->sinks, (size_t)h->H * sizeof(float));
    }
}

/* ---- expected values ---- */

typedef struct {
    int n;            /* visible keys; 0: o = 0, lse = -inf */
    double s[MAXK];   /* their scores, written by hand */
    double v[MAXK][DV];
    int has_sink;
    double sink;
} expect_row;

static void closed_form(const expect_row *e, double o[DV], double *lse)
{
    if (e->n == 0) {
        o[0] = o[1] = 0.0;
        *lse = -INFINITY;
        return;
    }
    double den = e->has_sink ? exp(e->sink) : 0.0, num[DV] = {0, 0};
    for (int k = 0; k < e->n; k++) {
        den += exp(e->s[k]);
        for (int d = 0; d < DV; d++)
            num[d] += exp(e->s[k]) * e->v[k][d];
    }
    for (int d = 0; d < DV; d++)
        o[d] = num[d] / den;
    *lse = log(den);
}

/* Compares both references on `fx` (attending to the given key sources)
 * with the expected rows [tokens * H]. */
static void check(const char *name, const mla_fixture *fx, const expect_row *rows, int use_prefix,
                  int use_drafts)
{
    const size_t R = (size_t)fx->num_q_tokens * fx->cfg.num_heads;
    float o32[64 * DV], l32[64];
    double o64[64 * DV], l64[64];
    if (R > 64)
        exit(2);
    const int32_t blocks[] = {0, 1, 2, 3};
    for (size_t kb = 0; kb < sizeof blocks / sizeof blocks[0] + 1; kb++) {
        const int oracle = kb == sizeof blocks / sizeof blocks[0];
        mla_error err = {{0}};
        mla_status st;
        for (size_t i = 0; i < R * DV; i++)
            o32[i] = NAN, o64[i] = NAN;
        if (oracle) {
            st = mla_oracle_run_opts(fx, use_prefix, use_drafts, o64, l64, NULL, &err);
        } else {
            mla_ref_opts opts = mla_ref_opts_default();
            if (blocks[kb])
                opts.key_block = blocks[kb];
            opts.use_prefix = use_prefix;
            opts.use_drafts = use_drafts;
            st = mla_reference_run_opts(fx, &opts, o32, l32, &err);
            for (size_t i = 0; i < R * DV; i++)
                o64[i] = o32[i];
            for (size_t i = 0; i < R; i++)
                l64[i] = l32[i];
        }
        if (st != MLA_OK) {
            printf("FAIL %s: %s run: %s\n", name, oracle ? "oracle" : "reference", err.msg);
            failures++;
            continue;
        }
        const double tol = oracle ? TOL64 : TOL32;
        for (size_t r = 0; r < R; r++) {
            double eo[DV], el;
            closed_form(&rows[r], eo, &el);
            double vmax = 0;
            for (int k = 0; k < rows[r].n; k++)
                for (int d = 0; d < DV; d++)
                    vmax = fmax(vmax, fabs(rows[r].v[k][d]));
            int bad = 0;
            for (int d = 0; d < DV; d++)
                bad |= !(fabs(o64[r * DV + d] - eo[d]) <= tol * vmax);
            if (rows[r].n == 0)
                bad |= !(isinf(l64[r]) && l64[r] < 0);
            else
                bad |= !(fabs(l64[r] - el) <= tol * (1.0 + fabs(el)));
            if (bad) {
                printf("FAIL %s row %zu (%s, key block %d): o = (%.9g, %.9g) lse = %.9g, "
                       "expected (%.9g, %.9g) lse %.9g\n",
                       name, r, oracle ? "oracle" : "reference", oracle ? 0 : (int)blocks[kb],
                       o64[r * DV], o64[r * DV + 1], l64[r], eo[0], eo[1], el);
                failures++;
            }
        }
    }
    printf("checked %s\n", name);
}

#define NANF ((float)NAN)
/* An unreferenced pool slot: never read by a correct reference. */
#define NAN_ROW NANF, NANF, NANF, NANF

/* Empty prefix, two causal drafts, then the same inputs non-causal. */
static void case_empty_prefix(void)
{
    const float q[] = {1, 0, 0, 0, 0.5f, 1, 0, 0};
    const float k[] = {1, 2, 0, 0, 0, 1, 1, 0};
    const float v[] = {1, -2, 3, 0.5f};
    const float pool[] = {NAN_ROW};
    hand h = {1, 1, 1, 1, -1, 1, 1, 1, 0, {2}, {0}, q, k, v, pool, 1, NULL, NULL};
    mla_fixture fx;
    build(&h, &fx);
    /* row 0 sees draft 0 (s = 1); row 1 sees drafts 0, 1 (s = 0.5*1+1*2 = 2.5, s = 1) */
    expect_row causal[2] = {{1, {1}, {{1, -2}}, 0, 0},
                            {2, {2.5, 1}, {{1, -2}, {3, 0.5}}, 0, 0}};
    check("empty-prefix-causal", &fx, causal, 1, 1);
    /* drafts alone give the same; the prefix alone (empty) leaves no key */
    check("empty-prefix-drafts-only", &fx, causal, 0, 1);
    expect_row none[2] = {{0, {0}, {{0}}, 0, 0}, {0, {0}, {{0}}, 0, 0}};
    check("empty-prefix-prefix-only-no-visible-key", &fx, none, 1, 0);
    fx.cfg.is_causal = 0;
    /* row 0 now also sees draft 1 (s = q0.k1 = 0) */
    expect_row noncausal[2] = {{2, {1, 0}, {{1, -2}, {3, 0.5}}, 0, 0},
                               {2, {2.5, 1}, {{1, -2}, {3, 0.5}}, 0, 0}};
    check("empty-prefix-non-causal", &fx, noncausal, 1, 1);
    mla_fixture_free(&fx);
}

/* Per-head sinks: exp(sink) joins the denominator and lse, never the values. */
static void case_sinks(void)
{
    const float q[] = {1, 0, 0, 0, 0, 0, 2, 1}; /* heads 0 and 1 */
    const float k[] = {0, 0, 1, 0};
    const float v[] = {-1, 1};
    const float pool[] = {NAN_ROW, 1, 2, 0, 1};
    const int64_t idx[] = {1};
    const float sinks[] = {0.5f, -1.0f};
    hand h = {1, 2, 1, 1, -1, 1, 1, 1, 0, {1}, {1}, q, k, v, pool, 2, idx, sinks};
    mla_fixture fx;
    build(&h, &fx);
    /* head 0: prefix s = 1 (value (1, 2)), draft s = 0; head 1: prefix s = 1, draft s = 2 */
    expect_row rows[2] = {{2, {1, 0}, {{1, 2}, {-1, 1}}, 1, 0.5},
                          {2, {1, 2}, {{1, 2}, {-1, 1}}, 1, -1.0}};
    check("sinks", &fx, rows, 1, 1);
    /* A row with no visible key stays (0, -inf) with a sink present. */
    expect_row none[2] = {{0, {0}, {{0}}, 0, 0}, {0, {0}, {{0}}, 0, 0}};
    fx.kv_indptr[1] = 0;
    fx.num_kv_indices = 0;
    check("sinks-no-visible-key", &fx, none, 1, 0);
    mla_fixture_free(&fx);
}

/* Logit cap: s <- cap tanh(s / cap) on prefix and draft scores alike. */
static void case_logit_cap(void)
{
    const float q[] = {2, 0, 0, 0};
    const float k[] = {1.5f, 0, 0, 0};
    const float v[] = {0, 1};
    const float pool[] = {1, 0, 0, 0};
    const int64_t idx[] = {0};
    hand h = {1, 1, 1, 1, -1, 1, 1, 1, 2.0f, {1}, {1}, q, k, v, pool, 1, idx, NULL};
    mla_fixture fx;
    build(&h, &fx);
    /* raw scores 2 (prefix, value (1, 0)) and 3 (draft) */
    expect_row rows[1] = {{2, {2 * tanh(1.0), 2 * tanh(1.5)}, {{1, 0}, {0, 1}}, 0, 0}};
    check("logit-cap", &fx, rows, 1, 1);
    mla_fixture_free(&fx);
}

/* Sliding window: the query at position P + i sees keys at distance <= W. */
static void case_window(void)
{
    /* 3 prefix keys with equal scores 1 and values 8, 4, 2; drafts value 1, 0.5 */
    const float q[] = {0, 0, 0, 1, 0, 0, 0, 1};
    const float k[] = {0, 0, 0, 1, 0, 0, 0, 1};
    const float v[] = {1, 0, 0.5f, 0};
    const float pool[] = {2, 0, 0, 1, NAN_ROW, 8, 0, 0, 1, 4, 0, 0, 1};
    const int64_t idx[] = {2, 3, 0}; /* t0 -> 8, t1 -> 4, t2 -> 2 */
    hand h = {1, 1, 1, 1, 2, 1, 1, 1, 0, {2}, {3}, q, k, v, pool, 4, idx, NULL};
    mla_fixture fx;
    build(&h, &fx);
    /* W = 2: row 0 (pos 3) sees t1, t2, d0 (t0 at distance 3 hidden);
     * row 1 (pos 4) sees t2, d0, d1 */
    expect_row w2[2] = {{3, {1, 1, 1}, {{4, 0}, {2, 0}, {1, 0}}, 0, 0},
                        {3, {1, 1, 1}, {{2, 0}, {1, 0}, {0.5, 0}}, 0, 0}};
    check("window-2-edge", &fx, w2, 1, 1);
    fx.cfg.sliding_window = 3; /* t0 at distance exactly 3 becomes visible to row 0 */
    expect_row w3[2] = {{4, {1, 1, 1, 1}, {{8, 0}, {4, 0}, {2, 0}, {1, 0}}, 0, 0},
                        {4, {1, 1, 1, 1}, {{4, 0}, {2, 0}, {1, 0}, {0.5, 0}}, 0, 0}};
    check("window-3-edge", &fx, w3, 1, 1);
    fx.cfg.sliding_window = 1; /* prefix only: row 0 sees t2, row 1 sees no prefix key */
    expect_row w1p[2] = {{1, {1}, {{2, 0}}, 0, 0}, {0, {0}, {{0}}, 0, 0}};
    check("window-1-prefix-only-no-visible-key", &fx, w1p, 1, 0);
    fx.cfg.sliding_window = -1; /* -1 is off */
    expect_row off[2] = {{4, {1, 1, 1, 1}, {{8, 0}, {4, 0}, {2, 0}, {1, 0}}, 0, 0},
                         {5, {1, 1, 1, 1, 1}, {{8, 0}, {4, 0}, {2, 0}, {1, 0}, {0.5, 0}}, 0, 0}};
    check("window-minus-1-is-off", &fx, off, 1, 1);
    /* 0 is invalid input (fixtures/README.md): both references reject it. */
    fx.cfg.sliding_window = 0;
    {
        float o[4], l[2];
        double od[4], ld[2];
        mla_error err = {0};
        const int rr = mla_reference_run(&fx, o, l, &err) == MLA_ERR_INVALID;
        const int ro = mla_oracle_run(&fx, od, ld, &err) == MLA_ERR_INVALID;
        if (!rr || !ro) {
            printf("FAIL window-0-rejected: reference %s, oracle %s\n",
                   rr ? "rejects" : "accepts", ro ? "rejects" : "accepts");
            failures++;
        } else {
            printf("ok   window-0-rejected: %s\n", err.msg);
        }
    }
    mla_fixture_free(&fx);
}

/* k_scale scales prefix scores, v_scale prefix values; drafts take neither. */
static void case_scales(void)
{
    const float q[] = {1, 0, 0, 1};
    const float k[] = {4, 0, 0, 0};
    const float v[] = {1, -1};
    const float pool[] = {2, 1, 0, 4};
    const int64_t idx[] = {0};
    hand h = {1, 1, 1, 1, -1, 0.25f, 0.5f, 2.0f, 0, {1}, {1}, q, k, v, pool, 1, idx, NULL};
    mla_fixture fx;
    build(&h, &fx);
    /* prefix: 0.25 * 0.5 * (2 + 4) = 0.75, value 2 * (2, 1); draft: 0.25 * 4 = 1 */
    expect_row rows[1] = {{2, {0.75, 1}, {{4, 2}, {1, -1}}, 0, 0}};
    check("k-v-scales", &fx, rows, 1, 1);
    mla_fixture_free(&fx);
}

/* Two KV heads: query head h reads KV head h / (H / Hkv). */
static void case_kv_heads(void)
{
    const float q[] = {2, 0, 0, 0, 0, 1, 0, 1};
    const float k[] = {0, 0, 1, 0, 0, 0, 0, 1};   /* draft keys of KV heads 0, 1 */
    const float v[] = {5, 5, -1, -1};              /* draft values of KV heads 0, 1 */
    const float pool[] = {NAN_ROW, NAN_ROW, 1, 0, 0, 0, 0, 3, 0, 0};
    const int64_t idx[] = {1};
    hand h = {1, 2, 2, 1, -1, 1, 1, 1, 0, {1}, {1}, q, k, v, pool, 2, idx, NULL};
    mla_fixture fx;
    build(&h, &fx);
    /* head 0: prefix s = 2 (value (1, 0)), draft s = 0 (value (5, 5));
     * head 1: prefix s = 3 (value (0, 3)), draft s = 1 (value (-1, -1)) */
    expect_row rows[2] = {{2, {2, 0}, {{1, 0}, {5, 5}}, 0, 0},
                          {2, {3, 1}, {{0, 3}, {-1, -1}}, 0, 0}};
    check("kv-heads-2", &fx, rows, 1, 1);
    mla_fixture_free(&fx);
}

/* Ragged batch: a sequence with no drafts, one with an empty prefix. */
static void case_ragged(void)
{
    const float q[] = {1, 0, 0, 0, 0, 1, 0, 0};
    const float k[] = {1, 0, 0, 0, 0, 0, 0, 1};
    const float v[] = {2, 0, 0, 2};
    const float pool[] = {1, 1, 0, 0, 3, 0, 1, 0};
    const int64_t idx[] = {0, 1};
    /* seq 0: 0 drafts, 2 prefix keys; seq 1: 1 draft, 0 prefix; seq 2: 1 draft, 0 prefix */
    hand h = {3, 1, 1, 1, -1, 1, 1, 1, 0, {0, 1, 1}, {2, 0, 0}, q, k, v, pool, 2, idx, NULL};
    mla_fixture fx;
    build(&h, &fx);
    expect_row rows[2] = {{1, {1}, {{2, 0}}, 0, 0}, {1, {0}, {{0, 2}}, 0, 0}};
    check("ragged-no-drafts-empty-prefix", &fx, rows, 1, 1);
    mla_fixture_free(&fx);
}

/* Non-finite inputs reach exactly the outputs whose math reads them (inf/
 * NaN positions must match, SPEC section 7), in both references. Two
 * causal drafts and one prefix key; the value of draft 1 (visible to row 1
 * only) holds NaN, then the prefix row (key and value at once, absorbed
 * MLA) holds inf, then the query of row 1 is NaN. */
static int nan_pattern(const float *o, const float *l, const double *o64, const double *l64,
                       const char *want_o, const char *want_l)
{
    int bad = 0;
    for (int i = 0; i < 2 * DV; i++) {
        const int f32 = want_o[i] == 'f' ? isfinite(o[i]) : isnan(o[i]);
        const int f64 = want_o[i] == 'f' ? isfinite(o64[i]) : isnan(o64[i]);
        bad |= !f32 || !f64;
    }
    for (int r = 0; r < 2; r++) {
        const int f32 = want_l[r] == 'f' ? isfinite(l[r]) : isnan(l[r]);
        const int f64 = want_l[r] == 'f' ? isfinite(l64[r]) : isnan(l64[r]);
        bad |= !f32 || !f64;
    }
    return bad;
}

static void case_nonfinite(void)
{
    const float q[] = {1, 0, 0, 0, 1, 0, 0, 0};
    const float k[] = {1, 0, 0, 0, 0, 1, 0, 0};
    const float v[] = {1, 2, 3, NANF};
    const float pool[] = {1, 1, 0, 0};
    const int64_t idx[] = {0};
    hand h = {1, 1, 1, 1, -1, 1, 1, 1, 0, {2}, {1}, q, k, v, pool, 1, idx, NULL};
    mla_fixture fx;
    build(&h, &fx);
    float o[2 * DV], l[2];
    double o64[2 * DV], l64[2];
    mla_error err = {{0}};
    const struct {
        const char *what, *o, *l;
    } steps[] = {
        /* row 0 never sees draft 1: all finite; row 1: its column 1 is NaN */
        {"NaN in a draft value", "fffn", "ff"},
        /* the prefix key is now inf in column 0: scores inf, weights NaN */
        {"inf in a prefix row", "nnnn", "nn"},
        /* only row 1's query is NaN (prefix restored, draft value restored) */
        {"NaN in one query", "ffnn", "fn"},
    };
    for (int step = 0; step < 3; step++) {
        if (step == 1)
            fx.kv_buffer[0] = 0x7f80; /* +inf */
        if (step == 2) {
            fx.kv_buffer[0] = exact_bf16(1.0f);
            fx.v_extend[3] = exact_bf16(4.0f);
            fx.q[D] = 0x7fc0;
        }
        const char *want_o = steps[step].o;
        int bad = mla_reference_run(&fx, o, l, &err) != MLA_OK ||
                  mla_oracle_run(&fx, o64, l64, &err) != MLA_OK;
        for (int kb = 1; kb <= 2 && !bad; kb++) {
            /* key blocks of 1 and 2: the NaN key alone or sharing a block */
            mla_ref_opts opts = mla_ref_opts_default();
            opts.key_block = kb;
            float ob[2 * DV], lb[2];
            bad |= mla_reference_run_opts(&fx, &opts, ob, lb, &err) != MLA_OK ||
                   nan_pattern(ob, lb, o64, l64, want_o, steps[step].l);
        }
        bad |= nan_pattern(o, l, o64, l64, want_o, steps[step].l);
        if (bad) {
            printf("FAIL non-finite, %s: ref o %g %g %g %g lse %g %g; oracle o %g %g %g %g "
                   "lse %g %g\n",
                   steps[step].what, (double)o[0], (double)o[1], (double)o[2], (double)o[3],
                   (double)l[0], (double)l[1], o64[0], o64[1], o64[2], o64[3], l64[0], l64[1]);
            failures++;
        }
    }
    printf("checked non-finite propagation\n");
    mla_fixture_free(&fx);
}

/* Invalid inputs are errors, never reads out of bounds. */
static void case_invalid(void)
{
    const float q[] = {1, 0, 0, 0};
    const float k[] = {1, 0, 0, 0};
    const float v[] = {1, 0};
    const float pool[] = {1, 0, 0, 0};
    const int64_t idx[] = {0};
    hand h = {1, 1, 1, 1, -1, 1, 1, 1, 0, {1}, {1}, q, k, v, pool, 1, idx, NULL};
    mla_fixture fx;
    build(&h, &fx);
    float o[DV], l[1];
    double o64[DV], l64[1];
    mla_error err = {{0}};
    fx.kv_indices[0] = 1; /* outside the one-slot pool */
    if (mla_reference_run(&fx, o, l, &err) != MLA_ERR_INVALID ||
        mla_oracle_run(&fx, o64, l64, &err) != MLA_ERR_INVALID) {
        printf("FAIL invalid: index outside the pool accepted\n");
        failures++;
    }
    fx.kv_indices[0] = 0;
    fx.cfg.num_heads = 3;
    fx.cfg.num_kv_heads = 2;
    if (mla_reference_run(&fx, o, l, &err) != MLA_ERR_INVALID) {
        printf("FAIL invalid: num_heads 3 with 2 KV heads accepted\n");
        failures++;
    }
    fx.cfg.num_heads = 1;
    fx.cfg.num_kv_heads = 1;
    fx.qo_indptr[1] = 2; /* more rows than q has */
    if (mla_reference_run(&fx, o, l, &err) != MLA_ERR_INVALID) {
        printf("FAIL invalid: qo_indptr beyond num_q_tokens accepted\n");
        failures++;
    }
    printf("checked invalid inputs\n");
    mla_fixture_free(&fx);
}

int main(int argc, char **argv)
{
    rt_cli(argc, argv, "Checks the reference on hand-computed cases: empty prefixes, sinks, logit cap, sliding\nwindow, k/v scales.", NULL);
    case_empty_prefix();
    case_sinks();
    case_logit_cap();
    case_window();
    case_scales();
    case_kv_heads();
    case_ragged();
    case_nonfinite();
    case_invalid();
    printf("%s (%d failures)\n", failures ? "FAILED" : "all hand cases match", failures);
    return failures != 0;
}
