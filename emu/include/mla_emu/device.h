/* Device header of the wave64 emulator (emu/README.md): the AMD kernels,
 * unchanged, compiled by the host compiler (clang++-22) for an emulated
 * gfx942 or gfx950. Force-included (-include) before the kernel source; it
 * stands in for hip/amd/hip_minimal.h (whose include guard it defines, so
 * compat.h's #include of that header becomes empty; if that guard is ever
 * renamed, both headers define float2 etc. and the build fails loudly).
 *
 * What it maps:
 *   threadIdx / blockIdx / blockDim / gridDim   the current fiber's ids
 *   __shared__                                  only `extern __shared__` arrays
 *       (dynamic LDS), declared through MLA_EMU_LDS_ARRAY so that they name
 *       the runtime's per-workgroup LDS arena; a static __shared__ variable
 *       fails the build (section attribute on a local), never becomes a
 *       silent per-work-item array
 *   __syncthreads, __builtin_amdgcn_s_barrier   workgroup barrier (fiber switch)
 *   MFMA, ds_bpermute, ds_swizzle, readfirstlane, ballot, __shfl*
 *                                               wave-collective steps
 *   mbcnt_lo/hi, workitem/workgroup ids         per-lane values
 * Any other __builtin_amdgcn_* is undeclared on the host target: the build
 * fails. Memory accesses of the kernel code are checked by the runtime via
 * compiler instrumentation (-fsanitize=thread hooks implemented by
 * emu/src/runtime.cpp, no TSan runtime linked): every load and store the
 * kernel TU makes is classified as LDS, private (own fiber stack) or global
 * (registered allocations) before it happens. */
#ifndef MLA_EMU_DEVICE_H
#define MLA_EMU_DEVICE_H

#if !defined(__clang__) || !defined(__cplusplus)
#error "the emulated kernels need clang++ (ext_vector_type, __bf16 vectors): use clang++-22"
#endif
#if !defined(__gfx942__) && !defined(__gfx950__)
#error "define __gfx942__ or __gfx950__ to pick the emulated target"
#endif

#define MLA_HIP_MINIMAL_H 1 /* hip/amd/hip_minimal.h: replaced by this header */
#define MLA_TARGET_AMD_EMU 1

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "mla_emu/runtime.h"

#define __global__
#define __device__
#define __host__
/* Clang accepts a section attribute on an extern redeclaration (warning,
 * silenced here) and rejects it on a local variable: static __shared__
 * arrays, which this emulator does not place in LDS, fail the build. */
#pragma clang diagnostic ignored "-Wsection"
#define __shared__ __attribute__((section("mla_emu_lds")))
#define __forceinline__ inline __attribute__((always_inline))
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)

/* Declare, at namespace scope before the kernel source, each `extern
 * __shared__` array the kernels use: it then names the runtime's LDS arena. */
#define MLA_EMU_LDS_ARRAY(type, name) extern type name[] __asm__("mla_emu_lds_arena")

#ifndef INFINITY
#define INFINITY (__builtin_inff())
#endif

struct float2 {
    float x, y;
};
struct float4 {
    float x, y, z, w;
};
struct uint4 {
    unsigned int x, y, z, w;
};
struct alignas(8) uint2 {
    unsigned int x, y;
};
static inline float2 make_float2(float x, float y)
{
    return float2{x, y};
}
static inline uint2 make_uint2(unsigned x, unsigned y)
{
    return uint2{x, y};
}
static inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w)
{
    return uint4{x, y, z, w};
}
static inline float __uint_as_float(unsigned int u)
{
    return __builtin_bit_cast(float, u);
}
static inline unsigned int __float_as_uint(float f)
{
    return __builtin_bit_cast(unsigned int, f);
}
/* The device's fast intrinsics are approximations; the host's libm is the
 * correctly rounded limit of them (emu/README.md: numerics). Macros: glibc
 * declares functions of these names itself. */
#define __expf(x) expf(x)
#define __logf(x) logf(x)
#define __log2f(x) log2f(x)

#define threadIdx (::mla_emu::thread_idx())
#define blockIdx (::mla_emu::block_idx())
#define blockDim (::mla_emu::block_dim())
#define gridDim (::mla_emu::grid_dim())
#define warpSize 64

#define __syncthreads() ::mla_emu::barrier(__FILE__, __LINE__)
#define __builtin_amdgcn_s_barrier() ::mla_emu::barrier(__FILE__, __LINE__)
/* Emulation is sequentially consistent: fences order nothing further. */
#define __builtin_amdgcn_fence(order, scope) ((void)(order), (void)(scope))
#define __builtin_amdgcn_workitem_id_x() (::mla_emu::thread_idx().x)
#define __builtin_amdgcn_workitem_id_y() (::mla_emu::thread_idx().y)
#define __builtin_amdgcn_workitem_id_z() (::mla_emu::thread_idx().z)
#define __builtin_amdgcn_workgroup_id_x() (::mla_emu::block_idx().x)
#define __builtin_amdgcn_workgroup_id_y() (::mla_emu::block_idx().y)
#define __builtin_amdgcn_workgroup_id_z() (::mla_emu::block_idx().z)
/* mbcnt: acc + number of set bits of mask below this lane (lo: lanes 0-31,
 * hi: lanes 32-63). Per-lane, no exchange. */
