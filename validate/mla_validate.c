/* mla-validate: run every backend on every fixture, judge each against the
 * fp32 reference (the reference itself against the fp64 oracle) with the
 * path-aware tolerances of SPEC section 7, and report. Modelled on ggml's
 * test-backend-ops: same case for every backend, "declined" is a status,
 * NaN fails outright, sentinel guards catch out-of-bounds writes. */
#include "mla/fixture.h"
#include "mla/reference.h"
#include "mla/report.h"
#include "mla/validate.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>

#include "mla_version.h" /* MLA_GIT_COMMIT, stamped at build time */
#ifndef MLA_SOURCE_DIR
#define MLA_SOURCE_DIR "."
#endif

enum { EXIT_PASS = 0, EXIT_FAILED = 1, EXIT_BAD = 2 };

/* Outputs are poisoned with MLA_POISON_* (common.h); guards: a non-NaN
 * pattern around each buffer. */
#define GUARD32 0x5a5a5a5au
#define GUARD16 0x5a5au
#define GUARD_N 256 /* elements each side */

/* The oracle is plain double loops (~1 GFLOP/s); above this it is skipped. */
#define ORACLE_DEFAULT_MAX_GFLOP 4.0

static void usage(FILE *f)
{
    fprintf(f,
"usage: mla-validate [options] FILE|DIR...\n"
"\n"
"Runs each backend on each fixture (DIR: every *.h5 in it) and judges it against\n"
"the fp32 reference; the reference itself is judged against the fp64 oracle.\n"
"\n"
"Options:\n"
"  --backend NAME    run this backend (repeatable; default: every available one\n"
"                    of the default set). --list-backends shows them all.\n"
"  --dump DIR        write DIR/<basename>.h5 per input (DIR/<backend>/<basename>.h5\n"
"                    with several backends): the inputs plus /expected/o, /expected/lse\n"
"                    and a producer naming the backend and commit\n"
"  --report DIR      write DIR/report.md, report.json and report.html\n"
"  --json FILE       write every metric as JSON\n"
"  --oracle-max-gflop X  skip the fp64 oracle above X GFLOP per case (default %.0f)\n"
"  --quiet           one line per case and backend only\n"
"  --list-backends   print the backend table and exit\n"
"  -h, --help        this text\n"
"\n"
"Verdicts:\n"
"  PASS      within every tolerance of the backend's execution path\n"
"  FAIL      over a bound, NaN/inf where the reference is finite, an element never\n"
"            written (output is poisoned with NaN first), a sentinel guard touched,\n"
"            a decline where SPEC section 3 says accept or an accept where it says\n"
"            decline, or output written while declining\n"
"  DECLINED  the backend correctly declined the case (a status, not a failure)\n"
"  N/A       backend unavailable here, no /expected in the file, or oracle too costly\n"
"  ERROR     the backend could not run (counts as a failure)\n"
"\n"
"Tolerances (validate/judge.c derives each once; u_b = 2^-8, u_32 = 2^-24):\n"
"  element   |o-ref| <= max(2 (k u_b + gamma_r) M_c, rel |ref|), where M_c bounds |v_c|\n"
"            over the sequence's visible values, gamma_r = (2 sqrt(D) A_r + sqrt(N)) u_32,\n"
"            k = bf16 roundings on the path (partials, P), rel = 2.01/128 (FlashMLA)\n"
"  cos_diff  1 - 2 sum(ab)/sum(a^2+b^2) <= 5e-6 (fp32 path), 1e-5 (bf16 partials or P)\n"
"  per row   every row's cos_diff <= 10x the tensor limit\n"
"  lse       |dlse| <= 2 (sqrt(D) A_r + sqrt(N) + |lse|) u_32\n"
"  reference vs oracle: element rel 4 u_32, cos_diff <= 2 gamma_max^2\n"
"Every output is also compared with the fp64 oracle where it is affordable\n"
"(cos_vs_oracle, max_abs_vs_oracle in the JSON; -1 where the oracle did not run).\n"
"\n"
"Exit codes: 0 every judged case passes, 1 any failure, 2 unreadable input or bad usage.\n",
            ORACLE_DEFAULT_MAX_GFLOP);
}

