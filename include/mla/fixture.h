/* Fixture files, schema 1.0.0 (SPEC section 6): read, check, write, and the
 * seeded catalogue of synthetic cases. */
#ifndef MLA_FIXTURE_H
#define MLA_FIXTURE_H

#include "mla/common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MLA_SCHEMA_NAME "mla-verify-fixture"
#define MLA_SCHEMA_VERSION "1.0.0"
#define MLA_SCHEMA_MAJOR 1

typedef struct {
    int32_t num_seqs;
    int32_t num_heads;
    int32_t num_kv_heads;
    int32_t q_len; /* > 0: every sequence has q_len drafts; 0: ragged */
    int32_t head_dim;
    int32_t v_head_dim;
    float sm_scale;
    float k_scale;
    float v_scale;
    int32_t is_causal;
    float logit_cap;        /* 0 = off */
    int32_t sliding_window; /* -1 = off (0 is also treated as off) */
    int32_t topk;
} mla_config;

/* One case in memory. Every pointer is owned (freed by mla_fixture_free).
 * Tensors are C-order, bf16 as raw bits. */
typedef struct mla_fixture {
    char *case_name;
    char *source; /* "synthetic" | "trace" */
    char *model;  /* optional, NULL if absent */
    char *description;
    char *created_by;
    int has_seed;
    int64_t seed;

    mla_config cfg;

    int64_t num_q_tokens;   /* qo_indptr[num_seqs] */
    int64_t pool_slots;     /* kv_buffer.shape[0] */
    int64_t num_kv_indices; /* kv_indptr[num_seqs] */

    mla_bf16 *q;         /* [num_q_tokens, num_heads, head_dim] */
    mla_bf16 *k_extend;  /* [num_q_tokens, num_kv_heads, head_dim] */
    mla_bf16 *v_extend;  /* [num_q_tokens, num_kv_heads, v_head_dim] */
    mla_bf16 *kv_buffer; /* [pool_slots, num_kv_heads, head_dim] */
    int32_t *qo_indptr;  /* [num_seqs + 1] */
    int32_t *kv_indptr;  /* [num_seqs + 1] */
    int64_t *kv_indices; /* [num_kv_indices] */
    float *sinks;        /* [num_heads] or NULL */

    /* Optional /expected group: an output captured from some kernel. */
    mla_bf16 *expected_o;    /* [num_q_tokens, num_heads, v_head_dim] or NULL */
    float *expected_lse;     /* [num_q_tokens, num_heads] or NULL */
    char *expected_producer; /* set when expected_o is */
} mla_fixture;

/* Element counts of each tensor, overflow-checked against the config. */
typedef struct {
    size_t q, k_extend, v_extend, kv_buffer, o, lse;
} mla_fixture_sizes;

mla_status mla_fixture_sizes_of(const mla_fixture *fx, mla_fixture_sizes *sz, mla_error *err);

/* Check every rule of SPEC section 6 that holds in memory: config values,
 * indptr monotonicity, indices in range, q_len consistency. The reader calls
 * it before returning; the writer calls it before writing. */
mla_status mla_fixture_check(const mla_fixture *fx, mla_error *err);

/* Read and fully check one file. On failure *fx is left empty and err names
 * the file, the dataset or attribute, and the rule. */
mla_status mla_fixture_read(const char *path, mla_fixture *fx, mla_error *err);

/* mla_fixture_read behind a guard for untrusted files: the file is first
 * read in a child process, so a corrupt file that crashes or hangs the HDF5
 * library itself (seen with damaged global heaps of variable-length string
 * attributes in HDF5 1.10) becomes an MLA_ERR_INVALID with a message instead
 * of taking the caller down. The command-line tools use this; a library
 * user who cannot fork calls mla_fixture_read. POSIX only. */
mla_status mla_fixture_read_guarded(const char *path, mla_fixture *fx, mla_error *err);

/* Write one file (shuffle + deflate level `deflate_level`, 0 = none). */
mla_status mla_fixture_write(const char *path, const mla_fixture *fx, int deflate_level,
                             mla_error *err);

void mla_fixture_free(mla_fixture *fx);

/* Deep copy of the inputs and metadata; /expected is not copied. */
mla_status mla_fixture_copy_inputs(const mla_fixture *src, mla_fixture *dst, mla_error *err);

/* Sequence helpers used everywhere. */
static inline int32_t mla_fixture_drafts(const mla_fixture *fx, int b)
{
    return fx->qo_indptr[b + 1] - fx->qo_indptr[b];
}
static inline int32_t mla_fixture_prefix(const mla_fixture *fx, int b)
{
    return fx->kv_indptr[b + 1] - fx->kv_indptr[b];
}

/* ---- The catalogue of seeded synthetic cases (fixtures/catalogue.c) ---- */

typedef struct {
    const char *name;
    const char *family;      /* ctest groups fixtures by family */
    const char *description;
    int large;               /* 1: generated at test time, never shipped */
} mla_case_info;

size_t mla_catalogue_count(void);
const mla_case_info *mla_catalogue_get(size_t i);
const mla_case_info *mla_catalogue_find(const char *name);

/* Build case `name` from `seed` (same name + seed -> identical tensors). */
mla_status mla_catalogue_generate(const char *name, uint64_t seed, mla_fixture *fx,
                                  mla_error *err);

/* Default seed of a case: fixed per name so shipped files are reproducible. */
uint64_t mla_catalogue_default_seed(const char *name);

#ifdef __cplusplus
}
#endif
#endif
