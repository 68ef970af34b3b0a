/* The validator's view of the GPU tiers: one fixture in, one tier run into
 * poisoned, guarded device buffers, o and lse back on the host. Every runtime
 * call is checked; the guards and the poison turn out-of-bounds writes and
 * writes by a declining tier into errors instead of silent corruption. */
#include "gpu_backend.h"

#include "compat.h"
#include "mla/gpu.h"
#include "mla/gpu_fixture.h"
#include "mla/guard.h"
#include "mla/validate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    void *ptrs[16];
    int n;
} dev_allocs;

#define CHECK(call)                                                                                \
    do {                                                                                           \
        hipError_t e_ = (call);                                                                    \
        if (e_ != hipSuccess) {                                                                    \
            mla_error_set(err, "%s failed: %s (%s:%d)", #call, hipGetErrorString(e_), __FILE__,         \
                     __LINE__);                                                                    \
            st = MLA_ERR_RUNTIME;                                                                  \
            goto done;                                                                             \
        }                                                                                          \
    } while (0)

static hipError_t dmalloc(dev_allocs *al, void **p, size_t bytes)
{
    *p = NULL;
    hipError_t e = hipMalloc(p, bytes ? bytes : 16);
    if (e == hipSuccess)
        al->ptrs[al->n++] = *p;
    return e;
}

static hipError_t upload(dev_allocs *al, void **p, const void *src, size_t bytes)
{
    hipError_t e = dmalloc(al, p, bytes);
    if (e == hipSuccess && bytes)
        e = hipMemcpy(*p, src, bytes, hipMemcpyHostToDevice);
    return e;
}

mla_status mla_gpu_backend_run(const mla_fixture *fx, int tier, mla_bf16 *o_host, float *lse_host,
                               mla_error *err)
{
    return mla_gpu_backend_run_opts(fx, tier, NULL, o_host, lse_host, NULL, err);
}

