/* Fixture files, schema 1.0.0 and 1.1.0 (fp8 pools) (SPEC section 6): read, check, write, and the
 * seeded catalogue of synthetic cases. */
#ifndef MLA_FIXTURE_H
#define MLA_FIXTURE_H

#include "mla/common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MLA_SCHEMA_NAME "mla-verify-fixture"
#define MLA_SCHEMA_VERSION "1.0.0"
/* Written when the pool is fp8 (and required by the reader for one). */
#define MLA_SCHEMA_VERSION_FP8 "1.1.0"
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
    /* The pool: bf16 in kv_buffer (kv_dtype MLA_KV_BF16), or, schema
     * 1.1.0, fp8 codes in kv_fp8 (kv_dtype MLA_KV_FP8_*; kv_buffer NULL).
     * Exactly one of the two is set. Read an element with mla_fixture_kv. */
    mla_kv_dtype kv_dtype;
    mla_bf16 *kv_buffer; /* [pool_slots, num_kv_heads, head_dim] or NULL */
    uint8_t *kv_fp8;     /* [pool_slots, num_kv_heads, head_dim] or NULL */
    int32_t *qo_indptr;  /* [num_seqs + 1] */
    int32_t *kv_indptr;  /* [num_seqs + 1] */
    int64_t *kv_indices; /* [num_kv_indices] */
    float *sinks;        /* [num_heads] or NULL */

    /* Optional /expected group: an output captured from some kernel. */
    mla_bf16 *expected_o;    /* [num_q_tokens, num_heads, v_head_dim] or NULL */
    float *expected_lse;     /* [num_q_tokens, num_heads] or NULL */
    char *expected_producer; /* set when expected_o is */
} mla_fixture;

/* Pool element e (index into [pool_slots, num_kv_heads, head_dim]) as fp32,
 * decoded exactly whatever the pool's dtype. */
static inline float mla_fixture_kv(const struct mla_fixture *fx, size_t e)
{
    return fx->kv_dtype == MLA_KV_BF16 ? mla_bf16_to_f32(fx->kv_buffer[e])
                                       : mla_fp8_to_f32(fx->kv_dtype, fx->kv_fp8[e]);
}

/* Element counts of each tensor, overflow-checked against the config
 * (kv_buffer counts pool elements of either dtype: bytes are
 * kv_buffer * mla_kv_dtype_size(kv_dtype)). */
typedef struct {
    size_t q, k_extend, v_extend, kv_buffer, o, lse;
} mla_fixture_sizes;

mla_status mla_fixture_sizes_of(const mla_fixture *fx, mla_fixture_sizes *sz, mla_error *err);

/* Check every rule of SPEC section 6 that holds in memory: config values,
 * indptr monotonicity, indices in range, q_len consistency. The reader calls
 * it before returning; the writer calls it before writing. */
mla_status mla_fixture_check(const mla_fixture *fx, mla_error *err);

/* Config rules alone, and one indptr (starts at 0, never decreases; n =
 * num_seqs, so p has n + 1 entries). mla_fixture_check calls both. */
mla_status mla_fixture_check_config(const mla_config *c, mla_error *err);
mla_status mla_fixture_check_indptr(const char *name, const int32_t *p, int32_t n,
                                    mla_error *err);

/* Limits of one read. A file's header declares its tensors' sizes; the
 * reader adds them up (every tensor it would load) and refuses the file
 * before allocating anything when the total passes max_memory. */
typedef struct {
    uint64_t max_memory; /* bytes; 0 = mla_fixture_default_max_memory() */
} mla_read_options;

/* min(half of physical memory, 16 GiB): the largest catalogue case (bs 8
 * at a 128k prefix) needs 1.2 GB, a hostile header asks for terabytes. */
uint64_t mla_fixture_default_max_memory(void);

/* "17179869184", "16G", "512M", "64k" (binary units, optional "iB"/"B")
 * -> bytes. 1 on success, 0 on a malformed or overflowing value; for the
 * CLIs' --max-memory. */
int mla_parse_bytes(const char *s, uint64_t *out);

/* Read and fully check one file, in this process. On failure *fx is left
 * empty and err names the file, the dataset or attribute, and the rule (or
 * the limit that was hit). Besides SPEC section 6 the reader refuses what
 * could make it read other files or memory the file does not pay for:
 * external links, external storage, virtual datasets, filters other than
 * shuffle and deflate, sparse (partly written) chunked datasets, data
 * stored smaller than deflate can make it, and declared sizes over the
 * memory limit. opt may be NULL (defaults). */
mla_status mla_fixture_read(const char *path, mla_fixture *fx, mla_error *err);
mla_status mla_fixture_read_opts(const char *path, const mla_read_options *opt, mla_fixture *fx,
                                 mla_error *err);

/* The reader for untrusted files. max_memory is the budget of the whole
 * run, this process and the reader's child together: a file's tensors may
 * declare at most (max_memory - resident - reader slack) / 2 bytes, the
 * child's address space is capped to its slack plus the declared bytes,
 * and the resident size of the caller is read at each call. libhdf5 1.10 itself can crash, hang or
 * corrupt its heap on a damaged file (seen with damaged global heaps of
 * variable-length strings), which no check of ours can precede. So a child
 * process does the whole read and check, then hands the checked arrays to
 * this process through a pipe; this process never calls libhdf5 on the
 * file, bounds everything it receives by the memory limit and checks the
 * result again (mla_fixture_check). A crash in the child is reported as
 * "reader crashed" (MLA_ERR_INVALID; the CLIs exit 2); a child that takes
 * longer than its time limit (10 s plus 20 s per GiB of declared tensor
 * sizes: derived from what the file claims, not from its size) is killed.
 * The command-line tools use this. POSIX only; fails (it never falls back
 * to reading in this process) when it cannot fork. */
mla_status mla_fixture_read_guarded(const char *path, mla_fixture *fx, mla_error *err);
mla_status mla_fixture_read_guarded_opts(const char *path, const mla_read_options *opt,
                                         mla_fixture *fx, mla_error *err);

/* Write one file (shuffle + deflate level `deflate_level`, 0 = none). The
 * data goes to a new temporary file in the same directory, renamed onto
 * `path` only when complete: a failed write leaves `path` as it was, and
 * nothing the writer did not create is ever removed. */
mla_status mla_fixture_write(const char *path, const mla_fixture *fx, int deflate_level,
                             mla_error *err);

void mla_fixture_free(mla_fixture *fx);

/* The pool as bf16, for code that walks bf16 rows: a bf16 pool is returned
 * as is (*owned NULL); an fp8 pool is widened into a new buffer (*owned,
 * freed by the caller) -- exact, since every e4m3fn/e4m3fnuz value and NaN
 * is a bf16 value. The GPU glue must not use this to upload an fp8 pool. */
mla_status mla_fixture_kv_bf16(const mla_fixture *fx, const mla_bf16 **pool, mla_bf16 **owned,
                               mla_error *err);

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
