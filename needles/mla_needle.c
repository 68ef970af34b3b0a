/* mla-needle: boundary needles (issue 17) at work.
 *
 *   map       the needle map of a case or file, optionally with each needle
 *             pair's exact softmax share (checks the construction)
 *   captured  boundary bugs as captured outputs: the fp64 oracle run on
 *             mutated inputs (mla_bmut_apply), stored as /expected/o + lse in
 *             the unmutated file; optionally runs mla-validate on each file
 *   model     the CPU model's boundary mutants judged in-process
 *   power     measured detection power: the fewest dropped tail tokens the
 *             judge catches on diffuse fixtures, and every needle position
 *
 * Everything is judged with the validator's own judge (validate/judge.c,
 * mla_judge) on the path mla-validate gives the backend in question, so the
 * numbers here are what mla-validate would say. */
#include "mla/fsutil.h"
#include "mla/model.h"
#include "mla/needle.h"
#include "mla/reference.h"
#include "mla/validate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void die(const char *what, const mla_error *err)
{
    fprintf(stderr, "mla-needle: %s: %s\n", what, err ? err->msg : "");
    exit(2);
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "mla-needle: out of memory (%zu bytes)\n", n);
        exit(2);
    }
    return p;
}

/* --max-memory of the command (0: the reader's default). */
static uint64_t max_memory;

/* A catalogue case by name, or a fixture file, read by the guarded reader
 * (a child process under the run's memory budget: include/mla/fixture.h),
 * as every tool that opens a fixture does. The file is an input: no writer
 * of this run replaces it. */
static void load(const char *name, const char *file, uint64_t seed, int has_seed, mla_fixture *fx)
{
    mla_error err = {{0}};
    if (file) {
        mla_read_options ro;
        memset(&ro, 0, sizeof ro);
        ro.max_memory = max_memory;
        if (mla_fixture_read_guarded_opts(file, &ro, fx, &err) != MLA_OK ||
            mla_protect_input(file, &err) != MLA_OK) {
            fprintf(stderr, "mla-needle: %s\n", err.msg); /* it names the file */
            exit(2);
        }
    } else if (mla_catalogue_generate(name, has_seed ? seed : mla_catalogue_default_seed(name), fx,
                                      &err) != MLA_OK)
        die(name, &err);
    if (fx->kv_dtype != MLA_KV_BF16) { /* the needle maths walks bf16 pool rows */
        mla_error_set(&err, "%s pool (schema 1.1.0): mla-needle handles bf16 pools only",
                      mla_kv_dtype_name(fx->kv_dtype));
        die(file ? file : name, &err);
    }
}

/* The array sizes of a fixture (exits on an invalid one). */
static mla_fixture_sizes sizes_of(const mla_fixture *fx)
{
    mla_fixture_sizes sz;
    mla_error err = {{0}};
    if (mla_fixture_sizes_of(fx, &sz, &err) != MLA_OK)
        die("sizes", &err);
    return sz;
}

/* --name CASE / --in FILE / --max-memory N at argv[*i] (every command
 * takes them): 1 and *i advanced past the value when it is one; a bad
 * --max-memory exits 2. */
static int source_arg(int argc, char **argv, int *i, const char **name, const char **file)
{
    if (!strcmp(argv[*i], "--name") && *i + 1 < argc)
        *name = argv[++*i];
    else if (!strcmp(argv[*i], "--in") && *i + 1 < argc)
        *file = argv[++*i];
    else if (!strcmp(argv[*i], "--max-memory") && *i + 1 < argc) {
        if (!mla_parse_bytes(argv[++*i], &max_memory) || max_memory == 0) {
            fprintf(stderr, "mla-needle: --max-memory needs a size such as 4G or 512M, got '%s'\n",
                    argv[*i]);
            exit(2);
        }
    } else
        return 0;
    return 1;
}

/* Exactly one of --name, --in: 0, else a message and 2 (bad usage). */
static int source_check(const char *cmd, const char *name, const char *file)
{
    if (!name == !file) {
        fprintf(stderr, "mla-needle %s: give one of --name, --in\n", cmd);
        return 2;
    }
    return 0;
}

/* ---- fp64 oracle and the delta construction ---- */

typedef struct {
    double *o, *lse;
} oracle_out;

static void oracle_of(const mla_fixture *fx, oracle_out *r)
{
    const mla_fixture_sizes sz = sizes_of(fx);
    mla_error err = {{0}};
    r->o = xmalloc(sz.o * sizeof(double));
    r->lse = xmalloc(sz.lse * sizeof(double));
    if (mla_oracle_run(fx, r->o, r->lse, &err) != MLA_OK)
        die("oracle", &err);
}

static void oracle_free(oracle_out *r)
{
    free(r->o);
    free(r->lse);
}

