/* Minimal device header for the AMD compile check: clang -x hip -nogpuinc
 * -nogpulib --offload-device-only (SPEC section 9). It maps the few HIP
 * names the kernels use onto clang's AMDGPU builtins; no runtime, no host
 * API, no device library, so the check runs on a machine without ROCm. */
#ifndef MLA_HIP_MINIMAL_H
#define MLA_HIP_MINIMAL_H

#include <stddef.h>
#include <stdint.h>

#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __host__ __attribute__((host))
#define __shared__ __attribute__((shared))
#define __forceinline__ inline __attribute__((always_inline))
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(threads, ...) __attribute__((amdgpu_flat_work_group_size(1, threads)))

#ifndef INFINITY
#define INFINITY (__builtin_inff())
#endif
#ifndef NAN
#define NAN (__builtin_nanf(""))
#endif

struct mla_idx3 {
    unsigned int x, y, z;
};
#define threadIdx                                                                                  \
    (mla_idx3{__builtin_amdgcn_workitem_id_x(), __builtin_amdgcn_workitem_id_y(),                  \
              __builtin_amdgcn_workitem_id_z()})
#define blockIdx                                                                                   \
    (mla_idx3{__builtin_amdgcn_workgroup_id_x(), __builtin_amdgcn_workgroup_id_y(),                \
              __builtin_amdgcn_workgroup_id_z()})

struct float2 {
    float x, y;
};
struct float4 {
    float x, y, z, w;
};
struct uint4 {
    unsigned int x, y, z, w;
};
struct __attribute__((aligned(8))) uint2 {
    unsigned int x, y;
};
__device__ __forceinline__ float2 make_float2(float x, float y)
{
    return float2{x, y};
}
__device__ __forceinline__ uint2 make_uint2(unsigned x, unsigned y)
{
    return uint2{x, y};
}
__device__ __forceinline__ uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w)
{
    return uint4{x, y, z, w};
}

__device__ __forceinline__ float __uint_as_float(unsigned int u)
{
    return __builtin_bit_cast(float, u);
}
__device__ __forceinline__ unsigned int __float_as_uint(float f)
{
    return __builtin_bit_cast(unsigned int, f);
}
__device__ __forceinline__ float fmaxf(float a, float b)
{
    return __builtin_fmaxf(a, b);
}
__device__ __forceinline__ float exp2f(float x)
{
    return __builtin_exp2f(x);
}
__device__ __forceinline__ float __expf(float x)
{
    return __builtin_expf(x);
}
__device__ __forceinline__ float __logf(float x)
{
    return __builtin_logf(x);
}
__device__ __forceinline__ float __log2f(float x)
{
    return __builtin_log2f(x);
}
/* No device libm here: tanh from exp, exact enough for a compile check and
 * correct in the limits (saturates to +-1). */
__device__ __forceinline__ float tanhf(float x)
{
    const float e = __builtin_expf(-2.f * __builtin_fabsf(x));
    const float t = (1.f - e) / (1.f + e);
    return x < 0 ? -t : t;
}

__device__ __forceinline__ void __syncthreads()
{
    __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
    __builtin_amdgcn_s_barrier();
    __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
}

/* Butterfly within groups of `width` lanes of the 64-lane wavefront. */
__device__ __forceinline__ float __shfl_xor(float v, int mask, int width)
{
    const int lane = (int)__builtin_amdgcn_mbcnt_hi(~0u, __builtin_amdgcn_mbcnt_lo(~0u, 0u));
    const int src = (lane & ~(width - 1)) | ((lane ^ mask) & (width - 1));
    return __builtin_bit_cast(float, __builtin_amdgcn_ds_bpermute(src << 2, __builtin_bit_cast(int, v)));
}

#endif
