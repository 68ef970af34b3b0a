/* mla-validate's command line: options, usage text, file collection. */
#include "internal.h"
#include "mla/fsutil.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void usage(FILE *f)
{
    fprintf(f,
"usage: mla-validate [options] FILE|DIR...\n"
"       mla-validate [options] --catalogue [--small] [--seed N] [NAME...]\n"
"\n"
"Runs each backend on each fixture (DIR: every *.h5 in it) and judges it against\n"
"the fp32 reference; the reference itself is judged against the fp64 oracle.\n"
"With --catalogue the cases are the fixture catalogue's (mla-fixture list),\n"
"generated in memory with a fresh seed (printed; --seed N reproduces a run), and\n"
"go through the same evaluation loop as files.\n"
"\n"
"Options:\n"
"  --backend NAME    run this backend (repeatable; default: every available one\n"
"                    of the default set). --list-backends shows them all.\n"
"  --catalogue       judge catalogue cases (NAME...: only these) instead of files\n"
"  --small           with --catalogue: skip the large cases\n"
"  --seed N          with --catalogue: base seed (case i uses N + 7919 i)\n"
"  --dump DIR        write DIR/<basename>.h5 per input (DIR/<backend>/<basename>.h5\n"
"                    with several backends): the inputs plus /expected/o, /expected/lse\n"
"                    and a producer naming the backend and commit\n"
"  --report DIR      write DIR/report.md, report.json and report.html\n"
"  --json FILE       write every metric as JSON\n"
"  --junit FILE      write JUnit XML (one testcase per fixture and backend; FAIL and\n"
"                    ERROR are failures, N/A and DECLINED skipped) for CI test tabs\n"
"  --known-bad MANIFEST  a trace manifest (fixtures/data/trace/manifest.json): the\n"
"                    captures it lists with \"expect\": \"fail\" are known-bad upstream\n"
"                    outputs; their FAIL for the recorded reason (\"fail_match\") is\n"
"                    reported as XFAIL and is not a failure; a PASS or a failure\n"
"                    for another reason is a FAIL\n"
"  --bias-noise FILE print the bias test's worst |s-1| per backend and group level\n"
"                    (row, sequence-head, draft-head, head, sequence; against the\n"
"                    fp64 oracle where it runs) and write it per case to FILE (markdown)\n"
"  --oracle-max-gflop X  skip the fp64 oracle above X GFLOP per case (default %.0f)\n"
"  --max-memory N    the memory budget of the whole run (16G, 512M; default min(half\n"
"                    of RAM, 16 GiB)): this process and the guarded reader's child\n"
"                    together. A file is read by a child process that holds its\n"
"                    tensors while this process receives a copy, so a file whose\n"
"                    tensors declare more than (N - in use - reader room) / 2 bytes is\n"
"                    refused before any of it is read (the reader's room: N/4, at\n"
"                    most 512 MiB; the child's address space is capped to it plus\n"
"                    the declared bytes), and a case whose buffers would pass N is\n"
"                    not run\n"
"  --quiet           one line per case and backend only\n"
"  --list-backends   print the backend table and exit\n"
"  -h, --help        this text\n"
"\n"
"Verdicts:\n"
"  PASS      within every tolerance of the backend's execution path\n"
"  FAIL      over a bound, NaN/inf where the reference is finite, an element never\n"
"            written (output is poisoned with NaN first), a sentinel guard touched,\n"
"            a decline where SPEC section 3 says accept or an accept where it says\n"
"            decline, output written while declining, or a systematic bias of one\n"
"            head, sequence or row past its threshold\n"
"  DECLINED  the backend correctly declined the case (a status, not a failure)\n"
"  N/A       backend unavailable here, no /expected in the file (counted in one\n"
"            summary line), or oracle too costly\n"
"  XFAIL     a known-bad capture (--known-bad) failing for its recorded reason\n"
"  ERROR     the backend could not run (counts as a failure)\n"
"\n"
"Tolerances (validate/judge.c derives each once, docs/accuracy.md explains them;\n"
"u_b = 2^-8, u_32 = 2^-24):\n"
"  element   |o-ref| <= max(2 (k u_b + gamma_r) M_c, rel |ref|), where M_c bounds |v_c|\n"
"            over the sequence's visible values, gamma_r = (2 sqrt(D) A_r + sqrt(N)) u_32,\n"
"            k = bf16 roundings on the path (partials, P), rel = 2.01/128 (FlashMLA)\n"
"  cos_diff  1 - 2 sum(ab)/sum(a^2+b^2) <= 5e-6 (fp32 path), 1e-5 (bf16 partials or P)\n"
"  per row   every row's cos_diff <= 10x the tensor limit\n"
"  bias      per (token, head), (sequence, head), (draft row, head), sequence and head:\n"
"            |s - 1| <= threshold, s = sum(o ref)/sum(ref^2) (docs/accuracy.md)\n"
"  lse       |dlse| <= 2 (sqrt(D) A_r + sqrt(N) + |lse|) u_32\n"
"  reference vs oracle: element rel 4 u_32, cos_diff <= 2 gamma_max^2\n"
"Every output is also compared with the fp64 oracle where it is affordable\n"
"(cos_vs_oracle, max_abs_vs_oracle in the JSON; -1 where the oracle did not run).\n"
"\n"
"Output files (--dump, --report, --json, --junit, --bias-noise) are written to an\n"
"exclusive temporary beside the target, fsync'ed and renamed: a failed write leaves\n"
"the old file as it was. A target that is an input of the run (same device and\n"
"inode), a symbolic link or not a regular file is refused; --report holds\n"
"DIR/.mla-write.lock while it writes its three files, so concurrent runs each leave\n"
"a consistent set.\n"
"\n"
"Exit codes: 0 every judged case passes, 1 any failure, 2 unreadable input, bad\n"
"usage or a failed write (the message names the file and the errno), 3 nothing was\n"
"judged at all (every result N/A or declined: a CI job that wrote no outputs).\n",
            VAL_ORACLE_DEFAULT_MAX_GFLOP);
}

