/* The fp32 reference (SPEC section 2) on OpenBLAS.
 *
 * Work unit: one sequence b, one KV head g, and a tile of its draft rows.
 * All query heads of the KV head's group times the tile's drafts form the M
 * rows of one GEMM (row r = draft i * heads_per_group + head), the way the
 * GPU kernel folds heads and drafts, so one gathered key block serves every
 * row. Keys are visited in blocks (prefix first, drafts last) with an online
 * softmax: a running max m and sum l per row and an accumulator rescaled
 * whenever m grows. Memory is bounded by one key block and one row tile,
 * whatever the prefix length.
 *
 * Determinism: every reduction here has a fixed order; the GEMMs are
 * OpenBLAS's, whose partition depends only on the shape and thread count. */
#include <cblas.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ref_work.h"

/* The element-wise work between the GEMMs (bf16 conversion, exp, max, sum)
 * runs on one core while OpenBLAS's threads wait, so its speed decides how
 * close the reference gets to the GEMM rate. Where the toolchain can
 * dispatch at load time, the hot loops are built for AVX-512, AVX2 and the
 * baseline, and the best one the CPU has is used. Results do not depend on
 * the choice: ISO C mode contracts nothing into FMAs, every element sees
 * the same operations, and the reductions keep their eight fixed lanes. */
#if defined(__x86_64__) && defined(__GLIBC__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define REF_HOT __attribute__((target_clones("avx512f", "avx2", "default")))
#endif
#endif
#ifndef REF_HOT
#define REF_HOT
#endif

/* 256 keys. At the K3 benchmark shape the reference's time is flat from
 * 128 to 1024 keys per block (193-208 ms, within this machine's noise; see
 * reports/bench-ref.md), so the block is sized for memory instead: its fp32
 * keys (576 KB at head_dim 576) stay in one core's L2 between the score and
 * value GEMMs, and the score tile is rows x 256. */
#define REF_KEY_BLOCK 256
/* Bounds the accumulator (row_tile x v_head_dim floats) on ragged inputs
 * with many drafts; the K3 shape (96 rows) is one tile. */
#define REF_ROW_TILE 1024

mla_ref_opts mla_ref_opts_default(void)
{
    mla_ref_opts o;
    o.key_block = REF_KEY_BLOCK;
    o.row_tile = REF_ROW_TILE;
    o.use_prefix = 1;
    o.use_drafts = 1;
    o.pstats = NULL;
    return o;
}


REF_INLINE void bf16_row_to_f32(float *dst, const mla_bf16 *src, int32_t n)
{
    for (int32_t d = 0; d < n; d++) {
        uint32_t u = (uint32_t)src[d] << 16;
        memcpy(&dst[d], &u, sizeof u);
    }
}

/* The same, returning non-zero if any element is inf or NaN (exponent all
 * ones: adding 0x0080 to the masked exponent then carries into bit 15). */
REF_INLINE uint32_t bf16_row_to_f32_nonfinite(float *dst, const mla_bf16 *src, int32_t n)
{
    uint32_t bad = 0;
    for (int32_t d = 0; d < n; d++) {
        bad |= (((uint32_t)src[d] & 0x7f80u) + 0x0080u) & 0x8000u;
        uint32_t u = (uint32_t)src[d] << 16;
        memcpy(&dst[d], &u, sizeof u);
    }
    return bad;
}

/* Eight interleaved partial sums: a fixed order (deterministic) that the
 * compiler can keep in vector registers, unlike one serial chain. */
REF_INLINE float sum_lanes(const float *x, int32_t n)
{
    float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int32_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++)
            lane[k] += x[i + k];
    for (; i < n; i++)
        lane[i & 7] += x[i];
    return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

/* Floats mapped to unsigned integers of the same order (negative values
 * reflected), so the max is an integer max: a float comparison counts as
 * possibly trapping and keeps GCC from vectorising the loop. A positive
 * NaN maps above +inf and wins; a negative one maps below -inf and loses,
 * but exp(NaN - m) still carries it into the weights, the sum and the
 * output, as in the oracle. */
