/* Helpers shared by the reference tests: a seeded generator of random
 * fixtures with every feature, and the reference-vs-oracle comparison with
 * its dimension-free error ratios. */
#ifndef MLA_REF_TEST_UTIL_H
#define MLA_REF_TEST_UTIL_H

#include "ref_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* -h / --help on every test program: prints what it checks, exits 0; any
 * other argument not in `known` (NULL-terminated, may be NULL) is a usage
 * error (exit 2), so a typo never runs a different test than asked. */
static inline void rt_cli(int argc, char **argv, const char *about, const char *const *known)
{
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: %s%s\n\n%s\n", argv[0], known ? " [options]" : "", about);
            exit(0);
        }
        int ok = 0;
        for (const char *const *k = known; k && *k; ++k)
            ok |= !strcmp(argv[i], *k);
        if (!ok) {
            fprintf(stderr, "%s: unknown argument '%s' (--help)\n", argv[0], argv[i]);
            exit(2);
        }
    }
}

typedef struct {
    uint64_t s;
} rt_rng;

uint64_t rt_next(rt_rng *r);
/* uniform in [-1, 1) */
float rt_uniform(rt_rng *r);

/* What the random fixture builder varies. */
typedef struct {
    const char *name;
    int32_t num_seqs, num_heads, num_kv_heads, head_dim, v_head_dim;
    const int32_t *drafts; /* [num_seqs] */
    const int32_t *prefix; /* [num_seqs] */
    int32_t is_causal, sliding_window, with_sinks;
    float logit_cap, k_scale, v_scale, sm_scale;
    float q_mag, k_mag; /* input magnitudes: q in [-q_mag, q_mag), keys likewise */
    float sink_bias;    /* sinks drawn around this value */
    uint64_t seed;
} rt_case;

/* Builds the case with fresh random bf16 inputs, slots shuffled in 64-token
 * pages and extra unreferenced pool slots filled with NaN (the references
 * must never read them). Caller frees with mla_fixture_free. */
mla_status rt_build(const rt_case *c, mla_fixture *fx, mla_error *err);

/* Dimension-free error ratios of one run (see ref_test_util.c for the
 * error model they come from). */
typedef struct {
    double o_ratio;   /* worst row: max|ref - oracle| / o_bound */
    double lse_ratio; /* worst row: |lse_ref - lse_oracle| / lse_bound */
    double max_abs;   /* worst |ref - oracle| over o, for orientation */
    double max_rel;   /* worst row max|ref - oracle| / vmax */
    double dot_err;   /* largest E (see ref_test_util.c) over the rows */
    long rows, masked_rows;
    long failures; /* non-finite mismatches, masked rows not exactly (0, -inf) */
} rt_cmp;

/* Threshold on both ratios, derived in ref_test_util.c. */
extern const double RT_RATIO_LIMIT;

/* Runs the reference with `opts` and the oracle with the same key sources on
 * `fx`, fills *res. Returns non-zero if either run failed (message printed). */
int rt_compare(const mla_fixture *fx, const mla_ref_opts *opts, rt_cmp *res);

#endif
