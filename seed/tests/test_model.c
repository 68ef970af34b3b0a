/* CPU model of the two-stage kernel against an in-test fp64 direct
 * computation (on the seed plan and on the fast tier's balanced partition),
 * the exact single-split case, declines, and a sanity check that every
 * planted mutation is caught by the same tolerance.
 * Fixtures are built in memory here, so this test needs no catalogue.
 * Usage: test_model [seed]  (a fresh seed is drawn and printed otherwise). */
#include "mla/gpu.h"
#include "mla/model.h"
#include "split_policy.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "test_util.h"

static double uniform01(void)
{
    return (double)(next_u64() >> 11) * 0x1p-53;
}

static int32_t uniform_int(int32_t lo, int32_t hi) /* inclusive */
{
    return lo + (int32_t)(next_u64() % (uint64_t)((int64_t)hi - lo + 1));
}

static mla_bf16 rand_bf16(double lo, double hi)
{
    return mla_f32_to_bf16((float)(lo + (hi - lo) * uniform01()));
}

#define BF16_QNAN ((mla_bf16)0x7fc1)
#define K3_SM_SCALE 0.0721688f /* 192^-0.5, SPEC section 5 */

/* ------------------------------------------------------------------ */
/* In-memory fixtures                                                  */

typedef struct {
    int bs, heads, len, dim, dv;
    const int32_t *prefix;
    float sm_scale, k_scale, v_scale;
    double q_amp;          /* q uniform in [-q_amp, q_amp] */
    double kv_lo, kv_hi;   /* pool rows (keys and values) */
    double ext_lo, ext_hi; /* k_extend and v_extend */
    int extra_slots;       /* unreferenced pool slots, filled with NaN */
} case_spec;

static void *xcalloc(size_t n, size_t sz)
{
    void *p = calloc(n ? n : 1, sz);
    if (!p) {
        fprintf(stderr, "test_model: out of memory\n");
        exit(2);
    }
    return p;
}

static void build_fixture(const case_spec *sp, mla_fixture *fx)
{
    const size_t nq = (size_t)sp->bs * (size_t)sp->len;
    int64_t total = 0, k, pool;
    int64_t *perm;
    size_t e, d;
    int b;

    memset(fx, 0, sizeof *fx);
    fx->cfg.num_seqs = sp->bs;
    fx->cfg.num_heads = sp->heads;
    fx->cfg.num_kv_heads = 1;
    fx->cfg.q_len = sp->len;
    fx->cfg.head_dim = sp->dim;
    fx->cfg.v_head_dim = sp->dv;
    fx->cfg.sm_scale = sp->sm_scale;
    fx->cfg.k_scale = sp->k_scale;
    fx->cfg.v_scale = sp->v_scale;
    fx->cfg.is_causal = 1;
    fx->cfg.logit_cap = 0.0f;
    fx->cfg.sliding_window = -1;
    fx->cfg.topk = 1;

    for (b = 0; b < sp->bs; b++)
        total += sp->prefix[b];
    pool = total + sp->extra_slots;
    fx->num_q_tokens = (int64_t)nq;
    fx->pool_slots = pool;
    fx->num_kv_indices = total;

    fx->q = xcalloc(nq * (size_t)sp->heads * (size_t)sp->dim, sizeof(mla_bf16));
    fx->k_extend = xcalloc(nq * (size_t)sp->dim, sizeof(mla_bf16));
    fx->v_extend = xcalloc(nq * (size_t)sp->dv, sizeof(mla_bf16));
    fx->kv_buffer = xcalloc((size_t)pool * (size_t)sp->dim, sizeof(mla_bf16));
    fx->qo_indptr = xcalloc((size_t)sp->bs + 1, sizeof(int32_t));
    fx->kv_indptr = xcalloc((size_t)sp->bs + 1, sizeof(int32_t));
    fx->kv_indices = total ? xcalloc((size_t)total, sizeof(int64_t)) : NULL;

    for (e = 0; e < nq * (size_t)sp->heads * (size_t)sp->dim; e++)
        fx->q[e] = rand_bf16(-sp->q_amp, sp->q_amp);
    for (e = 0; e < nq * (size_t)sp->dim; e++)
        fx->k_extend[e] = rand_bf16(sp->ext_lo, sp->ext_hi);
    for (e = 0; e < nq * (size_t)sp->dv; e++)
        fx->v_extend[e] = rand_bf16(sp->ext_lo, sp->ext_hi);
    /* NaN everywhere first: a slot no sequence references must never be
     * read, and NaN makes any such read visible in the output. */
    for (e = 0; e < (size_t)pool * (size_t)sp->dim; e++)
        fx->kv_buffer[e] = BF16_QNAN;
    for (b = 0; b < sp->bs; b++) {
        fx->qo_indptr[b + 1] = (b + 1) * sp->len;
        fx->kv_indptr[b + 1] = fx->kv_indptr[b] + sp->prefix[b];
    }
    /* Slots from a shuffled pool, so the gather really gathers. */
    perm = xcalloc((size_t)pool, sizeof(int64_t));
    for (k = 0; k < pool; k++)
        perm[k] = k;
    for (k = pool - 1; k > 0; k--) {
        int64_t j = (int64_t)(next_u64() % (uint64_t)(k + 1)), t = perm[k];
        perm[k] = perm[j];
        perm[j] = t;
    }
    for (k = 0; k < total; k++) {
        fx->kv_indices[k] = perm[k];
        for (d = 0; d < (size_t)sp->dim; d++)
            fx->kv_buffer[(size_t)perm[k] * (size_t)sp->dim + d] =
                rand_bf16(sp->kv_lo, sp->kv_hi);
    }
    free(perm);
}

static case_spec base_spec(int bs, int heads, int len, const int32_t *prefix)
{
    case_spec s;

    memset(&s, 0, sizeof s);
    s.bs = bs;
    s.heads = heads;
    s.len = len;
    s.dim = 576;
    s.dv = 512;
    s.prefix = prefix;
    s.sm_scale = K3_SM_SCALE;
    s.k_scale = 1.0f;
    s.v_scale = 1.0f;
    s.q_amp = 1.0;
    s.kv_lo = -1.0;
    s.kv_hi = 1.0;
    s.ext_lo = -1.0;
    s.ext_hi = 1.0;
    s.extra_slots = 37;
    return s;
}