static int cmp_i64(const void *a, const void *b)
{
    const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static double dot_q(const mla_bf16 *q, const mla_bf16 *k, int n)
{
    double s = 0;
    for (int d = 0; d < n; ++d)
        s += (double)mla_bf16_to_f32(q[d]) * (double)mla_bf16_to_f32(k[d]);
    return s;
}

/* Key row of "extended slot" x: a pool slot, or pool_slots + flat draft row. */
static const mla_bf16 *ext_key(const mla_fixture *fx, int64_t x)
{
    return x < fx->pool_slots ? fx->kv_buffer + (size_t)x * fx->cfg.head_dim
                              : fx->k_extend + (size_t)(x - fx->pool_slots) * fx->cfg.head_dim;
}

/* Apply a key-multiset change (removed R, added A; extended slots) to row
 * `row`'s exact output: with w_x = exp(s_x - lse), o' = (o - sum_R w v +
 * sum_A w v) / (1 - sum_R w + sum_A w), lse' = lse + log(den). Exact in
 * fp64 up to ~1e-16 relative (den >= 1 - 0.8 for a dropped needle). */
static void apply_delta(const mla_fixture *fx, int64_t row, const int64_t *R, size_t nr,
                        const int64_t *A, size_t na, const oracle_out *base, double *o,
                        double *lse)
{
    const int H = fx->cfg.num_heads, D = fx->cfg.head_dim, Dv = fx->cfg.v_head_dim;
    const double sm = fx->cfg.sm_scale;
    for (int h = 0; h < H; ++h) {
        const size_t li = (size_t)row * H + h;
        const mla_bf16 *q = fx->q + li * D;
        double *oo = o + li * Dv;
        const double l0 = base->lse[li];
        double den = 1;
        memcpy(oo, base->o + li * Dv, (size_t)Dv * sizeof(double));
        for (int pass = 0; pass < 2; ++pass) {
            const int64_t *X = pass ? A : R;
            const size_t nx = pass ? na : nr;
            const double sg = pass ? 1.0 : -1.0;
            for (size_t k = 0; k < nx; ++k) {
                const mla_bf16 *key = ext_key(fx, X[k]);
                const double w = exp(sm * dot_q(q, key, D) - l0);
                den += sg * w;
                for (int c = 0; c < Dv; ++c)
                    oo[c] += sg * w * (double)mla_bf16_to_f32(key[c]);
            }
        }
        for (int c = 0; c < Dv; ++c)
            oo[c] /= den;
        lse[li] = l0 + log(den);
    }
}

/* Mutated outputs by the delta construction: the oracle of the true inputs
 * plus an fp64 correction over exactly the keys the mutation adds or
 * removes for each row (read off the expanded fixture mla_bmut_apply
 * builds). Same result as the oracle on the mutated inputs (checked by
 * `captured --cross-check`), at the cost of the changed keys only. */
static void delta_outputs(const mla_fixture *fx, const mla_fixture *mx, const oracle_out *base,
                          double *o, double *lse)
{
    const int D = fx->cfg.head_dim;
    for (int32_t b = 0; b < fx->cfg.num_seqs; ++b) {
        const int32_t P = mla_fixture_prefix(fx, b), L = mla_fixture_drafts(fx, b);
        const int64_t q0 = fx->qo_indptr[b], k0 = fx->kv_indptr[b];
        for (int32_t i = 0; i < L; ++i) {
            const int64_t r = q0 + i;
            const int32_t mp = mla_fixture_prefix(mx, (int)r);
            const size_t n0 = (size_t)P + (size_t)i + 1, n1 = (size_t)mp + 1;
            int64_t *a = xmalloc(n0 * sizeof *a), *m = xmalloc(n1 * sizeof *m);
            for (int32_t t = 0; t < P; ++t)
                a[t] = fx->kv_indices[k0 + t];
            for (int32_t j = 0; j <= i; ++j)
                a[P + j] = fx->pool_slots + q0 + j;
            for (int32_t t = 0; t < mp; ++t)
                m[t] = mx->kv_indices[mx->kv_indptr[r] + t];
            /* The expanded row's own draft: find which original draft row
             * it copies (a row of this sequence or the next). */
            int64_t own = -1;
            for (int64_t j = q0; j < fx->num_q_tokens && j <= q0 + L && own < 0; ++j)
                if (!memcmp(mx->k_extend + (size_t)r * D, fx->k_extend + (size_t)j * D,
                            (size_t)D * sizeof(mla_bf16)))
                    own = fx->pool_slots + j;
            if (own < 0) {
                fprintf(stderr, "mla-needle: delta: row %lld's draft key not found\n",
                        (long long)r);
                exit(2);
            }
            m[mp] = own;
            /* Expanded pool slots >= fx->pool_slots are draft rows already. */
            qsort(a, n0, sizeof *a, cmp_i64);
            qsort(m, n1, sizeof *m, cmp_i64);
            int64_t *R = xmalloc(n0 * sizeof *R), *A = xmalloc(n1 * sizeof *A);
            size_t nr = 0, na = 0, x = 0, y = 0;
            while (x < n0 || y < n1) {
                if (y >= n1 || (x < n0 && a[x] < m[y]))
                    R[nr++] = a[x++];
                else if (x >= n0 || m[y] < a[x])
                    A[na++] = m[y++];
                else
                    ++x, ++y;
            }
            apply_delta(fx, r, R, nr, A, na, base, o, lse);
            free(a);
            free(m);
            free(R);
            free(A);
        }
    }
}

/* ---- judging in-process ---- */

typedef struct {
    const mla_fixture *fx;
    float *ref_o, *ref_lse;
    double *ref_pstats; /* the baseline's statistics, as mla-validate gives the judge */
} judge_ctx;

static void judge_prepare(const mla_fixture *fx, judge_ctx *j)
{
    const mla_fixture_sizes sz = sizes_of(fx);
    mla_error err = {{0}};
    j->fx = fx;
    j->ref_o = xmalloc(sz.o * sizeof(float));
    j->ref_lse = xmalloc(sz.lse * sizeof(float));
    j->ref_pstats = xmalloc(sz.lse * MLA_REF_PSTATS * sizeof(double));
    if (mla_reference_run_pstats(fx, j->ref_o, j->ref_lse, j->ref_pstats, &err) != MLA_OK)
        die("reference", &err);
}

static void judge_free(judge_ctx *j)
{
    free(j->ref_o);
    free(j->ref_lse);
    free(j->ref_pstats);
}

/* The judge's verdict on bf16 outputs o16 (+ lse or NULL) on `path`. */
static mla_verdict judge_bf16(const judge_ctx *j, mla_path path, const mla_bf16 *o16,
                              const float *lse, mla_metrics *m, char *reason, size_t rn)
{
    const mla_fixture_sizes sz = sizes_of(j->fx);
    float *o = xmalloc(sz.o * sizeof(float));
    for (size_t e = 0; e < sz.o; ++e)
        o[e] = mla_bf16_to_f32(o16[e]);
    mla_judge_input in = {.fx = j->fx, .ref_o = j->ref_o, .ref_lse = j->ref_lse,
                          .ref_pstats = j->ref_pstats};
    mla_verdict v = mla_judge(&in, path, o, NULL, lse, m, reason, rn);
    free(o);
    return v;
}

static void round_outputs(const double *o, const double *lse, size_t no, size_t nl, mla_bf16 *o16,
                          float *l32)
{
    for (size_t e = 0; e < no; ++e)
        o16[e] = mla_f32_to_bf16((float)o[e]);
    for (size_t e = 0; e < nl; ++e)
        l32[e] = (float)lse[e];
}

/* ---- map ---- */

static const char *kind_name(int k)
{
    switch (k) {
    case MLA_NEEDLE_PREFIX: return "prefix";
    case MLA_NEEDLE_DRAFT: return "draft";
    case MLA_NEEDLE_TRAP_DRAFT: return "trap-draft";
    case MLA_NEEDLE_TRAP_NEXT: return "trap-next";
    }
    return "?";
}

static void why_str(uint32_t w, char *b, size_t n)
{
    snprintf(b, n, "%s%s%s%s%s%s%s%s", w & MLA_WHY_FIRST ? "first " : "",
             w & MLA_WHY_LAST ? "last " : "", w & MLA_WHY_SEED ? "seed " : "",
             w & MLA_WHY_FAST ? "fast " : "", w & MLA_WHY_FAST_GFX942 ? "fast-gfx942 " : "",
             w & MLA_WHY_FAST_GFX950 ? "fast-gfx950 " : "", w & MLA_WHY_PERHEAD ? "perhead " : "",
             w & MLA_WHY_GRID ? "grid" : "");
}

/* Exact softmax share of the needle's key in its pair (for a trap: the
 * share it would take if it were visible). */
static double needle_share(const mla_fixture *fx, const mla_needle *nd)
{
    const int H = fx->cfg.num_heads, D = fx->cfg.head_dim;
    const int32_t P = mla_fixture_prefix(fx, nd->seq);
    const int64_t q0 = fx->qo_indptr[nd->seq], k0 = fx->kv_indptr[nd->seq];
    const mla_bf16 *q = fx->q + ((size_t)(q0 + nd->row) * H + nd->head) * D;
    const double sm = fx->cfg.sm_scale;
    const mla_bf16 *key;
    if (nd->kind == MLA_NEEDLE_PREFIX)
        key = fx->kv_buffer + (size_t)fx->kv_indices[k0 + nd->pos] * D;
    else if (nd->kind == MLA_NEEDLE_TRAP_NEXT)
        key = fx->kv_buffer + (size_t)fx->kv_indices[fx->kv_indptr[nd->seq + 1] + nd->pos] * D;
    else
        key = fx->k_extend + (size_t)(q0 + nd->pos) * D;
    const double sn = sm * dot_q(q, key, D);
    double sum = 0; /* sum over visible keys of exp(s - sn) */
    for (int32_t t = 0; t < P; ++t)
        sum += exp(sm * dot_q(q, fx->kv_buffer + (size_t)fx->kv_indices[k0 + t] * D, D) - sn);
    for (int32_t j = 0; j <= nd->row; ++j)
        sum += exp(sm * dot_q(q, fx->k_extend + (size_t)(q0 + j) * D, D) - sn);
    if (nd->kind == MLA_NEEDLE_TRAP_DRAFT || nd->kind == MLA_NEEDLE_TRAP_NEXT)
        sum += 1;
    return 1 / sum;
}

static int cmd_map(int argc, char **argv)
{
    const char *name = NULL, *file = NULL;
    int weights = 0, verbose = 0;
    for (int i = 0; i < argc; ++i) {
        if (source_arg(argc, argv, &i, &name, &file))
            continue;
        if (!strcmp(argv[i], "--weights"))
            weights = 1;
        else if (!strcmp(argv[i], "-v"))
            verbose = 1;
        else {
            fprintf(stderr, "usage: mla-needle map (--name CASE | --in FILE) [--weights] [-v]\n");
            return 2;
        }
    }
    if (source_check("map", name, file))
        return 2;
    mla_fixture fx;
    load(name, file, 0, 0, &fx);
    mla_needle *map;
    size_t n;
    mla_error err = {{0}};
    if (mla_needle_map_make(&fx, &map, &n, &err) != MLA_OK)
        die("map", &err);
    printf("%s: bs %d, H %d, L %d, %zu needle pairs\n", fx.case_name, fx.cfg.num_seqs,
           fx.cfg.num_heads, fx.cfg.q_len, n);
    for (int32_t b = 0; b < fx.cfg.num_seqs; ++b) {
        int32_t bg[1024], en[1024];
        printf("  seq %d: prefix %d;", b, mla_fixture_prefix(&fx, b));
        for (int p = 0; p < MLA_SPLITS_COUNT; ++p)
            printf(" %s %d splits", mla_split_plan_name((mla_split_plan)p),
                   mla_needle_split_ranges((mla_split_plan)p, &fx, b, bg, en, 1024));
        int np = 0;
        for (size_t k = 0; k < n; ++k)
            np += map[k].seq == b && map[k].kind == MLA_NEEDLE_PREFIX;
        printf("; %d prefix needles\n", np);
    }
    /* Coverage: every first/last token of every split of every plan, and
     * the first/last prefix token, is a needle in some sequence with the
     * same splits (mla_needle_same_splits: the fast plans' pieces depend on
     * where a sequence sits in the batch, so equal prefixes alone are not
     * enough). One check per group of such sequences. */
    int64_t need = 0, have = 0;
    unsigned char *same = calloc((size_t)fx.cfg.num_seqs + 1, 1);
    if (!same)
        die("coverage", NULL);
    for (int32_t b = 0; b < fx.cfg.num_seqs; ++b) {
        const int32_t P = mla_fixture_prefix(&fx, b);
        int first_of_group = 1;
        for (int32_t c = 0; c < b && first_of_group; ++c)
            first_of_group = !mla_needle_same_splits(&fx, b, c);
        if (!first_of_group || P == 0)
            continue;
        for (int32_t c = 0; c < fx.cfg.num_seqs; ++c)
            same[c] = (unsigned char)mla_needle_same_splits(&fx, b, c);
        unsigned char *cov = calloc((size_t)P, 1), *req = calloc((size_t)P, 1);
        if (!cov || !req)
            die("coverage", NULL);
        for (size_t k = 0; k < n; ++k)
            if (map[k].kind == MLA_NEEDLE_PREFIX && same[map[k].seq])
                cov[map[k].pos] = 1;
        req[0] = req[P - 1] = 1;
        static int32_t bg[4096], en[4096];
        for (int p = 0; p < MLA_SPLITS_COUNT; ++p) {
            const int32_t ns = mla_needle_split_ranges((mla_split_plan)p, &fx, b, bg, en, 4096);
            for (int32_t k = 0; k < ns && k < 4096; ++k)
                req[bg[k]] = req[en[k] - 1] = 1;
        }
        for (int32_t t = 0; t < P; ++t)
            if (req[t]) {
                ++need;
                if (cov[t])
                    ++have;
                else
                    printf("  NOT COVERED: sequence %d (prefix %d) position %d\n", b, P, t);
            }
        free(cov);
        free(req);
    }
    free(same);
    printf("required boundary positions: %lld, covered: %lld\n", (long long)need, (long long)have);
    double wmin = 2, wmax = -1;
    for (size_t k = 0; k < n; ++k) {
        char w[96];
        why_str(map[k].why, w, sizeof w);
        double share = weights ? needle_share(&fx, &map[k]) : -1;
        if (weights) {
            wmin = share < wmin ? share : wmin;
            wmax = share > wmax ? share : wmax;
        }
        if (verbose)
            printf("  seq %d row %d head %2d %-10s pos %6d %s%s%.3f\n", map[k].seq, map[k].row,
                   map[k].head, kind_name(map[k].kind), map[k].pos, w, weights ? "  share " : "",
                   weights ? share : 0.0);
    }
    if (weights)
        printf("needle shares: min %.3f max %.3f (built for %.2f)\n", wmin, wmax, MLA_NEEDLE_WEIGHT);
    free(map);
    mla_fixture_free(&fx);
    return have == need ? 0 : 1;
}

/* ---- captured ---- */

static const char *const DEFAULT_MUTANTS[] = {
    "drop-first:seed:mid", "drop-last:seed:mid", "drop-remainder:seed", "dup:seed:mid",
    "shift:seed:mid", "drop-first:fast:mid", "drop-last:fast:mid", "dup:fast:mid", "shift:fast:mid", "drop-first:perhead:mid", "drop-last:perhead:mid",
    "dup:perhead:mid", "shift:perhead:mid", "drop-first:seed:0", "drop-last:seed:all",
    "next-seq", "kv-off-by-one", "draft-mask", "draft-base"};
#define N_DEFAULT_MUTANTS (sizeof DEFAULT_MUTANTS / sizeof DEFAULT_MUTANTS[0])

static int run_validate(const char *validate, const char *file)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' --quiet --backend captured --oracle-max-gflop 0 '%s'",
             validate, file);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    char line[2048];
    while (fgets(line, sizeof line, p))
        if (!strncmp(line, "FAIL", 4) || !strncmp(line, "PASS", 4) || !strncmp(line, "ERROR", 5))
            printf("      %s", line);
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int cmd_captured(int argc, char **argv)
{
    const char *name = NULL, *file = NULL, *dir = ".", *validate = NULL;
    const char *muts[64];
    int nm = 0, exact = 0, cross = 0, keep = 0;
    for (int i = 0; i < argc; ++i) {
        if (source_arg(argc, argv, &i, &name, &file))
            continue;
        if (!strcmp(argv[i], "--dir") && i + 1 < argc)
            dir = argv[++i];
        else if (!strcmp(argv[i], "--mutant") && i + 1 < argc && nm < 64)
            muts[nm++] = argv[++i];
        else if (!strcmp(argv[i], "--exact"))
            exact = 1;
        else if (!strcmp(argv[i], "--cross-check"))
            cross = 1;
        else if (!strcmp(argv[i], "--validate") && i + 1 < argc)
            validate = argv[++i];
        else if (!strcmp(argv[i], "--keep"))
            keep = 1;
        else {
            fprintf(stderr,
                    "usage: mla-needle captured (--name CASE | --in FILE) [--mutant SPEC]... "
                    "[--dir DIR]\n"
                    "         [--exact] [--cross-check] [--validate MLA_VALIDATE [--keep]]\n"
                    "  SPEC: KIND[:PLAN[:SPLIT]] (KIND drop-first drop-last drop-remainder dup "
                    "shift next-seq\n"
                    "        kv-off-by-one draft-mask draft-base none; PLAN seed fast perhead; "
                    "SPLIT N|all|mid)\n"
                    "  default: 'none' and %zu boundary mutants. --exact runs the oracle on each "
                    "mutated\n"
                    "  input; the default adds an fp64 correction over the changed keys to one "
                    "oracle run.\n",
                    N_DEFAULT_MUTANTS);
            return 2;
        }
    }
    if (source_check("captured", name, file))
        return 2;
    if (nm == 0) {
        muts[nm++] = "none";
        for (size_t k = 0; k < N_DEFAULT_MUTANTS; ++k)
            muts[nm++] = DEFAULT_MUTANTS[k];
    }
    mla_fixture fx;
    load(name, file, 0, 0, &fx);
    const mla_fixture_sizes sz = sizes_of(&fx);
    mla_error err = {{0}};
    double t0 = now_s();
    oracle_out base = {0};
    if (!exact || cross)
        oracle_of(&fx, &base);
    printf("%s: bs %d, prefixes %d..., oracle %.1fs\n", fx.case_name, fx.cfg.num_seqs,
           mla_fixture_prefix(&fx, 0), now_s() - t0);
    double *o = xmalloc(sz.o * sizeof(double)), *lse = xmalloc(sz.lse * sizeof(double));
    fx.expected_o = xmalloc(sz.o * sizeof(mla_bf16));
    fx.expected_lse = xmalloc(sz.lse * sizeof(float));
    int bad = 0;
    for (int k = 0; k < nm; ++k) {
        mla_bmut m;
        char mname[96];
        if (mla_bmut_parse(muts[k], &m, &err) != MLA_OK)
            die("mutant", &err);
        mla_bmut_format(&m, mname, sizeof mname);
        mla_fixture mx;
        int changed = 0;
        t0 = now_s();
        if (mla_bmut_apply(&fx, &m, &mx, &changed, &err) != MLA_OK)
            die(mname, &err);
        if (exact) {
            if (mla_oracle_run(&mx, o, lse, &err) != MLA_OK)
                die("oracle on mutated inputs", &err);
            if (cross) {
                double *o2 = xmalloc(sz.o * sizeof(double)), *l2 = xmalloc(sz.lse * sizeof(double));
                delta_outputs(&fx, &mx, &base, o2, l2);
                double dmax = 0, lmax = 0;
                for (size_t e = 0; e < sz.o; ++e)
                    dmax = fmax(dmax, fabs(o2[e] - o[e]));
                for (size_t e = 0; e < sz.lse; ++e)
                    lmax = fmax(lmax, fabs(l2[e] - lse[e]));
                printf("  %-24s exact vs delta: max |do| %.2e, max |dlse| %.2e\n", mname, dmax,
                       lmax);
                if (!(dmax < 1e-9 && lmax < 1e-9))
                    bad = 1;
                free(o2);
                free(l2);
            }
        } else
            delta_outputs(&fx, &mx, &base, o, lse);
        mla_fixture_free(&mx);
        round_outputs(o, lse, sz.o, sz.lse, fx.expected_o, fx.expected_lse);
        free(fx.expected_producer);
        char prod[160];
        snprintf(prod, sizeof prod, "mla-needle captured: fp64 oracle, mutant %s (%s)", mname,
                 exact ? "oracle on mutated inputs" : "oracle + fp64 delta over changed keys");
        fx.expected_producer = strdup(prod);
        char path[4096], fname[128];
        snprintf(fname, sizeof fname, "%s", mname);
        for (char *c = fname; *c; ++c)
            if (*c == ':')
                *c = '_';
        snprintf(path, sizeof path, "%s/%s--%s.h5", dir, fx.case_name, fname);
        if (mla_fixture_write(path, &fx, 0, &err) != MLA_OK)
            die(path, &err);
        printf("  %-24s %s  %.1fs -> %s\n", mname, changed || m.kind == MLA_BMUT_NONE ? "" : "(no-op here)",
               now_s() - t0, path);
        if (validate) {
            const int rc = run_validate(validate, path);
            const int want = (m.kind == MLA_BMUT_NONE || !changed) ? 0 : 1;
            printf("    mla-validate --backend captured: exit %d, %s\n", rc,
                   rc == want ? (want ? "caught" : "passes") : "WRONG");
            if (rc != want)
                bad = 1;
            if (!keep)
                unlink(path);
        }
        fflush(stdout);
    }
    free(o);
    free(lse);
    oracle_free(&base);
    mla_fixture_free(&fx);
    if (validate || cross)
        printf("captured: %s\n", bad ? "FAILED" : "all as expected");
    return bad ? 1 : 0;
}