static void list_backends(void)
{
    printf("%-24s %-28s %-8s %-36s %s\n", "backend", "kind", "default", "path", "description");
    for (size_t i = 0; i < mla_backend_count(); ++i) {
        const mla_backend *b = mla_backend_get(i);
        char why[256] = "";
        int av = b->available(b, why, sizeof why);
        printf("%-24s %-28s %-8s %-36s %s%s%s\n", b->name, mla_backend_kind_name(b->kind),
               b->in_default_set ? "yes" : "no", mla_path_name(b->path), b->description,
               av ? "" : " -- unavailable: ", av ? "" : why);
    }
}

int val_strvec_push(val_strvec *s, const char *x)
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

void val_strvec_free(val_strvec *s)
{
    for (size_t i = 0; i < s->n; ++i)
        free(s->v[i]);
    free(s->v);
    s->v = NULL;
    s->n = s->cap = 0;
}

const char *val_base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

static int cmpstr(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* FILE: itself; DIR: its *.h5, sorted. */
static int collect(const char *arg, val_strvec *files)
{
    struct stat sb;
    if (stat(arg, &sb) != 0) {
        fprintf(stderr, "mla-validate: %s: %s\n", arg, strerror(errno));
        return 0;
    }
    if (!S_ISDIR(sb.st_mode))
        return val_strvec_push(files, arg);
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
            if (!val_strvec_push(files, p)) {
                closedir(d);
                return 0;
            }
        }
    }
    closedir(d);
    if (files->n == first) {
        /* Nothing to sort, and files->v may still be NULL, which qsort must
         * not be given. No file at all is reported by the caller. */
        fprintf(stderr, "mla-validate: %s: no *.h5 files in the directory\n", arg);
        return 1;
    }
    qsort(files->v + first, files->n - first, sizeof *files->v, cmpstr);
    return 1;
}

/* The JSON string value starting at *p (just after its opening quote),
 * escapes kept as written (base names and message fragments need none);
 * NULL when unterminated. */
