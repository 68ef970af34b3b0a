/* The fp64 oracle: SPEC section 2 written as directly as possible, one row
 * and one head at a time, scores of every visible key kept, then a plain
 * two-pass softmax. Shares no code with the fp32 reference beyond the input
 * checks, so a slip in the reference's blocking, tiling or online rescaling
 * cannot be mirrored here. Inputs are exact bf16 values, products of two of
 * them are exact in double, and every sum is accumulated in double: its own
 * error (~1e-16 relative) is far below what it is used to measure. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ref_internal.h"

/* q . k in double (exact products, ~1e-16 relative sum), with two sizes the
 * fp32 reference's error on this dot depends on: sum |q_d k_d| and the
 * root-sum-square of the running partial sums (an fp32 sum errs by
 * sum_d delta_d S_d, |delta_d| <= 2^-24, S_d the partial sums). */
static double dot_bf16(const mla_bf16 *a, const mla_bf16 *b, int32_t n, double *abs_sum,
                       double *partial_rss)
{
    double s = 0.0, sa = 0.0, ss = 0.0;
    for (int32_t d = 0; d < n; d++) {
        double p = (double)mla_bf16_to_f32(a[d]) * (double)mla_bf16_to_f32(b[d]);
        s += p;
        sa += fabs(p);
        ss += s * s;
    }
    *abs_sum = sa;
    *partial_rss = sqrt(ss);
    return s;
}

/* SPEC section 2: is key position kpos visible to the query at qpos? */
static int visible(int64_t qpos, int64_t kpos, int causal, int32_t window)
{
    if (causal && kpos > qpos)
        return 0;
    if (window > 0 && qpos - kpos > window)
        return 0;
    return 1;
}

