/* The launch plan of the two-stage MLA verify kernel (SPEC sections 3, 4):
 * decline conditions, block configuration, split counts and the floor
 * partition of each prefix. Everything here is a function of shapes alone, so
 * a GPU launch built on it never reads device data and stays graph safe. The
 * per-sequence partition is inline so device code and the CPU model share
 * one definition. */
#ifndef MLA_PLAN_H
#define MLA_PLAN_H

#include "mla/common.h"

#if defined(__CUDACC__) || defined(__HIPCC__) || defined(__HIP__)
#define MLA_HD __host__ __device__
#else
#define MLA_HD
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* What the fast path needs to decide, known on the host without touching
 * device memory. */
typedef struct {
    int32_t num_seqs;
    int32_t num_heads;
    int32_t num_kv_heads;
    int32_t q_len;        /* declared drafts per sequence (0 = ragged) */
    int64_t num_q_tokens; /* rows of q */
    int32_t head_dim;     /* q width */
    int32_t kv_dim;       /* kv pool width */
    int32_t v_head_dim;   /* output width */
    int32_t v_extend_dim; /* v_extend width */
    int32_t is_causal;
    float logit_cap;
    int32_t sliding_window;
    int32_t has_sinks;
    int32_t topk;
} mla_shape;

typedef struct {
    int32_t block_h; /* query heads per program */
    int32_t block_n; /* keys per tile */
    int32_t num_warps;
    int32_t num_stages;
} mla_block_config;

typedef struct {
    mla_block_config blk;
    int32_t num_seqs;
    int32_t num_heads;
    int32_t q_len;
    int32_t n_head_blocks; /* ceil(num_heads / block_h) */
    int32_t num_splits;    /* max(1, min(32, 512 / (bs * n_head_blocks))) */
} mla_plan;

/* The shape view of a fixture, as the GPU API would see it (the fixture's
 * pool and q share head_dim, v_extend has v_head_dim). */
struct mla_fixture;
void mla_shape_from_fixture(const struct mla_fixture *fx, mla_shape *s);

/* NULL when the fast path accepts `s`, otherwise a static string naming the
 * first decline condition of SPEC section 3 that holds. */
const char *mla_can_handle(const mla_shape *s);

/* Upstream tuning (SPEC section 4): BLOCK_H 4, BLOCK_N 64, 8 warps, 1 stage. */
mla_block_config mla_block_config_default(void);

/* Fill *plan for an accepted shape; MLA_ERR_DECLINED (reason in err) else. */
mla_status mla_plan_make(const mla_shape *s, const mla_block_config *blk, mla_plan *plan,
                         mla_error *err);

/* Active splits of a sequence with `prefix` keys: max(1, min(num_splits,
 * prefix / block_n)). An empty prefix still has one (empty) split, so the
 * merge sees a well-defined -inf partial instead of dividing by zero. */
static inline MLA_HD int32_t mla_plan_active_splits(int32_t prefix, int32_t num_splits,
                                                   int32_t block_n)
{
    int32_t a = prefix / block_n;
    if (a > num_splits)
        a = num_splits;
    return a < 1 ? 1 : a;
}

/* Floor partition: split s of `active` covers [s*len, (s+1)*len) with
 * len = prefix / active; the last split absorbs the remainder. */
static inline MLA_HD void mla_plan_split_range(int32_t prefix, int32_t active, int32_t s,
                                              int32_t *begin, int32_t *end)
{
    int32_t len = prefix / active;
    *begin = s * len;
    *end = (s == active - 1) ? prefix : (s + 1) * len;
}

#ifdef __cplusplus
}
#endif
#endif
