// NVIDIA mma.sync path (sm_80+): ldmatrix fragments, m16n8k16 bf16 MMA, and
// the two tile products of one KV tile built on them (s_tile, PvAcc). The
// AMD build gets the same interface from mfma_gfx9.h.
//   s_tile:  Ss[ROWS][TN] (fp32, times scale) = Qs[ROWS][D] . Ks[TN][D]^T
//   PvAcc:   acc[ROWS][DV_MAX] += Ps[ROWS][TN] . Ks[TN][0:Dv] with a row
//            rescale before, and an epilogue that hands each (row, col pair)
//            of the accumulator to a callback.
#ifndef MLA_DEVICE_MMA_SM80_H
#define MLA_DEVICE_MMA_SM80_H

#include "../config.h"
#include "smem_layout.h"

#if defined(MLA_TARGET_NVIDIA)

namespace mla_dev {

__device__ __forceinline__ void ldsm_x4(uint32_t &r0, uint32_t &r1, uint32_t &r2, uint32_t &r3,
                                        const void *p)
{
    uint32_t s = (uint32_t)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(s));
}
__device__ __forceinline__ void ldsm_x2(uint32_t &r0, uint32_t &r1, const void *p)
{
    uint32_t s = (uint32_t)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
                 : "=r"(r0), "=r"(r1)
                 : "r"(s));
}
__device__ __forceinline__ void ldsm_x4_t(uint32_t &r0, uint32_t &r1, uint32_t &r2, uint32_t &r3,
                                          const void *p)
{
    uint32_t s = (uint32_t)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(s));
}
__device__ __forceinline__ void mma16816(float *c, uint32_t a0, uint32_t a1, uint32_t a2,
                                         uint32_t a3, uint32_t b0, uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// S = Q K^T: warps tile the ROWS x TN scores as MT row tiles x SCG token
// groups (16 x 16 per warp for 96 rows and 12 warps). PITCH: smem row pitch
// of Q and K. PADK > 0 (the per-head baseline): one dot over PADK columns,
// the zero-filled columns past D included, as upstream's padded 1024 dot.
template <int MT, int NW, int PITCH = DP, int PADK = 0>
__device__ __forceinline__ void s_tile(const bf16_t *Qs, const bf16_t *Kb, float *Ss, int D,
                                       int Dn, float scale)
{
    constexpr int SCG = NW / MT;
    constexpr int S_NT = TN / (8 * SCG);
    static_assert(NW % MT == 0 && TN % (8 * SCG) == 0, "S tiling");
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int sr = warp / SCG, sc = warp % SCG;
    float acc[S_NT][4];
#pragma unroll
    for (int j = 0; j < S_NT; ++j)
        acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
    const bf16_t *qa = Qs + (sr * 16 + (lane & 15)) * PITCH + (lane >> 4) * 8;
    const int mi = lane >> 3, r8 = lane & 7;
    const int tok_base = sc * S_NT * 8;
    // The 512-wide nope product and the 64-wide rope product: both are whole
    // k16 steps, so 576 costs 36 steps with no padding to a power of two.
    for (int part = 0; part < (PADK ? 1 : 2); ++part) {
        const int k_lo = part == 0 ? 0 : Dn, k_hi = PADK ? PADK : part == 0 ? Dn : D;
#pragma unroll 4
        for (int kk = k_lo; kk < k_hi; kk += 16) {
            uint32_t a0, a1, a2, a3;
            ldsm_x4(a0, a1, a2, a3, qa + kk);
            if constexpr (S_NT % 2 == 0) {
#pragma unroll
                for (int np = 0; np < S_NT / 2; ++np) {
                    uint32_t b0, b1, b2, b3;
                    const bf16_t *kp =
                        Kb + (tok_base + np * 16 + (mi >> 1) * 8 + r8) * PITCH + kk + (mi & 1) * 8;
                    ldsm_x4(b0, b1, b2, b3, kp);
                    mma16816(acc[2 * np], a0, a1, a2, a3, b0, b1);
                    mma16816(acc[2 * np + 1], a0, a1, a2, a3, b2, b3);
                }
            } else {
                uint32_t b0, b1;
                const bf16_t *kp = Kb + (tok_base + r8) * PITCH + kk + (mi & 1) * 8;
                ldsm_x2(b0, b1, kp);
                mma16816(acc[0], a0, a1, a2, a3, b0, b1);
            }
        }
    }
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int j = 0; j < S_NT; ++j) {
        const int tok = tok_base + j * 8 + 2 * t;
        const int row = sr * 16 + g;
        *(float2 *)(Ss + row * SSP + tok) = make_float2(acc[j][0] * scale, acc[j][1] * scale);
        *(float2 *)(Ss + (row + 8) * SSP + tok) = make_float2(acc[j][2] * scale, acc[j][3] * scale);
    }
}

