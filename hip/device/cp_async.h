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
// The same with a shared-state-space address (no conversion per copy).
__device__ __forceinline__ void cp_async16_s(uint32_t s, const void *gsrc, int src_bytes)
{
#if defined(MLA_TARGET_NVIDIA)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gsrc),
                 "r"(src_bytes));
#else
    (void)s;
    (void)gsrc;
    (void)src_bytes;
#endif
}
// 8-byte variant (cp.async.ca: .cg takes 16 bytes only), shared-state-space
// address; NVIDIA only (the fp8 gather of the warp-specialized kernel).
__device__ __forceinline__ void cp_async8_s(uint32_t s, const void *gsrc, int src_bytes)
{
#if defined(MLA_TARGET_NVIDIA)
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(s), "l"(gsrc),
                 "r"(src_bytes));
#else
    (void)s;
    (void)gsrc;
    (void)src_bytes;
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
template <int N> __device__ __forceinline__ void cp_async_wait_group()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
#endif

} // namespace mla_dev

#endif
