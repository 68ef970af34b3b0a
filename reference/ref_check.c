/* Input checks shared by the fp32 reference and the fp64 oracle. They cover
 * exactly what the references index with, so that a fixture built in memory
 * (which never went through the reader's checks) cannot make them read out
 * of bounds; head_dim and v_head_dim may be any positive sizes. */
#include <math.h>

#include "ref_internal.h"

static mla_status check_indptr(const int32_t *p, int32_t n, int64_t last, const char *name,
                               mla_error *err)
{
    if (!p) {
        mla_error_set(err, "%s is NULL", name);
        return MLA_ERR_INVALID;
    }
    if (p[0] != 0) {
        mla_error_set(err, "%s[0] = %d, must be 0", name, (int)p[0]);
        return MLA_ERR_INVALID;
    }
    for (int32_t b = 0; b < n; b++) {
        if (p[b + 1] < p[b]) {
            mla_error_set(err, "%s decreases at %d (%d -> %d)", name, (int)b, (int)p[b],
                          (int)p[b + 1]);
            return MLA_ERR_INVALID;
        }
    }
    if ((int64_t)p[n] != last) {
        mla_error_set(err, "%s[num_seqs] = %d but the tensor has %lld rows", name, (int)p[n],
                      (long long)last);
        return MLA_ERR_INVALID;
    }
    return MLA_OK;
}

mla_status mla_ref_check_inputs(const mla_fixture *fx, mla_error *err)
{
    if (!fx) {
        mla_error_set(err, "fixture is NULL");
        return MLA_ERR_INVALID;
    }
    const mla_config *c = &fx->cfg;
    if (c->num_seqs < 0 || c->num_heads < 1 || c->num_kv_heads < 1 || c->head_dim < 1 ||
        c->v_head_dim < 1) {
        mla_error_set(err,
                      "config: num_seqs %d, num_heads %d, num_kv_heads %d, head_dim %d, "
                      "v_head_dim %d (need num_seqs >= 0, the others >= 1)",
                      (int)c->num_seqs, (int)c->num_heads, (int)c->num_kv_heads,
                      (int)c->head_dim, (int)c->v_head_dim);
        return MLA_ERR_INVALID;
    }
    if (c->num_heads % c->num_kv_heads != 0) {
        mla_error_set(err, "config: num_heads %d is not a multiple of num_kv_heads %d",
                      (int)c->num_heads, (int)c->num_kv_heads);
        return MLA_ERR_INVALID;
    }
    /* Prefix values are the first v_head_dim columns of each pool row. */
    if (c->v_head_dim > c->head_dim) {
        mla_error_set(err, "config: v_head_dim %d exceeds head_dim %d (values are pool columns)",
                      (int)c->v_head_dim, (int)c->head_dim);
        return MLA_ERR_INVALID;
    }
    /* topk > 1 only makes the fast path decline (SPEC section 3): a fixture
     * carries no tree mask, so its computation is section 2's for any topk. */
    if (c->topk < 1) {
        mla_error_set(err, "config: topk %d must be >= 1", (int)c->topk);
        return MLA_ERR_INVALID;
    }
    /* fixtures/README.md: -1 is off, W >= 1 a window; 0 is not a value
     * (SPEC section 2 defines the window for sliding_window > 0 only, and
     * frameworks disagree on what 0 means), so it is rejected, not guessed. */
    if (c->sliding_window == 0 || c->sliding_window < -1) {
        mla_error_set(err, "config: sliding_window %d must be -1 (off) or >= 1",
                      (int)c->sliding_window);
        return MLA_ERR_INVALID;
    }
    if (!(c->logit_cap >= 0.0f) || isinf(c->logit_cap)) {
        mla_error_set(err, "config: logit_cap %g must be finite and >= 0 (0 = off)",
                      (double)c->logit_cap);
        return MLA_ERR_INVALID;
    }
    if (fx->num_q_tokens < 0 || fx->pool_slots < 0 || fx->num_kv_indices < 0) {
        mla_error_set(err, "negative tensor extent (num_q_tokens %lld, pool_slots %lld, "
                           "num_kv_indices %lld)",
                      (long long)fx->num_q_tokens, (long long)fx->pool_slots,
                      (long long)fx->num_kv_indices);
        return MLA_ERR_INVALID;
    }
    mla_status st = check_indptr(fx->qo_indptr, c->num_seqs, fx->num_q_tokens, "qo_indptr", err);
    if (st != MLA_OK)
        return st;
    st = check_indptr(fx->kv_indptr, c->num_seqs, fx->num_kv_indices, "kv_indptr", err);
    if (st != MLA_OK)
        return st;

    /* Every element count the references form must fit in size_t. */
    size_t n;
    const size_t T = (size_t)fx->num_q_tokens, H = (size_t)c->num_heads,
                 Hkv = (size_t)c->num_kv_heads, D = (size_t)c->head_dim,
                 Dv = (size_t)c->v_head_dim, S = (size_t)fx->pool_slots;
    if (!mla_mul3_size(T, H, D, &n) || !mla_mul3_size(T, Hkv, D, &n) ||
        !mla_mul3_size(T, H, Dv, &n) || !mla_mul3_size(S, Hkv, D, &n) ||
        !mla_mul_size(n, sizeof(float), &n)) {
        mla_error_set(err, "tensor sizes overflow size_t");
        return MLA_ERR_NOMEM;
    }
    if (fx->num_q_tokens > 0 && (!fx->q || !fx->k_extend || !fx->v_extend)) {
        mla_error_set(err, "q, k_extend or v_extend is NULL with %lld query tokens",
                      (long long)fx->num_q_tokens);
        return MLA_ERR_INVALID;
    }
    if (fx->num_kv_indices > 0 &&
        (!fx->kv_indices || (fx->kv_dtype == MLA_KV_BF16 ? !fx->kv_buffer : !fx->kv_fp8))) {
        mla_error_set(err, "kv_indices or kv_buffer is NULL with %lld prefix keys",
                      (long long)fx->num_kv_indices);
        return MLA_ERR_INVALID;
    }
    for (int64_t t = 0; t < fx->num_kv_indices; t++) {
        if (fx->kv_indices[t] < 0 || fx->kv_indices[t] >= fx->pool_slots) {
            mla_error_set(err, "kv_indices[%lld] = %lld outside the pool [0, %lld)", (long long)t,
                          (long long)fx->kv_indices[t], (long long)fx->pool_slots);
            return MLA_ERR_INVALID;
        }
    }
    return MLA_OK;
}