/* ---- model ---- */

static int cmd_model(int argc, char **argv)
{
    const char *name = NULL, *file = NULL;
    const char *muts[64];
    int nm = 0;
    mla_model_plan plan = MLA_MODEL_PLAN_SEED;
    static const char *const PLANS[MLA_MODEL_PLAN_COUNT] = {"seed", "fast", "fast-gfx942",
                                                            "fast-gfx950"};
    for (int i = 0; i < argc; ++i) {
        if (source_arg(argc, argv, &i, &name, &file))
            continue;
        int known = 0;
        if (!strcmp(argv[i], "--mutation") && i + 1 < argc && nm < 64)
            muts[nm++] = argv[++i], known = 1;
        else if (!strcmp(argv[i], "--plan") && i + 1 < argc) {
            ++i;
            for (int p = 0; p < MLA_MODEL_PLAN_COUNT; ++p)
                if (!strcmp(argv[i], PLANS[p]))
                    plan = (mla_model_plan)p, known = 1;
        }
        if (!known) {
            fprintf(stderr, "usage: mla-needle model (--name CASE | --in FILE) [--plan PLAN] "
                            "[--mutation NAME]...\n"
                            "  NAME: a seed/model.c mutation (mla_mutation_name); default: none and "
                            "every boundary mutation\n"
                            "  PLAN: the model's partition, seed (default), fast, fast-gfx942 or "
                            "fast-gfx950 (the fast tier's balanced\n"
                            "        partition; drop_remainder, a floor-partition bug, is left "
                            "out of the default list there)\n");
            return 2;
        }
    }
    if (source_check("model", name, file))
        return 2;
    mla_fixture fx;
    load(name, file, 0, 0, &fx);
    judge_ctx j;
    judge_prepare(&fx, &j);
    const mla_fixture_sizes sz = sizes_of(&fx);
    mla_error err = {{0}};
    mla_bf16 *o = xmalloc(sz.o * sizeof *o);
    float *lse = xmalloc(sz.lse * sizeof *lse);
    int bad = 0;
    /* The boundary family: every mutation from DROP_REMAINDER's neighbours
     * that moves tokens, by name. */
    static const char *const BOUNDARY[] = {"none",
                                           "drop_remainder",
                                           "partition_off_by_one",
                                           "split_drop_first",
                                           "split_drop_last",
                                           "split_dup_next",
                                           "split_shift",
                                           "next_seq_first",
                                           "kv_indices_off_by_one",
                                           "draft_off_by_one"};
    if (nm == 0)
        for (size_t k = 0; k < sizeof BOUNDARY / sizeof BOUNDARY[0]; ++k)
            if (plan == MLA_MODEL_PLAN_SEED || strcmp(BOUNDARY[k], "drop_remainder"))
                muts[nm++] = BOUNDARY[k];
    for (int k = 0; k < nm; ++k) {
        int id = -1;
        for (int mm = 0; mm < MLA_MUT_COUNT; ++mm)
            if (!strcmp(mla_mutation_name((mla_mutation)mm), muts[k]))
                id = mm;
        if (id < 0) {
            printf("  model:%-24s NOT IN THIS BUILD (seed/model.c hook missing)\n", muts[k]);
            bad = 1;
            continue;
        }
        mla_model_opts opts = mla_model_opts_default();
        opts.mutation = (mla_mutation)id;
        opts.plan = plan;
        const double t0 = now_s();
        if (mla_model_run(&fx, &opts, o, lse, &err) != MLA_OK)
            die("model", &err);
        mla_metrics m;
        char reason[512];
        /* The path mla-validate gives the model (backends.c). */
        const mla_verdict v = judge_bf16(&j, MLA_PATH_BF16_PARTIALS, o, lse, &m, reason, sizeof reason);
        const mla_verdict vn = judge_bf16(&j, MLA_PATH_BF16_PARTIALS, o, NULL, &m, reason, sizeof reason);
        const int want_pass = id == MLA_MUT_NONE;
        const int ok = want_pass ? v == MLA_VERDICT_PASS : v == MLA_VERDICT_FAIL;
        printf("  model:%-24s %s (without lse: %s) %.1fs %s\n", muts[k], mla_verdict_name(v),
               mla_verdict_name(vn), now_s() - t0, ok ? (want_pass ? "ok" : "caught") : "WRONG");
        if (v == MLA_VERDICT_FAIL)
            printf("      %.200s\n", reason);
        if (!ok)
            bad = 1;
        fflush(stdout);
    }
    printf("model mutants (%s plan) on %s: %s\n", PLANS[plan], fx.case_name,
           bad ? "FAILED" : "all as expected");
    free(o);
    free(lse);
    judge_free(&j);
    mla_fixture_free(&fx);
    return bad;
}