typedef struct {
    mla_bf16 *o;
    float *lse;
    size_t n_o, n_lse;
} outputs;

static void outputs_alloc(const mla_fixture *fx, outputs *out)
{
    size_t k;

    out->n_lse = (size_t)fx->num_q_tokens * (size_t)fx->cfg.num_heads;
    out->n_o = out->n_lse * (size_t)fx->cfg.v_head_dim;
    out->o = xcalloc(out->n_o, sizeof(mla_bf16));
    out->lse = xcalloc(out->n_lse, sizeof(float));
    /* Poison: anything the model does not write stays NaN. */
    for (k = 0; k < out->n_o; k++)
        out->o[k] = BF16_QNAN;
    for (k = 0; k < out->n_lse; k++)
        out->lse[k] = nanf("0x51");
}

static void outputs_free(outputs *out)
{
    free(out->o);
    free(out->lse);
}

/* ------------------------------------------------------------------ */
/* fp64 direct computation and the tolerance                           */

/* Tolerance of the bf16-partial path, from SPEC section 7, u_b = 2^-8 per
 * bf16 rounding (the unit roundoff of an 8-bit significand; attained just
 * above a power of two, so err/tol close to 1 is expected, not a warning):
 *   |o - O| <= u_b*|O|                  final bf16 rounding
 *            + u_b*max_s |O_s|           bf16 partials: the prefix part is
 *                                        sum_s W_s*O_s with sum W_s <= 1, each
 *                                        O_s rounded once; charged whenever the
 *                                        prefix is non-empty, since even a
 *                                        single split is stored in bf16 before
 *                                        it meets the draft part
 *            + 2*(sqrt(D)*A + sqrt(N))*2^-24 * max|V|
 *                                        fp32 terms: a score error delta moves
 *                                        the softmax output by at most
 *                                        2*delta*max|V|, delta ~ sqrt(D)*A*2^-24
 *                                        (random-walk dot error, A = largest
 *                                        |scaled score|) and the denominator and
 *                                        P.V sums add ~ sqrt(N)*2^-24 relative.
 *                                        A score's size is taken as the larger of
 *                                        |s| and scale*sqrt(sum (q_k k_k)^2): a
 *                                        score near 0 by cancellation still
 *                                        carries its partial sums' rounding
 *                                        (seen: a lone draft key scoring 0.005
 *                                        with partial sums near 2).
 * The model keeps P in fp32, so the SPEC's P-in-bf16 term is not charged.
 *   |lse - LSE| <= 2*(sqrt(D)*A + sqrt(N))*2^-24 + 4*(|LSE| + 1)*2^-24
 *                                        the same score and sum errors, plus
 *                                        the three "m + log(sum)" additions
 *                                        (stage 1, split merge, final merge),
 *                                        each rounding at |LSE|, and logf.
 * lse has no bf16 term: partial lse stays fp32. */
#define U_B 0x1p-8
#define U_32 0x1p-24

typedef struct {
    long elements, violations, nonfinite;
    double worst_o, worst_lse; /* largest error / tolerance */
    int have_first;
    char first[256];
} check_result;

static double dot64(const double *a, const double *b, int n)
{
    double s = 0.0;
    int k;
    for (k = 0; k < n; k++)
        s += a[k] * b[k];
    return s;
}

/* Random-walk size of a dot product's partial sums, sqrt(sum (a_k b_k)^2):
 * what its fp32 rounding scales with, even when cancellation leaves the
 * result itself near zero. */
static double rw_size(const double *a, const double *b, int n)
{
    double s = 0.0;
    int k;
    for (k = 0; k < n; k++)
        s += (a[k] * b[k]) * (a[k] * b[k]);
    return sqrt(s);
}

static void note(check_result *r, const char *fmt, int b, int i, int h, int d, double got,
                 double want, double tol)
{
    if (r->have_first)
        return;
    r->have_first = 1;
    snprintf(r->first, sizeof r->first, fmt, b, i, h, d, got, want, tol);
}

/* Compares o and lse of every row against the fp64 direct computation,
 * with the per-element tolerance above. The split structure (for the
 * partial term) is the plan's own for block config `blk`. */
/* The key ranges the model's plan makes partials of for sequence b, from
 * the plans' own functions (core/plan.c, hip/split_policy.h); the count is
 * returned, at most cap written. */
static int32_t plan_ranges(const mla_fixture *fx, const mla_model_opts *opts, const mla_plan *plan,
                           int32_t b, int32_t *lo, int32_t *hi, int32_t cap)
{
    const int32_t P = mla_fixture_prefix(fx, b);
    int32_t n = 0, s;
    if (opts->plan == MLA_MODEL_PLAN_SEED) {
        const int32_t active = mla_plan_active_splits(P, plan->num_splits, opts->blk.block_n);
        for (s = 0; s < active && s < cap; s++)
            mla_plan_split_range(P, active, s, &lo[s], &hi[s]);
        return active;
    }
    const mla_sp_target t = opts->plan == MLA_MODEL_PLAN_FAST_GFX942   ? MLA_SP_AMD_GFX942
                            : opts->plan == MLA_MODEL_PLAN_FAST_GFX950 ? MLA_SP_AMD_GFX950
                                                                       : MLA_SP_NVIDIA;
    mla_sp_fast_plan pl;
    int first, last, c;
    mla_sp_fast_plan_make(fx->cfg.num_seqs, fx->cfg.num_heads, fx->cfg.q_len, fx->cfg.v_head_dim,
                          fx->num_kv_indices, MLA_GPU_FAST_MIN_SPLIT, 1, t,
                          MLA_GPU_FAST_TARGET_CTAS, &pl);
    const long long A = mla_sp_seq_start(fx->kv_indptr[b], b);
    mla_sp_seq_chunks(A, P, pl.chunks, pl.work, &first, &last);
    for (c = first; c <= last; c++, n++) {
        int x, y;
        mla_sp_piece_range(A, P, c, first, last, pl.chunks, pl.work, &x, &y);
        if (n < cap) {
            lo[n] = x;
            hi[n] = y;
        }
    }
    return n;
}