static void list_backends(void)
{
    printf("%-28s %-8s %-36s %s\n", "backend", "default", "path", "description");
    for (size_t i = 0; i < mla_backend_count(); ++i) {
        const mla_backend *b = mla_backend_get(i);
        char why[256] = "";
        int av = b->available(b, why, sizeof why);
        printf("%-28s %-8s %-36s %s%s%s\n", b->name, b->in_default_set ? "yes" : "no",
               mla_path_name(b->path), b->description, av ? "" : " -- unavailable: ",
               av ? "" : why);
    }
}

/* ---- file collection ---- */

typedef struct {
    char **v;
    size_t n, cap;
} strvec;

static int strvec_push(strvec *s, const char *x)
{
    if (s->n == s->cap) {
        size_t nc = s->cap ? 2 * s->cap : 16;
        char **nv = realloc(s->v, nc * sizeof *nv);
        if (!nv)
            return 0;
        s->v = nv;
        s->cap = nc;
    }
    return (s->v[s->n++] = strdup(x)) != NULL;
}

static int cmpstr(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int collect(const char *arg, strvec *files)
{
    struct stat sb;
    if (stat(arg, &sb) != 0) {
        fprintf(stderr, "mla-validate: %s: %s\n", arg, strerror(errno));
        return 0;
    }
    if (!S_ISDIR(sb.st_mode))
        return strvec_push(files, arg);
    DIR *d = opendir(arg);
    if (!d) {
        fprintf(stderr, "mla-validate: %s: %s\n", arg, strerror(errno));
        return 0;
    }
    size_t first = files->n;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len > 3 && strcmp(e->d_name + len - 3, ".h5") == 0) {
            char p[4096];
            snprintf(p, sizeof p, "%s/%s", arg, e->d_name);
            if (!strvec_push(files, p)) {
                closedir(d);
                return 0;
            }
        }
    }
    closedir(d);
    qsort(files->v + first, files->n - first, sizeof *files->v, cmpstr);
    return 1;
}

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

/* ---- guarded buffers ---- */

typedef struct {
    void *raw;
    size_t n, esize;
} guarded;

static void *gbuf_alloc(guarded *g, size_t n, size_t esize)
{
    g->n = n;
    g->esize = esize;
    g->raw = malloc((n + 2 * GUARD_N) * esize);
    if (!g->raw)
        return NULL;
    for (size_t i = 0; i < n + 2 * GUARD_N; ++i) {
        int guard = i < GUARD_N || i >= GUARD_N + n;
        if (esize == 4) {
            uint32_t v = guard ? GUARD32 : MLA_POISON_F32;
            memcpy((char *)g->raw + i * 4, &v, 4);
        } else {
            uint16_t v = guard ? GUARD16 : MLA_POISON_BF16;
            memcpy((char *)g->raw + i * 2, &v, 2);
        }
    }
    return (char *)g->raw + GUARD_N * esize;
}

/* Index of the first touched guard element, or -1. */
static long gbuf_guard_broken(const guarded *g)
{
    for (size_t i = 0; i < g->n + 2 * GUARD_N; ++i) {
        if (i >= GUARD_N && i < GUARD_N + g->n)
            continue;
        int ok;
        if (g->esize == 4) {
            uint32_t v;
            memcpy(&v, (char *)g->raw + i * 4, 4);
            ok = v == GUARD32;
        } else {
            uint16_t v;
            memcpy(&v, (char *)g->raw + i * 2, 2);
            ok = v == GUARD16;
        }
        if (!ok)
            return (long)i;
    }
    return -1;
}

static int is_poison(const guarded *g, size_t i)
{
    const char *p = (char *)g->raw + (GUARD_N + i) * g->esize;
    if (g->esize == 4) {
        uint32_t v;
        memcpy(&v, p, 4);
        return v == MLA_POISON_F32;
    }
    uint16_t v;
    memcpy(&v, p, 2);
    return v == MLA_POISON_BF16;
}

