// Asynchronous global->shared copies (cp.async, sm_80+). On AMD the copy is
// a plain 16-byte load and store, and the group operations are no-ops.
#ifndef MLA_DEVICE_CP_ASYNC_H
#define MLA_DEVICE_CP_ASYNC_H

#include "../config.h"

namespace mla_dev {

// Asynchronous 16-byte global->shared copy; src_bytes 0 fills zeros (tokens
// past a split's end and padded query rows must be 0, never stale smem: a
// stale NaN times a zero probability is NaN).
__device__ __forceinline__ void cp_async16(void *smem_dst, const void *gsrc, int src_bytes)
{
#if defined(MLA_TARGET_NVIDIA)
    uint32_t s = (uint32_t)__cvta_generic_to_shared(smem_dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gsrc),
                 "r"(src_bytes));
#else
    uint4 v = make_uint4(0, 0, 0, 0);
    if (src_bytes)
        v = *(const uint4 *)gsrc;
    *(uint4 *)smem_dst = v;
#endif
}
// The same with a shared-state-space address (no conversion per copy), of
// N = 16 bytes (cp.async.cg) or 8 (cp.async.ca: .cg takes 16 only; the fp8
// gather of the warp-specialized kernel). NVIDIA only.
template <int N>
__device__ __forceinline__ void cp_async_s(uint32_t s, const void *gsrc, int src_bytes)
{
    static_assert(N == 16 || N == 8, "cp.async sizes used here");
#if defined(MLA_TARGET_NVIDIA)
    if constexpr (N == 16)
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gsrc),
                     "r"(src_bytes));
    else
        asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(s), "l"(gsrc),
                     "r"(src_bytes));
#else
    (void)s;
    (void)gsrc;
    (void)src_bytes;
#endif
}
__device__ __forceinline__ void cp_async16_s(uint32_t s, const void *gsrc, int src_bytes)
{
    cp_async_s<16>(s, gsrc, src_bytes);
}
// A global line into L2 (no register result, nothing to wait for): the
// gathers of stage1_pp.h and stage1_pair.h warm a block they will copy
// once its stage frees.
__device__ __forceinline__ void prefetch_l2(const void *gptr)
{
#if defined(MLA_TARGET_NVIDIA)
    asm volatile("prefetch.global.L2 [%0];\n" ::"l"(gptr));
#else
    (void)gptr;
#endif
}
__device__ __forceinline__ void cp_async_commit()
{
#if defined(MLA_TARGET_NVIDIA)
    asm volatile("cp.async.commit_group;\n" ::);
#endif
}
__device__ __forceinline__ void cp_async_wait_all()
{
#if defined(MLA_TARGET_NVIDIA)
    asm volatile("cp.async.wait_group 0;\n" ::);
#endif
}
#if defined(MLA_TARGET_NVIDIA)
// An arrival on the mbarrier at shared address bar once every cp.async this
// thread issued so far has landed (noinc: the barrier's count includes it).
// The consumer still needs fence_proxy_async before wgmma reads the bytes.
__device__ __forceinline__ void cp_async_mbar_arrive(uint32_t bar)
{
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}
template <int N> __device__ __forceinline__ void cp_async_wait_group()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
#endif

} // namespace mla_dev

#endif
