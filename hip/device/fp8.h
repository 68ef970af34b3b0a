// fp8 KV pools (schema 1.1.0): e4m3 codes decoded to bf16 in the producer
// of every tier. Every e4m3 value is exact in bf16 (3 mantissa bits,
// exponents -10..8), so the decode adds no rounding and the tiers' bf16
// error analysis holds unchanged (docs/accuracy.md "fp8 KV pools").
//   e4m3fn  (kv_fmt 1): bias 7, 0x7F / 0xFF NaN, subnormals m * 2^-9;
//   e4m3fnuz (kv_fmt 2): bias 8, 0x80 the only NaN, subnormals m * 2^-10.
#ifndef MLA_DEVICE_FP8_H
#define MLA_DEVICE_FP8_H

#include "../params.h"

namespace mla_dev {

// One code, exact, every target: the reference of the packed path below
// (and what the generic tier and the AMD kernels use).
__device__ __forceinline__ bf16_t fp8_to_bf16(uint32_t x, int fmt)
{
    const bool uz = fmt == KV_E4M3FNUZ;
    const uint32_t em = x & 0x7fu, sign = (x & 0x80u) << 8;
    if (uz ? x == 0x80u : em == 0x7fu)
        return (bf16_t)(sign | 0x7fc0u);
    if (em == 0)
        return (bf16_t)sign; // fnuz has no 0x80 zero: that was its NaN
    const uint32_t bias = uz ? 8u : 7u, e = em >> 3;
    uint32_t m = em & 7u;
    if (e != 0)
        return (bf16_t)(sign | ((e + 127u - bias) << 7) | (m << 4));
    // Subnormal m * 2^(-2 - bias): normalize m = 1.f * 2^k.
    const uint32_t k = m >= 4u ? 2u : (m >= 2u ? 1u : 0u);
    m = (m << (3u - k)) & 7u;
    return (bf16_t)(sign | ((125u - bias + k) << 7) | (m << 4));
}

// Four codes (the bytes of w, lowest first) one at a time: lo holds codes
// 0 and 1, hi codes 2 and 3, lowest half first.
__device__ __forceinline__ void fp8x4_to_bf16x4_scalar(uint32_t w, int fmt, uint32_t &lo, uint32_t &hi)
{
    lo = (uint32_t)fp8_to_bf16(w & 0xffu, fmt) | ((uint32_t)fp8_to_bf16((w >> 8) & 0xffu, fmt) << 16);
    hi = (uint32_t)fp8_to_bf16((w >> 16) & 0xffu, fmt) | ((uint32_t)fp8_to_bf16(w >> 24, fmt) << 16);
}

// Four codes (the bytes of w, lowest first) to four bf16: lo holds codes 0
// and 1, hi codes 2 and 3 (lowest half first), exactly for every code but
// the NaN codes; returns nonzero when w holds a NaN code (then lo / hi are
// wrong for it and the caller re-decodes with fp8_to_bf16: kept off the
// unrolled fast path, whose code size the warp-specialized kernel's
// instruction cache cannot afford 36 times over).
__device__ __forceinline__ uint32_t fp8x4_to_bf16x4_nonan(uint32_t w, int fmt, uint32_t &lo, uint32_t &hi)
{
    const bool uz = fmt == KV_E4M3FNUZ;
    // NaN flags, exact per byte (no carry leaves a byte): e4m3fn em = 0x7F,
    // em + 1 sets bit 7; e4m3fnuz 0x80, em + 0x7F leaves bit 7 clear, sign set.
    const uint32_t em = w & 0x7f7f7f7fu;
    const uint32_t nan = uz ? ~(em + 0x7f7f7f7fu) & w & 0x80808080u : (em + 0x01010101u) & 0x80808080u;
#if defined(MLA_TARGET_NVIDIA) && defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)
    // Each code's 7 exponent-and-mantissa bits placed at the bottom of a
    // bf16's: the e4m3 exponent field e reads as a bf16 exponent field e
    // (bias 127), the 3 mantissa bits as bf16's top 3, e = 0 as a bf16
    // subnormal of the same mantissa. One multiply by 2^(127 - bias) then
    // rescales exactly (a power of two, the product representable; bf16
    // arithmetic keeps subnormals), 2 codes per instruction: per 4 codes 2
    // byte permutes, 6 integer operations and 2 multiplies.
    const uint32_t a = __byte_perm(w, 0u, 0x1404u); // [0, b0, 0, b1]
    const uint32_t b = __byte_perm(w, 0u, 0x3424u); // [0, b2, 0, b3]
    uint32_t l = ((a & 0x7f007f00u) >> 4) | (a & 0x80008000u);
    uint32_t h = ((b & 0x7f007f00u) >> 4) | (b & 0x80008000u);
    const uint32_t k = uz ? 0x7b007b00u : 0x7b807b80u; // 2^119, 2^120
    // fma with -0 (not mul: sm_80 has it too); x * k + (-0) keeps the sign
    // of a zero product.
    asm("fma.rn.bf16x2 %0, %0, %2, %3;\n"
        "fma.rn.bf16x2 %1, %1, %2, %3;\n"
        : "+r"(l), "+r"(h)
        : "r"(k), "r"(0x80008000u));
    lo = l;
    hi = h;
#else
    fp8x4_to_bf16x4_scalar(w, fmt, lo, hi);
#endif
    return nan;
}

// The same with the NaN codes handled: four codes to four bf16, exactly.
__device__ __forceinline__ void fp8x4_to_bf16x4(uint32_t w, int fmt, uint32_t &lo, uint32_t &hi)
{
    if (fp8x4_to_bf16x4_nonan(w, fmt, lo, hi)) {
        fp8x4_to_bf16x4_scalar(w, fmt, lo, hi);
    }
}

// Eight codes (8 bytes) to one 16-byte chunk of 8 bf16, exactly.
__device__ __forceinline__ uint4 fp8x8_to_bf16x8(uint2 w, int fmt)
{
    uint4 r;
    fp8x4_to_bf16x4(w.x, fmt, r.x, r.y);
    fp8x4_to_bf16x4(w.y, fmt, r.z, r.w);
    return r;
}

} // namespace mla_dev

#endif
