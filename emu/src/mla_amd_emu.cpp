// C API of the emulated AMD tiers (include/mla_amd_emu.h): copies the host
// tensors into checked emulator buffers, applies the split tiers' decline
// rules (the arch's mla_gpu_declines), runs the arch's build of the library and copies the outputs back.
#include "mla_amd_emu.h"
#include "mla/gpu_fixture.h"
#include "mla/validate.h"

#include "mla_emu/runtime.h"
#include "mla_emu_internal.h"
#include "split_policy.h"

#include <math.h>
#include <mutex>
#include <stdio.h>
#include <string.h>

namespace {

// The split tiers' decline rules: mla_gpu_declines of the arch's build of
// hip/api.hip (the emulator runs the library's own host code).
const char *split_declines(const mla_gpu_args *a, mla_gpu_tier tier, mla_amd_emu_arch arch)
{
    return arch == MLA_AMD_EMU_GFX950 ? mla_emu_gfx950::emu_declines(a, tier) : mla_emu_gfx942::emu_declines(a, tier);
}

struct Bufs {
    void *p[12] = {};
    int n = 0;
    void *add(size_t bytes, int flags, const char *name)
    {
        void *b = mla_emu::alloc(bytes ? bytes : 1, flags, name);
        if (b)
            p[n++] = b;
        return b;
    }
    ~Bufs()
    {
        for (int i = 0; i < n; ++i)
            mla_emu::release(p[i]);
    }
};

std::mutex g_lock;

} // namespace

mla_status mla_amd_emu_run_with(void (*run)(mla_emu_tier_run &), const mla_gpu_args *a, int64_t kv_pool_slots,
                                mla_gpu_tier tier, mla_amd_emu_arch arch, unsigned flags, mla_amd_emu_info *info,
                                mla_error *err)
{
    std::lock_guard<std::mutex> guard(g_lock);
    if (info) {
        info->ran = tier;
        info->fault = 0;
        info->launches[0] = 0;
    }
    if (!a || (arch != MLA_AMD_EMU_GFX942 && arch != MLA_AMD_EMU_GFX950) || kv_pool_slots < 0) {
        mla_error_set(err, "amd emu: bad arguments (args %p, arch %d, pool slots %lld)", (const void *)a, (int)arch,
                      (long long)kv_pool_slots);
        return MLA_ERR_INVALID;
    }
    const mla_shape *s = &a->shape;
    if (tier == MLA_GPU_TIER_AUTO)
        tier = !split_declines(a, MLA_GPU_TIER_FAST, arch)      ? MLA_GPU_TIER_FAST
               : !split_declines(a, MLA_GPU_TIER_PERHEAD, arch) ? MLA_GPU_TIER_PERHEAD
                                                                : MLA_GPU_TIER_GENERIC;
    if (info)
        info->ran = tier;
    if (tier == MLA_GPU_TIER_FAST || tier == MLA_GPU_TIER_PERHEAD) {
        const char *why = split_declines(a, tier, arch);
        if (!why && a->sinks)
            why = "sinks present";
        if (why) {
            mla_error_set(err, "%s tier declines: %s", tier == MLA_GPU_TIER_FAST ? "fast" : "perhead", why);
            return MLA_ERR_DECLINED;
        }
    } else if (tier != MLA_GPU_TIER_GENERIC) {
        mla_error_set(err, "amd emu: unknown tier %d", (int)tier);
        return MLA_ERR_INVALID;
    }
    const long long T = s->num_q_tokens, bs = s->num_seqs, H = s->num_heads;
    if (T < 0 || bs < 0 || H <= 0 || !a->q || !a->k_extend || !a->v_extend || !a->qo_indptr || !a->kv_indptr ||
        !a->o || (a->num_kv_indices > 0 && (!a->kv_indices || !a->kv_buffer))) {
        mla_error_set(err, "amd emu: missing tensors or negative sizes");
        return MLA_ERR_INVALID;
    }
    if (bs == 0 || T == 0)
        return MLA_OK;

    // Extents: the last row of each tensor ends at its row start + width.
    auto extent = [](long long rows, long long stride_row, long long inner_rows, long long stride_inner,
                     long long width) -> size_t {
        if (rows <= 0)
            return 0;
        return (size_t)((rows - 1) * stride_row + (inner_rows - 1) * stride_inner + width) * 2;
    };
    const size_t q_b = extent(T, a->q_stride_tok, H, a->q_stride_head, s->head_dim);
    const size_t k_b = extent(T, a->k_stride_tok, s->num_kv_heads, a->k_stride_head, s->head_dim);
    const size_t v_b = extent(T, a->v_stride_tok, s->num_kv_heads, a->v_stride_head, s->v_head_dim);
    // extent() counts bf16 elements; an fp8 pool has one byte per element.
    const size_t kv_esize = mla_kv_dtype_size((mla_kv_dtype)a->kv_dtype);
    if (kv_esize == 0) {
        mla_error_set(err, "amd emu: kv_dtype %d is no mla_kv_dtype", a->kv_dtype);
        return MLA_ERR_INVALID;
    }
    const size_t kv_b =
        extent(kv_pool_slots, a->kv_stride_slot, s->num_kv_heads, a->kv_stride_head, s->kv_dim) / 2 * kv_esize;
    const size_t o_b = extent(T, a->o_stride_tok, H, a->o_stride_head, s->v_head_dim);
    const size_t lse_b = a->lse ? (size_t)((T - 1) * a->lse_stride_tok + H) * 4 : 0;

    Bufs B;
    mla_gpu_args d = *a;
    // An input's allocation is rounded up to 16 bytes: a buffer ends at its
    // guard, so an odd size (an empty pool: 1 byte) started it misaligned,
    // and the tiers declined "kv_buffer is not 16-byte aligned" where a
    // device allocation is aligned. A read past the end by a row or a 16-byte
    // chunk still reaches the guard; the outputs keep their exact size.
    auto upload = [&](const void *src, size_t bytes, const char *name) -> void * {
        void *p = B.add(bytes ? (bytes + 15) / 16 * 16 : 16, 0, name);
        if (p && src && bytes)
            memcpy(p, src, bytes);
        if (p)
            mla_emu::set_flags(p, mla_emu::BUF_READONLY); // the kernels only read inputs
        return p;
    };
    d.q = (const mla_bf16 *)upload(a->q, q_b, "q");
    d.k_extend = (const mla_bf16 *)upload(a->k_extend, k_b, "k_extend");
    d.v_extend = (const mla_bf16 *)upload(a->v_extend, v_b, "v_extend");
    d.kv_buffer = upload(a->kv_buffer, kv_b, "kv_buffer");
    d.qo_indptr = (const int32_t *)upload(a->qo_indptr, (size_t)(bs + 1) * 4, "qo_indptr");
    d.kv_indptr = (const int32_t *)upload(a->kv_indptr, (size_t)(bs + 1) * 4, "kv_indptr");
    d.kv_indices = (const int64_t *)upload(a->kv_indices, (size_t)a->num_kv_indices * 8, "kv_indices");
    d.sinks = a->sinks ? (const float *)upload(a->sinks, (size_t)H * 4, "sinks") : nullptr;
    d.o = (mla_bf16 *)B.add(o_b, 0, "o");
    d.lse = a->lse ? (float *)B.add(lse_b, 0, "lse") : nullptr;
    if (!d.q || !d.k_extend || !d.v_extend || !d.kv_buffer || !d.qo_indptr || !d.kv_indptr || !d.kv_indices ||
        (a->sinks && !d.sinks) || !d.o || (a->lse && !d.lse)) {
        mla_error_set(err, "amd emu: out of memory for the emulator buffers");
        return MLA_ERR_NOMEM;
    }
    // Outputs start as NaN: a row the kernels skip shows up in the comparison.
    memset(d.o, 0xff, o_b);
    if (d.lse)
        memset(d.lse, 0xff, lse_b);

    (void)flags; // none defined for mla_amd_emu_run (MLA_AMD_EMU_SHORT_POOL is the backend entry's)
    mla_emu_tier_run r;
    memset(&r, 0, sizeof r);
    r.g = &d;
    r.tier = tier;
    run(r);
    if (info) {
        info->fault = r.status;
        snprintf(info->launches, sizeof info->launches, "%s", r.what);
    }
    if (r.status != 0) {
        mla_error_set(err, "amd emu %s: %s", arch == MLA_AMD_EMU_GFX950 ? "gfx950" : "gfx942", r.msg);
        // A decline is the tier's answer, judged as one (DECLINED, or a FAIL
        // where SPEC section 3 says accept), not a kernel fault; so is the
        // library's rejection of invalid arguments.
        return r.declined ? MLA_ERR_DECLINED : r.invalid ? MLA_ERR_INVALID : MLA_ERR_RUNTIME;
    }
    memcpy(a->o, d.o, o_b);
    if (a->lse)
        memcpy(a->lse, d.lse, lse_b);
    return MLA_OK;
}