/* ---- power ---- */

/* A one-sequence view of fx (pointers into its arrays) so the judge's cost
 * is that sequence's, not the batch's. */
typedef struct {
    mla_fixture v;
    int32_t qo[2], kv[2];
} seq_view;

static void view_of(const mla_fixture *fx, int32_t b, seq_view *sv)
{
    const int H = fx->cfg.num_heads, D = fx->cfg.head_dim, Dv = fx->cfg.v_head_dim;
    const int64_t q0 = fx->qo_indptr[b], k0 = fx->kv_indptr[b];
    memset(sv, 0, sizeof *sv);
    sv->v = *fx;
    sv->v.cfg.num_seqs = 1;
    sv->qo[1] = mla_fixture_drafts(fx, b);
    sv->kv[1] = mla_fixture_prefix(fx, b);
    sv->v.qo_indptr = sv->qo;
    sv->v.kv_indptr = sv->kv;
    sv->v.num_q_tokens = sv->qo[1];
    sv->v.num_kv_indices = sv->kv[1];
    sv->v.q = fx->q + (size_t)q0 * H * D;
    sv->v.k_extend = fx->k_extend + (size_t)q0 * D;
    sv->v.v_extend = fx->v_extend + (size_t)q0 * Dv;
    sv->v.kv_indices = fx->kv_indices + k0;
    sv->v.expected_o = NULL;
    sv->v.expected_lse = NULL;
}