REF_INLINE uint32_t order_key(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u ^ ((0u - (u >> 31)) | 0x80000000u);
}

REF_INLINE float max_lanes(const float *x, int32_t n)
{
    uint32_t lane[8];
    const uint32_t lowest = order_key(-INFINITY);
    for (int k = 0; k < 8; k++)
        lane[k] = lowest;
    int32_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) {
            const uint32_t v = order_key(x[i + k]);
            lane[k] = v > lane[k] ? v : lane[k];
        }
    for (; i < n; i++) {
        const uint32_t v = order_key(x[i]);
        lane[i & 7] = v > lane[i & 7] ? v : lane[i & 7];
    }
    uint32_t m = lane[0];
    for (int k = 1; k < 8; k++)
        m = lane[k] > m ? lane[k] : m;
    const uint32_t bits = m ^ (((m >> 31) - 1u) | 0x80000000u);
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}



/* Online softmax update of the M rows of one key block: mask, cap, new
 * running max, weights exp(s - m) in place of the scores, running sum, and
 * the accumulator rescaled when the max grew. */
static REF_HOT void softmax_rows(ref_work *w, int32_t M, int32_t N, const ref_vis *vis)
{
    const int32_t Dv = w->Dv, NB = w->NB;
    for (int32_t r = 0; r < M; r++) {
        float *s = w->s + (size_t)r * NB;
        int64_t a, b;
        visible_range(w, vis, r, N, &a, &b);
        w->vis_lo[r] = (int32_t)a;
        w->vis_hi[r] = (int32_t)b;
        if (a >= b) {
            memset(s, 0, (size_t)N * sizeof *s);
            continue;
        }
        if (vis->cap > 0.0f)
            for (int64_t n = a; n < b; n++)
                s[n] = vis->cap * tanhf(s[n] / vis->cap);
        const float bm = max_lanes(s + a, (int32_t)(b - a));
        const float m_old = w->m[r];
        const float m_new = (bm > m_old || bm != bm) ? bm : m_old;
        /* m_new is finite here unless a score is NaN or inf (then the row
         * becomes NaN as the oracle's does); m_old = -inf gives corr = 0. */
        const float corr = ref_exp_nonpos(m_old - m_new);
        for (int64_t n = 0; n < a; n++)
            s[n] = 0.0f;
        for (int64_t n = a; n < b; n++)
            s[n] = ref_exp_nonpos(s[n] - m_new);
        for (int64_t n = b; n < N; n++)
            s[n] = 0.0f;
        w->l[r] = w->l[r] * corr + sum_lanes(s + a, (int32_t)(b - a));
        w->m[r] = m_new;
        if (corr != 1.0f) {
            float *acc = w->acc + (size_t)r * Dv;
            for (int32_t d = 0; d < Dv; d++)
                acc[d] *= corr;
        }
    }
}

/* One key block: S = score_alpha Q K^T, online softmax update of the rows,
 * acc += value_alpha P V. When the block's values hold an inf or NaN, a
 * GEMM would spread it to rows that cannot see that key (0 * inf = NaN), so
 * each row then takes only its visible keys, as the oracle does. */
static void ref_block(ref_work *w, int32_t M, int32_t N, const float *v, int32_t ldv,
                      float score_alpha, float value_alpha, const ref_vis *vis,
                      uint32_t v_nonfinite)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, w->D, score_alpha, w->qf, w->D,
                w->kf, w->D, 0.0f, w->s, w->NB);
    softmax_rows(w, M, N, vis);
    if (!v_nonfinite) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, w->Dv, N, value_alpha, w->s,
                    w->NB, v, ldv, 1.0f, w->acc, w->Dv);
        return;
    }
    for (int32_t r = 0; r < M; r++) {
        const int32_t lo = w->vis_lo[r], hi = w->vis_hi[r];
        if (lo < hi)
            cblas_sgemv(CblasRowMajor, CblasTrans, hi - lo, w->Dv, value_alpha,
                        v + (size_t)lo * ldv, ldv, w->s + (size_t)r * w->NB + lo, 1, 1.0f,
                        w->acc + (size_t)r * w->Dv, 1);
    }
}