static void check_against_fp64(const mla_fixture *fx, const mla_model_opts *opts,
                               const outputs *out, check_result *r)
{
    const mla_block_config *blk = &opts->blk;
    const int D = fx->cfg.head_dim, Dv = fx->cfg.v_head_dim, H = fx->cfg.num_heads;
    const int L = fx->cfg.q_len;
    const double qk = (double)fx->cfg.sm_scale * (double)fx->cfg.k_scale;
    const double vs = fx->cfg.v_scale, sm = fx->cfg.sm_scale;
    mla_shape shape;
    mla_plan plan;
    mla_error err;
    int b;

    memset(r, 0, sizeof *r);
    mla_shape_from_fixture(fx, &shape);
    if (mla_plan_make(&shape, blk, &plan, &err) != MLA_OK) {
        CHECK(0, "check: no plan: %s", err.msg);
        return;
    }
    for (b = 0; b < fx->cfg.num_seqs; b++) {
        const int32_t P = mla_fixture_prefix(fx, b);
        static int32_t rlo[MLA_SP_MAX_CHUNKS], rhi[MLA_SP_MAX_CHUNKS];
        const int32_t active = plan_ranges(fx, opts, &plan, b, rlo, rhi, MLA_SP_MAX_CHUNKS);
        const int64_t row0 = fx->qo_indptr[b];
        double *keys = xcalloc((size_t)(P + L) * (size_t)D, sizeof(double));
        double *vals = xcalloc((size_t)(P + L) * (size_t)Dv, sizeof(double));
        double *q = xcalloc((size_t)D, sizeof(double));
        double *sc = xcalloc((size_t)(P + L), sizeof(double));
        double *O = xcalloc((size_t)Dv, sizeof(double));
        double *Os = xcalloc((size_t)Dv, sizeof(double));
        double *maxOs = xcalloc((size_t)Dv, sizeof(double));
        int t, i, h, d, s;

        /* Rows 0..P-1 prefix keys (values scaled by v_scale), then drafts. */
        for (t = 0; t < P; t++) {
            const mla_bf16 *src =
                fx->kv_buffer + (size_t)fx->kv_indices[fx->kv_indptr[b] + t] * (size_t)D;
            for (d = 0; d < D; d++)
                keys[(size_t)t * D + d] = mla_bf16_to_f32(src[d]);
            for (d = 0; d < Dv; d++)
                vals[(size_t)t * Dv + d] = vs * mla_bf16_to_f32(src[d]);
        }
        for (t = 0; t < L; t++) {
            for (d = 0; d < D; d++)
                keys[(size_t)(P + t) * D + d] =
                    mla_bf16_to_f32(fx->k_extend[(size_t)(row0 + t) * D + d]);
            for (d = 0; d < Dv; d++)
                vals[(size_t)(P + t) * Dv + d] =
                    mla_bf16_to_f32(fx->v_extend[(size_t)(row0 + t) * Dv + d]);
        }

        for (i = 0; i < L; i++)
            for (h = 0; h < H; h++) {
                const int n = P + i + 1; /* causal: drafts 0..i */
                const size_t orow = (size_t)(row0 + i) * H + h;
                double mx = -INFINITY, A = 0.0, sum = 0.0, vmax = 0.0, lse_ref, fp32, tol_l;
                double got_l, err_l;

                for (d = 0; d < D; d++)
                    q[d] = mla_bf16_to_f32(fx->q[orow * D + d]);
                for (t = 0; t < n; t++) {
                    const double scale = t < P ? qk : sm;
                    sc[t] = scale * dot64(q, keys + (size_t)t * D, D);
                    mx = fmax(mx, sc[t]);
                    A = fmax(A, fabs(sc[t]));
                    A = fmax(A, scale * rw_size(q, keys + (size_t)t * D, D));
                }
                for (d = 0; d < Dv; d++)
                    O[d] = 0.0;
                for (t = 0; t < n; t++) {
                    const double p = exp(sc[t] - mx);
                    sum += p;
                    for (d = 0; d < Dv; d++) {
                        O[d] += p * vals[(size_t)t * Dv + d];
                        vmax = fmax(vmax, fabs(vals[(size_t)t * Dv + d]));
                    }
                }
                for (d = 0; d < Dv; d++)
                    O[d] /= sum;
                lse_ref = mx + log(sum);

                for (d = 0; d < Dv; d++)
                    maxOs[d] = 0.0;
                for (s = 0; P > 0 && s < active; s++) {
                    const int32_t lo = rlo[s], hi = rhi[s];
                    double ms = -INFINITY, ss = 0.0;
                    for (t = lo; t < hi; t++)
                        ms = fmax(ms, sc[t]);
                    for (d = 0; d < Dv; d++)
                        Os[d] = 0.0;
                    for (t = lo; t < hi; t++) {
                        const double p = exp(sc[t] - ms);
                        ss += p;
                        for (d = 0; d < Dv; d++)
                            Os[d] += p * vals[(size_t)t * Dv + d];
                    }
                    for (d = 0; d < Dv; d++)
                        maxOs[d] = fmax(maxOs[d], fabs(Os[d] / ss));
                }

                fp32 = 2.0 * (sqrt((double)D) * A + sqrt((double)n)) * U_32;
                for (d = 0; d < Dv; d++) {
                    const double got = mla_bf16_to_f32(out->o[orow * Dv + d]);
                    const double tol = U_B * fabs(O[d]) + U_B * maxOs[d] + fp32 * vmax;
                    const double e = fabs(got - O[d]);
                    r->elements++;
                    if (!isfinite(got))
                        r->nonfinite++;
                    if (!(e <= tol)) {
                        r->violations++;
                        note(r, "o[seq %d row %d head %d col %d] = %.9g, fp64 %.9g, tol %.3g", b,
                             i, h, d, got, O[d], tol);
                    }
                    if (isfinite(e))
                        r->worst_o = fmax(r->worst_o, e / tol);
                    else
                        r->worst_o = INFINITY;
                }
                tol_l = fp32 + 4.0 * (fabs(lse_ref) + 1.0) * U_32;
                got_l = out->lse[orow];
                err_l = fabs(got_l - lse_ref);
                if (!isfinite(got_l))
                    r->nonfinite++;
                if (!(err_l <= tol_l)) {
                    r->violations++;
                    note(r, "lse[seq %d row %d head %d] (col %d) = %.9g, fp64 %.9g, tol %.3g", b,
                         i, h, -1, got_l, lse_ref, tol_l);
                }
                r->worst_lse = isfinite(err_l) ? fmax(r->worst_lse, err_l / tol_l) : INFINITY;
            }
        free(keys);
        free(vals);
        free(q);
        free(sc);
        free(O);
        free(Os);
        free(maxOs);
    }
}