/* ---- environment for reports ---- */

static void run_cmd(const char *cmd, char *out, size_t n)
{
    out[0] = '\0';
    FILE *p = popen(cmd, "r");
    if (!p)
        return;
    if (fgets(out, (int)n, p)) {
        size_t l = strlen(out);
        while (l && (out[l - 1] == '\n' || out[l - 1] == '\r'))
            out[--l] = '\0';
    }
    pclose(p);
}

static void describe_machine(char *out, size_t n)
{
    struct utsname u;
    char cpu[256] = "";
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[512];
        while (fgets(line, sizeof line, f))
            if (strncmp(line, "model name", 10) == 0) {
                char *c = strchr(line, ':');
                if (c) {
                    snprintf(cpu, sizeof cpu, "%s", c + 2);
                    cpu[strcspn(cpu, "\n")] = '\0';
                }
                break;
            }
        fclose(f);
    }
    char gpu[256] = "";
    run_cmd("nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1", gpu,
            sizeof gpu);
    long ncpu = 0;
    FILE *c = popen("nproc 2>/dev/null", "r");
    if (c) {
        if (fscanf(c, "%ld", &ncpu) != 1)
            ncpu = 0;
        pclose(c);
    }
    if (uname(&u) == 0)
        snprintf(out, n, "%s %s %s, %s, %ld cores%s%s", u.nodename, u.sysname, u.machine,
                 cpu[0] ? cpu : "unknown CPU", ncpu, gpu[0] ? ", GPU " : "", gpu);
    else
        snprintf(out, n, "unknown machine");
}

/* The commit this binary was built from (stamped at build time); where the
 * build could not tell, the source tree's state now. */
static void describe_commit(char *out, size_t n)
{
    snprintf(out, n, "%s", MLA_GIT_COMMIT);
    if (strcmp(out, "unknown") == 0) {
        run_cmd("git -C '" MLA_SOURCE_DIR "' describe --always --dirty --abbrev=12 2>/dev/null",
                out, n);
        if (!out[0])
            snprintf(out, n, "unknown");
    }
}

/* ---- dump ---- */