/* Judge a mutated sequence b given its fp64 outputs (rows of b only). */
static void judge_seq(const mla_fixture *fx, const judge_ctx *j, int32_t b, const double *o,
                      const double *lse, int *caught_lse, int *caught_nolse)
{
    const int H = fx->cfg.num_heads, Dv = fx->cfg.v_head_dim;
    const int64_t q0 = fx->qo_indptr[b];
    const int32_t L = mla_fixture_drafts(fx, b);
    seq_view sv;
    view_of(fx, b, &sv);
    const size_t no = (size_t)L * H * Dv, nl = (size_t)L * H;
    float *o32 = xmalloc(no * sizeof(float)), *l32 = xmalloc(nl * sizeof(float));
    for (size_t e = 0; e < no; ++e)
        o32[e] = mla_bf16_to_f32(mla_f32_to_bf16((float)o[e]));
    for (size_t e = 0; e < nl; ++e)
        l32[e] = (float)lse[e];
    mla_judge_input in = {.fx = &sv.v, .ref_o = j->ref_o + (size_t)q0 * H * Dv,
                          .ref_lse = j->ref_lse + (size_t)q0 * H,
                          .ref_pstats = j->ref_pstats + (size_t)q0 * H * MLA_REF_PSTATS};
    mla_metrics m;
    char reason[512];
    *caught_lse = mla_judge(&in, MLA_PATH_BF16_P_PARTIALS, o32, NULL, l32, &m, reason,
                            sizeof reason) == MLA_VERDICT_FAIL;
    *caught_nolse = mla_judge(&in, MLA_PATH_BF16_P_PARTIALS, o32, NULL, NULL, &m, reason,
                              sizeof reason) == MLA_VERDICT_FAIL;
    free(o32);
    free(l32);
}

