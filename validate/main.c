/* mla-validate: every selected backend on every case (fixture files, or
 * catalogue cases generated in memory), judged against the fp32 reference
 * (the reference against the fp64 oracle) with the path-aware tolerances of
 * SPEC section 7, then the reports. The pieces: cli.c (options), suite.c
 * (the evaluation loop), backends.c (the table), judge.c, dump.c,
 * report.c. */
#include "internal.h"
#include "mla/fsutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>


static const char *family_of(const mla_fixture *fx)
{
    const mla_case_info *ci = fx->case_name ? mla_catalogue_find(fx->case_name) : NULL;
    if (ci && fx->source && strcmp(fx->source, "synthetic") == 0)
        return ci->family;
    return fx->source && strcmp(fx->source, "trace") == 0 ? "trace" : "other";
}

static uint64_t fresh_seed(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ((uint64_t)ts.tv_sec * 1000003u) ^ (uint64_t)ts.tv_nsec;
}

/* Every catalogue case (or the named ones; --small skips the large ones),
 * generated in memory, case i from seed + 7919 i as the GPU tests did. */
static void run_catalogue(val_suite *s, const val_opts *o)
{
    const uint64_t seed = o->have_seed ? o->seed : fresh_seed();
    printf("mla-validate: catalogue seed %llu (rerun with --seed %llu to reproduce)\n",
           (unsigned long long)seed, (unsigned long long)seed);
    for (size_t ci = 0; ci < mla_catalogue_count(); ++ci) {
        const mla_case_info *info = mla_catalogue_get(ci);
        if (o->files.n) {
            int hit = 0;
            for (size_t k = 0; k < o->files.n; ++k)
                hit |= !strcmp(o->files.v[k], info->name);
            if (!hit)
                continue;
        } else if (o->small && info->large) {
            continue;
        }
        mla_fixture fx;
        mla_error err = {{0}};
        memset(&fx, 0, sizeof fx);
        if (!o->quiet)
            fprintf(stderr, "[catalogue] %s\n", info->name);
        if (mla_catalogue_generate(info->name, seed + 7919u * ci, &fx, &err) != MLA_OK) {
            fprintf(stderr, "mla-validate: catalogue case %s: %s\n", info->name, err.msg);
            s->n_unreadable++;
            continue;
        }
        char label[160];
        snprintf(label, sizeof label, "catalogue:%s", info->name);
        val_suite_run_case(s, &fx, label, info->family);
        mla_fixture_free(&fx);
    }
}

static void run_files(val_suite *s, const val_opts *o)
{
    for (size_t fi = 0; fi < o->files.n; ++fi) {
        const char *file = o->files.v[fi];
        mla_fixture fx;
        mla_error err = {{0}};
        if (!o->quiet)
            fprintf(stderr, "[%zu/%zu] %s\n", fi + 1, o->files.n, file);
        mla_read_options ro;
        memset(&ro, 0, sizeof ro);
        ro.max_memory = o->max_memory;
        if (mla_fixture_read_guarded_opts(file, &ro, &fx, &err) != MLA_OK) {
            fprintf(stderr, "mla-validate: %s\n", err.msg);
            s->n_unreadable++;
            continue;
        }
        val_suite_run_case(s, &fx, val_base_name(file), family_of(&fx));
        mla_fixture_free(&fx);
    }
}

