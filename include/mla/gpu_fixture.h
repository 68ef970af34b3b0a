/* A fixture's call as mla_gpu_args: the shape, the scales, the dense
 * strides of the schema's layout (SPEC section 6) and the host pointers of
 * its tensors (the pool as stored: bf16, or fp8 codes with kv_dtype). The
 * GPU glue (validate/gpu_backend.c) then points the tensors at device
 * copies; the AMD emulator glue (emu/) runs them as they are. One place, so
 * that both glues describe a fixture the same way. */
#ifndef MLA_GPU_FIXTURE_H
#define MLA_GPU_FIXTURE_H

#include "mla/fixture.h"
#include "mla/gpu.h"
#include "mla/plan.h"

#include <string.h>

/* o / lse: where the output goes (may be NULL; set by the caller later). */
static inline void mla_gpu_args_from_fixture(const mla_fixture *fx, mla_bf16 *o, float *lse,
                                             mla_gpu_args *a)
{
    const int64_t H = fx->cfg.num_heads, Hkv = fx->cfg.num_kv_heads;
    const int64_t D = fx->cfg.head_dim, Dv = fx->cfg.v_head_dim;
    memset(a, 0, sizeof *a);
    mla_shape_from_fixture(fx, &a->shape);
    a->num_kv_indices = fx->num_kv_indices;
    a->sm_scale = fx->cfg.sm_scale;
    a->k_scale = fx->cfg.k_scale;
    a->v_scale = fx->cfg.v_scale;
    a->q = fx->q;
    a->q_stride_tok = H * D;
    a->q_stride_head = D;
    a->k_extend = fx->k_extend;
    a->k_stride_tok = Hkv * D;
    a->k_stride_head = D;
    a->v_extend = fx->v_extend;
    a->v_stride_tok = Hkv * Dv;
    a->v_stride_head = Dv;
    a->kv_buffer = fx->kv_dtype == MLA_KV_BF16 ? (const void *)fx->kv_buffer : (const void *)fx->kv_fp8;
    a->kv_dtype = (int)fx->kv_dtype;
    a->kv_stride_slot = Hkv * D;
    a->kv_stride_head = D;
    a->qo_indptr = fx->qo_indptr;
    a->kv_indptr = fx->kv_indptr;
    a->kv_indices = fx->kv_indices;
    a->sinks = fx->sinks;
    a->o = o;
    a->o_stride_tok = H * Dv;
    a->o_stride_head = Dv;
    a->lse = lse;
    a->lse_stride_tok = H;
}

#endif