static char *json_string_at(const char *p, const char **end)
{
    const char *q = p;
    while (*q && *q != '"')
        q += (*q == '\\' && q[1]) ? 2 : 1;
    if (!*q)
        return NULL;
    *end = q + 1;
    return strndup(p, (size_t)(q - p));
}

/* The value of "key" inside the object [obj, lim), or NULL. */
static char *json_field(const char *obj, const char *lim, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\"", key);
    const char *k = strstr(obj, pat);
    if (!k || k >= lim)
        return NULL;
    k += strlen(pat);
    while (*k == ' ' || *k == ':' || *k == '\n' || *k == '\t' || *k == '\r')
        ++k;
    const char *end;
    return *k == '"' ? json_string_at(k + 1, &end) : NULL;
}

/* --known-bad: every {"file": ..., "expect": "fail", "fail_match": ...}
 * object of a trace manifest (a flat list of objects of strings). */
static int read_known_bad(const char *path, val_opts *o)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "mla-validate: --known-bad %s: %s\n", path, strerror(errno));
        return 0;
    }
    char *text = malloc(1 << 20);
    size_t n = text ? fread(text, 1, (1 << 20) - 1, f) : 0;
    fclose(f);
    if (!text || n == (1 << 20) - 1) {
        fprintf(stderr, "mla-validate: --known-bad %s: %s\n", path,
                text ? "larger than 1 MiB" : "out of memory");
        free(text);
        return 0;
    }
    text[n] = '\0';
    int ok = 1;
    for (const char *p = strchr(text, '{'); p && ok; p = strchr(p + 1, '{')) {
        const char *lim = strchr(p + 1, '}');
        if (!lim)
            break;
        char *file = json_field(p, lim, "file"), *expect = json_field(p, lim, "expect");
        char *match = json_field(p, lim, "fail_match");
        if (file && expect && !strcmp(expect, "fail"))
            ok = val_strvec_push(&o->known_bad, file) &&
                 val_strvec_push(&o->known_bad_match, match ? match : "");
        free(file);
        free(expect);
        free(match);
    }
    free(text);
    if (!ok)
        fprintf(stderr, "mla-validate: out of memory\n");
    return ok;
}

/* A whole string that is a number >= 0 (an empty string is not 0). */
static int parse_nonneg(const char *s, double *out)
{
    char *end;
    errno = 0;
    if (!s[0])
        return 0;
    *out = strtod(s, &end);
    return !*end && errno == 0 && *out >= 0;
}

static int parse_u64(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    if (!s[0] || s[0] == '-')
        return 0;
    *out = strtoull(s, &end, 0);
    return !*end && errno == 0;
}