// O += P V: warps tile ROWS x DV_MAX as RG row groups x CG column groups
// (32 x 128 per warp for 96 rows and 12 warps: 128 fp32 accumulators).
template <int MT, int NW, int RG, bool CM, int PITCH = DP> struct PvAcc {
    static constexpr int CG = NW / RG;
    static constexpr int WM = 16 * MT / RG;
    static constexpr int PMT = WM / 16;
    static constexpr int WN = DV_MAX / CG;
    static constexpr int PNT = WN / 8;
    static_assert(NW % RG == 0 && (16 * MT) % RG == 0 && WM % 16 == 0 && PNT % 2 == 0, "PV tiling");
    float acc[PMT][PNT][4];

    __device__ __forceinline__ void zero()
    {
#pragma unroll
        for (int i = 0; i < PMT; ++i)
#pragma unroll
            for (int j = 0; j < PNT; ++j)
                acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.f;
    }

    __device__ __forceinline__ void rescale_mma(const float *Al, const bf16_t *Ps, const bf16_t *Vb,
                                                int Dv)
    {
        const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
        const int pr = warp / CG, pc = warp % CG;
        const int g = lane >> 2;
#pragma unroll
        for (int i = 0; i < PMT; ++i) {
            const int row = pr * WM + i * 16 + g;
            const float a0 = Al[row], a1 = Al[row + 8];
#pragma unroll
            for (int j = 0; j < PNT; ++j) {
                acc[i][j][0] *= a0;
                acc[i][j][1] *= a0;
                acc[i][j][2] *= a1;
                acc[i][j][3] *= a1;
            }
        }
        const int mi = lane >> 3, r8 = lane & 7;
#pragma unroll
        for (int kk = 0; kk < TN; kk += 16) {
            uint32_t a[PMT][4];
#pragma unroll
            for (int i = 0; i < PMT; ++i)
                ldsm_x4(a[i][0], a[i][1], a[i][2], a[i][3],
                        Ps + (pr * WM + i * 16 + (lane & 15)) * PSP + kk + (lane >> 4) * 8);
#pragma unroll
            for (int np = 0; np < PNT / 2; ++np) {
                const int col0 = pc * WN + np * 16;
                if (col0 < Dv) {
                    uint32_t b0, b1, b2, b3;
                    ldsm_x4_t(b0, b1, b2, b3, Vb + toff<CM, PITCH>(kk + (mi & 1) * 8 + r8, col0 + (mi >> 1) * 8, TN));
#pragma unroll
                    for (int i = 0; i < PMT; ++i) {
                        mma16816(acc[i][2 * np], a[i][0], a[i][1], a[i][2], a[i][3], b0, b1);
                        mma16816(acc[i][2 * np + 1], a[i][0], a[i][1], a[i][2], a[i][3], b2, b3);
                    }
                }
            }
        }
    }

    // f(local_row, col, v0, v1) for the pair (col, col + 1).
    template <typename F> __device__ __forceinline__ void for_each(int Dv, F f) const
    {
        const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
        const int pr = warp / CG, pc = warp % CG;
        const int g = lane >> 2, t = lane & 3;
#pragma unroll
        for (int i = 0; i < PMT; ++i)
#pragma unroll
            for (int j = 0; j < PNT; ++j) {
                const int col = pc * WN + j * 8 + 2 * t;
                if (col < Dv) {
                    const int row = pr * WM + i * 16 + g;
                    f(row, col, acc[i][j][0], acc[i][j][1]);
                    f(row + 8, col, acc[i][j][2], acc[i][j][3]);
                }
            }
    }
};

} // namespace mla_dev

#endif // MLA_TARGET_NVIDIA
#endif