/* ------------------------------------------------------------------ */

static void run_accuracy_case_plan(const char *name, const case_spec *sp, mla_model_plan plan)
{
    mla_fixture fx;
    outputs out;
    mla_model_opts opts = mla_model_opts_default();
    mla_error err;
    check_result r;
    mla_status st;
    int threads;

    opts.plan = plan;
    build_fixture(sp, &fx);
    outputs_alloc(&fx, &out);
    st = mla_model_run(&fx, &opts, out.o, out.lse, &err);
    CHECK(st == MLA_OK, "%s: model returned %d: %s", name, (int)st, err.msg);
    if (st == MLA_OK) {
        check_against_fp64(&fx, &opts, &out, &r);
        printf("  %-18s %8ld elements  worst err/tol: o %.3f  lse %.3f\n", name, r.elements,
               r.worst_o, r.worst_lse);
        CHECK(r.nonfinite == 0, "%s: %ld non-finite outputs (unwritten or NaN)", name,
              r.nonfinite);
        CHECK(r.violations == 0, "%s: %ld elements out of tolerance, first: %s", name,
              r.violations, r.first);
    }
    /* Thread count must not change a bit: tasks write disjoint rows. */
    for (threads = 1; threads <= 3; threads += 2) {
        outputs again;
        outputs_alloc(&fx, &again);
        CHECK(mla_model_run_threads(&fx, &opts, threads, again.o, again.lse, &err) == MLA_OK,
              "%s: %s", name, err.msg);
        CHECK(memcmp(again.o, out.o, out.n_o * sizeof(mla_bf16)) == 0 &&
                  memcmp(again.lse, out.lse, out.n_lse * sizeof(float)) == 0,
              "%s: %d threads give different bits", name, threads);
        outputs_free(&again);
    }
    outputs_free(&out);
    mla_fixture_free(&fx);
}

static void run_accuracy_case(const char *name, const case_spec *sp)
{
    run_accuracy_case_plan(name, sp, MLA_MODEL_PLAN_SEED);
}

static void accuracy_cases(void)
{
    static const int32_t p_mixed[] = {200, 1, 63, 1000};
    static const int32_t p_peaky[] = {64, 129, 0};
    static const int32_t p_l1[] = {0, 2, 3, 65, 2500};
    static const int32_t p_empty[] = {0, 0, 0};
    int32_t p_few[40];
    case_spec s;
    int b;

    /* K3 widths; 6 heads leave a half-full last head block; 200 and 1000
     * leave split remainders (3 splits of 66 + 2, 15 of 66 + 10). */
    s = base_spec(4, 6, 8, p_mixed);
    run_accuracy_case("mixed_remainders", &s);

    /* Both scales off 1 and scores ~4x larger, so attention is peaked. */
    s = base_spec(3, 12, 4, p_peaky);
    s.k_scale = 0.8f;
    s.v_scale = 1.7f;
    s.q_amp = 4.0;
    run_accuracy_case("scaled_peaky", &s);

    /* L = 1 (decode-like) and 32 splits of a 2500-key prefix. */
    s = base_spec(5, 4, 1, p_l1);
    run_accuracy_case("l1_32_splits", &s);

    /* A large batch: 512 / (40 * 4) = 3 splits per sequence. */
    for (b = 0; b < 40; b++)
        p_few[b] = uniform_int(0, 400);
    s = base_spec(40, 16, 2, p_few);
    run_accuracy_case("batch40_3_splits", &s);

    /* Every prefix empty: kv_indices has no entries at all, which upstream
     * declines and this kernel must run as drafts-only attention. */
    s = base_spec(3, 4, 8, p_empty);
    s.extra_slots = 4;
    run_accuracy_case("all_prefix_empty", &s);
}

/* The fast tier's balanced partition: the model's pieces are split_policy's
 * (max count from mla_model_max_splits equals plan_ranges'), a long sequence
 * of a skewed batch gets many more of them than under the seed plan, and
 * each target's partition is within the fp64 tolerance built from its own
 * pieces (check_against_fp64 via plan_ranges). */
static void fast_plan_cases(void)
{
    static const int32_t p_skew[] = {3000, 64, 100, 0, 1, 130, 64, 70};
    static const int32_t p_mixed[] = {200, 1, 63, 1000};
    static const int32_t p_l1[] = {0, 2, 3, 65, 2500};
    static const char *const names[] = {"skew_fast", "skew_fast_gfx942"};
    static int32_t lo[MLA_SP_MAX_CHUNKS], hi[MLA_SP_MAX_CHUNKS];
    case_spec s = base_spec(8, 6, 8, p_skew);
    mla_fixture fx;
    mla_model_opts seed = mla_model_opts_default(), fast = seed;
    mla_shape shape;
    mla_plan plan;
    mla_error err;
    int p, b;

    build_fixture(&s, &fx);
    fast.plan = MLA_MODEL_PLAN_FAST;
    mla_shape_from_fixture(&fx, &shape);
    CHECK(mla_plan_make(&shape, &seed.blk, &plan, &err) == MLA_OK, "fast: plan: %s", err.msg);
    int32_t most = 1;
    for (b = 0; b < fx.cfg.num_seqs; b++) {
        const int32_t n = plan_ranges(&fx, &fast, &plan, b, lo, hi, MLA_SP_MAX_CHUNKS);
        most = n > most ? n : most;
        /* The pieces tile the prefix in order. */
        int32_t t = 0, k;
        for (k = 0; k < n; k++) {
            CHECK(lo[k] == t && hi[k] >= lo[k], "fast: seq %d piece %d is [%d, %d), want start %d",
                  b, k, lo[k], hi[k], t);
            t = hi[k];
        }
        CHECK(t == mla_fixture_prefix(&fx, b), "fast: seq %d pieces end at %d, not %d", b, t,
              mla_fixture_prefix(&fx, b));
    }
    CHECK(mla_model_max_splits(&fx, &fast) == most, "fast: model reports %d pieces, split_policy %d",
          mla_model_max_splits(&fx, &fast), most);
    CHECK(most > mla_model_max_splits(&fx, &seed),
          "fast: the long sequence has %d pieces, no more than the seed plan's %d splits", most,
          mla_model_max_splits(&fx, &seed));
    fast.plan = MLA_MODEL_PLAN_COUNT;
    CHECK(mla_model_max_splits(&fx, &fast) == -1, "fast: an unknown plan is not refused");
    {
        outputs out;
        outputs_alloc(&fx, &out);
        const mla_bf16 o0 = out.o[0];
        CHECK(mla_model_run(&fx, &fast, out.o, out.lse, &err) == MLA_ERR_INVALID,
              "fast: an unknown plan runs");
        CHECK(out.o[0] == o0, "fast: an unknown plan wrote the output");
        outputs_free(&out);
    }
    mla_fixture_free(&fx);
    /* gfx950 takes NVIDIA's 64-row blocks at these 48 rows: the same pieces. */
    for (p = MLA_MODEL_PLAN_FAST; p <= MLA_MODEL_PLAN_FAST_GFX942; p++)
        run_accuracy_case_plan(names[p - MLA_MODEL_PLAN_FAST], &s, (mla_model_plan)p);
    s = base_spec(4, 6, 8, p_mixed);
    run_accuracy_case_plan("mixed_fast", &s, MLA_MODEL_PLAN_FAST);
    s = base_spec(5, 4, 1, p_l1);
    run_accuracy_case_plan("l1_fast", &s, MLA_MODEL_PLAN_FAST);
}