/* Gathers and converts the prefix keys of one block (values are their first
 * Dv columns); returns non-zero if a value is inf or NaN. (Software
 * prefetch of the rows ahead measured no gain, with 64-slot pages or with
 * single scattered slots: the hardware prefetcher follows each row.) */
static REF_HOT uint32_t gather_prefix(float *kf, const mla_bf16 *pool, const int64_t *slots,
                                      int32_t N, int32_t D, int32_t Dv, int32_t Hkv, int32_t g)
{
    uint32_t bad = 0;
    for (int32_t n = 0; n < N; n++) {
        const mla_bf16 *src = pool + ((size_t)slots[n] * Hkv + g) * D;
        float *dst = kf + (size_t)n * D;
        bad |= bf16_row_to_f32_nonfinite(dst, src, Dv);
        bf16_row_to_f32(dst + Dv, src + Dv, D - Dv);
    }
    return bad;
}

/* gather_prefix for an fp8 pool (schema 1.1.0): decodes the codes exactly
 * into the same fp32 tile; k_scale and v_scale are applied by the caller,
 * as for bf16 pools. */
static REF_HOT uint32_t gather_prefix_fp8(float *kf, const uint8_t *pool, mla_kv_dtype t,
                                          const int64_t *slots, int32_t N, int32_t D, int32_t Dv,
                                          int32_t Hkv, int32_t g)
{
    uint32_t bad = 0;
    for (int32_t n = 0; n < N; n++) {
        const uint8_t *src = pool + ((size_t)slots[n] * Hkv + g) * D;
        float *dst = kf + (size_t)n * D;
        for (int32_t d = 0; d < D; d++)
            dst[d] = mla_fp8_to_f32(t, src[d]);
        for (int32_t d = 0; d < Dv; d++) /* no infinities in e4m3: NaN codes only */
            bad |= dst[d] != dst[d];
    }
    return bad;
}

/* a * b elements of `size` bytes; clears *ok on overflow or failure. */
static void *alloc_array(size_t a, size_t b, size_t size, int *ok)
{
    size_t n;
    if (!*ok || !mla_mul3_size(a, b, size, &n)) {
        *ok = 0;
        return NULL;
    }
    void *p = malloc(n ? n : 1);
    if (!p)
        *ok = 0;
    return p;
}