int val_parse_args(int argc, char **argv, val_opts *o)
{
    memset(o, 0, sizeof *o);
    o->oracle_max = VAL_ORACLE_DEFAULT_MAX_GFLOP;
    val_strvec args = {0};
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i];
        const int has = i + 1 < argc;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            val_strvec_free(&args);
            return VAL_EXIT_PASS;
        } else if (!strcmp(a, "--list-backends")) {
            list_backends();
            val_strvec_free(&args);
            return VAL_EXIT_PASS;
        } else if (!strcmp(a, "--backend") && has) {
            const mla_backend *b = mla_backend_find(argv[++i]);
            if (!b) {
                fprintf(stderr, "mla-validate: unknown backend '%s' (see --list-backends)\n",
                        argv[i]);
                goto bad;
            }
            if (o->nsel == VAL_MAX_BACKENDS) {
                fprintf(stderr, "mla-validate: too many --backend\n");
                goto bad;
            }
            o->sel[o->nsel++] = b;
        } else if (!strcmp(a, "--dump") && has) {
            o->dump_dir = argv[++i];
        } else if (!strcmp(a, "--report") && has) {
            o->report_dir = argv[++i];
        } else if (!strcmp(a, "--json") && has) {
            o->json_path = argv[++i];
        } else if (!strcmp(a, "--junit") && has) {
            o->junit_path = argv[++i];
        } else if (!strcmp(a, "--known-bad") && has) {
            if (!read_known_bad(argv[++i], o))
                goto bad;
        } else if (!strcmp(a, "--bias-noise") && has) {
            o->bias_noise_path = argv[++i];
        } else if (!strcmp(a, "--oracle-max-gflop") && has) {
            if (!parse_nonneg(argv[++i], &o->oracle_max)) {
                fprintf(stderr, "mla-validate: --oracle-max-gflop needs a number >= 0, got '%s'\n",
                        argv[i]);
                goto bad;
            }
        } else if (!strcmp(a, "--max-memory") && has) {
            if (!mla_parse_bytes(argv[++i], &o->max_memory) || o->max_memory == 0) {
                fprintf(stderr, "mla-validate: --max-memory needs a size such as 16G or 512M, got '%s'\n",
                        argv[i]);
                goto bad;
            }
        } else if (!strcmp(a, "--catalogue")) {
            o->catalogue = 1;
        } else if (!strcmp(a, "--small")) {
            o->small = 1;
        } else if (!strcmp(a, "--seed") && has) {
            if (!parse_u64(argv[++i], &o->seed)) {
                fprintf(stderr, "mla-validate: --seed needs an unsigned integer, got '%s'\n",
                        argv[i]);
                goto bad;
            }
            o->have_seed = 1;
        } else if (!strcmp(a, "--quiet")) {
            o->quiet = 1;
        } else if (a[0] == '-') {
            fprintf(stderr, "mla-validate: unknown or incomplete option '%s'\n", a);
            usage(stderr);
            goto bad;
        } else if (!val_strvec_push(&args, a)) {
            fprintf(stderr, "mla-validate: out of memory\n");
            goto bad;
        }
    }
    if (o->dump_dir && !o->dump_dir[0]) {
        fprintf(stderr, "mla-validate: --dump needs a directory name\n");
        goto bad;
    }
    if (o->report_dir && !o->report_dir[0]) {
        fprintf(stderr, "mla-validate: --report needs a directory name\n");
        goto bad;
    }
    if (!o->catalogue && (o->small || o->have_seed)) {
        fprintf(stderr, "mla-validate: --small and --seed go with --catalogue\n");
        goto bad;
    }
    if (o->catalogue) {
        for (size_t k = 0; k < args.n; ++k)
            if (!mla_catalogue_find(args.v[k])) {
                fprintf(stderr, "mla-validate: no catalogue case '%s' (mla-fixture list)\n",
                        args.v[k]);
                goto bad;
            }
        o->files = args; /* case names; none = every case */
        return -1;
    }
    for (size_t k = 0; k < args.n; ++k)
        if (!collect(args.v[k], &o->files))
            goto bad;
    val_strvec_free(&args);
    if (o->files.n == 0) {
        fprintf(stderr, "mla-validate: no fixture files given\n");
        usage(stderr);
        return VAL_EXIT_BAD;
    }
    /* Every input is protected from every writer of this run (device and
     * inode, whatever the name: fsutil.h), and two inputs whose dumps would
     * have one name are refused before anything runs. */
    for (size_t k = 0; k < o->files.n; ++k) {
        mla_error err = {{0}};
        if (mla_protect_input(o->files.v[k], &err) != MLA_OK) {
            fprintf(stderr, "mla-validate: %s\n", err.msg);
            goto bad;
        }
        for (size_t j = 0; o->dump_dir && j < k; ++j)
            if (!strcmp(val_base_name(o->files.v[j]), val_base_name(o->files.v[k]))) {
                fprintf(stderr,
                        "mla-validate: --dump: inputs %s and %s have the same base name, so "
                        "their dumps would overwrite each other; dump them in separate runs\n",
                        o->files.v[j], o->files.v[k]);
                goto bad;
            }
    }
    return -1;
bad:
    val_strvec_free(&args);
    val_opts_free(o);
    return VAL_EXIT_BAD;
}

void val_opts_free(val_opts *o)
{
    val_strvec_free(&o->files);
    val_strvec_free(&o->known_bad);
    val_strvec_free(&o->known_bad_match);
}
