// AMD matrix-core path (gfx90a / gfx942: wave64, MFMA 32x32x8 bf16): the
// same s_tile / PvAcc interface as mma_sm80.h with MFMA register layouts.
#ifndef MLA_DEVICE_MFMA_GFX9_H
#define MLA_DEVICE_MFMA_GFX9_H

#include "../config.h"

#if !defined(MLA_TARGET_NVIDIA)

namespace mla_dev {

typedef short mfma_ab_t __attribute__((ext_vector_type(4)));
typedef float mfma_c_t __attribute__((ext_vector_type(16)));

// Operand layouts of v_mfma_f32_32x32x8bf16_1k (one block):
//   A[32 x 8]: lane l holds row l%32, k = 4*(l/32) .. +3
//   B[8 x 32]: lane l holds col l%32, k = 4*(l/32) .. +3
//   C[32 x 32]: lane l, register v holds col l%32, row 8*(v/4) + 4*(l/32) + v%4
__device__ __forceinline__ mfma_ab_t lds4(const bf16_t *p)
{
    return *(const mfma_ab_t *)p; // 8-byte aligned: pitches and k offsets are multiples of 4
}

template <int MT, int NW, int PITCH = DP, int PADK = 0>
__device__ __forceinline__ void s_tile(const bf16_t *Qs, const bf16_t *Kb, float *Ss, int D,
                                       int Dn, float scale)
{
    static_assert((16 * MT) % 32 == 0, "AMD tiles are 32 rows");
    static_assert(PITCH == DP && PADK == 0, "the padded per-head dot is NVIDIA-only");
    constexpr int NWAVE = NW / 2;
    constexpr int RT = 16 * MT / 32; // 32-row tiles; TN == 32 tokens is one column tile
    const int lane = threadIdx.x & 63, wave = threadIdx.x >> 6;
    (void)Dn;
    for (int rt = wave; rt < RT; rt += NWAVE) {
        mfma_c_t acc;
#pragma unroll
        for (int v = 0; v < 16; ++v)
            acc[v] = 0.f;
        const bf16_t *qa = Qs + (rt * 32 + (lane & 31)) * DP + 4 * (lane >> 5);
        const bf16_t *kb = Kb + (lane & 31) * DP + 4 * (lane >> 5);
        for (int kk = 0; kk < D; kk += 8)
            acc = __builtin_amdgcn_mfma_f32_32x32x8bf16_1k(lds4(qa + kk), lds4(kb + kk), acc, 0, 0, 0);
#pragma unroll
        for (int v = 0; v < 16; ++v) {
            const int row = rt * 32 + 8 * (v >> 2) + 4 * (lane >> 5) + (v & 3);
            Ss[row * SSP + (lane & 31)] = acc[v] * scale;
        }
    }
}

template <int MT, int NW, int RG, bool CM, int PITCH = DP> struct PvAcc {
    static_assert(PITCH == DP, "AMD: unpadded rows");
    static_assert(!CM, "the swizzled layout is the wgmma path's");
    static constexpr int NWAVE = NW / 2;
    static constexpr int RT = 16 * MT / 32;
    static constexpr int CT = DV_MAX / 32;
    static constexpr int PER = RT * CT / NWAVE; // 32x32 output tiles per wave
    static_assert((16 * MT) % 32 == 0 && (RT * CT) % NWAVE == 0, "AMD PV tiling");
    mfma_c_t acc[PER];

    __device__ __forceinline__ void zero()
    {
#pragma unroll
        for (int i = 0; i < PER; ++i)
#pragma unroll
            for (int v = 0; v < 16; ++v)
                acc[i][v] = 0.f;
    }
    __device__ __forceinline__ static void tile_of(int i, int &rt, int &ct)
    {
        const int id = (threadIdx.x >> 6) * PER + i;
        rt = id / CT;
        ct = id % CT;
    }
    __device__ __forceinline__ void rescale_mma(const float *Al, const bf16_t *Ps, const bf16_t *Vb,
                                                int Dv)
    {
        const int lane = threadIdx.x & 63;
#pragma unroll
        for (int i = 0; i < PER; ++i) {
            int rt, ct;
            tile_of(i, rt, ct);
#pragma unroll
            for (int v = 0; v < 16; ++v)
                acc[i][v] *= Al[rt * 32 + 8 * (v >> 2) + 4 * (lane >> 5) + (v & 3)];
            if (ct * 32 >= Dv)
                continue;
            for (int kk = 0; kk < TN; kk += 8) {
                const mfma_ab_t a = lds4(Ps + (rt * 32 + (lane & 31)) * PSP + kk + 4 * (lane >> 5));
                mfma_ab_t b;
                const bf16_t *vp = Vb + (kk + 4 * (lane >> 5)) * DP + ct * 32 + (lane & 31);
                b[0] = (short)vp[0];
                b[1] = (short)vp[DP];
                b[2] = (short)vp[2 * DP];
                b[3] = (short)vp[3 * DP];
                acc[i] = __builtin_amdgcn_mfma_f32_32x32x8bf16_1k(a, b, acc[i], 0, 0, 0);
            }
        }
    }
    // One column per lane on AMD: pairs are (col, col) with the second value
    // ignored by the callers' odd-column check; hand single columns instead.
    template <typename F> __device__ __forceinline__ void for_each_single(int Dv, F f) const
    {
        const int lane = threadIdx.x & 63;
#pragma unroll
        for (int i = 0; i < PER; ++i) {
            int rt, ct;
            tile_of(i, rt, ct);
            const int col = ct * 32 + (lane & 31);
            if (col >= Dv)
                continue;
#pragma unroll
            for (int v = 0; v < 16; ++v)
                f(rt * 32 + 8 * (v >> 2) + 4 * (lane >> 5) + (v & 3), col, acc[i][v]);
        }
    }
};

} // namespace mla_dev

#endif // !MLA_TARGET_NVIDIA
#endif