extern "C" mla_status mla_amd_emu_run(const mla_gpu_args *a, int64_t kv_pool_slots, mla_gpu_tier tier,
                                      mla_amd_emu_arch arch, unsigned flags, mla_amd_emu_info *info,
                                      mla_error *err)
{
    return mla_amd_emu_run_with(arch == MLA_AMD_EMU_GFX950 ? mla_emu_gfx950::emu_run_tier
                                                           : mla_emu_gfx942::emu_run_tier,
                                a, kv_pool_slots, tier, arch, flags, info, err);
}

extern "C" mla_status mla_amd_emu_backend_run(const mla_fixture *fx, int tier, mla_amd_emu_arch arch,
                                              unsigned flags, mla_bf16 *o_host, float *lse_host, mla_error *err)
{
    if (!fx || !o_host) {
        mla_error_set(err, "mla_amd_emu_backend_run: NULL fixture or output");
        return MLA_ERR_INVALID;
    }
    mla_gpu_args a;
    mla_gpu_args_from_fixture(fx, o_host, lse_host, &a);
    int64_t slots = fx->pool_slots;
    if (flags & MLA_AMD_EMU_SHORT_POOL) {
        int64_t hi = -1;
        for (int64_t t = 0; t < fx->num_kv_indices; ++t)
            hi = fx->kv_indices[t] > hi ? fx->kv_indices[t] : hi;
        if (hi >= 0)
            slots = hi;
    }
    mla_amd_emu_info info;
    return mla_amd_emu_run(&a, slots, (mla_gpu_tier)tier, arch, flags & ~MLA_AMD_EMU_SHORT_POOL, &info, err);
}
