/* mla-validate's own pieces (not a public API): the options the command
 * line gives, the fixture-by-backend suite (the one evaluation loop), the
 * dumps, and file helpers shared with the report writers. */
#ifndef MLA_VALIDATE_INTERNAL_H
#define MLA_VALIDATE_INTERNAL_H

#include "mla/report.h"
#include "mla/validate.h"

#include <stdint.h>
#include <stdio.h>

/* The captured backend's N/A reason on a file without /expected (the
 * text backends.c's run_captured sets), summarised in one line. */
#define VAL_NO_EXPECTED "file has no /expected/o"

enum { VAL_EXIT_PASS = 0, VAL_EXIT_FAILED = 1, VAL_EXIT_BAD = 2, VAL_EXIT_NOTHING = 3 };

/* The oracle is plain double loops (~1 GFLOP/s); above this it is skipped. */
#define VAL_ORACLE_DEFAULT_MAX_GFLOP 4.0
#define VAL_MAX_BACKENDS 64

typedef struct {
    char **v;
    size_t n, cap;
} val_strvec;

int val_strvec_push(val_strvec *s, const char *x);
void val_strvec_free(val_strvec *s);

typedef struct {
    const mla_backend *sel[VAL_MAX_BACKENDS];
    size_t nsel;
    const char *dump_dir, *report_dir, *json_path;
    const char *bias_noise_path; /* --bias-noise FILE: the bias noise tables (markdown) */
    const char *junit_path;      /* --junit FILE: JUnit XML */
    /* --known-bad MANIFEST: the captures expected to fail (base names, and
     * the text each failure must contain; "" = any). */
    val_strvec known_bad, known_bad_match;
    double oracle_max;
    uint64_t max_memory; /* --max-memory; 0: the reader's default */
    int quiet;
    /* --catalogue: cases generated in memory instead of files. */
    int catalogue, small, have_seed;
    uint64_t seed;
    val_strvec files; /* fixture files; with --catalogue, case names (empty: all) */
} val_opts;

/* Parses argv into *o. Returns -1 to go on, otherwise the exit code to
 * return now (0 after --help / --list-backends, VAL_EXIT_BAD on bad usage). */
int val_parse_args(int argc, char **argv, val_opts *o);
/* The part of a path after its last '/'. */
const char *val_base_name(const char *path);
void val_opts_free(val_opts *o);

/* ---- the suite: every selected backend on every case ---- */
typedef struct {
    const val_opts *opt;
    const char *commit;
    mla_case_result *results;
    size_t nres, cap;
    int n_pass, n_fail, n_decl, n_na, n_unreadable;
    int n_xfail;     /* known-bad captures failing as recorded (not failures) */
    int n_na_noexp;  /* N/A because the file has no /expected: one summary line */
    /* Bias-test margin on correct backends (issue 18): the largest
     * |s - 1| / threshold seen per path, printed at the end. */
    double bias_margin[MLA_PATH_COUNT];
    char bias_margin_where[MLA_PATH_COUNT][192];
    int bias_apriori_p[MLA_PATH_COUNT]; /* results judged with the a-priori P term */
} val_suite;

void val_suite_init(val_suite *s, const val_opts *opt, const char *commit);
/* Runs every selected backend on one case; `label` names it in the results
 * (a file's base name, or catalogue:NAME). */
void val_suite_run_case(val_suite *s, const mla_fixture *fx, const char *label,
                        const char *family);
void val_suite_free(val_suite *s);

/* ---- dumps ---- */
/* Writes the case's inputs plus /expected (o, lse when given, producer) to
 * DIR/<label>.h5, or DIR/<backend>/<label>.h5 when per_backend_dir. */
int val_dump_output(const char *dir, const char *backend, int per_backend_dir, const char *label,
                    const mla_fixture *fx, const mla_bf16 *o16, const float *lse,
                    const char *commit);

/* ---- JUnit XML (junit.c) ---- */
mla_status val_write_junit(const char *path, const mla_case_result *r, size_t n, mla_error *err);

/* ---- the environment a report names ---- */
void val_describe_machine(char *out, size_t n);
void val_describe_commit(char *out, size_t n);

#endif
