#include "ref_test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Error model of one output row of the fp32 reference against the exact
 * result (the fp64 oracle's own error, ~1e-16 relative, is negligible).
 * u = 2^-24 is fp32's unit roundoff; per row, from the oracle: vmax the
 * largest |value| over visible keys (v_scale applied), N the visible keys,
 * smax the largest |score| (before the cap), and E the largest over visible
 * keys of |scale| * sqrt(sum_d S_d^2), S_d the partial sums of q . k.
 *  - Score. Products of two bf16 values are exact in fp32, so a dot errs
 *    only in its additions: sum_d delta_d S_d with |delta_d| <= u, which
 *    for independent roundings is below lambda u sqrt(sum S_d^2) except
 *    with probability 2 exp(-lambda^2 / 2) (Hoeffding; the probabilistic
 *    analysis of Higham and Mary). The GEMM may add in panels or with
 *    interleaved accumulators; their partial sums are subsets of these, no
 *    larger in magnitude. E <= sqrt(D) * max |scale| sum |q_d k_d|, the
 *    usual sqrt(D) A form of SPEC section 7, and much smaller when the
 *    terms cancel. Then the alpha and cap roundings: <= 6 u |s|.
 *  - A relative error e_k on weight k (= the error of s_k) moves
 *    o = sum w_k v_k by sum w_k (e_k - e_bar) v_k <= 2 max|e| vmax.
 *    s - m is formed in fp32 but exp(-x) * u x <= u / e: bounded weights.
 *  - Sums over N keys (value GEMM, denominator): lambda sqrt(N) u vmax.
 *  - exp (< 1 ulp), online rescale, final division: about 10 u vmax.
 * |o_ref - o| <= u vmax (2 lambda E + 12 smax + lambda sqrt(N) + 10), and
 * lse = m + log(l) errs by the weighted score error, the denominator's
 * relative error and u (|lse| + smax) for the log and the add. With
 *   o_bound = u vmax (E + smax + sqrt(N)),
 *   lse_bound = u (|lse| + E + smax + sqrt(N)),
 * each ratio is below max(2 lambda, 12, lambda + 10 / sqrt(N)): 14 with
 * lambda = 4 (N = 1 is exact: one weight of 1); limit 16. Typical ratios
 * are far smaller (the worst cases need every rounding aligned), and a real
 * defect (a key masked wrongly, a missing rescale, a bf16 rounding) moves o
 * by ~vmax or 2^-8 vmax: ratios of 1e3 to 1e7. */
const double RT_RATIO_LIMIT = 16.0;

static const double U32 = 5.9604644775390625e-08; /* 2^-24 */

uint64_t rt_next(rt_rng *r)
{
    /* splitmix64 */
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

float rt_uniform(rt_rng *r)
{
    return (float)((double)(rt_next(r) >> 11) * 0x1.0p-53 * 2.0 - 1.0);
}

static mla_bf16 rt_bf16(rt_rng *r, float mag)
{
    return mla_f32_to_bf16(mag * rt_uniform(r));
}

static char *dupstr(const char *s)
{
    char *d = malloc(strlen(s) + 1);
    if (d)
        strcpy(d, s);
    return d;
}

mla_status rt_build(const rt_case *c, mla_fixture *fx, mla_error *err)
{
    memset(fx, 0, sizeof *fx);
    rt_rng rng = {c->seed};
    const int32_t bs = c->num_seqs, H = c->num_heads, Hkv = c->num_kv_heads, D = c->head_dim,
                  Dv = c->v_head_dim;
    fx->case_name = dupstr(c->name);
    fx->source = dupstr("synthetic");
    fx->has_seed = 1;
    fx->seed = (int64_t)c->seed;
    mla_config *g = &fx->cfg;
    g->num_seqs = bs;
    g->num_heads = H;
    g->num_kv_heads = Hkv;
    g->head_dim = D;
    g->v_head_dim = Dv;
    g->sm_scale = c->sm_scale;
    g->k_scale = c->k_scale;
    g->v_scale = c->v_scale;
    g->is_causal = c->is_causal;
    g->logit_cap = c->logit_cap;
    g->sliding_window = c->sliding_window;
    g->topk = 1;
    fx->qo_indptr = calloc((size_t)bs + 1, sizeof(int32_t));
    fx->kv_indptr = calloc((size_t)bs + 1, sizeof(int32_t));
    if (!fx->case_name || !fx->source || !fx->qo_indptr || !fx->kv_indptr)
        goto nomem;
    int same = 1;
    for (int32_t b = 0; b < bs; b++) {
        fx->qo_indptr[b + 1] = fx->qo_indptr[b] + c->drafts[b];
        fx->kv_indptr[b + 1] = fx->kv_indptr[b] + c->prefix[b];
        same &= c->drafts[b] == c->drafts[0];
    }
    g->q_len = same ? c->drafts[0] : 0;
    fx->num_q_tokens = fx->qo_indptr[bs];
    fx->num_kv_indices = fx->kv_indptr[bs];
    /* Whole 64-slot pages, plus two unreferenced pages of NaN. */
    const int64_t pages = (fx->num_kv_indices + 63) / 64 + 2;
    fx->pool_slots = pages * 64;
    const size_t T = (size_t)fx->num_q_tokens;
    fx->q = malloc(T * H * D * sizeof(mla_bf16) + 1);
    fx->k_extend = malloc(T * Hkv * D * sizeof(mla_bf16) + 1);
    fx->v_extend = malloc(T * Hkv * Dv * sizeof(mla_bf16) + 1);
    fx->kv_buffer = malloc((size_t)fx->pool_slots * Hkv * D * sizeof(mla_bf16));
    fx->kv_indices = malloc((size_t)fx->num_kv_indices * sizeof(int64_t) + 1);
    int64_t *perm = malloc((size_t)pages * sizeof(int64_t));
    if (!fx->q || !fx->k_extend || !fx->v_extend || !fx->kv_buffer || !fx->kv_indices || !perm) {
        free(perm);
        goto nomem;
    }
    for (size_t i = 0; i < T * H * D; i++)
        fx->q[i] = rt_bf16(&rng, c->q_mag);
    for (size_t i = 0; i < T * Hkv * D; i++)
        fx->k_extend[i] = rt_bf16(&rng, c->k_mag);
    for (size_t i = 0; i < T * Hkv * Dv; i++)
        fx->v_extend[i] = rt_bf16(&rng, 1.0f);
    for (size_t i = 0; i < (size_t)fx->pool_slots * Hkv * D; i++)
        fx->kv_buffer[i] = 0x7fc0; /* NaN until referenced */
    /* Shuffled pages, keeping the two NaN pages out of the list. */
    for (int64_t p = 0; p < pages; p++)
        perm[p] = p;
    for (int64_t p = pages - 1; p > 0; p--) {
        int64_t k = (int64_t)(rt_next(&rng) % (uint64_t)(p + 1));
        int64_t t = perm[p];
        perm[p] = perm[k];
        perm[k] = t;
    }
    for (int64_t t = 0; t < fx->num_kv_indices; t++) {
        int64_t slot = perm[t / 64] * 64 + t % 64;
        fx->kv_indices[t] = slot;
        for (int32_t h = 0; h < Hkv; h++)
            for (int32_t d = 0; d < D; d++)
                fx->kv_buffer[((size_t)slot * Hkv + h) * D + d] = rt_bf16(&rng, c->k_mag);
    }
    free(perm);
    if (c->with_sinks) {
        fx->sinks = malloc((size_t)H * sizeof(float));
        if (!fx->sinks)
            goto nomem;
        for (int32_t h = 0; h < H; h++)
            fx->sinks[h] = c->sink_bias + rt_uniform(&rng);
    }
    return MLA_OK;
nomem:
    mla_fixture_free(fx);
    mla_error_set(err, "rt_build: out of memory");
    return MLA_ERR_NOMEM;
}

int rt_compare(const mla_fixture *fx, const mla_ref_opts *opts, rt_cmp *res)
{
    memset(res, 0, sizeof *res);
    const size_t rows = (size_t)fx->num_q_tokens * (size_t)fx->cfg.num_heads;
    const size_t Dv = (size_t)fx->cfg.v_head_dim;
    float *o = malloc(rows * Dv * sizeof(float) + 1);
    float *lse = malloc(rows * sizeof(float) + 1);
    double *oo = malloc(rows * Dv * sizeof(double) + 1);
    double *olse = malloc(rows * sizeof(double) + 1);
    mla_oracle_row_stats *st = malloc(rows * sizeof *st + 1);
    int rc = 1;
    mla_error err = {{0}};
    if (!o || !lse || !oo || !olse || !st) {
        fprintf(stderr, "rt_compare: out of memory\n");
        goto done;
    }
    mla_status s = mla_reference_run_opts(fx, opts, o, lse, &err);
    if (s != MLA_OK) {
        fprintf(stderr, "reference failed: %s: %s\n", mla_status_name(s), err.msg);
        goto done;
    }
    s = mla_oracle_run_opts(fx, opts->use_prefix, opts->use_drafts, oo, olse, st, &err);
    if (s != MLA_OK) {
        fprintf(stderr, "oracle failed: %s: %s\n", mla_status_name(s), err.msg);
        goto done;
    }
    res->rows = (long)rows;
    for (size_t r = 0; r < rows; r++) {
        const float *a = o + r * Dv;
        const double *b = oo + r * Dv;
        if (st[r].keys == 0) {
            res->masked_rows++;
            int bad = !(isinf(lse[r]) && lse[r] < 0) || !(isinf(olse[r]) && olse[r] < 0);
            for (size_t d = 0; d < Dv; d++)
                bad |= a[d] != 0.0f || b[d] != 0.0;
            if (bad) {
                if (res->failures < 5)
                    fprintf(stderr, "  row %zu has no visible key but o/lse are not 0/-inf\n", r);
                res->failures++;
            }
            continue;
        }
        double err_o = 0.0;
        int nonfinite_bad = 0;
        for (size_t d = 0; d < Dv; d++) {
            if (!isfinite(b[d]) || !isfinite(a[d])) {
                /* inf/NaN positions must match (SPEC section 7) */
                nonfinite_bad |= !(isnan(b[d]) && isnan(a[d])) && !((double)a[d] == b[d]);
                continue;
            }
            double e = fabs((double)a[d] - b[d]);
            err_o = e > err_o ? e : err_o;
        }
        if (nonfinite_bad || !isnan(lse[r]) != !isnan(olse[r])) {
            if (res->failures < 5)
                fprintf(stderr, "  row %zu: non-finite values do not match the oracle\n", r);
            res->failures++;
            continue;
        }
        res->max_abs = err_o > res->max_abs ? err_o : res->max_abs;
        if (st[r].vmax > 0 && err_o / st[r].vmax > res->max_rel)
            res->max_rel = err_o / st[r].vmax;
        res->dot_err = st[r].dot_err > res->dot_err ? st[r].dot_err : res->dot_err;
        const double bound_o = U32 * st[r].vmax * (st[r].dot_err + st[r].smax + sqrt(st[r].keys));
        double ratio_o = bound_o > 0 ? err_o / bound_o : (err_o > 0 ? INFINITY : 0.0);
        res->o_ratio = ratio_o > res->o_ratio ? ratio_o : res->o_ratio;
        if (!isnan(olse[r])) {
            const double err_l = fabs((double)lse[r] - olse[r]);
            const double bound_l =
                U32 * (fabs(olse[r]) + st[r].dot_err + st[r].smax + sqrt(st[r].keys));
            const double ratio_l = err_l / bound_l;
            res->lse_ratio = ratio_l > res->lse_ratio ? ratio_l : res->lse_ratio;
        }
    }
    rc = 0;
done:
    free(o);
    free(lse);
    free(oo);
    free(olse);
    free(st);
    return rc;
}
