/* The judge: metrics of one backend's output against its baseline and the
 * path-aware verdict of SPEC section 7, as passes over one accumulator
 * (judge_internal.h): the per-sequence scales and the element, cosine and
 * lse passes in judge_bounds.c, the bias test in judge_bias.c, the driver
 * and the verdict here. Every tolerance constant is defined once, in
 * judge_internal.h, with its derivation; docs/accuracy.md says the same in
 * prose. */
#include "judge_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *mla_spec_decline_reason(const mla_fixture *fx)
{
    const mla_config *c = &fx->cfg;
    if (fx->sinks)
        return "sinks present";
    /* Any window (-1 is off; 0 is invalid input, fixtures/README.md). */
    if (c->sliding_window >= 0)
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

static void jg_free(jg_state *s)
{
    free(s->M), free(s->kmax), free(s->kvwide);
    free(s->row_cos), free(s->row_floor), free(s->row_sub);
    free(s->g_sh), free(s->g_dh), free(s->g_s), free(s->g_h);
}

/* The verdict from the passes' counts, in order: element and row failures;
 * then, where the elements showed nothing (none finite, or all 0), the lse
 * alone; else the bias test, cos_diff and lse. */
static mla_verdict jg_verdict(const jg_state *s, char *reason, size_t reason_n)
{
    const mla_metrics *m = s->m;
    const int lse_bad = s->lse && m->lse_ratio > 1.0;
    if (m->n_unwritten || m->n_nan || m->n_over || m->n_rows_over) {
        snprintf(reason, reason_n, "%s (%lld unwritten, %lld non-finite, %lld over bound, %lld "
                 "rows over limit)",
                 s->first_reason, (long long)m->n_unwritten, (long long)m->n_nan,
                 (long long)m->n_over, (long long)m->n_rows_over);
        return MLA_VERDICT_FAIL;
    }
    if (lse_bad && (m->n_compared == 0 || s->sum_a2b2 == 0)) {
        snprintf(reason, reason_n, "lse error %.3g exceeds its bound (ratio %.3g)",
                 m->lse_max_abs, m->lse_ratio);
        return MLA_VERDICT_FAIL;
    }
    if (m->n_compared == 0 || s->sum_a2b2 == 0) {
        /* The elements show nothing about accuracy: an lse judged finite
         * shows something, so the case passes on it; else N/A. */
        if (s->n_lse_finite > 0)
            return MLA_VERDICT_PASS;
        if (m->n_elems == 0)
            snprintf(reason, reason_n, "nothing to judge: the case has no output elements");
        else if (m->n_compared == 0)
            snprintf(reason, reason_n,
                     "nothing to judge: all %lld reference elements are NaN/Inf (the output "
                     "matches their classes)",
                     (long long)m->n_elems);
        else
            snprintf(reason, reason_n,
                     "degenerate: all %lld compared elements are 0 in the reference and the "
                     "output",
                     (long long)m->n_compared);
        return MLA_VERDICT_NA;
    }
    if (m->n_bias_over) {
        /* Before cos_diff: a bias is the more specific diagnosis (a
         * truncating kernel also raises cos_diff). Names the group furthest
         * past its threshold. */
        snprintf(reason, reason_n,
                 "biased %s: slope %.6f, |s-1| %.3g > threshold %.3g (%lld of %lld bias groups "
                 "past their threshold)",
                 m->bias_group, m->bias_slope, fabs(m->bias_slope - 1.0), m->bias_threshold,
                 (long long)m->n_bias_over, (long long)m->n_bias_groups);
        return MLA_VERDICT_FAIL;
    }
    if (m->cos_diff > m->cos_limit) {
        snprintf(reason, reason_n, "cos_diff %.3g > limit %.3g for path '%s'", m->cos_diff,
                 m->cos_limit, mla_path_name(s->path));
        return MLA_VERDICT_FAIL;
    }
    if (lse_bad) {
        snprintf(reason, reason_n, "lse error %.3g exceeds its bound (ratio %.3g)",
                 m->lse_max_abs, m->lse_ratio);
        return MLA_VERDICT_FAIL;
    }
    return MLA_VERDICT_PASS;
}

mla_verdict mla_judge(const mla_judge_input *in, mla_path path, const float *o,
                      const unsigned char *unwritten, const float *lse, mla_metrics *m,
                      char *reason, size_t reason_n)
{
    const mla_fixture *fx = in->fx;
    const mla_config *c = &fx->cfg;
    const int H = c->num_heads, HK = c->num_kv_heads, DV = c->v_head_dim;
    const int group = H / HK;
    jg_state s;
    memset(&s, 0, sizeof s);
    memset(m, 0, sizeof *m);
    m->lse_max_abs = -1;
    m->first_bad = -1;
    reason[0] = '\0';
    s.in = in;
    s.fx = fx;
    s.path = path;
    s.ref_path = path == MLA_PATH_REFERENCE;
    s.o = o;
    s.lse = lse;
    s.unwritten = unwritten;
    s.m = m;
    s.kterms = jg_path_bf16_terms(path);
    s.rel_tol = s.ref_path ? REL_TOL_REF : REL_TOL_BF16;
    s.eta = s.ref_path ? ETA_32 : ETA_B;
    m->rel_tol = s.rel_tol;
    m->abs_frac = SAFETY * (s.kterms * U_B);

    const size_t nbs = (size_t)c->num_seqs, nbh = (size_t)H;
    const size_t nrows = (size_t)fx->num_q_tokens * nbh;
    s.M = malloc(((size_t)HK * DV + 1) * sizeof *s.M);
    s.kmax = calloc((size_t)HK + 1, sizeof *s.kmax);
    s.row_cos = calloc(nrows + 1, sizeof *s.row_cos);
    s.row_floor = calloc(nrows + 1, sizeof *s.row_floor);
    s.row_sub = calloc(nrows + 1, sizeof *s.row_sub);
    /* fp8 pools (schema 1.1.0): bf16 rows for M_c and the key norms, exact */
    mla_error kverr;
    const int kv_ok = mla_fixture_kv_bf16(fx, &s.kvpool, &s.kvwide, &kverr) == MLA_OK;
    if (kv_ok)
        jg_bias_init(&s, nrows, nbs, nbh);
    if (!kv_ok || !s.M || !s.kmax || !s.row_cos || !s.row_floor || !s.row_sub || !s.g_sh ||
        !s.g_dh || !s.g_s || !s.g_h) {
        jg_free(&s);
        snprintf(reason, reason_n, "judge: out of memory");
        return MLA_VERDICT_ERROR;
    }

    for (int b = 0; b < c->num_seqs; ++b)
        for (int hk = 0; hk < HK; ++hk) {
            jg_seq_scales(&s, b, hk);
            for (int i = 0; i < mla_fixture_drafts(fx, b); ++i)
                for (int hh = 0; hh < group; ++hh) {
                    jg_row r = {b, i, hk * group + hh, hk, fx->qo_indptr[b] + i, 0, 0, 0};
                    bias_acc racc, rw; /* the row's plain and column-weighted sums (B0) */
                    memset(&racc, 0, sizeof racc);
                    memset(&rw, 0, sizeof rw);
                    jg_row_setup(&s, &r);
                    jg_row_elements(&s, &r, &racc, &rw);
                    jg_row_bias(&s, &r, &racc, &rw);
                    jg_row_lse(&s, &r);
                }
        }
    jg_bias_groups(&s);
    jg_finish_cos(&s);
    const mla_verdict v = jg_verdict(&s, reason, reason_n);
    jg_free(&s);
    return v;
}