static int dump_output(const char *dir, const char *backend, int per_backend_dir,
                       const char *file, const mla_fixture *fx, const mla_bf16 *o16,
                       const float *lse, const char *commit)
{
    char path[4096], sub[4096];
    if (per_backend_dir) {
        snprintf(sub, sizeof sub, "%s/%s", dir, backend);
        for (char *p = sub + strlen(dir) + 1; *p; ++p)
            if (*p == ':')
                *p = '_';
        mkdir(sub, 0777);
        snprintf(path, sizeof path, "%s/%s", sub, base_name(file));
    } else
        snprintf(path, sizeof path, "%s/%s", dir, base_name(file));
    mla_fixture out;
    mla_error err = {{0}};
    if (mla_fixture_copy_inputs(fx, &out, &err) != MLA_OK) {
        fprintf(stderr, "mla-validate: dump %s: %s\n", path, err.msg);
        return 0;
    }
    mla_fixture_sizes sz;
    mla_fixture_sizes_of(fx, &sz, &err);
    char producer[512];
    snprintf(producer, sizeof producer, "mla-validate backend=%s commit=%s", backend, commit);
    out.expected_o = malloc(sz.o * 2 + 2);
    out.expected_lse = lse ? malloc(sz.lse * 4 + 4) : NULL;
    out.expected_producer = strdup(producer);
    int ok = out.expected_o && out.expected_producer && (!lse || out.expected_lse);
    if (ok) {
        memcpy(out.expected_o, o16, sz.o * 2);
        if (lse)
            memcpy(out.expected_lse, lse, sz.lse * 4);
        ok = mla_fixture_write(path, &out, 6, &err) == MLA_OK;
        if (!ok)
            fprintf(stderr, "mla-validate: dump: %s\n", err.msg);
    } else
        fprintf(stderr, "mla-validate: dump %s: out of memory\n", path);
    mla_fixture_free(&out);
    return ok;
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
        if (unwritten[e] || !isfinite(o[e]))
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

static const char *family_of(const mla_fixture *fx)
{
    const mla_case_info *ci = mla_catalogue_find(fx->case_name);
    if (ci && strcmp(fx->source, "synthetic") == 0)
        return ci->family;
    return strcmp(fx->source, "trace") == 0 ? "trace" : "other";
}

int main(int argc, char **argv)
{
    const mla_backend *sel[64];
    size_t nsel = 0;
    const char *dump_dir = NULL, *report_dir = NULL, *json_path = NULL;
    double oracle_max = ORACLE_DEFAULT_MAX_GFLOP;
    int quiet = 0;
    strvec files = {0};
    int exit_code = EXIT_PASS;

    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i];
        int has = i + 1 < argc;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--list-backends")) {
            list_backends();
            return 0;
        } else if (!strcmp(a, "--backend") && has) {
            const mla_backend *b = mla_backend_find(argv[++i]);
            if (!b) {
                fprintf(stderr, "mla-validate: unknown backend '%s' (see --list-backends)\n",
                        argv[i]);
                return EXIT_BAD;
            }
            if (nsel == sizeof sel / sizeof sel[0]) {
                fprintf(stderr, "mla-validate: too many --backend\n");
                return EXIT_BAD;
            }
            sel[nsel++] = b;
        } else if (!strcmp(a, "--dump") && has) {
            dump_dir = argv[++i];
        } else if (!strcmp(a, "--report") && has) {
            report_dir = argv[++i];
        } else if (!strcmp(a, "--json") && has) {
            json_path = argv[++i];
        } else if (!strcmp(a, "--oracle-max-gflop") && has) {
            char *end;
            oracle_max = strtod(argv[++i], &end);
            if (*end || !(oracle_max >= 0)) {
                fprintf(stderr, "mla-validate: --oracle-max-gflop needs a number >= 0\n");
                return EXIT_BAD;
            }
        } else if (!strcmp(a, "--quiet")) {
            quiet = 1;
        } else if (a[0] == '-') {
            fprintf(stderr, "mla-validate: unknown or incomplete option '%s'\n", a);
            usage(stderr);
            return EXIT_BAD;
        } else if (!collect(a, &files)) {
            return EXIT_BAD;
        }
    }
    if (files.n == 0) {
        fprintf(stderr, "mla-validate: no fixture files given\n");
        usage(stderr);
        return EXIT_BAD;
    }
    int explicit_sel = nsel > 0;
    /* No --backend: every backend of the default set that is available
     * here (an unavailable one named explicitly still reports N/A). */
    if (!explicit_sel)
        for (size_t i = 0; i < mla_backend_count(); ++i) {
            const mla_backend *b = mla_backend_get(i);
            char why[256];
            if (b->in_default_set && b->available(b, why, sizeof why))
                sel[nsel++] = b;
            else if (b->in_default_set && !quiet)
                fprintf(stderr, "mla-validate: backend %s skipped: %s\n", b->name, why);
        }
    if (dump_dir) {
        struct stat sb;
        if (stat(dump_dir, &sb) != 0 && mkdir(dump_dir, 0777) != 0) {
            fprintf(stderr, "mla-validate: cannot create --dump directory %s\n", dump_dir);
            return EXIT_BAD;
        }
    }

    char commit[128], machine[512], date[64], command[4096] = "";
    describe_commit(commit, sizeof commit);
    describe_machine(machine, sizeof machine);
    time_t tnow = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S UTC", gmtime(&tnow));
    for (int i = 0; i < argc; ++i) {
        strncat(command, i ? " " : "", sizeof command - strlen(command) - 1);
        strncat(command, argv[i], sizeof command - strlen(command) - 1);
    }
    char backends_list[1024] = "";
    for (size_t i = 0; i < nsel; ++i) {
        strncat(backends_list, i ? "," : "", sizeof backends_list - strlen(backends_list) - 1);
        strncat(backends_list, sel[i]->name, sizeof backends_list - strlen(backends_list) - 1);
    }
    if (!quiet)
        fprintf(stderr, "mla-validate: %zu file(s), backends %s, commit %s\n", files.n,
                backends_list, commit);

    mla_case_result *results = calloc(files.n * nsel + 1, sizeof *results);
    if (!results) {
        fprintf(stderr, "mla-validate: out of memory\n");
        return EXIT_BAD;
    }
    size_t nres = 0;
    int n_pass = 0, n_fail = 0, n_decl = 0, n_na = 0, n_unreadable = 0;

    for (size_t fi = 0; fi < files.n; ++fi) {
        const char *file = files.v[fi];
        mla_fixture fx;
        mla_error err = {{0}};
        if (!quiet)
            fprintf(stderr, "[%zu/%zu] %s\n", fi + 1, files.n, file);
        if (mla_fixture_read_guarded(file, &fx, &err) != MLA_OK) {
            fprintf(stderr, "mla-validate: %s\n", err.msg);
            n_unreadable++;
            continue;
        }
        mla_fixture_sizes sz;
        mla_fixture_sizes_of(&fx, &sz, &err);
        float *ref_o = malloc((sz.o + 1) * sizeof *ref_o);
        float *ref_lse = malloc((sz.lse + 1) * sizeof *ref_lse);
        double *or_o = NULL, *or_lse = NULL;
        unsigned char *unwritten = malloc(sz.o + 1);
        float *o32 = malloc((sz.o + 1) * sizeof *o32);
        if (!ref_o || !ref_lse || !unwritten || !o32) {
            fprintf(stderr, "mla-validate: %s: out of memory\n", file);
            exit(EXIT_BAD);
        }
        double t0 = now_s();
        if (mla_reference_run(&fx, ref_o, ref_lse, &err) != MLA_OK) {
            fprintf(stderr, "mla-validate: %s: reference failed: %s\n", file, err.msg);
            n_unreadable++;
            goto next_file;
        }
        double t_ref = now_s() - t0;
        double gflop = case_gflop(&fx);
        /* The oracle judges the reference and gives every other backend a
         * second opinion, wherever it is affordable. */
        if (gflop <= oracle_max) {
            or_o = malloc((sz.o + 1) * sizeof *or_o);
            or_lse = malloc((sz.lse + 1) * sizeof *or_lse);
            if (!or_o || !or_lse || mla_oracle_run(&fx, or_o, or_lse, &err) != MLA_OK) {
                fprintf(stderr, "mla-validate: %s: oracle failed: %s\n", file, err.msg);
                free(or_o);
                free(or_lse);
                or_o = NULL;
                or_lse = NULL;
            }
        }
        int max_splits = mla_case_max_splits(&fx);
        int64_t max_prefix = 0;
        for (int b = 0; b < fx.cfg.num_seqs; ++b)
            if (mla_fixture_prefix(&fx, b) > max_prefix)
                max_prefix = mla_fixture_prefix(&fx, b);

        for (size_t bi = 0; bi < nsel; ++bi) {
            const mla_backend *be = sel[bi];
            mla_case_result *res = &results[nres++];
            snprintf(res->fixture, sizeof res->fixture, "%s", base_name(file));
            snprintf(res->case_name, sizeof res->case_name, "%s", fx.case_name);
            snprintf(res->family, sizeof res->family, "%s", family_of(&fx));
            snprintf(res->backend, sizeof res->backend, "%s", be->name);
            res->path = be->path;
            res->max_prefix = max_prefix;
            res->max_splits = max_splits;
            res->num_seqs = fx.cfg.num_seqs;
            res->num_heads = fx.cfg.num_heads;
            res->q_len = fx.cfg.q_len;
            res->m.lse_max_abs = -1;
            res->m.cos_vs_oracle = -1;
            res->m.max_abs_vs_oracle = -1;

            char why[256] = "";
            if (!be->available(be, why, sizeof why)) {
                res->verdict = MLA_VERDICT_NA;
                snprintf(res->reason, sizeof res->reason, "unavailable: %s", why);
                goto print;
            }
            if (be->path == MLA_PATH_REFERENCE && strcmp(be->name, "oracle") != 0 && !or_o) {
                res->verdict = MLA_VERDICT_NA;
                snprintf(res->reason, sizeof res->reason,
                         "oracle skipped (%.1f GFLOP > --oracle-max-gflop %.1f)", gflop,
                         oracle_max);
                goto print;
            }
            if (!strcmp(be->name, "oracle") && gflop > oracle_max) {
                res->verdict = MLA_VERDICT_NA;
                snprintf(res->reason, sizeof res->reason,
                         "oracle skipped (%.1f GFLOP > --oracle-max-gflop %.1f)", gflop,
                         oracle_max);
                goto print;
            }

            guarded go, gl;
            mla_outputs out = {0};
            void *obuf = gbuf_alloc(&go, sz.o, be->out_bf16 ? 2 : 4);
            float *lbuf = gbuf_alloc(&gl, sz.lse, 4);
            if (!obuf || !lbuf) {
                fprintf(stderr, "mla-validate: out of memory\n");
                exit(EXIT_BAD);
            }
            if (be->out_bf16)
                out.o16 = obuf;
            else
                out.o32 = obuf;
            out.lse = lbuf;
            mla_error berr = {{0}};
            double tb = now_s();
            mla_status st = be->run(be, &fx, &out, &berr);
            res->seconds = now_s() - tb;
            const char *spec_reason = mla_spec_decline_reason(&fx);
            long gbroken = gbuf_guard_broken(&go), lbroken = gbuf_guard_broken(&gl);

            if (gbroken >= 0 || lbroken >= 0) {
                res->verdict = MLA_VERDICT_FAIL;
                snprintf(res->reason, sizeof res->reason,
                         "sentinel guard %s the %s buffer overwritten (element %ld of the guard "
                         "region)",
                         (gbroken >= 0 ? gbroken : lbroken) < GUARD_N ? "before" : "after",
                         gbroken >= 0 ? "o" : "lse", gbroken >= 0 ? gbroken : lbroken);
            } else if (st == MLA_ERR_DECLINED) {
                int wrote = 0;
                for (size_t e = 0; e < sz.o && !wrote; ++e)
                    wrote = !is_poison(&go, e);
                for (size_t e = 0; e < sz.lse && !wrote; ++e)
                    wrote = !is_poison(&gl, e);
                if (be->expect == MLA_EXPECT_HAS_EXPECTED) {
                    res->verdict = MLA_VERDICT_NA;
                    snprintf(res->reason, sizeof res->reason, "%s", berr.msg);
                } else if (wrote) {
                    res->verdict = MLA_VERDICT_FAIL;
                    snprintf(res->reason, sizeof res->reason,
                             "declined (%s) but wrote to its output", berr.msg);
                } else if (be->expect == MLA_EXPECT_ACCEPT_ALL || !spec_reason) {
                    res->verdict = MLA_VERDICT_FAIL;
                    snprintf(res->reason, sizeof res->reason,
                             "declined (%s) where SPEC section 3 says accept", berr.msg);
                } else {
                    res->verdict = MLA_VERDICT_DECLINED;
                    snprintf(res->reason, sizeof res->reason, "%s (SPEC: %s)", berr.msg,
                             spec_reason);
                }
            } else if (st != MLA_OK) {
                res->verdict = MLA_VERDICT_ERROR;
                snprintf(res->reason, sizeof res->reason, "%s: %s", mla_status_name(st),
                         berr.msg);
            } else if (be->expect == MLA_EXPECT_SPEC_DECLINES && spec_reason) {
                res->verdict = MLA_VERDICT_FAIL;
                snprintf(res->reason, sizeof res->reason,
                         "accepted a case SPEC section 3 says to decline (%s)", spec_reason);
            } else {
                for (size_t e = 0; e < sz.o; ++e) {
                    unwritten[e] = (unsigned char)is_poison(&go, e);
                    o32[e] = be->out_bf16 ? mla_bf16_to_f32(out.o16[e]) : out.o32[e];
                }
                mla_judge_input jin = {&fx, ref_o, ref_lse,
                                       strcmp(be->name, "oracle") ? or_o : NULL,
                                       strcmp(be->name, "oracle") ? or_lse : NULL};
                res->verdict = mla_judge(&jin, be->path, o32, unwritten,
                                         out.wrote_lse ? out.lse : NULL, &res->m, res->reason,
                                         sizeof res->reason);
                oracle_metrics(or_o, o32, unwritten, sz.o, &res->m);
                if (dump_dir) {
                    /* Dumps are bf16, as the schema's /expected/o is. */
                    mla_bf16 *o16 = out.o16;
                    mla_bf16 *tmp = NULL;
                    if (!be->out_bf16) {
                        tmp = malloc(sz.o * 2 + 2);
                        if (tmp)
                            mla_round_bf16(out.o32, tmp, sz.o);
                        o16 = tmp;
                    }
                    if (!o16 || !dump_output(dump_dir, be->name, nsel > 1, file, &fx, o16,
                                             out.wrote_lse ? out.lse : NULL, commit))
                        n_unreadable++; /* a dump that cannot be written is an I/O error */
                    free(tmp);
                }
            }
            free(go.raw);
            free(gl.raw);
        print:
            switch (res->verdict) {
            case MLA_VERDICT_PASS: n_pass++; break;
            case MLA_VERDICT_DECLINED: n_decl++; break;
            case MLA_VERDICT_NA: n_na++; break;
            default: n_fail++; break;
            }
            if (res->verdict == MLA_VERDICT_PASS)
                printf("%-8s %-28s %-22s cos %.2e  row %.2e  max|err| %.3g  bound %.2f  "
                       "1ulp %5.1f%%  %.3fs\n",
                       mla_verdict_name(res->verdict), res->fixture, be->name, res->m.cos_diff,
                       res->m.worst_row_cos, res->m.max_abs, res->m.worst_ratio,
                       100.0 * res->m.within_1ulp, res->seconds);
            else
                printf("%-8s %-28s %-22s %s\n", mla_verdict_name(res->verdict), res->fixture,
                       be->name, res->reason);
            fflush(stdout);
        }
        if (!quiet)
            fprintf(stderr, "    reference %.3fs (%.2f GFLOP/s)\n", t_ref,
                    t_ref > 0 ? gflop / t_ref : 0);
    next_file:
        free(ref_o);
        free(ref_lse);
        free(or_o);
        free(or_lse);
        free(unwritten);
        free(o32);
        mla_fixture_free(&fx);
    }

    mla_report_meta meta = {commit, machine, command, date, backends_list};
    mla_error rerr = {{0}};
    if (report_dir && mla_report_write_dir(report_dir, &meta, results, nres, &rerr) != MLA_OK) {
        fprintf(stderr, "mla-validate: report: %s\n", rerr.msg);
        n_unreadable++;
    }
    if (json_path && mla_report_write_json(json_path, &meta, results, nres, &rerr) != MLA_OK) {
        fprintf(stderr, "mla-validate: json: %s\n", rerr.msg);
        n_unreadable++;
    }
    printf("mla-validate: %d passed, %d failed, %d declined, %d n/a, %d unreadable\n", n_pass,
           n_fail, n_decl, n_na, n_unreadable);
    if (report_dir && !quiet)
        printf("mla-validate: report written to %s/report.{md,json,html}\n", report_dir);
    if (n_unreadable)
        exit_code = EXIT_BAD;
    else if (n_fail)
        exit_code = EXIT_FAILED;
    for (size_t i = 0; i < files.n; ++i)
        free(files.v[i]);
    free(files.v);
    free(results);
    return exit_code;
}
