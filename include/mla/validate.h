/* The validator: one table of backends, the path-aware judge (SPEC section
 * 7) and the per-case result every report is written from. */
#ifndef MLA_VALIDATE_H
#define MLA_VALIDATE_H

#include "mla/fixture.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Execution path of a backend: which roundings its result carries beyond
 * fp32 arithmetic, and so which tolerance judges it. */
typedef enum {
    MLA_PATH_REFERENCE = 0, /* fp32 output, no bf16 rounding: judged against the oracle */
    MLA_PATH_FP32 = 1,      /* fp32 math (or fp32 partials), bf16 output */
    MLA_PATH_BF16_PARTIALS = 2, /* bf16 split partials + bf16 output */
    MLA_PATH_BF16_P = 3,    /* tensor-core kernel: P rounded to bf16, fp32 partials, bf16 out */
    MLA_PATH_BF16_P_PARTIALS = 4, /* P in bf16 and bf16 partials: the seed kernel's path */
    MLA_PATH_COUNT
} mla_path;

const char *mla_path_name(mla_path p);

typedef enum {
    MLA_EXPECT_ACCEPT_ALL = 0,  /* must run every valid case */
    MLA_EXPECT_SPEC_DECLINES,   /* must decline exactly SPEC section 3's conditions */
    MLA_EXPECT_HAS_EXPECTED     /* runs where the file has /expected */
} mla_expect;

/* A backend writes o as fp32 (out_bf16 0) or bf16 (out_bf16 1) into buffers
 * the validator poisons and guards. */
/* Split counts a run reports (mla_outputs.splits). */
#define MLA_SPLITS_NONE 0     /* the path has no split-KV partials (reference, oracle, generic) */
#define MLA_SPLITS_UNKNOWN -1 /* the backend cannot tell (a captured output, a library that
                               * does not report it) */

typedef struct {
    float *o32;      /* [tokens, H, Dv] when the backend's output is fp32 */
    mla_bf16 *o16;   /* [tokens, H, Dv] when it is bf16 */
    float *lse;      /* [tokens, H] */
    int wrote_lse;   /* set by the backend when it produced lse */
    /* Largest split count the run really used over the case's sequences
     * (>= 1), or MLA_SPLITS_NONE / MLA_SPLITS_UNKNOWN: set by the backend,
     * printed by the reports for each tier. */
    int splits;
} mla_outputs;

/* What a backend is, for the table and the reports. */
typedef enum {
    MLA_KIND_REFERENCE = 0, /* the fp32 CPU reference every other backend is judged against */
    MLA_KIND_ORACLE,        /* fp64 plain loops: judges the reference */
    MLA_KIND_MODEL,         /* CPU model of the seed kernel (two stages, bf16 partials) */
    MLA_KIND_GPU_FAST,      /* GPU fast path */
    MLA_KIND_GPU_PERHEAD,   /* GPU per-head split-KV baseline */
    MLA_KIND_GPU_GENERIC,   /* GPU generic fallback */
    MLA_KIND_CAPTURED,      /* a file's /expected output */
    MLA_KIND_MUTANT,        /* a planted bug: must FAIL (mutation tests) */
    MLA_KIND_EMU            /* the AMD GPU tiers under the wave64 emulator (emu/): a kernel
                               fault (out of bounds, race, divergence) is a FAIL */
} mla_backend_kind;

const char *mla_backend_kind_name(mla_backend_kind k);

typedef struct mla_backend {
    const char *name;
    mla_backend_kind kind;
    const char *description;
    mla_path path;
    mla_expect expect;
    int out_bf16;
    int in_default_set; /* run when no --backend is given */
    /* 1 if usable here; else 0 with a reason (no GPU, not built). */
    int (*available)(const struct mla_backend *b, char *why, size_t n);
    /* MLA_OK, MLA_ERR_DECLINED (reason in err, nothing written) or an error. */
    mla_status (*run)(const struct mla_backend *b, const mla_fixture *fx, mla_outputs *out,
                      mla_error *err);
    int arg; /* backend-specific: mutation id, GPU tier */
    /* 1: MLA_ERR_RUNTIME from run is a fault of the kernel itself (the
     * emulated AMD tiers: out-of-bounds access, LDS race, barrier
     * divergence, a launch the hardware would refuse): the verdict is FAIL
     * naming it, not ERROR. */
    int fault_is_fail;
} mla_backend;

size_t mla_backend_count(void);
const mla_backend *mla_backend_get(size_t i);
/* By name; "model:MUTATION" names a planted-bug model. */
const mla_backend *mla_backend_find(const char *name);

/* SPEC section 3's decline conditions re-derived from the file's config,
 * independently of core/'s decline code, so a wrong can_handle is caught. NULL when
 * the fast path must accept. */
const char *mla_spec_decline_reason(const mla_fixture *fx);

typedef enum {
    MLA_VERDICT_PASS = 0,
    MLA_VERDICT_FAIL,
    MLA_VERDICT_DECLINED, /* a correct decline: a status, not a failure */
    MLA_VERDICT_NA,       /* backend unavailable here, or nothing to judge */
    MLA_VERDICT_ERROR     /* the backend could not run (not a numerical verdict) */
} mla_verdict;

const char *mla_verdict_name(mla_verdict v);

/* Group levels of the bias test (mla_metrics.bias_level). */
typedef enum {
    MLA_BIAS_ROW = 0,  /* (token, head) */
    MLA_BIAS_SEQ_HEAD, /* (sequence, head) */
    MLA_BIAS_DRAFT_HEAD, /* (draft row i, head) across sequences */
    MLA_BIAS_HEAD,     /* head across all sequences */
    MLA_BIAS_SEQ,      /* sequence, every head */
    MLA_BIAS_LEVELS
} mla_bias_level;

