/* The launch plan of the upstream two-stage MLA verify kernel (SPEC section
 * 4), the seed: block configuration, split counts and the floor partition of
 * each prefix (the shape and the decline conditions: mla/shape.h). Everything here is a function of shapes alone, so
 * a GPU launch built on it never reads device data and stays graph safe. The
 * per-sequence partition is inline so device code and the CPU model share
 * one definition. */
#ifndef MLA_PLAN_H
#define MLA_PLAN_H

#include "mla/common.h"
#include "mla/shape.h"

#ifdef __cplusplus
extern "C" {
#endif

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