int main(int argc, char **argv)
{
    val_opts o;
    mla_write_signals();
    int rc = val_parse_args(argc, argv, &o);
    if (rc >= 0)
        return rc;
    /* No --backend: every backend of the default set that is available
     * here (an unavailable one named explicitly still reports N/A). */
    if (o.nsel == 0)
        for (size_t i = 0; i < mla_backend_count(); ++i) {
            const mla_backend *b = mla_backend_get(i);
            char why[256];
            if (b->in_default_set && b->available(b, why, sizeof why))
                o.sel[o.nsel++] = b;
            else if (b->in_default_set && !o.quiet)
                fprintf(stderr, "mla-validate: backend %s skipped: %s\n", b->name, why);
        }

    char commit[128], machine[512], date[64], command[4096] = "", backends[1024] = "";
    val_describe_commit(commit, sizeof commit);
    val_describe_machine(machine, sizeof machine);
    time_t tnow = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S UTC", gmtime(&tnow));
    for (int i = 0; i < argc; ++i) {
        strncat(command, i ? " " : "", sizeof command - strlen(command) - 1);
        strncat(command, argv[i], sizeof command - strlen(command) - 1);
    }
    for (size_t i = 0; i < o.nsel; ++i) {
        strncat(backends, i ? "," : "", sizeof backends - strlen(backends) - 1);
        strncat(backends, o.sel[i]->name, sizeof backends - strlen(backends) - 1);
    }
    if (!o.quiet)
        fprintf(stderr, "mla-validate: %s, backends %s, commit %s\n",
                o.catalogue ? "catalogue" : "files", backends, commit);

    val_suite s;
    val_suite_init(&s, &o, commit);
    if (o.catalogue)
        run_catalogue(&s, &o);
    else
        run_files(&s, &o);

    mla_report_meta meta = {commit, machine, command, date, backends};
    mla_error rerr = {{0}};
    int report_ok = 0;
    if (o.report_dir) {
        report_ok = mla_report_write_dir(o.report_dir, &meta, s.results, s.nres, &rerr) == MLA_OK;
        if (!report_ok) {
            fprintf(stderr, "mla-validate: report: %s\n", rerr.msg);
            s.n_unreadable++;
        }
    }
    if (o.json_path && mla_report_write_json(o.json_path, &meta, s.results, s.nres, &rerr) != MLA_OK) {
        fprintf(stderr, "mla-validate: json: %s\n", rerr.msg);
        s.n_unreadable++;
    }
    if (o.junit_path && val_write_junit(o.junit_path, s.results, s.nres, &rerr) != MLA_OK) {
        fprintf(stderr, "mla-validate: junit: %s\n", rerr.msg);
        s.n_unreadable++;
    }
    if (o.bias_noise_path) {
        /* The bias test's noise per backend and group level (issue 18). */
        printf("mla-validate: bias noise per backend and group level\n");
        mla_report_bias_noise_md(stdout, s.results, s.nres, 0);
        mla_atomic_file bf;
        mla_error berr = {{0}};
        int ok = mla_atomic_open(&bf, o.bias_noise_path, &berr) == MLA_OK;
        if (ok) {
            fprintf(bf.f, "# Bias noise per group level\n\n- commit: `%s`\n- machine: %s\n- "
                          "date: %s\n- command: `%s`\n\n",
                    commit, machine, date, command);
            ok = mla_atomic_close(&bf, mla_report_bias_noise_md(bf.f, s.results, s.nres, 1),
                                  &berr) == MLA_OK;
        }
        if (!ok) {
            fprintf(stderr, "mla-validate: bias noise: %s\n", berr.msg);
            s.n_unreadable++;
        }
    }
    /* The bias-test margin on correct backends, per path (issue 18). */
    for (int p = 0; p < MLA_PATH_COUNT; ++p)
        if (s.bias_margin_where[p][0])
            printf("mla-validate: bias margin, path '%s': largest |s-1|/threshold %.3f (%s)\n",
                   mla_path_name((mla_path)p), s.bias_margin[p], s.bias_margin_where[p]);
    for (int p = 0; p < MLA_PATH_COUNT; ++p)
        if (s.bias_apriori_p[p])
            printf("mla-validate: bias test, path '%s': %d result(s) judged with the a-priori "
                   "P-rounding term (B2), the reference's P statistics being unavailable\n",
                   mla_path_name((mla_path)p), s.bias_apriori_p[p]);
    if (s.n_na_noexp)
        printf("mla-validate: %d file%s without /expected output: backend captured N/A on %s\n",
               s.n_na_noexp, s.n_na_noexp == 1 ? "" : "s", s.n_na_noexp == 1 ? "it" : "each");
    if (s.n_xfail)
        printf("mla-validate: %d known-bad capture%s failed as recorded (XFAIL, --known-bad)\n",
               s.n_xfail, s.n_xfail == 1 ? "" : "s");
    printf("mla-validate: %d passed, %d failed, %d declined, %d n/a, %d unreadable\n", s.n_pass,
           s.n_fail, s.n_decl, s.n_na, s.n_unreadable);
    if (report_ok && !o.quiet)
        printf("mla-validate: report written to %s/report.{md,json,html}\n", o.report_dir);
    /* Nothing judged at all (every result N/A or declined): a CI job that
     * forgot to write its outputs must not pass (issue 40). */
    rc = s.n_unreadable ? VAL_EXIT_BAD
         : s.n_fail     ? VAL_EXIT_FAILED
         : s.n_pass + s.n_xfail == 0 ? VAL_EXIT_NOTHING
                         : VAL_EXIT_PASS;
    if (rc == VAL_EXIT_NOTHING)
        printf("mla-validate: nothing was judged (every result N/A or declined): exit %d\n", rc);
    val_suite_free(&s);
    val_opts_free(&o);
    return rc;
}
