/* Launch plan of the upstream two-stage MLA verify kernel (SPEC sections 3,
 * 4): the seed. Our GPU tiers take mla_can_handle and the floor partition
 * from it; their own split rules are in hip/split_policy.c.
 *
 * Pure C that needs only mla_common: the GPU library compiles this file as
 * well, and a plan must never need device data or the fixture reader (the
 * fixture struct is read, never loaded, so HDF5 stays out). */
#include "mla/plan.h"
#include "mla/fixture.h"

#include <stdio.h>

const char *mla_can_handle(const mla_shape *s)
{
    if (!s)
        return "no shape given";
    /* SPEC section 3 order. The fast kernel implements none of the optional
     * score features, so each of them sends the case down the chain. */
    if (s->has_sinks)
        return "attention sinks present";
    if (s->sliding_window > 0)
        return "sliding window attention (sliding_window > 0)";
    /* Written as !(<= 0) so that a NaN cap also declines rather than being
     * silently treated as off. */
    if (!(s->logit_cap <= 0.0f))
        return "logit capping (logit_cap > 0)";
    if (!s->is_causal)
        return "non-causal draft attention (is_causal = 0)";
    /* Guarded before the modulo below and before n_head_blocks, which
     * divides by it; not a SPEC condition, but no plan exists without
     * heads. */
    if (s->num_heads < 1)
        return "num_heads < 1";
    if (s->num_kv_heads < 1 || s->num_heads % s->num_kv_heads != 0)
        return "num_heads is not a multiple of num_kv_heads";
    if (s->num_kv_heads != 1)
        return "more than one KV head (the kernel shares one latent head)";
    if (s->head_dim != s->kv_dim)
        return "head_dim differs from the kv pool width";
    if (s->v_head_dim != s->v_extend_dim)
        return "v_head_dim differs from the v_extend width";
    if (s->head_dim < s->v_head_dim)
        return "head_dim < v_head_dim (values must be a prefix of the latent row)";
    /* Zero-width values would leave the kernel nothing to write; not in the
     * SPEC list, declined so no division or empty tile reaches the device. */
    if (s->v_head_dim < 1)
        return "v_head_dim < 1";
    if (s->num_seqs < 1)
        return "batch size < 1";
    if (s->q_len < 1)
        return "q_len < 1 (no declared per-sequence draft count)";
    /* 64-bit product: bs and q_len are int32 each. */
    if (s->num_q_tokens != (int64_t)s->num_seqs * (int64_t)s->q_len)
        return "ragged draft counts (num_q_tokens != bs * q_len)";
    if (s->topk != 1)
        return "topk != 1 (tree drafts)";
    return NULL;
}

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

void mla_shape_from_fixture(const mla_fixture *fx, mla_shape *s)
{
    memset(s, 0, sizeof *s);
    s->num_seqs = fx->cfg.num_seqs;
    s->num_heads = fx->cfg.num_heads;
    s->num_kv_heads = fx->cfg.num_kv_heads;
    s->q_len = fx->cfg.q_len;
    s->num_q_tokens = fx->num_q_tokens;
    s->head_dim = fx->cfg.head_dim;
    /* A fixture stores q and the pool with the same declared width, and
     * v_extend with v_head_dim; a GPU caller may pass tensors that differ,
     * which is why the shape keeps them apart. */
    s->kv_dim = fx->cfg.head_dim;
    s->v_head_dim = fx->cfg.v_head_dim;
    s->v_extend_dim = fx->cfg.v_head_dim;
    s->is_causal = fx->cfg.is_causal;
    s->logit_cap = fx->cfg.logit_cap;
    s->sliding_window = fx->cfg.sliding_window;
    s->has_sinks = fx->sinks != NULL;
    s->topk = fx->cfg.topk;
}
