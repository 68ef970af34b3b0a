/* The bf16 MFMA K-step of the AMD stage 1, one definition per CDNA
 * generation (SPEC section 9):
 *   gfx90a / gfx942 (CDNA2/3): v_mfma_f32_32x32x8bf16_1k, K = 8 per step,
 *                              4 bf16 of A and of B per lane
 *   gfx950 (CDNA4):            v_mfma_f32_32x32x16_bf16,  K = 16 per step,
 *                              8 bf16 of A and of B per lane
 * Both are one 32x32 block (no cbsz/abid/blgp broadcast), with the same
 * shape of layout, only the K extent per lane differs:
 *   A[32 x K]:  lane l holds row l % 32, k = KL * (l / 32) + j, j < KL
 *   B[K x 32]:  lane l holds col l % 32, k = KL * (l / 32) + j, j < KL
 *   C/D[32x32]: lane l, accumulator v (0..15) holds col l % 32,
 *               row 8 * (v / 4) + 4 * (l / 32) + v % 4
 * where KL = MFMA_K / 2. So a kernel written against MFMA_K, k_lane_offset,
 * load_k and gather_k runs on either with no other change; D (576) and the
 * 32-token tile are multiples of 16.
 *
 * Self-contained on purpose (no #include): it is included inside the
 * kernels' namespace, compiles in clang's HIP device pass, in the host pass
 * of a ROCm build (which parses device code without an arch macro: the
 * gfx942 types stand in, never code-generated), and in the host-compiled
 * wave64 emulator (emu/), which defines __gfx942__ or __gfx950__ itself and
 * supplies the two builtins. */
#ifndef MLA_AMD_MFMA_GFX9_H
#define MLA_AMD_MFMA_GFX9_H

namespace mla_amd {

typedef float mfma_c_t __attribute__((ext_vector_type(16)));

#if defined(__gfx950__)
typedef __bf16 mfma_ab_t __attribute__((ext_vector_type(8)));
constexpr int MFMA_K = 16;
__device__ __forceinline__ mfma_c_t mfma32(mfma_ab_t a, mfma_ab_t b, mfma_c_t c)
{
    return __builtin_amdgcn_mfma_f32_32x32x16_bf16(a, b, c, 0, 0, 0);
}
#elif defined(__gfx942__) || defined(__gfx941__) || defined(__gfx940__) || defined(__gfx90a__) ||   \
    !defined(__HIP_DEVICE_COMPILE__)
typedef short mfma_ab_t __attribute__((ext_vector_type(4)));
constexpr int MFMA_K = 8;
__device__ __forceinline__ mfma_c_t mfma32(mfma_ab_t a, mfma_ab_t b, mfma_c_t c)
{
    return __builtin_amdgcn_mfma_f32_32x32x8bf16_1k(a, b, c, 0, 0, 0);
}
#else
#error "mfma_gfx9.h: no bf16 32x32 MFMA known for this AMD target (gfx90a, gfx942, gfx950 supported)"
#endif

constexpr int MFMA_KL = MFMA_K / 2; // k values per lane (per half-wave)

// First k of lane `lane` within a step (0 for lanes 0-31, KL for 32-63).
__device__ __forceinline__ int k_lane_offset(int lane)
{
    return MFMA_KL * (lane >> 5);
}

// KL consecutive bf16 at p: an A row or a B column stored k-contiguous.
// p must be 2 * KL byte aligned (8 on gfx942, 16 on gfx950).
__device__ __forceinline__ mfma_ab_t load_k(const unsigned short *p)
{
    return *(const mfma_ab_t *)p;
}

// KL bf16 p[0], p[stride], ..., p[(KL-1) * stride]: a B column stored
// row-major (V tile: token-major rows, the column is the output column).
__device__ __forceinline__ mfma_ab_t gather_k(const unsigned short *p, int stride)
{
    mfma_ab_t r;
#pragma unroll
    for (int j = 0; j < MFMA_KL; ++j)
#if defined(__gfx950__)
        r[j] = __builtin_bit_cast(__bf16, p[j * stride]);
#else
        r[j] = (short)p[j * stride];
#endif
    return r;
}

// Row of accumulator v held by lane `lane` (its column is lane % 32).
__device__ __forceinline__ int c_row(int lane, int v)
{
    return 8 * (v >> 2) + 4 * (lane >> 5) + (v & 3);
}

} // namespace mla_amd

#endif
