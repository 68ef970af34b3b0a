/* The contract of every GPU tier (include/mla/shape.h): the shape a call
 * is judged by and the decline conditions of SPEC section 3. Pure C that
 * needs only the status codes: the GPU library links it, and a shape never
 * needs device data or the fixture reader (the fixture struct is read,
 * never loaded, so HDF5 stays out). */
#include "mla/shape.h"
#include "mla/fixture.h"

#include <stdio.h>
#include <string.h>

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
