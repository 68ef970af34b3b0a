// bf16 conversions and the partial-output element types (bf16 for the fast
// tier, fp32 for the per-head tier). Plain integer and float code: every
// target.
#ifndef MLA_DEVICE_BF16_H
#define MLA_DEVICE_BF16_H

#include "../config.h"

namespace mla_dev {

__device__ __forceinline__ float bf2f(bf16_t b)
{
    return __uint_as_float(((uint32_t)b) << 16);
}

// The low and high bf16 of a packed pair (a 32-bit word of a bf16 row) as
// floats.
__device__ __forceinline__ float bf2_lo(uint32_t w)
{
    return __uint_as_float(w << 16);
}
__device__ __forceinline__ float bf2_hi(uint32_t w)
{
    return __uint_as_float(w & 0xffff0000u);
}

// Round to nearest even; NaN stays a quiet NaN (as mla_f32_to_bf16).
__device__ __forceinline__ bf16_t f2bf(float f)
{
    uint32_t u = __float_as_uint(f);
    if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0)
        return (bf16_t)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (bf16_t)(u >> 16);
}

__device__ __forceinline__ uint32_t pack_bf2(float lo, float hi)
{
#if defined(MLA_TARGET_NVIDIA) && defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 800)
    uint32_t r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
#else
    return (uint32_t)f2bf(lo) | ((uint32_t)f2bf(hi) << 16);
#endif
}

template <typename PT> struct Partial;
template <> struct Partial<bf16_t> {
    __device__ static void store2(void *base, long long idx, float a, float b)
    {
        *(uint32_t *)((bf16_t *)base + idx) = pack_bf2(a, b);
    }
    __device__ static void load2(const void *base, long long idx, float &a, float &b)
    {
        const uint32_t u = *(const uint32_t *)((const bf16_t *)base + idx);
        a = bf2_lo(u);
        b = bf2_hi(u);
    }
};
template <> struct Partial<float> {
    __device__ static void store2(void *base, long long idx, float a, float b)
    {
        *(float2 *)((float *)base + idx) = make_float2(a, b);
    }
    __device__ static void load2(const void *base, long long idx, float &a, float &b)
    {
        float2 v = *(const float2 *)((const float *)base + idx);
        a = v.x;
        b = v.y;
    }
};

} // namespace mla_dev

#endif