#define __builtin_amdgcn_mbcnt_lo(mask, acc) (::mla_emu::mbcnt_lo((mask), (acc)))
#define __builtin_amdgcn_mbcnt_hi(mask, acc) (::mla_emu::mbcnt_hi((mask), (acc)))

#define __builtin_amdgcn_ds_bpermute(addr, data) (::mla_emu::ds_bpermute((addr), (data)))
#define __builtin_amdgcn_ds_swizzle(data, pattern) (::mla_emu::ds_swizzle<(pattern)>((data)))
#define __builtin_amdgcn_readfirstlane(v) (::mla_emu::readfirstlane((v)))
#define __builtin_amdgcn_ballot_w64(pred) (::mla_emu::ballot((pred)))

#define __builtin_amdgcn_mfma_f32_32x32x8bf16_1k(a, b, c, cbsz, abid, blgp)                      \
    (::mla_emu::mfma<::mla_emu::MFMA_F32_32X32X8_BF16_1K, (cbsz), (abid), (blgp)>((a), (b), (c)))
#if defined(__gfx950__)
#define __builtin_amdgcn_mfma_f32_32x32x16_bf16(a, b, c, cbsz, abid, blgp)                       \
    (::mla_emu::mfma<::mla_emu::MFMA_F32_32X32X16_BF16, (cbsz), (abid), (blgp)>((a), (b), (c)))
#endif

namespace mla_emu {

// One call site per inlined copy: the runtime groups the lanes of a wave
// that wait at the same instruction (its return address) into one step.
template <int KIND, int CBSZ, int ABID, int BLGP, typename AB, typename C>
__attribute__((always_inline)) inline C mfma(AB a, AB b, C c)
{
    static_assert(CBSZ == 0 && ABID == 0 && BLGP == 0,
                  "emu: MFMA cbsz/abid/blgp broadcast modifiers are not implemented");
    static_assert(sizeof(AB) == (KIND == MFMA_F32_32X32X8_BF16_1K ? 8 : 16), "emu: MFMA A/B operand size");
    static_assert(sizeof(C) == 64, "emu: 32x32 MFMA takes 16 fp32 accumulators");
    unsigned char ab[2][16];
    float cc[16], dd[16];
    memcpy(ab[0], &a, sizeof(AB));
    memcpy(ab[1], &b, sizeof(AB));
    memcpy(cc, &c, sizeof(C));
    mfma_step(KIND, ab[0], ab[1], cc, dd);
    C d;
    memcpy(&d, dd, sizeof(C));
    return d;
}

template <int PATTERN> __attribute__((always_inline)) inline int ds_swizzle(int data)
{
    static_assert(PATTERN >= 0 && PATTERN <= 0xffff, "ds_swizzle offset is 16 bits");
    return ds_swizzle_step(data, PATTERN);
}

__attribute__((always_inline)) inline int lane_id()
{
    return (int)(thread_linear() & 63);
}

} // namespace mla_emu

/* HIP's warp shuffles for wave64 (same definitions as ROCm's: a lane out of
 * its width-group, or past it, reads its own value), built on ds_bpermute so
 * the emulated path exercises the same exchange as the device's. */
#define MLA_EMU_SHFL_TYPES(T)                                                                      \
    __attribute__((always_inline)) inline T __shfl(T v, int src, int width = 64)                  \
    {                                                                                              \
        const int self = ::mla_emu::lane_id();                                                     \
        const int idx = (src & (width - 1)) + (self & ~(width - 1));                               \
        return __builtin_bit_cast(T, ::mla_emu::ds_bpermute(idx << 2, __builtin_bit_cast(int, v)));\
    }                                                                                              \
    __attribute__((always_inline)) inline T __shfl_xor(T v, int mask, int width = 64)             \
    {                                                                                              \
        const int self = ::mla_emu::lane_id();                                                     \
        int idx = self ^ mask;                                                                     \
        idx = idx >= ((self + width) & ~(width - 1)) ? self : idx;                                 \
        return __builtin_bit_cast(T, ::mla_emu::ds_bpermute(idx << 2, __builtin_bit_cast(int, v)));\
    }                                                                                              \
    __attribute__((always_inline)) inline T __shfl_up(T v, unsigned int delta, int width = 64)    \
    {                                                                                              \
        const int self = ::mla_emu::lane_id();                                                     \
        int idx = self - (int)delta;                                                               \
        idx = idx < (self & ~(width - 1)) ? self : idx;                                            \
        return __builtin_bit_cast(T, ::mla_emu::ds_bpermute(idx << 2, __builtin_bit_cast(int, v)));\
    }                                                                                              \
    __attribute__((always_inline)) inline T __shfl_down(T v, unsigned int delta, int width = 64)  \
    {                                                                                              \
        const int self = ::mla_emu::lane_id();                                                     \
        int idx = self + (int)delta;                                                               \
        idx = (int)((self & (width - 1)) + delta) >= width ? self : idx;                           \
        return __builtin_bit_cast(T, ::mla_emu::ds_bpermute(idx << 2, __builtin_bit_cast(int, v)));\
    }
MLA_EMU_SHFL_TYPES(float)
MLA_EMU_SHFL_TYPES(int)
MLA_EMU_SHFL_TYPES(unsigned int)
#undef MLA_EMU_SHFL_TYPES

#endif