/* Outputs of sequence b's rows with its prefix multiset changed (removed R,
 * added A, extended slots), fp64, written at their absolute rows of o/lse. */
static void seq_delta(const mla_fixture *fx, const oracle_out *base, int32_t b, const int64_t *R,
                      size_t nr, const int64_t *A, size_t na, double *o, double *lse)
{
    const int64_t q0 = fx->qo_indptr[b];
    const int32_t L = mla_fixture_drafts(fx, b);
    for (int32_t i = 0; i < L; ++i)
        apply_delta(fx, q0 + i, R, nr, A, na, base, o, lse);
}

/* Whether the judge catches sequence 0 of fx (prefix P) with its last d
 * prefix tokens dropped from every row (with lse or without); o/lse are
 * scratch for the mutated outputs. */
static int tail_drop_caught(const mla_fixture *fx, const oracle_out *base, const judge_ctx *j,
                            int32_t P, int32_t d, int withlse, double *o, double *lse)
{
    int64_t *R = xmalloc((size_t)d * sizeof *R);
    for (int32_t k = 0; k < d; ++k)
        R[k] = fx->kv_indices[P - d + k];
    seq_delta(fx, base, 0, R, (size_t)d, NULL, 0, o, lse);
    free(R);
    int cl, cn;
    judge_seq(fx, j, 0, o, lse, &cl, &cn);
    return withlse ? cl : cn;
}

