/* Launch plan of the upstream two-stage MLA verify kernel (SPEC section 4):
 * the seed, the yardstick of the GPU tiers. The contract every tier shares
 * (the shape, the decline conditions of SPEC section 3) is core/'s
 * (include/mla/shape.h); our tiers' split rules are in hip/split_policy.c. */
#include "mla/plan.h"

#include <stdio.h>

mla_block_config mla_block_config_default(void)
{
    mla_block_config c;

    c.block_h = 4;
    c.block_n = 64;
    c.num_warps = 8;
    c.num_stages = 1;
    return c;
}

mla_status mla_plan_make(const mla_shape *s, const mla_block_config *blk, mla_plan *plan,
                         mla_error *err)
{
    const char *why;
    int64_t n_head_blocks, programs, splits;

    if (!s || !blk || !plan) {
        mla_error_set(err, "mla_plan_make: null argument");
        return MLA_ERR_INVALID;
    }
    why = mla_can_handle(s);
    if (why) {
        mla_error_set(err, "fast path declines the case: %s", why);
        return MLA_ERR_DECLINED;
    }
    if (blk->block_h < 1 || blk->block_n < 1 || blk->num_warps < 1 || blk->num_stages < 1) {
        mla_error_set(err, "invalid block config (block_h %d, block_n %d, warps %d, stages %d)",
                   (int)blk->block_h, (int)blk->block_n, (int)blk->num_warps,
                   (int)blk->num_stages);
        return MLA_ERR_INVALID;
    }

    n_head_blocks = ((int64_t)s->num_heads + blk->block_h - 1) / blk->block_h;
    /* Upstream sizes the grid for about 512 stage-1 programs; 64-bit so a
     * large batch cannot overflow the product. */
    programs = (int64_t)s->num_seqs * n_head_blocks;
    splits = 512 / programs;
    if (splits > 32)
        splits = 32;
    if (splits < 1)
        splits = 1;

    plan->blk = *blk;
    plan->num_seqs = s->num_seqs;
    plan->num_heads = s->num_heads;
    plan->q_len = s->q_len;
    plan->n_head_blocks = (int32_t)n_head_blocks;
    plan->num_splits = (int32_t)splits;
    return MLA_OK;
}