/* A single non-empty split: the merge must return the stored partial
 * exactly. Built so that every fp32 step is exact except the ones the test
 * reproduces: q is zero on columns 1..255, where the prefix keys differ, so
 * every prefix score is the same integer dot times the scale (p = 1 for all
 * keys, l = P exactly); values are multiples of 1/16, so the P.V sums are
 * exact in fp32 in any order; the draft keys score ~250 lower, so the draft
 * weight exp(lse_d - lse_p) underflows to exactly 0. The model's output must
 * then equal bf16(sum / P) and its lse (the score) + logf(P), bit for bit
 * (compared as values: the sign of a zero may differ). */
static void single_split_exact(int32_t P, int32_t block_n)
{
    const int bs = 2, H = 5, L = 4, D = 576, Dv = 512;
    int32_t prefix[2];
    case_spec sp;
    mla_fixture fx;
    outputs out;
    mla_model_opts opts = mla_model_opts_default();
    mla_shape shape;
    mla_plan plan;
    mla_error err;
    long bad_o = 0, bad_l = 0;
    int b, t, d, i, h;

    prefix[0] = prefix[1] = P;
    sp = base_spec(bs, H, L, prefix);
    build_fixture(&sp, &fx);
    opts.blk.block_n = block_n;

    for (b = 0; b < bs; b++) {
        const int64_t base = fx.kv_indptr[b];
        mla_bf16 common[576];
        for (d = 256; d < D; d++)
            common[d] = mla_f32_to_bf16((float)uniform_int(-1, 1));
        for (t = 0; t < P; t++) {
            mla_bf16 *k = fx.kv_buffer + (size_t)fx.kv_indices[base + t] * D;
            k[0] = mla_f32_to_bf16(0.0f);
            for (d = 1; d < 256; d++)
                k[d] = mla_f32_to_bf16((float)uniform_int(-32, 32) / 16.0f);
            for (d = 256; d < D; d++)
                k[d] = common[d];
        }
    }
    for (i = 0; i < bs * L; i++) {
        for (h = 0; h < H; h++) {
            mla_bf16 *q = fx.q + ((size_t)i * H + h) * D;
            q[0] = mla_f32_to_bf16(64.0f);
            for (d = 1; d < 256; d++)
                q[d] = mla_f32_to_bf16(0.0f);
            for (d = 256; d < D; d++)
                q[d] = mla_f32_to_bf16((float)uniform_int(-1, 1));
        }
        fx.k_extend[(size_t)i * D] = mla_f32_to_bf16(-64.0f);
        for (d = 1; d < D; d++)
            fx.k_extend[(size_t)i * D + d] = mla_f32_to_bf16((float)uniform_int(-1, 1));
        for (d = 0; d < Dv; d++)
            fx.v_extend[(size_t)i * Dv + d] = mla_f32_to_bf16((float)uniform_int(-32, 32) / 16.0f);
    }

    mla_shape_from_fixture(&fx, &shape);
    CHECK(mla_plan_make(&shape, &opts.blk, &plan, &err) == MLA_OK, "exact: plan: %s", err.msg);
    CHECK(mla_plan_active_splits(P, plan.num_splits, block_n) == 1,
          "exact case P %d block_n %d is not a single split", P, block_n);

    outputs_alloc(&fx, &out);
    CHECK(mla_model_run(&fx, &opts, out.o, out.lse, &err) == MLA_OK, "exact: %s", err.msg);

    for (b = 0; b < bs; b++) {
        const int64_t base = fx.kv_indptr[b];
        double sum[512];
        for (d = 0; d < Dv; d++) {
            sum[d] = 0.0;
            for (t = 0; t < P; t++)
                sum[d] += mla_bf16_to_f32(fx.kv_buffer[(size_t)fx.kv_indices[base + t] * D + d]);
        }
        for (i = 0; i < L; i++)
            for (h = 0; h < H; h++) {
                const size_t row = (size_t)(b * L + i) * H + h;
                const mla_bf16 *q = fx.q + row * D;
                const mla_bf16 *k0 = fx.kv_buffer + (size_t)fx.kv_indices[base] * D;
                const float qk = fx.cfg.sm_scale * fx.cfg.k_scale;
                double idot = 0.0, ddot_max = -INFINITY;
                float score, want_lse;
                int j;

                for (d = 0; d < D; d++)
                    idot += (double)mla_bf16_to_f32(q[d]) * mla_bf16_to_f32(k0[d]);
                for (j = 0; j <= i; j++) {
                    double dd = 0.0;
                    for (d = 0; d < D; d++)
                        dd += (double)mla_bf16_to_f32(q[d]) *
                              mla_bf16_to_f32(fx.k_extend[(size_t)(b * L + j) * D + d]);
                    ddot_max = fmax(ddot_max, dd);
                }
                /* expf underflows to 0 below about -104; keep a margin. */
                CHECK((idot - ddot_max) * fx.cfg.sm_scale > 150.0,
                      "exact: draft score gap %.1f too small", (idot - ddot_max) * fx.cfg.sm_scale);
                score = (float)idot * qk;
                want_lse = score + logf((float)P);
                if (out.lse[row] != want_lse)
                    bad_l++;
                for (d = 0; d < Dv; d++) {
                    const float want = mla_bf16_to_f32(mla_f32_to_bf16((float)sum[d] / (float)P));
                    if (mla_bf16_to_f32(out.o[row * Dv + d]) != want)
                        bad_o++;
                }
            }
    }
    printf("  single split P %-4d block_n %-3d (%d tile%s): %ld o and %ld lse mismatches\n", P,
           block_n, (P + block_n - 1) / block_n, (P + block_n - 1) / block_n == 1 ? "" : "s",
           bad_o, bad_l);
    CHECK(bad_o == 0 && bad_l == 0, "single split P %d block_n %d not exact", P, block_n);
    outputs_free(&out);
    mla_fixture_free(&fx);
}

