/* The fixture-by-backend suite: the one evaluation loop. Every case, from a
 * file or generated from the catalogue, goes through val_suite_run_case:
 * the fp32 reference and (where affordable) the fp64 oracle once, then
 * every selected backend into guarded, poisoned outputs, the SPEC section 3
 * acceptance check, the judge, the dump. Modelled on ggml's
 * test-backend-ops: same case for every backend, "declined" is a status,
 * NaN fails outright, sentinel guards catch out-of-bounds writes. */
#include "internal.h"
#include "mla/fsutil.h"
#include "mla/guard.h"
#include "mla/reference.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void val_suite_init(val_suite *s, const val_opts *opt, const char *commit)
{
    memset(s, 0, sizeof *s);
    s->opt = opt;
    s->commit = commit;
}

void val_suite_free(val_suite *s)
{
    free(s->results);
    s->results = NULL;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double case_gflop(const mla_fixture *fx)
{
    double f = 0;
    for (int b = 0; b < fx->cfg.num_seqs; ++b) {
        double L = mla_fixture_drafts(fx, b), P = mla_fixture_prefix(fx, b);
        f += 2.0 * L * fx->cfg.num_heads * (P + L) * (fx->cfg.head_dim + fx->cfg.v_head_dim);
    }
    return f * 1e-9;
}

/* A second opinion beside the verdict: the same output against the fp64
 * oracle, where the oracle was affordable for this case. Informational. */
static void oracle_metrics(const double *oracle, const float *o, const unsigned char *unwritten,
                           size_t n, mla_metrics *m)
{
    m->cos_vs_oracle = -1;
    m->max_abs_vs_oracle = -1;
    if (!oracle)
        return;
    double ab = 0, a2b2 = 0, mx = 0;
    for (size_t e = 0; e < n; ++e) {
        if (unwritten[e] || !isfinite(o[e]) || !isfinite(oracle[e]))
            continue;
        const double a = o[e], b = oracle[e];
        ab += a * b;
        a2b2 += a * a + b * b;
        if (fabs(a - b) > mx)
            mx = fabs(a - b);
    }
    m->cos_vs_oracle = a2b2 > 0 ? 1.0 - 2.0 * ab / a2b2 : 0.0;
    m->max_abs_vs_oracle = mx;
}

static mla_case_result *new_result(val_suite *s)
{
    if (s->nres == s->cap) {
        size_t nc = s->cap ? 2 * s->cap : 64;
        mla_case_result *nr = realloc(s->results, nc * sizeof *nr);
        if (!nr) {
            fprintf(stderr, "mla-validate: out of memory\n");
            exit(VAL_EXIT_BAD);
        }
        s->results = nr;
        s->cap = nc;
    }
    mla_case_result *r = &s->results[s->nres++];
    memset(r, 0, sizeof *r);
    return r;
}

static void count_and_print(val_suite *s, const mla_case_result *res)
{
    switch (res->verdict) {
    case MLA_VERDICT_PASS: s->n_pass++; break;
    case MLA_VERDICT_DECLINED: s->n_decl++; break;
    case MLA_VERDICT_NA: s->n_na++; break;
    default:
        if (res->expected_fail)
            s->n_xfail++;
        else
            s->n_fail++;
        break;
    }
    if (res->verdict == MLA_VERDICT_NA && !strcmp(res->reason, VAL_NO_EXPECTED)) {
        s->n_na_noexp++; /* one summary line at the end, not one per file */
        return;
    }
    if (res->expected_fail)
        printf("%-8s %-28s %-22s known-bad capture, as recorded: %s\n", "XFAIL", res->fixture,
               res->backend, res->reason);
    else if (res->verdict == MLA_VERDICT_PASS)
        printf("%-8s %-28s %-22s cos %.2e  row %.2e  max|err| %.3g  bound %.2f  bias %.2f  "
               "1ulp %5.1f%%  %.3fs\n",
               mla_verdict_name(res->verdict), res->fixture, res->backend, res->m.cos_diff,
               res->m.worst_row_cos, res->m.max_abs, res->m.worst_ratio, res->m.bias_ratio,
               100.0 * res->m.within_1ulp, res->seconds);
    else
        printf("%-8s %-28s %-22s %s\n", mla_verdict_name(res->verdict), res->fixture,
               res->backend, res->reason);
    /* Non-finite policy: say how many elements the finite statistics ran
     * over when some were left out (NaN/Inf in the reference). */
    if ((res->verdict == MLA_VERDICT_PASS || res->verdict == MLA_VERDICT_FAIL) &&
        res->m.n_compared < res->m.n_elems)
        printf("         %-28s %-22s compared %lld of %lld elements (%lld NaN/Inf in the "
               "reference)\n",
               res->fixture, res->backend, (long long)res->m.n_compared,
               (long long)res->m.n_elems, (long long)res->m.n_ref_nonfinite);
    fflush(stdout);
}

/* A captured output listed as known-bad (--known-bad): its FAIL for the
 * recorded reason is expected; a PASS, or a FAIL for another reason, is a
 * failure (the manifest no longer describes the file). */
static void known_bad(const val_opts *opt, const mla_backend *be, mla_case_result *res)
{
    if (be->kind != MLA_KIND_CAPTURED)
        return;
    for (size_t k = 0; k < opt->known_bad.n; ++k) {
        if (strcmp(opt->known_bad.v[k], res->fixture) != 0)
            continue;
        const char *match = opt->known_bad_match.v[k];
        if (res->verdict == MLA_VERDICT_FAIL && strstr(res->reason, match))
            res->expected_fail = 1;
        else if (res->verdict == MLA_VERDICT_PASS || res->verdict == MLA_VERDICT_FAIL) {
            char was[sizeof res->reason];
            snprintf(was, sizeof was, "%s", res->reason);
            snprintf(res->reason, sizeof res->reason,
                     "listed as known-bad (--known-bad) with failure '%s', but %s%s%s", match,
                     res->verdict == MLA_VERDICT_PASS ? "it passed" : "it failed otherwise: ",
                     res->verdict == MLA_VERDICT_PASS ? "" : "", was);
            res->verdict = MLA_VERDICT_FAIL;
        }
        return;
    }
}

/* The bias margin of correct backends (not mutants), per path: how close a
 * correct kernel comes to its bias threshold. */
static void note_margin(val_suite *s, const mla_backend *be, const mla_case_result *res)
{
    if (res->m.n_bias_apriori_p)
        s->bias_apriori_p[be->path]++;
    if (be->kind == MLA_KIND_MUTANT || res->verdict != MLA_VERDICT_PASS)
        return;
    if (res->m.bias_ratio > s->bias_margin[be->path]) {
        s->bias_margin[be->path] = res->m.bias_ratio;
        snprintf(s->bias_margin_where[be->path], sizeof s->bias_margin_where[be->path],
                 "%s on %s, %s: slope %.6f, threshold %.2e", be->name, res->fixture,
                 res->m.bias_group, res->m.bias_slope, res->m.bias_threshold);
    }
}

void val_suite_run_case(val_suite *s, const mla_fixture *fx, const char *label,
                        const char *family)
{
    const val_opts *opt = s->opt;
    mla_fixture_sizes sz;
    mla_error err = {{0}};
    if (mla_fixture_sizes_of(fx, &sz, &err) != MLA_OK) {
        fprintf(stderr, "mla-validate: %s: %s\n", label, err.msg);
        s->n_unreadable++;
        return;
    }
    /* The run's memory budget (--max-memory) covers this case's buffers
     * too: the reference, the oracle, the statistics, one guarded output
     * and a dump, beside what the process holds already (the fixture). */
    {
        const double work = (double)sz.o * (4 + 4 + 1 + 8 + 4 + 2) +
                            (double)sz.lse * (4 + 8 + 4 + 8.0 * MLA_REF_PSTATS) +
                            4.0 * (double)MLA_GUARD_BYTES;
        const uint64_t budget = opt->max_memory ? opt->max_memory : mla_fixture_default_max_memory();
        const double in_use = (double)mla_resident_bytes();
        if (in_use + work > (double)budget) {
            fprintf(stderr,
                    "mla-validate: %s: not run: its buffers need %.0f bytes beside the %.0f in "
                    "use, over the run's memory budget of %llu bytes (--max-memory)\n",
                    label, work, in_use, (unsigned long long)budget);
            s->n_unreadable++;
            return;
        }
    }
    float *ref_o = malloc((sz.o + 1) * sizeof *ref_o);
    float *ref_lse = malloc((sz.lse + 1) * sizeof *ref_lse);
    double *or_o = NULL, *or_lse = NULL;
    unsigned char *unwritten = malloc(sz.o + 1);
    float *o32 = malloc((sz.o + 1) * sizeof *o32);
    if (!ref_o || !ref_lse || !unwritten || !o32) {
        fprintf(stderr, "mla-validate: %s: out of memory\n", label);
        exit(VAL_EXIT_BAD);
    }
    /* The reference's statistics (judge.c (B3), and A_c of (B2)) cost a
     * second pass of the reference. (B2) uses A_c on every path but the
     * reference's own, so they are computed whenever a selected, available
     * backend is judged on such a path: a backend's verdict must not depend
     * on which other backends were selected with it. */
    double *ref_pstats = NULL;
    for (size_t bi = 0; bi < opt->nsel && !ref_pstats; ++bi) {
        const mla_backend *be = opt->sel[bi];
        char why[256];
        if (be->path != MLA_PATH_REFERENCE && be->available(be, why, sizeof why)) {
            ref_pstats = malloc((sz.lse + 1) * MLA_REF_PSTATS * sizeof *ref_pstats);
            if (!ref_pstats) {
                fprintf(stderr, "mla-validate: %s: out of memory\n", label);
                exit(VAL_EXIT_BAD);
            }
        }
    }
    const double t0 = now_s();
    if ((ref_pstats ? mla_reference_run_pstats(fx, ref_o, ref_lse, ref_pstats, &err)
                    : mla_reference_run(fx, ref_o, ref_lse, &err)) != MLA_OK) {
        fprintf(stderr, "mla-validate: %s: reference failed: %s\n", label, err.msg);
        s->n_unreadable++;
        goto done;
    }
    const double t_ref = now_s() - t0;
    const double gflop = case_gflop(fx);
    /* The oracle judges the reference and gives every other backend a
     * second opinion, wherever it is affordable. */
    if (gflop <= opt->oracle_max) {
        or_o = malloc((sz.o + 1) * sizeof *or_o);
        or_lse = malloc((sz.lse + 1) * sizeof *or_lse);
        if (!or_o || !or_lse || mla_oracle_run(fx, or_o, or_lse, &err) != MLA_OK) {
            fprintf(stderr, "mla-validate: %s: oracle failed: %s\n", label, err.msg);
            free(or_o);
            free(or_lse);
            or_o = NULL;
            or_lse = NULL;
        }
    }
    int64_t max_prefix = 0;
    for (int b = 0; b < fx->cfg.num_seqs; ++b)
        if (mla_fixture_prefix(fx, b) > max_prefix)
            max_prefix = mla_fixture_prefix(fx, b);
    const char *spec_reason = mla_spec_decline_reason(fx);

    for (size_t bi = 0; bi < opt->nsel; ++bi) {
        const mla_backend *be = opt->sel[bi];
        mla_case_result *res = new_result(s);
        snprintf(res->fixture, sizeof res->fixture, "%s", label);
        snprintf(res->case_name, sizeof res->case_name, "%s", fx->case_name ? fx->case_name : "");
        snprintf(res->family, sizeof res->family, "%s", family);
        snprintf(res->backend, sizeof res->backend, "%s", be->name);
        res->path = be->path;
        res->max_prefix = max_prefix;
        res->splits = MLA_SPLITS_UNKNOWN;
        res->num_seqs = fx->cfg.num_seqs;
        res->num_heads = fx->cfg.num_heads;
        res->q_len = fx->cfg.q_len;
        res->m.lse_max_abs = -1;
        res->m.cos_vs_oracle = -1;
        res->m.max_abs_vs_oracle = -1;

        char why[256] = "";
        if (!be->available(be, why, sizeof why)) {
            res->verdict = MLA_VERDICT_NA;
            snprintf(res->reason, sizeof res->reason, "unavailable: %s", why);
            count_and_print(s, res);
            continue;
        }
        if (be->kind == MLA_KIND_ORACLE && gflop > opt->oracle_max) {
            res->verdict = MLA_VERDICT_NA;
            snprintf(res->reason, sizeof res->reason,
                     "oracle skipped (%.1f GFLOP > --oracle-max-gflop %.1f)", gflop,
                     opt->oracle_max);
            count_and_print(s, res);
            continue;
        }
        /* The reference path is judged against the oracle: without it the
         * verdict is N/A, but the output exists and is still dumped. */
        const int no_baseline = be->path == MLA_PATH_REFERENCE && be->kind != MLA_KIND_ORACLE &&
                                !or_o;

        mla_guarded go, gl;
        mla_outputs out = {0};
        void *obuf = mla_guarded_alloc(&go, sz.o, be->out_bf16 ? 2 : 4);
        float *lbuf = mla_guarded_alloc(&gl, sz.lse, 4);
        if (!obuf || !lbuf) {
            fprintf(stderr, "mla-validate: out of memory\n");
            exit(VAL_EXIT_BAD);
        }
        if (be->out_bf16)
            out.o16 = obuf;
        else
            out.o32 = obuf;
        out.lse = lbuf;
        out.splits = MLA_SPLITS_UNKNOWN;
        mla_error berr = {{0}}, gerr = {{0}};
        const double tb = now_s();
        const mla_status st = be->run(be, fx, &out, &berr);
        res->seconds = now_s() - tb;
        res->splits = out.splits;
        const int declined = st == MLA_ERR_DECLINED;
        int judged = 0;

        if (mla_guard_check_run(be->name, go.image, sz.o, go.esize, gl.image, sz.lse,
                                declined && be->expect != MLA_EXPECT_HAS_EXPECTED,
                                &gerr) != MLA_OK) {
            res->verdict = MLA_VERDICT_FAIL;
            snprintf(res->reason, sizeof res->reason, "%s", gerr.msg);
        } else if (declined) {
            if (be->expect == MLA_EXPECT_HAS_EXPECTED) {
                res->verdict = MLA_VERDICT_NA;
                snprintf(res->reason, sizeof res->reason, "%s", berr.msg);
            } else if (be->expect == MLA_EXPECT_ACCEPT_ALL || !spec_reason) {
                res->verdict = MLA_VERDICT_FAIL;
                snprintf(res->reason, sizeof res->reason,
                         "declined (%s) where SPEC section 3 says accept", berr.msg);
            } else {
                res->verdict = MLA_VERDICT_DECLINED;
                snprintf(res->reason, sizeof res->reason, "%s (SPEC: %s)", berr.msg,
                         spec_reason);
            }
        } else if (st == MLA_ERR_RUNTIME && be->fault_is_fail) {
            /* The emulated kernel faulted (or its launch would fail on the
             * hardware): a bug in the kernel, not a missing resource. */
            res->verdict = MLA_VERDICT_FAIL;
            snprintf(res->reason, sizeof res->reason, "kernel fault under emulation: %s", berr.msg);
        } else if (st != MLA_OK) {
            res->verdict = MLA_VERDICT_ERROR;
            snprintf(res->reason, sizeof res->reason, "%s: %s", mla_status_name(st), berr.msg);
        } else if (be->expect == MLA_EXPECT_SPEC_DECLINES && spec_reason) {
            res->verdict = MLA_VERDICT_FAIL;
            snprintf(res->reason, sizeof res->reason,
                     "accepted a case SPEC section 3 says to decline (%s)", spec_reason);
        } else {
            judged = 1;
            mla_guard_unwritten(obuf, sz.o, go.esize, unwritten);
            for (size_t e = 0; e < sz.o; ++e)
                o32[e] = be->out_bf16 ? mla_bf16_to_f32(out.o16[e]) : out.o32[e];
            if (no_baseline) {
                res->verdict = MLA_VERDICT_NA;
                snprintf(res->reason, sizeof res->reason,
                         "oracle skipped (%.1f GFLOP > --oracle-max-gflop %.1f): nothing to "
                         "judge the reference against",
                         gflop, opt->oracle_max);
            } else {
                const int is_oracle = be->kind == MLA_KIND_ORACLE;
                mla_judge_input jin = {fx, ref_o, ref_lse, is_oracle ? NULL : or_o,
                                       is_oracle ? NULL : or_lse, ref_pstats};
                res->verdict = mla_judge(&jin, be->path, o32, unwritten,
                                         out.wrote_lse ? out.lse : NULL, &res->m, res->reason,
                                         sizeof res->reason);
                oracle_metrics(or_o, o32, unwritten, sz.o, &res->m);
            }
        }
        /* Every output that was produced is dumped, whatever its verdict
         * (a failing output is the one worth replaying). */
        if (judged && opt->dump_dir) {
            mla_bf16 *o16 = out.o16;
            mla_bf16 *tmp = NULL;
            if (!be->out_bf16) { /* dumps are bf16, as the schema's /expected/o is */
                tmp = malloc(sz.o * 2 + 2);
                if (tmp)
                    mla_round_bf16(out.o32, tmp, sz.o);
                o16 = tmp;
            }
            char dname[300];
            snprintf(dname, sizeof dname, "%s%s", label,
                     strlen(label) > 3 && !strcmp(label + strlen(label) - 3, ".h5") ? "" : ".h5");
            if (!o16 || !val_dump_output(opt->dump_dir, be->name, opt->nsel > 1, dname, fx, o16,
                                         out.wrote_lse ? out.lse : NULL, s->commit))
                s->n_unreadable++; /* a dump that cannot be written is an I/O error */
            free(tmp);
        }
        mla_guarded_free(&go);
        mla_guarded_free(&gl);
        known_bad(opt, be, res);
        note_margin(s, be, res);
        count_and_print(s, res);
    }
    if (!opt->quiet)
        fprintf(stderr, "    reference %.3fs (%.2f GFLOP/s)\n", t_ref,
                t_ref > 0 ? gflop / t_ref : 0);
done:
    free(ref_o);
    free(ref_pstats);
    free(ref_lse);
    free(or_o);
    free(or_lse);
    free(unwritten);
    free(o32);
}