mla_status mla_gpu_backend_run_opts(const mla_fixture *fx, int tier, const mla_gpu_options *opt,
                                    mla_bf16 *o_host, float *lse_host, mla_gpu_run_info *info,
                                    mla_error *err)
{
    mla_status st = MLA_OK;
    dev_allocs al;
    unsigned char *host_o = NULL, *host_l = NULL, *first_o = NULL, *first_l = NULL;
    char why[256];
    al.n = 0;

    if (!fx || !o_host) {
        mla_error_set(err, "mla_gpu_backend_run: NULL fixture or output");
        return MLA_ERR_INVALID;
    }
    if (!mla_gpu_available(why, sizeof why)) {
        mla_error_set(err, "%s", why);
        return MLA_ERR_RUNTIME;
    }

    const int64_t T = fx->num_q_tokens, H = fx->cfg.num_heads, Hkv = fx->cfg.num_kv_heads;
    const int64_t D = fx->cfg.head_dim, Dv = fx->cfg.v_head_dim, B = fx->cfg.num_seqs;
    const size_t q_b = (size_t)(T * H * D) * 2, ke_b = (size_t)(T * Hkv * D) * 2,
                 ve_b = (size_t)(T * Hkv * Dv) * 2,
                 kv_b = (size_t)(fx->pool_slots * Hkv * D) * mla_kv_dtype_size(fx->kv_dtype);
    const size_t o_b = (size_t)(T * H * Dv) * 2, l_b = (size_t)(T * H) * 4;

    /* The fixture's description with its host pointers; each tensor is
     * pointed at its device copy below. */
    mla_gpu_args a;
    mla_gpu_args_from_fixture(fx, NULL, NULL, &a);

    void *d_q, *d_ke, *d_ve, *d_kv, *d_qo, *d_kvp, *d_idx, *d_sinks = NULL, *d_o, *d_l, *d_ws = NULL;
    CHECK(upload(&al, &d_q, fx->q, q_b));
    CHECK(upload(&al, &d_ke, fx->k_extend, ke_b));
    CHECK(upload(&al, &d_ve, fx->v_extend, ve_b));
    /* The pool as stored (a.kv_buffer: bf16, or the fp8 codes themselves,
     * schema 1.1.0, which the tiers decode); never a widened copy. */
    CHECK(upload(&al, &d_kv, a.kv_buffer, kv_b));
    CHECK(upload(&al, &d_qo, fx->qo_indptr, (size_t)(B + 1) * 4));
    CHECK(upload(&al, &d_kvp, fx->kv_indptr, (size_t)(B + 1) * 4));
    CHECK(upload(&al, &d_idx, fx->kv_indices, (size_t)fx->num_kv_indices * 8));
    if (fx->sinks)
        CHECK(upload(&al, &d_sinks, fx->sinks, (size_t)H * 4));

    /* Outputs: the one guard convention (mla/guard.h), filled on the host
     * so the exact bits are known, uploaded whole, read back whole. */
    const size_t o_img = mla_guard_image_bytes((size_t)(T * H * Dv), 2);
    const size_t l_img = mla_guard_image_bytes((size_t)(T * H), 4);
    host_o = o_img ? malloc(o_img) : NULL;
    host_l = l_img ? malloc(l_img) : NULL;
    if (!host_o || !host_l) {
        mla_error_set(err, "mla_gpu_backend_run: host allocation failed");
        st = MLA_ERR_NOMEM;
        goto done;
    }
    mla_guard_fill(host_o, (size_t)(T * H * Dv), 2);
    mla_guard_fill(host_l, (size_t)(T * H), 4);
    CHECK(upload(&al, &d_o, host_o, o_img));
    CHECK(upload(&al, &d_l, host_l, l_img));

    a.q = d_q;
    a.k_extend = d_ke;
    a.v_extend = d_ve;
    a.kv_buffer = d_kv;
    a.qo_indptr = d_qo;
    a.kv_indptr = d_kvp;
    a.kv_indices = d_idx;
    a.sinks = d_sinks;
    a.o = (mla_bf16 *)((unsigned char *)d_o + MLA_GUARD_BYTES);
    a.lse = (float *)((unsigned char *)d_l + MLA_GUARD_BYTES);

    /* A declined shape needs no workspace: mla_gpu_run below reports the
     * decline with its reason. */
    size_t ws_b = 0;
    mla_error ws_err;
    if (mla_gpu_workspace_size(&a.shape, (mla_gpu_tier)tier, opt, &ws_b, &ws_err) == MLA_ERR_INVALID) {
        mla_error_set(err, "%s", ws_err.msg);
        st = MLA_ERR_INVALID;
        goto done;
    }
    if (ws_b)
        CHECK(dmalloc(&al, &d_ws, ws_b));

    /* Two calls on the same workspace, each into freshly poisoned outputs:
     * the second must repeat the first bit for bit: nothing may depend on
     * what a call left in the workspace, on timing, or on the order in
     * which blocks run. */
    mla_error run_err;
    mla_status rs = MLA_OK;
    for (int call = 0; call < 2; ++call) {
        if (call == 1) {
            if (rs != MLA_OK)
                break;
            if (!first_o) {
                first_o = malloc(o_img);
                first_l = malloc(l_img);
                if (!first_o || !first_l) {
                    mla_error_set(err, "mla_gpu_backend_run: host allocation failed");
                    st = MLA_ERR_NOMEM;
                    goto done;
                }
            }
            memcpy(first_o, host_o, o_img);
            memcpy(first_l, host_l, l_img);
            mla_guard_fill(host_o, (size_t)(T * H * Dv), 2);
            mla_guard_fill(host_l, (size_t)(T * H), 4);
            CHECK(hipMemcpy(d_o, host_o, o_img, hipMemcpyHostToDevice));
            CHECK(hipMemcpy(d_l, host_l, l_img, hipMemcpyHostToDevice));
        }
        run_err.msg[0] = 0;
        rs = mla_gpu_run(&a, (mla_gpu_tier)tier, opt, d_ws, ws_b, NULL, info, &run_err);
        CHECK(hipGetLastError());
        CHECK(hipDeviceSynchronize());
        CHECK(hipMemcpy(host_o, d_o, o_img, hipMemcpyDeviceToHost));
        CHECK(hipMemcpy(host_l, d_l, l_img, hipMemcpyDeviceToHost));

        st = mla_guard_check_run(mla_gpu_tier_name((mla_gpu_tier)tier), host_o, (size_t)(T * H * Dv), 2,
                                 host_l, (size_t)(T * H), rs == MLA_ERR_DECLINED, err);
        if (st != MLA_OK)
            goto done;
        if (call == 1 && rs == MLA_OK &&
            (memcmp(first_o, host_o, o_img) != 0 || memcmp(first_l, host_l, l_img) != 0)) {
            mla_error_set(err, "%s tier: a second call on the same workspace changed %s",
                          mla_gpu_tier_name((mla_gpu_tier)tier),
                          memcmp(first_o, host_o, o_img) != 0 ? "o" : "lse");
            st = MLA_ERR_RUNTIME;
            goto done;
        }
    }
    if (rs == MLA_ERR_DECLINED) {
        mla_error_set(err, "%s", run_err.msg);
        st = MLA_ERR_DECLINED;
        goto done;
    }
    if (rs != MLA_OK) {
        mla_error_set(err, "%s", run_err.msg);
        st = rs;
        goto done;
    }
    memcpy(o_host, host_o + MLA_GUARD_BYTES, o_b);
    if (lse_host)
        memcpy(lse_host, host_l + MLA_GUARD_BYTES, l_b);

done:
    for (int i = 0; i < al.n; ++i)
        (void)hipFree(al.ptrs[i]);
    free(host_o);
    free(host_l);
    free(first_o);
    free(first_l);
    return st;
}