/* A declined or invalid case must leave both output buffers bit for bit. */
static void declines_leave_outputs(void)
{
    static const int32_t prefix[] = {3, 70};
    case_spec sp = base_spec(2, 4, 2, prefix);
    const char *names[] = {"sinks",  "not causal", "logit cap", "sliding window",
                           "topk 2", "ragged",     "bad slot",  "block_n 0"};
    int k;

    for (k = 0; k < 8; k++) {
        mla_fixture fx;
        outputs out;
        mla_bf16 *o0;
        float *l0;
        mla_model_opts opts = mla_model_opts_default();
        mla_error err;
        mla_status st, want = k < 6 ? MLA_ERR_DECLINED : MLA_ERR_INVALID;
        int h;

        build_fixture(&sp, &fx);
        switch (k) {
        case 0:
            fx.sinks = xcalloc((size_t)fx.cfg.num_heads, sizeof(float));
            for (h = 0; h < fx.cfg.num_heads; h++)
                fx.sinks[h] = (float)uniform01();
            break;
        case 1:
            fx.cfg.is_causal = 0;
            break;
        case 2:
            fx.cfg.logit_cap = 30.0f;
            break;
        case 3:
            fx.cfg.sliding_window = 16;
            break;
        case 4:
            fx.cfg.topk = 2;
            break;
        case 5:
            fx.cfg.q_len = 0;
            break;
        case 6:
            fx.kv_indices[fx.num_kv_indices - 1] = fx.pool_slots;
            break;
        default:
            opts.blk.block_n = 0;
            break;
        }
        outputs_alloc(&fx, &out);
        o0 = xcalloc(out.n_o, sizeof(mla_bf16));
        l0 = xcalloc(out.n_lse, sizeof(float));
        memcpy(o0, out.o, out.n_o * sizeof(mla_bf16));
        memcpy(l0, out.lse, out.n_lse * sizeof(float));
        err.msg[0] = '\0';
        st = mla_model_run(&fx, &opts, out.o, out.lse, &err);
        printf("  %-15s -> %s: %s\n", names[k], mla_status_name(st), err.msg);
        CHECK(st == want, "%s: status %d, want %d", names[k], (int)st, (int)want);
        CHECK(err.msg[0] != '\0', "%s: no reason given", names[k]);
        CHECK(memcmp(o0, out.o, out.n_o * sizeof(mla_bf16)) == 0 &&
                  memcmp(l0, out.lse, out.n_lse * sizeof(float)) == 0,
              "%s: output buffers touched", names[k]);
        free(o0);
        free(l0);
        outputs_free(&out);
        mla_fixture_free(&fx);
    }
}

/* The fp16 helper against the compiler's own conversion where it has one,
 * and against hand-checked values everywhere. */
static void fp16_rounding(void)
{
    static const struct {
        float in, out;
    } known[] = {
        {1.0f, 1.0f},
        {1.0f + 0x1p-11f, 1.0f},                   /* tie -> even */
        {1.0f + 3 * 0x1p-11f, 1.0f + 0x1p-9f},     /* tie -> even (up) */
        {1.0f + 0x1p-11f + 0x1p-20f, 1.0f + 0x1p-10f},
        {65504.0f, 65504.0f},
        {65519.99f, 65504.0f},
        {65520.0f, INFINITY},                       /* tie at max rounds to inf */
        {1e6f, INFINITY},
        {-1e6f, -INFINITY},
        {0x1p-14f, 0x1p-14f},                       /* smallest normal */
        {0x1p-24f, 0x1p-24f},                       /* smallest subnormal */
        {0x1p-25f, 0.0f},                           /* tie -> even zero */
        {3 * 0x1p-26f, 0x1p-24f},
        {3 * 0x1p-25f, 2 * 0x1p-24f},               /* 1.5 ulp tie -> 2 */
        {1e-10f, 0.0f},
        {0.1f, 0.0999755859375f},
    };
    long mism = 0;
    int k;

    for (k = 0; k < (int)(sizeof known / sizeof known[0]); k++)
        CHECK(mla_f32_round_f16(known[k].in) == known[k].out, "fp16(%a) = %a, want %a",
              (double)known[k].in, (double)mla_f32_round_f16(known[k].in), (double)known[k].out);
    CHECK(isnan(mla_f32_round_f16(nanf(""))), "fp16(NaN) not NaN");
    CHECK(signbit(mla_f32_round_f16(-0.0f)) && mla_f32_round_f16(-0.0f) == 0.0f,
          "fp16(-0) lost its sign");
#if defined(__FLT16_MAX__)
    for (k = 0; k < 2000000; k++) {
        /* Exponents spread over the whole fp16 range and beyond. */
        uint32_t u = (uint32_t)next_u64();
        float f, want, got;
        u = (u & 0x807fffffu) | ((uint32_t)uniform_int(96, 150) << 23);
        memcpy(&f, &u, sizeof f);
        want = (float)(_Float16)f;
        got = mla_f32_round_f16(f);
        if (memcmp(&want, &got, sizeof f) != 0 && mism++ < 5)
            fprintf(stderr, "fp16(%a): %a, _Float16 %a\n", (double)f, (double)got,
                    (double)want);
    }
    printf("  fp16 rounding: %ld mismatches vs _Float16 over 2e6 values\n", mism);
    CHECK(mism == 0, "fp16 helper disagrees with _Float16");
#else
    (void)mism;
    printf("  fp16 rounding: compiler has no _Float16, hand-checked values only\n");
#endif
}