static int cmd_power(int argc, char **argv)
{
    const char *out = NULL;
    long pmax = 131085;
    int needles_only = 0, random_only = 0, nseeds = 1;
    const char *ncases[16];
    int nn = 0;
    for (int i = 0; i < argc; ++i) {
        if (!strcmp(argv[i], "--out") && i + 1 < argc)
            out = argv[++i];
        else if (!strcmp(argv[i], "--max-prefix") && i + 1 < argc)
            pmax = atol(argv[++i]);
        else if (!strcmp(argv[i], "--needle-case") && i + 1 < argc && nn < 16)
            ncases[nn++] = argv[++i];
        else if (!strcmp(argv[i], "--seeds") && i + 1 < argc)
            nseeds = atoi(argv[++i]) > 0 ? atoi(argv[i]) : 1;
        else if (!strcmp(argv[i], "--needles-only"))
            needles_only = 1;
        else if (!strcmp(argv[i], "--random-only"))
            random_only = 1;
        else {
            fprintf(stderr, "usage: mla-needle power [--max-prefix P] [--needle-case CASE]... "
                            "[--seeds N] [--needles-only|--random-only] [--out FILE.md]\n");
            return 2;
        }
    }
    mla_atomic_file mdf;
    mla_error werr = {{0}};
    if (out && mla_atomic_open(&mdf, out, &werr) != MLA_OK)
        die("power", &werr);
    FILE *md = out ? mdf.f : NULL;
#define EMIT(...)                                                                                  \
    do {                                                                                           \
        printf(__VA_ARGS__);                                                                       \
        if (md)                                                                                    \
            fprintf(md, __VA_ARGS__);                                                              \
    } while (0)
    mla_error err = {{0}};
    if (!needles_only) {
        static const int32_t PS[] = {1000, 2051, 4099, 8209, 16411, 32771, 65573, 131085};
        EMIT("### Diffuse random fixtures (K3 TP8, bs 1, L 8): fewest dropped tail tokens caught\n\n"
             "Judged as mla-validate judges a captured output (path: P in bf16, bf16 partials). "
             "The mutated output is the fp64 oracle's with the last d prefix tokens removed from "
             "every row, rounded to bf16. One fixture per seed (%d seed%s; values listed per "
             "seed); the fewest d is found by doubling then bisection.\n\n"
             "| prefix P | caught with lse: fewest d | without lse: fewest d | d/P (no lse, "
             "largest) | time |\n|---|---|---|---|---|\n",
             nseeds, nseeds > 1 ? "s" : "");
        for (size_t pi = 0; pi < sizeof PS / sizeof PS[0]; ++pi) {
            const int32_t P = PS[pi];
            if (P > pmax)
                continue;
            const double t0 = now_s();
            char cell[2][128] = {"", ""};
            int32_t worst_nolse = 0;
            for (int sd = 0; sd < nseeds; ++sd) {
            mla_fixture fx;
            if (mla_needle_make(12, 8, 1, P, 0, 0x5eed0000u + (uint64_t)P + 0x100000000ull * (uint64_t)sd,
                                &fx, &err) != MLA_OK)
                die("random fixture", &err);
            oracle_out base;
            oracle_of(&fx, &base);
            judge_ctx j;
            judge_prepare(&fx, &j);
            const size_t no = (size_t)fx.num_q_tokens * 12 * 512, nl = (size_t)fx.num_q_tokens * 12;
            double *o = xmalloc(no * sizeof(double)), *lse = xmalloc(nl * sizeof(double));
            int32_t best[2];
            for (int withlse = 1; withlse >= 0; --withlse) {
                /* Doubling then bisection on d (detection is monotone in d
                 * in practice: more dropped weight, larger error). */
                int32_t lo = 0, hi = 1;
                for (;;) {
                    if (tail_drop_caught(&fx, &base, &j, P, hi, withlse, o, lse))
                        break;
                    lo = hi;
                    if (hi >= P) {
                        hi = P + 1;
                        break;
                    }
                    hi = hi * 2 > P ? P : hi * 2;
                }
                while (hi <= P && hi - lo > 1) {
                    const int32_t mid = lo + (hi - lo) / 2;
                    if (tail_drop_caught(&fx, &base, &j, P, mid, withlse, o, lse))
                        hi = mid;
                    else
                        lo = mid;
                }
                best[withlse] = hi;
            }
            for (int w = 0; w < 2; ++w)
                snprintf(cell[w] + strlen(cell[w]), sizeof cell[w] - strlen(cell[w]), "%s%d",
                         sd ? ", " : "", best[1 - w]);
            if (best[0] > worst_nolse)
                worst_nolse = best[0];
            free(o);
            free(lse);
            oracle_free(&base);
            judge_free(&j);
            mla_fixture_free(&fx);
            }
            EMIT("| %d | %s | %s | %.2g%% | %.0fs |\n", P, cell[0], cell[1],
                 100.0 * worst_nolse / P, now_s() - t0);
            fflush(stdout);
        }
        EMIT("\n");
    }
    if (!random_only) {
        if (nn == 0) {
            ncases[nn++] = "needle-k3-small";
            ncases[nn++] = "needle-dsv3-small";
            ncases[nn++] = "needle-k3-4k";
            ncases[nn++] = "needle-k3-16k";
            ncases[nn++] = "needle-dsv3-16k";
            ncases[nn++] = "needle-k3-64k";
        }
        EMIT("### Needle fixtures: one token dropped / duplicated at every covered position\n\n"
             "Each covered prefix position of each sequence in turn, all rows of that sequence, "
             "same judge and path. A position counts as caught when the judge FAILs the "
             "sequence.\n\n"
             "| case | prefixes | positions | drop caught (lse / no lse) | dup caught (lse / "
             "no lse) | time |\n|---|---|---|---|---|---|\n");
        for (int c = 0; c < nn; ++c) {
            const double t0 = now_s();
            mla_fixture fx;
            load(ncases[c], NULL, 0, 0, &fx);
            mla_needle *map;
            size_t n;
            if (mla_needle_map_make(&fx, &map, &n, &err) != MLA_OK)
                die("map", &err);
            oracle_out base;
            oracle_of(&fx, &base);
            judge_ctx j;
            judge_prepare(&fx, &j);
            const size_t no = (size_t)fx.num_q_tokens * fx.cfg.num_heads * 512;
            double *o = xmalloc(no * sizeof(double)),
                   *lse = xmalloc((size_t)fx.num_q_tokens * fx.cfg.num_heads * sizeof(double));
            int npos = 0, cnt[4] = {0, 0, 0, 0};
            char missed[2048] = "";
            for (size_t k = 0; k < n; ++k) {
                if (map[k].kind != MLA_NEEDLE_PREFIX)
                    continue;
                const int32_t b = map[k].seq;
                const int64_t slot = fx.kv_indices[fx.kv_indptr[b] + map[k].pos];
                const int64_t qoff = (int64_t)fx.qo_indptr[b] * fx.cfg.num_heads;
                ++npos;
                for (int dup = 0; dup < 2; ++dup) {
                    seq_delta(&fx, &base, b, dup ? NULL : &slot, dup ? 0 : 1, dup ? &slot : NULL,
                              dup ? 1 : 0, o, lse);
                    int cl, cn;
                    judge_seq(&fx, &j, b, o + (size_t)qoff * 512, lse + qoff, &cl, &cn);
                    cnt[dup * 2] += cl;
                    cnt[dup * 2 + 1] += cn;
                    if (!cn && strlen(missed) < sizeof missed - 64)
                        snprintf(missed + strlen(missed), sizeof missed - strlen(missed),
                                 " %s@seq%d:%d", dup ? "dup" : "drop", b, map[k].pos);
                }
            }
            char pre[128] = "";
            for (int32_t b = 0; b < fx.cfg.num_seqs && strlen(pre) < 100; ++b)
                snprintf(pre + strlen(pre), sizeof pre - strlen(pre), "%s%d", b ? "," : "",
                         mla_fixture_prefix(&fx, b));
            EMIT("| %s | %s | %d | %d / %d | %d / %d | %.0fs |\n", fx.case_name, pre, npos,
                 cnt[0], cnt[1], cnt[2], cnt[3], now_s() - t0);
            if (missed[0])
                printf("    missed without lse:%s\n", missed);
            fflush(stdout);
            free(o);
            free(lse);
            oracle_free(&base);
            judge_free(&j);
            free(map);
            mla_fixture_free(&fx);
        }
    }
    if (md && mla_atomic_close(&mdf, 1, &werr) != MLA_OK)
        die("power", &werr);
    return 0;
}

int main(int argc, char **argv)
{
    mla_write_signals();
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        printf("usage: mla-needle map|captured|model|power [options] (--help after a command)\n"
               "Boundary needles (issue 17): see include/mla/needle.h.\n"
               "map, captured and model take --name CASE (a catalogue case) or --in FILE (a\n"
               "fixture, read by the guarded reader in a child process, as mla-validate reads),\n"
               "and --max-memory N (16G, 512M): the budget of the whole run, this process and\n"
               "the reader's child together; a file whose tensors do not fit is refused before\n"
               "it is read (default min(half of RAM, 16 GiB)).\n"
               "Exit codes: 0 as expected, 1 a check failed, 2 unreadable input, bad usage or a\n"
               "failed write (the message names the file and the errno).\n");
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "map"))
        return cmd_map(argc - 2, argv + 2);
    if (!strcmp(argv[1], "captured"))
        return cmd_captured(argc - 2, argv + 2);
    if (!strcmp(argv[1], "model"))
        return cmd_model(argc - 2, argv + 2);
    if (!strcmp(argv[1], "power"))
        return cmd_power(argc - 2, argv + 2);
    fprintf(stderr, "mla-needle: unknown command '%s'\n", argv[1]);
    return 2;
}