/* "row", "sequence-head", "draft-head", "head", "sequence". */
const char *mla_bias_level_name(int level);

/* One group level's noise figures (mla_metrics.bias_level). */
typedef struct {
    double dev;        /* largest |s - 1| among the level's groups (s against the judge's
                          baseline: the fp32 reference; the oracle for the reference) */
    double tau;        /* the threshold of that group */
    double ratio;      /* largest |s - 1| / threshold among the level's groups */
    double dev_oracle; /* largest |s - 1| with s against the fp64 oracle; -1 where the
                          oracle did not run */
    char group[48];    /* the group of dev */
    int64_t n;         /* groups judged at this level */
} mla_bias_level_stats;

typedef struct {
    double max_abs;       /* max |o - ref| */
    double worst_row_rel; /* max over rows of ||o_r - ref_r||_2 / ||ref_r||_2 */
    double nmse;          /* sum (o-ref)^2 / sum ref^2 */
    double cos_diff;      /* 1 - 2 sum(o ref) / sum(o^2 + ref^2) */
    double worst_row_cos; /* max over rows of the row's cos_diff */
    double within_1ulp;   /* share of elements with |o - ref| <= one bf16 ulp of ref */
    double worst_ratio;   /* max over elements of |o-ref| / allowed (1 = at the bound) */
    double lse_max_abs;   /* max |lse - lse_ref| where the backend gave lse; -1 otherwise */
    double lse_ratio;     /* max |dlse| / allowed */
    double cos_vs_oracle; /* cos_diff against the fp64 oracle where it ran; -1 otherwise */
    double max_abs_vs_oracle;
    int64_t n_elems;
    int64_t n_nan;        /* non-finite outputs where the reference is finite, or outputs
                           * of another class where it is NaN / +-Inf */
    int64_t n_compared;   /* elements both finite: the set err, cos, rows and bias run over */
    int64_t n_ref_nonfinite; /* elements where the reference is NaN or +-Inf */
    int64_t n_unwritten;  /* still holding the poison pattern */
    int64_t n_over;       /* elements over their bound */
    int64_t n_rows_over;  /* rows over the per-row cos_diff limit */
    int64_t first_bad;    /* flat index of the first bad element, -1 if none */
    /* Bias test (issue 18): the group whose slope s = sum(o ref)/sum(ref^2)
     * is furthest from 1 relative to its threshold. */
    double bias_ratio;     /* max over groups of |s - 1| / threshold (1 = at the bound) */
    double bias_slope;     /* s of that group */
    double bias_threshold; /* its threshold */
    char bias_group[64];   /* e.g. "head 3", "seq 1 head 5", "token 12 head 0" */
    int64_t n_bias_groups; /* groups tested */
    int64_t n_bias_over;   /* groups past their threshold */
    int64_t n_bias_apriori_p; /* P-in-bf16 path, groups judged with the a-priori P term
                                 (no reference statistics: judge.c (B2) instead of (B3)) */
    /* The bias test's noise per group level (issue 18's measured-noise
     * table), indexed by mla_bias_level. */
    mla_bias_level_stats bias_level[MLA_BIAS_LEVELS];
    /* Tolerances used, for the report. */
    double cos_limit, row_cos_limit, rel_tol, abs_frac;
    int ulp_hist[8]; /* |err| in ulps of ref: 0, <=0.5, <=1, <=2, <=4, <=8, <=16, >16 */
} mla_metrics;

typedef struct {
    char fixture[256];  /* file base name */
    char case_name[128];
    char family[64];
    char backend[64];
    mla_path path;
    mla_verdict verdict;
    char reason[512];
    double seconds;
    int64_t max_prefix;
    int splits; /* what the run reported: >= 1, MLA_SPLITS_NONE or MLA_SPLITS_UNKNOWN */
    int num_seqs, num_heads, q_len;
    /* 1: a FAIL that was expected -- a captured output listed as known-bad
     * (mla-validate --known-bad MANIFEST) failing for its recorded reason.
     * Reported as XFAIL, not counted as a failure. */
    int expected_fail;
    mla_metrics m;
} mla_case_result;

/* Per-row scales the judge needs, computed once per fixture from the fp32
 * reference and the inputs. */
typedef struct {
    const mla_fixture *fx;
    const float *ref_o;  /* [tokens, H, Dv] fp32 */
    const float *ref_lse;
    const double *oracle_o; /* may be NULL */
    const double *oracle_lse;
    /* NULL, or [tokens, H, MLA_REF_PSTATS] from mla_reference_run_pstats:
     * the bias test's P-in-bf16 term (judge.c (B3)) and the A_c of its
     * cancellation term (B2); without it the a-priori terms (M_c) stand in,
     * and on a P-in-bf16 path the run says so. */
    const double *ref_pstats;
} mla_judge_input;

/* Judge outputs `o` (fp32 values; from bf16 when the backend is bf16) and
 * optional lse against the baseline for `path`: the oracle for the
 * reference, the fp32 reference otherwise. Fills *m; returns PASS or FAIL
 * with the first reason. `unwritten` flags elements that kept the poison. */
mla_verdict mla_judge(const mla_judge_input *in, mla_path path, const float *o,
                      const unsigned char *unwritten, const float *lse, mla_metrics *m,
                      char *reason, size_t reason_n);

#ifdef __cplusplus
}
#endif
#endif