/* Rows of sequence b (all heads, all columns) identical in two outputs. */
static int seq_identical(const mla_fixture *fx, const outputs *a, const outputs *b, int seq,
                         int row_lo, int row_hi)
{
    const size_t H = (size_t)fx->cfg.num_heads, Dv = (size_t)fx->cfg.v_head_dim;
    const size_t r0 = (size_t)fx->qo_indptr[seq];
    size_t i;

    for (i = r0 + (size_t)row_lo; i < r0 + (size_t)row_hi; i++)
        if (memcmp(a->o + i * H * Dv, b->o + i * H * Dv, H * Dv * sizeof(mla_bf16)) != 0 ||
            memcmp(a->lse + i * H, b->lse + i * H, H * sizeof(float)) != 0)
            return 0;
    return 1;
}

/* The masked drafts summed at weight 0: with finite draft values the
 * output is the correct model's to the bit (0 x v = 0); a NaN in the last
 * draft's value column 5 of the first sequence must leave the earlier
 * drafts' rows finite there in the correct model and turn them NaN in the
 * mutant (what the shipped k3-nan-draft catches in mla-validate). */
static void masked_draft_caught(mla_fixture *fx, const outputs *ref, int L, int H)
{
    const int Dv = fx->cfg.v_head_dim;
    const size_t at = (size_t)(fx->qo_indptr[0] + L - 1) * (size_t)Dv + 5;
    const mla_bf16 keep = fx->v_extend[at];
    mla_model_opts good = mla_model_opts_default(), bad = good;
    outputs og, ob;
    mla_error err;
    int i, hd, good_finite = 1, bad_nan = 1;

    bad.mutation = MLA_MUT_MASKED_DRAFT_ZERO_WEIGHT;
    outputs_alloc(fx, &og);
    outputs_alloc(fx, &ob);
    CHECK(mla_model_run(fx, &bad, ob.o, ob.lse, &err) == MLA_OK, "masked draft: %s", err.msg);
    CHECK(memcmp(ob.o, ref->o, (size_t)fx->num_q_tokens * H * Dv * sizeof(mla_bf16)) == 0,
          "mutation masked_draft_zero_weight changed an output with finite draft values");
    fx->v_extend[at] = BF16_QNAN;
    CHECK(mla_model_run(fx, &good, og.o, og.lse, &err) == MLA_OK, "masked draft: %s", err.msg);
    CHECK(mla_model_run(fx, &bad, ob.o, ob.lse, &err) == MLA_OK, "masked draft: %s", err.msg);
    fx->v_extend[at] = keep;
    for (i = 0; i < L - 1; i++)
        for (hd = 0; hd < H; hd++) {
            const size_t e = ((size_t)(fx->qo_indptr[0] + i) * H + hd) * Dv + 5;
            good_finite &= isfinite(mla_bf16_to_f32(og.o[e]));
            bad_nan &= isnan(mla_bf16_to_f32(ob.o[e]));
        }
    printf("  mutation %-22s earlier drafts' column 5: correct finite %d, mutant NaN %d\n",
           mla_mutation_name(MLA_MUT_MASKED_DRAFT_ZERO_WEIGHT), good_finite, bad_nan);
    CHECK(good_finite, "correct model: a NaN in the last draft's value reached earlier drafts");
    CHECK(bad_nan, "mutation masked_draft_zero_weight not caught");
    outputs_free(&og);
    outputs_free(&ob);
}

/* The lazy running max with its rescale of O dropped: within tolerance on
 * random scores (fx: the reference never moves past 2^8 after a split's
 * first tile), out of it on the catalogue's k3-ramp, whose scores rise
 * ~12 log2 units per 64 tokens and move the max in every tile. */
static void lazy_rescale_caught(const mla_fixture *fx)
{
    mla_fixture ramp;
    outputs out, good;
    mla_model_opts go = mla_model_opts_default(), mo = go;
    mla_error err;
    check_result rg, rb;

    mo.mutation = MLA_MUT_LAZY_RESCALE_DROPPED;
    outputs_alloc(fx, &out);
    CHECK(mla_model_run(fx, &mo, out.o, out.lse, &err) == MLA_OK, "lazy: %s", err.msg);
    check_against_fp64(fx, &mo, &out, &rb);
    printf("  mutation %-22s random scores: %ld of %ld out of tolerance\n",
           mla_mutation_name(MLA_MUT_LAZY_RESCALE_DROPPED), rb.violations, rb.elements);
    CHECK(rb.violations == 0, "lazy_rescale_dropped shows on random scores: %s", rb.first);
    outputs_free(&out);

    CHECK(mla_catalogue_generate("k3-ramp", mla_catalogue_default_seed("k3-ramp"), &ramp, &err) == MLA_OK,
          "k3-ramp: %s", err.msg);
    outputs_alloc(&ramp, &good);
    outputs_alloc(&ramp, &out);
    CHECK(mla_model_run(&ramp, &go, good.o, good.lse, &err) == MLA_OK, "lazy: %s", err.msg);
    check_against_fp64(&ramp, &go, &good, &rg);
    CHECK(mla_model_run(&ramp, &mo, out.o, out.lse, &err) == MLA_OK, "lazy: %s", err.msg);
    check_against_fp64(&ramp, &mo, &out, &rb);
    printf("  mutation %-22s k3-ramp: correct %ld, mutant %ld of %ld out of tolerance\n",
           mla_mutation_name(MLA_MUT_LAZY_RESCALE_DROPPED), rg.violations, rb.violations, rb.elements);
    CHECK(rg.violations == 0, "correct model fails k3-ramp: %s", rg.first);
    CHECK(rb.violations > 0, "mutation lazy_rescale_dropped not caught on k3-ramp");
    outputs_free(&good);
    outputs_free(&out);
    mla_fixture_free(&ramp);
}

/* Each planted bug must fail the same tolerance the real model passes, and
 * only where it should. */
