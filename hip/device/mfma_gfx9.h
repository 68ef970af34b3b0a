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
 * The K-step layer (namespace mla_amd) compiles in clang's HIP device
 * pass, in the host pass of a ROCm build (which parses device code without
 * an arch macro: the gfx942 types stand in, never code-generated), and in
 * the host-compiled wave64 emulator (emu/), which defines __gfx942__ or
 * __gfx950__ itself and supplies the two builtins. Below it, s_tile and
 * PvAcc: the same interface as mma_sm80.h, written against the K step, the
 * same for every CDNA generation. */
#ifndef MLA_DEVICE_MFMA_GFX9_H
#define MLA_DEVICE_MFMA_GFX9_H

#include "../config.h"

#if !defined(MLA_TARGET_NVIDIA)

// Nested in mla_dev: the emulator builds one copy per arch under a renamed
// mla_dev, so the per-arch helpers never collide at link time.
namespace mla_dev {
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

// An operand of zeros (a Q row past the block, columns past D).
__device__ __forceinline__ mfma_ab_t zero_k()
{
    mfma_ab_t r;
#pragma unroll
    for (int j = 0; j < MFMA_KL; ++j)
#if defined(__gfx950__)
        r[j] = __builtin_bit_cast(__bf16, (unsigned short)0);
#else
        r[j] = 0;
#endif
    return r;
}

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
} // namespace mla_dev

namespace mla_dev {

using mla_amd::mfma_ab_t;
using mla_amd::mfma_c_t;

template <int MT, int NW, int PITCH = DP, int PADK = 0>
__device__ __forceinline__ void s_tile(const bf16_t *Qs, const bf16_t *Kb, float *Ss, int D,
                                       int Dn, float scale)
{
    static_assert((16 * MT) % 32 == 0, "AMD tiles are 32 rows");
    static_assert(PADK == 0, "the padded per-head dot is NVIDIA-only");
    constexpr int NWAVE = NW / 2;
    constexpr int RT = 16 * MT / 32; // 32-row tiles; TN == 32 tokens is one column tile
    const int lane = threadIdx.x & 63, wave = threadIdx.x >> 6;
    (void)Dn;
    for (int rt = wave; rt < RT; rt += NWAVE) {
        mfma_c_t acc;
#pragma unroll
        for (int v = 0; v < 16; ++v)
            acc[v] = 0.f;
        const bf16_t *qa = Qs + (rt * 32 + (lane & 31)) * PITCH + mla_amd::k_lane_offset(lane);
        const bf16_t *kb = Kb + (lane & 31) * PITCH + mla_amd::k_lane_offset(lane);
        for (int kk = 0; kk < D; kk += mla_amd::MFMA_K)
            acc = mla_amd::mfma32(mla_amd::load_k(qa + kk), mla_amd::load_k(kb + kk), acc);
#pragma unroll
        for (int v = 0; v < 16; ++v)
            Ss[(rt * 32 + mla_amd::c_row(lane, v)) * SSP + (lane & 31)] = acc[v] * scale;
    }
}

// Q in registers (arch plans with q_regs, config.h): one 32-row tile per
// CTA; wave w holds the K steps w, w + NWAVE, w + 2 NWAVE, ... of its lane's
// row (A operand layout) and computes a partial S over them into score
// buffer w (Ss + w * 32 * SSP); the softmax adds the NWAVE partials.
template <int MT, int NW> struct QRegs {
    static_assert(16 * MT == 32, "Q in registers: one 32-row tile per CTA");
    static constexpr int NWAVE = NW / 2;
    static constexpr int NQ = (D_MAX / mla_amd::MFMA_K + NWAVE - 1) / NWAVE;
    mfma_ab_t q[NQ];

    // row: this lane's Q row (row lane % 32 of the tile), nullptr past the
    // block's rows.
    __device__ __forceinline__ void load(const bf16_t *row, int D)
    {
        const int lane = threadIdx.x & 63, wave = threadIdx.x >> 6;
#pragma unroll
        for (int i = 0; i < NQ; ++i) {
            const int k = (wave + NWAVE * i) * mla_amd::MFMA_K + mla_amd::k_lane_offset(lane);
            q[i] = row && k < D ? mla_amd::load_k(row + k) : mla_amd::zero_k();
        }
    }
};

template <int MT, int NW, int PITCH>
__device__ __forceinline__ void s_tile_qregs(const QRegs<MT, NW> &qr, const bf16_t *Kb, float *Ss,
                                             int D, float scale)
{
    constexpr int NWAVE = NW / 2;
    const int lane = threadIdx.x & 63, wave = threadIdx.x >> 6;
    mfma_c_t acc;
#pragma unroll
    for (int v = 0; v < 16; ++v)
        acc[v] = 0.f;
    const bf16_t *kb = Kb + (lane & 31) * PITCH + mla_amd::k_lane_offset(lane);
#pragma unroll
    for (int i = 0; i < QRegs<MT, NW>::NQ; ++i) {
        const int kk = (wave + NWAVE * i) * mla_amd::MFMA_K; // wave-uniform
        if (kk < D)
            acc = mla_amd::mfma32(qr.q[i], mla_amd::load_k(kb + kk), acc);
    }
    float *S = Ss + wave * 32 * SSP;
#pragma unroll
    for (int v = 0; v < 16; ++v)
        S[mla_amd::c_row(lane, v) * SSP + (lane & 31)] = acc[v] * scale;
}

template <int MT, int NW, int RG, bool CM, int PITCH = DP> struct PvAcc {
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
                acc[i][v] *= Al[rt * 32 + mla_amd::c_row(lane, v)];
            if (ct * 32 >= Dv)
                continue;
            const int kl = mla_amd::k_lane_offset(lane);
            for (int kk = 0; kk < TN; kk += mla_amd::MFMA_K) {
                const mfma_ab_t a = mla_amd::load_k(Ps + (rt * 32 + (lane & 31)) * PSP + kk + kl);
                const mfma_ab_t b = mla_amd::gather_k(Vb + (kk + kl) * PITCH + ct * 32 + (lane & 31), PITCH);
                acc[i] = mla_amd::mfma32(a, b, acc[i]);
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
                f(rt * 32 + mla_amd::c_row(lane, v), col, acc[i][v]);
        }
    }
};

} // namespace mla_dev

#endif // !MLA_TARGET_NVIDIA
#endif