mla_status mla_reference_run_opts(const mla_fixture *fx, const mla_ref_opts *opts, float *o,
                                  float *lse, mla_error *err)
{
    mla_status st = mla_ref_check_inputs(fx, err);
    if (st != MLA_OK)
        return st;
    if (!opts || opts->key_block < 1 || opts->row_tile < 1) {
        mla_error_set(err, "reference options: key_block and row_tile must be >= 1");
        return MLA_ERR_INVALID;
    }
    if (!o && fx->num_q_tokens > 0) {
        mla_error_set(err, "output o is NULL");
        return MLA_ERR_INVALID;
    }
    const mla_config *c = &fx->cfg;
    const int32_t H = c->num_heads, Hkv = c->num_kv_heads, D = c->head_dim, Dv = c->v_head_dim;
    const int32_t hg = H / Hkv, NB = opts->key_block;
    const int32_t window = c->sliding_window > 0 ? c->sliding_window : 0;
    const float cap = c->logit_cap > 0.0f ? c->logit_cap : 0.0f;
    const float prefix_alpha = c->sm_scale * c->k_scale;

    int32_t max_drafts = 0;
    for (int32_t b = 0; b < c->num_seqs; b++) {
        int32_t L = mla_fixture_drafts(fx, b);
        max_drafts = L > max_drafts ? L : max_drafts;
    }
    int32_t tile_drafts = opts->row_tile / hg;
    if (tile_drafts < 1)
        tile_drafts = 1;
    if (tile_drafts > max_drafts)
        tile_drafts = max_drafts;
    const size_t Mmax = (size_t)tile_drafts * (size_t)hg;

    ref_work w;
    memset(&w, 0, sizeof w);
    w.D = D;
    w.Dv = Dv;
    w.NB = NB;
    w.hg = hg;
    int ok = 1;
    w.qf = alloc_array(Mmax, (size_t)D, sizeof(float), &ok);
    w.kf = alloc_array((size_t)NB, (size_t)D, sizeof(float), &ok);
    w.vf = alloc_array((size_t)NB, (size_t)Dv, sizeof(float), &ok);
    w.s = alloc_array(Mmax, (size_t)NB, sizeof(float), &ok);
    w.acc = alloc_array(Mmax, (size_t)Dv, sizeof(float), &ok);
    w.m = alloc_array(Mmax, 1, sizeof(float), &ok);
    w.l = alloc_array(Mmax, 1, sizeof(float), &ok);
    w.vis_lo = alloc_array(Mmax, 1, sizeof(int32_t), &ok);
    w.vis_hi = alloc_array(Mmax, 1, sizeof(int32_t), &ok);
    if (opts->pstats) {
        w.cw = alloc_array(Mmax, (size_t)NB, sizeof(float), &ok);
        w.cwg = alloc_array(Mmax, (size_t)NB, sizeof(float), &ok);
        w.accg = alloc_array(Mmax, (size_t)Dv, sizeof(float), &ok);
        w.on2g = alloc_array(Mmax, 1, sizeof(double), &ok);
        w.pinv = alloc_array(Mmax, 1, sizeof(float), &ok);
        w.ps = alloc_array(Mmax, MLA_REF_PSTATS, sizeof(double), &ok);
        w.on2 = alloc_array(Mmax, 1, sizeof(double), &ok);
        w.va = alloc_array((size_t)NB, (size_t)Dv, sizeof(float), &ok);
        w.aacc = alloc_array(Mmax, (size_t)Dv, sizeof(float), &ok);
        w.vstar = alloc_array(Mmax, (size_t)Dv, sizeof(float), &ok);
        w.hstar = alloc_array(Mmax, 1, 1, &ok);
        w.gw = alloc_array(1, (size_t)Dv, sizeof(double), &ok);
        w.osc = alloc_array(Mmax, 1, sizeof(double), &ok);
        w.gsc = alloc_array(Mmax, 1, sizeof(double), &ok);
    }
    if (!ok) {
        mla_error_set(err, "reference: cannot allocate work buffers (%zu rows, key block %d)",
                      Mmax, (int)NB);
        st = MLA_ERR_NOMEM;
        goto done;
    }

    for (int32_t b = 0; b < c->num_seqs; b++) {
        const int32_t L = mla_fixture_drafts(fx, b), P = mla_fixture_prefix(fx, b);
        const int64_t qo = fx->qo_indptr[b];
        const int64_t *slots = fx->kv_indices + fx->kv_indptr[b];
        for (int32_t g = 0; g < Hkv; g++) {
            if (opts->pstats)
                mla_ref_bias_weights(fx, b, g, w.gw);
            for (int32_t i0 = 0; i0 < L; i0 += tile_drafts) {
                const int32_t i1 = i0 + tile_drafts < L ? i0 + tile_drafts : L;
                const int32_t M = (i1 - i0) * hg;
                for (int32_t r = 0; r < M; r++) {
                    const int64_t tok = qo + i0 + r / hg;
                    const int32_t h = g * hg + r % hg;
                    bf16_row_to_f32(w.qf + (size_t)r * D, fx->q + ((size_t)tok * H + h) * D, D);
                    w.m[r] = -INFINITY;
                    w.l[r] = 0.0f;
                }
                memset(w.acc, 0, (size_t)M * Dv * sizeof(float));

                ref_vis vis;
                vis.qpos0 = (int64_t)P + i0;
                vis.window = window;
                vis.cap = cap;
                if (opts->use_prefix && P > 0) {
                    /* Keys before the first row's window are hidden from every
                     * row of the tile: never gathered. */
                    int64_t t_lo = window > 0 ? (int64_t)P + i0 - window : 0;
                    if (t_lo < 0)
                        t_lo = 0;
                    vis.causal = 0; /* prefix keys all precede the queries */
                    for (int64_t t0 = t_lo; t0 < P; t0 += NB) {
                        const int32_t N = (int32_t)(P - t0 < NB ? P - t0 : NB);
                        const uint32_t bad =
                            fx->kv_dtype == MLA_KV_BF16
                                ? gather_prefix(w.kf, fx->kv_buffer, slots + t0, N, D, Dv, Hkv, g)
                                : gather_prefix_fp8(w.kf, fx->kv_fp8, fx->kv_dtype, slots + t0, N,
                                                    D, Dv, Hkv, g);
                        vis.kpos0 = t0;
                        ref_block(&w, M, N, w.kf, D, prefix_alpha, c->v_scale, &vis, bad);
                    }
                }
                if (opts->use_drafts) {
                    int64_t j_lo = window > 0 ? (int64_t)i0 - window : 0;
                    if (j_lo < 0)
                        j_lo = 0;
                    const int64_t j_hi = c->is_causal ? i1 : L;
                    vis.causal = c->is_causal != 0;
                    for (int64_t j0 = j_lo; j0 < j_hi; j0 += NB) {
                        const int32_t N = (int32_t)(j_hi - j0 < NB ? j_hi - j0 : NB);
                        uint32_t bad = 0;
                        for (int32_t n = 0; n < N; n++) {
                            const size_t tok = (size_t)(qo + j0 + n);
                            bf16_row_to_f32(w.kf + (size_t)n * D,
                                            fx->k_extend + (tok * Hkv + g) * D, D);
                            bad |= bf16_row_to_f32_nonfinite(
                                w.vf + (size_t)n * Dv, fx->v_extend + (tok * Hkv + g) * Dv, Dv);
                        }
                        vis.kpos0 = (int64_t)P + j0;
                        ref_block(&w, M, N, w.vf, Dv, c->sm_scale, 1.0f, &vis, bad);
                    }
                }

                for (int32_t r = 0; r < M; r++) {
                    const int64_t tok = qo + i0 + r / hg;
                    const int32_t h = g * hg + r % hg;
                    float *orow = o + ((size_t)tok * H + h) * Dv;
                    const float *acc = w.acc + (size_t)r * Dv;
                    const float m = w.m[r];
                    /* No visible key: SPEC section 2 fixes o = 0, lse = -inf
                     * (with or without a sink), and nothing is divided. (A
                     * row whose scores were all NaN also keeps m = -inf, but
                     * its l is NaN, and NaN is what it outputs.) */
                    if (w.pinv)
                        w.pinv[r] = 0.0f;
                    if (m == -INFINITY && w.l[r] == 0.0f) {
                        memset(orow, 0, (size_t)Dv * sizeof *orow);
                        if (lse)
                            lse[(size_t)tok * H + h] = -INFINITY;
                        continue;
                    }
                    float scale = 1.0f, denom = w.l[r], mm = m;
                    if (fx->sinks) {
                        /* The sink joins the denominator only; shift by the
                         * larger of m and the sink so neither exp overflows. */
                        const float sk = fx->sinks[h];
                        mm = (sk > m || sk != sk) ? sk : m;
                        scale = expf(m - mm);
                        denom = w.l[r] * scale + expf(sk - mm);
                    }
                    /* denom >= 1 without a sink (the max key contributes
                     * exp(0)), and >= 1 with one (the larger of the two does). */
                    for (int32_t d = 0; d < Dv; d++)
                        orow[d] = acc[d] * scale / denom;
                    if (lse)
                        lse[(size_t)tok * H + h] = mm + logf(denom);
                    if (w.pinv)
                        w.pinv[r] = scale / denom;
                }
                if (opts->pstats) {
                    /* Second pass over the same blocks with the final o and
                     * weights (ref_pstats_block). */
                    for (int32_t r = 0; r < M; r++)
                        mla_ref_pstats_begin(&w, r,
                                             o + ((size_t)(qo + i0 + r / hg) * H + g * hg + r % hg) * Dv);
                    memset(w.aacc, 0, (size_t)M * Dv * sizeof(float));
                    memset(w.hstar, 0, (size_t)M);
                    if (opts->use_prefix && P > 0) {
                        int64_t t_lo = window > 0 ? (int64_t)P + i0 - window : 0;
                        if (t_lo < 0)
                            t_lo = 0;
                        vis.causal = 0;
                        for (int64_t t0 = t_lo; t0 < P; t0 += NB) {
                            const int32_t N = (int32_t)(P - t0 < NB ? P - t0 : NB);
                            if (fx->kv_dtype == MLA_KV_BF16)
                                gather_prefix(w.kf, fx->kv_buffer, slots + t0, N, D, Dv, Hkv, g);
                            else
                                gather_prefix_fp8(w.kf, fx->kv_fp8, fx->kv_dtype, slots + t0, N, D,
                                                  Dv, Hkv, g);
                            vis.kpos0 = t0;
                            mla_ref_pstats_block(&w, M, N, w.kf, D, prefix_alpha, c->v_scale, &vis);
                        }
                    }
                    if (opts->use_drafts) {
                        int64_t j_lo = window > 0 ? (int64_t)i0 - window : 0;
                        if (j_lo < 0)
                            j_lo = 0;
                        const int64_t j_hi = c->is_causal ? i1 : L;
                        vis.causal = c->is_causal != 0;
                        for (int64_t j0 = j_lo; j0 < j_hi; j0 += NB) {
                            const int32_t N = (int32_t)(j_hi - j0 < NB ? j_hi - j0 : NB);
                            for (int32_t n = 0; n < N; n++) {
                                const size_t tok = (size_t)(qo + j0 + n);
                                bf16_row_to_f32(w.kf + (size_t)n * D,
                                                fx->k_extend + (tok * Hkv + g) * D, D);
                                bf16_row_to_f32(w.vf + (size_t)n * Dv,
                                                fx->v_extend + (tok * Hkv + g) * Dv, Dv);
                            }
                            vis.kpos0 = (int64_t)P + j0;
                            mla_ref_pstats_block(&w, M, N, w.vf, Dv, c->sm_scale, 1.0f, &vis);
                        }
                    }
                    for (int32_t r = 0; r < M; r++) {
                        const size_t ri = (size_t)(qo + i0 + r / hg) * H + g * hg + r % hg;
                        mla_ref_pstats_finish(&w, r, o + ri * Dv, opts->pstats + ri * MLA_REF_PSTATS);
                    }
                }
            }
        }
    }
    st = MLA_OK;
done:
    free(w.qf);
    free(w.kf);
    free(w.vf);
    free(w.s);
    free(w.acc);
    free(w.m);
    free(w.l);
    free(w.vis_lo);
    free(w.vis_hi);
    free(w.cw);
    free(w.cwg);
    free(w.accg);
    free(w.on2g);
    free(w.pinv);
    free(w.ps);
    free(w.on2);
    free(w.va);
    free(w.aacc);
    free(w.vstar);
    free(w.hstar);
    free(w.gw);
    free(w.osc);
    free(w.gsc);
    return st;
}

mla_status mla_reference_run(const mla_fixture *fx, float *o, float *lse, mla_error *err)
{
    const mla_ref_opts opts = mla_ref_opts_default();
    return mla_reference_run_opts(fx, &opts, o, lse, err);
}

mla_status mla_reference_run_pstats(const mla_fixture *fx, float *o, float *lse, double *pstats,
                                    mla_error *err)
{
    mla_ref_opts opts = mla_ref_opts_default();
    opts.pstats = pstats;
    return mla_reference_run_opts(fx, &opts, o, lse, err);
}

void mla_round_bf16(const float *src, mla_bf16 *dst, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = mla_f32_to_bf16(src[i]);
}