static void mutations_caught(void)
{
    /* Empty prefix, a tiny one, 3 splits of 64 + 2, 2 splits of 65 + 1. */
    static const int32_t prefix[] = {0, 3, 194, 131};
    static const int32_t prefix_big[] = {100, 70};
    const int bs = 4, H = 6, L = 4;
    case_spec sp = base_spec(bs, H, L, prefix);
    case_spec sp_big = base_spec(2, 4, 2, prefix_big);
    mla_fixture fx, fx_big;
    outputs ref, ref_big;
    mla_model_opts opts = mla_model_opts_default();
    mla_error err;
    check_result r;
    int m;

    build_fixture(&sp, &fx);
    outputs_alloc(&fx, &ref);
    CHECK(mla_model_run(&fx, &opts, ref.o, ref.lse, &err) == MLA_OK, "mut base: %s", err.msg);
    check_against_fp64(&fx, &opts, &ref, &r);
    CHECK(r.violations == 0, "mutation base case fails unmutated: %s", r.first);

    /* Partials near 1e5: within bf16 range, past fp16's 65504. q is scaled
     * down so the scores stay moderate. */
    sp_big.kv_lo = 65536.0;
    sp_big.kv_hi = 131072.0;
    sp_big.ext_lo = 65536.0;
    sp_big.ext_hi = 131072.0;
    sp_big.q_amp = 0x1p-16;
    build_fixture(&sp_big, &fx_big);
    outputs_alloc(&fx_big, &ref_big);
    CHECK(mla_model_run(&fx_big, &opts, ref_big.o, ref_big.lse, &err) == MLA_OK, "big: %s",
          err.msg);
    check_against_fp64(&fx_big, &opts, &ref_big, &r);
    CHECK(r.violations == 0 && r.nonfinite == 0, "large-value case fails unmutated: %s",
          r.first);

    for (m = 1; m < MLA_MUT_COUNT; m++) {
        const int big = (m == MLA_MUT_FP16_PARTIALS);
        if (m == MLA_MUT_MASKED_DRAFT_ZERO_WEIGHT) {
            masked_draft_caught(&fx, &ref, L, H);
            continue;
        }
        if (m == MLA_MUT_LAZY_RESCALE_DROPPED) {
            lazy_rescale_caught(&fx);
            continue;
        }
        const mla_fixture *f = big ? &fx_big : &fx;
        outputs out;
        mla_model_opts mo = mla_model_opts_default();
        int b, hd, ok_scope = 1;

        mo.mutation = (mla_mutation)m;
        outputs_alloc(f, &out);
        CHECK(mla_model_run(f, &mo, out.o, out.lse, &err) == MLA_OK, "%s: %s",
              mla_mutation_name((mla_mutation)m), err.msg);
        check_against_fp64(f, &mo, &out, &r);
        printf("  mutation %-22s %6ld of %ld out of tolerance, %ld non-finite\n",
               mla_mutation_name((mla_mutation)m), r.violations, r.elements, r.nonfinite);
        CHECK(r.violations > 0, "mutation %s not caught", mla_mutation_name((mla_mutation)m));

        /* Where each bug must not show. */
        switch (m) {
        case MLA_MUT_DROP_REMAINDER: /* only sequences with a remainder */
            ok_scope = seq_identical(&fx, &out, &ref, 0, 0, L) &&
                       seq_identical(&fx, &out, &ref, 1, 0, L);
            break;
        case MLA_MUT_NO_CAUSAL: /* the last draft row already sees all */
            for (b = 0; b < bs; b++)
                ok_scope &= seq_identical(&fx, &out, &ref, b, L - 1, L);
            break;
        case MLA_MUT_LSE_NO_MAX_SHIFT:
        case MLA_MUT_PARTITION_OFF_BY_ONE: /* nothing to shift or skip */
            ok_scope = seq_identical(&fx, &out, &ref, 0, 0, L);
            break;
        case MLA_MUT_EMPTY_PREFIX_NAN: /* only the empty-prefix sequence */
            for (b = 1; b < bs; b++)
                ok_scope &= seq_identical(&fx, &out, &ref, b, 0, L);
            for (b = 0; b < L * H * 512; b++)
                ok_scope &= isnan(mla_bf16_to_f32(out.o[b]));
            break;
        case MLA_MUT_SKIP_HEAD_BLOCK: /* heads 4, 5 keep the poison exactly */
            for (b = 0; b < bs * L; b++)
                for (hd = 0; hd < H; hd++) {
                    const size_t row = (size_t)b * H + hd;
                    int k;
                    if (hd < 4) {
                        ok_scope &= memcmp(out.o + row * 512, ref.o + row * 512,
                                           512 * sizeof(mla_bf16)) == 0;
                        continue;
                    }
                    for (k = 0; k < 512; k++)
                        ok_scope &= out.o[row * 512 + k] == BF16_QNAN;
                    ok_scope &= isnan(out.lse[row]);
                }
            break;
        case MLA_MUT_FP16_PARTIALS:
            ok_scope = r.nonfinite > 0; /* overflow to inf, not a small drift */
            break;
        default:
            break;
        }
        CHECK(ok_scope, "mutation %s changed what it must not (or not what it must)",
              mla_mutation_name((mla_mutation)m));
        outputs_free(&out);
    }
    CHECK(strcmp(mla_mutation_name(MLA_MUT_COUNT), "unknown") == 0, "mutation name fallback");
    outputs_free(&ref);
    outputs_free(&ref_big);
    mla_fixture_free(&fx);
    mla_fixture_free(&fx_big);
}

int main(int argc, char **argv)
{
    uint64_t seed = argc > 1 ? strtoull(argv[1], NULL, 0)
                             : ((uint64_t)time(NULL) * 0x9e3779b97f4a7c15ull) ^ (uint64_t)clock();

    rng_state = seed;
    printf("test_model seed %" PRIu64 " (rerun: test_model %" PRIu64 ")\n", seed, seed);
    printf("fp16 helper\n");
    fp16_rounding();
    printf("accuracy vs fp64 direct computation\n");
    accuracy_cases();
    printf("the fast tier's balanced partition\n");
    fast_plan_cases();
    printf("single non-empty split is returned exactly\n");
    single_split_exact(1, 64);
    single_split_exact(37, 64);
    single_split_exact(40, 32);
    single_split_exact(200, 256);
    printf("declines and invalid input leave outputs untouched\n");
    declines_leave_outputs();
    printf("planted mutations\n");
    mutations_caught();
    printf("%d failures\n", failures);
    return failures ? 1 : 0;
}