mla_status mla_oracle_run_opts(const mla_fixture *fx, int use_prefix, int use_drafts, double *o,
                               double *lse, mla_oracle_row_stats *stats, mla_error *err)
{
    mla_status st = mla_ref_check_inputs(fx, err);
    if (st != MLA_OK)
        return st;
    if (!o && fx->num_q_tokens > 0) {
        mla_error_set(err, "output o is NULL");
        return MLA_ERR_INVALID;
    }
    const mla_config *c = &fx->cfg;
    const int32_t H = c->num_heads, Hkv = c->num_kv_heads, D = c->head_dim, Dv = c->v_head_dim;
    const double sm = (double)c->sm_scale, ks = (double)c->k_scale, vs = (double)c->v_scale;
    const double cap = (double)c->logit_cap;

    int64_t max_keys = 0;
    for (int32_t b = 0; b < c->num_seqs; b++) {
        int64_t n = (int64_t)mla_fixture_prefix(fx, b) + mla_fixture_drafts(fx, b);
        max_keys = n > max_keys ? n : max_keys;
    }
    /* score, and for each visible key: its value row and whether v_scale applies */
    double *score = malloc(((size_t)max_keys + 1) * sizeof *score);
    const mla_bf16 **vrow = malloc(((size_t)max_keys + 1) * sizeof *vrow);
    double *vmul = malloc(((size_t)max_keys + 1) * sizeof *vmul);
    double *acc = malloc((size_t)Dv * sizeof *acc);
    /* fp8 pools (schema 1.1.0) decoded once into bf16, exactly: every e4m3
     * value is a bf16 value. The scales apply below as for a bf16 pool. */
    const mla_bf16 *kvpool = NULL;
    mla_bf16 *kvwide = NULL;
    if ((st = mla_fixture_kv_bf16(fx, &kvpool, &kvwide, err)) != MLA_OK)
        goto done;
    if (!score || !vrow || !vmul || !acc) {
        mla_error_set(err, "oracle: cannot allocate %lld scores", (long long)max_keys);
        st = MLA_ERR_NOMEM;
        goto done;
    }

    for (int32_t b = 0; b < c->num_seqs; b++) {
        const int32_t L = mla_fixture_drafts(fx, b), P = mla_fixture_prefix(fx, b);
        const int64_t qo = fx->qo_indptr[b], ko = fx->kv_indptr[b];
        for (int32_t i = 0; i < L; i++) {
            const int64_t qpos = (int64_t)P + i;
            for (int32_t h = 0; h < H; h++) {
                const int32_t g = h / (H / Hkv);
                const mla_bf16 *q = fx->q + ((size_t)(qo + i) * H + h) * D;
                int64_t n = 0;
                double amax = 0.0, vmax = 0.0, dmax = 0.0;
                if (use_prefix) {
                    for (int32_t t = 0; t < P; t++) {
                        if (!visible(qpos, t, 0, c->sliding_window))
                            continue;
                        const mla_bf16 *k =
                            kvpool + ((size_t)fx->kv_indices[ko + t] * Hkv + g) * D;
                        double a, e;
                        score[n] = sm * ks * dot_bf16(q, k, D, &a, &e);
                        a *= fabs(sm * ks);
                        e *= fabs(sm * ks);
                        amax = a > amax ? a : amax;
                        dmax = e > dmax ? e : dmax;
                        vrow[n] = k;
                        vmul[n] = vs;
                        n++;
                    }
                }
                if (use_drafts) {
                    for (int32_t j = 0; j < L; j++) {
                        if (!visible(qpos, (int64_t)P + j, c->is_causal != 0, c->sliding_window))
                            continue;
                        const size_t tok = (size_t)(qo + j);
                        double a, e;
                        score[n] =
                            sm * dot_bf16(q, fx->k_extend + (tok * Hkv + g) * D, D, &a, &e);
                        a *= fabs(sm);
                        e *= fabs(sm);
                        amax = a > amax ? a : amax;
                        dmax = e > dmax ? e : dmax;
                        vrow[n] = fx->v_extend + (tok * Hkv + g) * Dv;
                        vmul[n] = 1.0;
                        n++;
                    }
                }
                double *orow = o + ((size_t)(qo + i) * H + h) * Dv;
                const size_t row = (size_t)(qo + i) * H + h;
                double smax = 0.0;
                for (int64_t k = 0; k < n; k++) {
                    smax = fabs(score[k]) > smax ? fabs(score[k]) : smax;
                    if (cap > 0.0)
                        score[k] = cap * tanh(score[k] / cap);
                    for (int32_t d = 0; d < Dv; d++) {
                        double v = fabs(vmul[k] * (double)mla_bf16_to_f32(vrow[k][d]));
                        vmax = v > vmax ? v : vmax;
                    }
                }
                if (stats) {
                    stats[row].keys = (double)n;
                    stats[row].vmax = vmax;
                    stats[row].amax = amax;
                    stats[row].dot_err = dmax;
                    stats[row].smax = smax;
                }
                if (n == 0) {
                    /* SPEC section 2: no visible key -> o = 0, lse = -inf. */
                    for (int32_t d = 0; d < Dv; d++)
                        orow[d] = 0.0;
                    if (lse)
                        lse[row] = -INFINITY;
                    continue;
                }
                /* Pass 1: the max, including the sink so exp never overflows;
                 * a NaN score makes the max (and so the row) NaN. */
                double m = -INFINITY;
                for (int64_t k = 0; k < n; k++)
                    m = (score[k] > m || isnan(score[k])) ? score[k] : m;
                const double sk = fx->sinks ? (double)fx->sinks[h] : -INFINITY;
                if (fx->sinks)
                    m = (sk > m || isnan(sk)) ? sk : m;
                /* Pass 2: weights, denominator and weighted values. */
                double l = fx->sinks ? exp(sk - m) : 0.0;
                memset(acc, 0, (size_t)Dv * sizeof *acc);
                for (int64_t k = 0; k < n; k++) {
                    const double p = exp(score[k] - m);
                    l += p;
                    for (int32_t d = 0; d < Dv; d++)
                        acc[d] += p * vmul[k] * (double)mla_bf16_to_f32(vrow[k][d]);
                }
                for (int32_t d = 0; d < Dv; d++)
                    orow[d] = acc[d] / l;
                if (lse)
                    lse[row] = m + log(l);
            }
        }
    }
    st = MLA_OK;
done:
    free(score);
    free(vrow);
    free(vmul);
    free(acc);
    free(kvwide);
    return st;
}

mla_status mla_oracle_run(const mla_fixture *fx, double *o, double *lse, mla_error *err)
{
    return mla_oracle_run_opts(fx, 1, 1, o, lse, NULL, err);
}
