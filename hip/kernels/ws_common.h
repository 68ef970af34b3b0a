// Device helpers of the warp-specialized stage 1 (stage1_ws.h): the online
// softmax on wgmma accumulator layouts, the O rescale, the draft tile's
// exact path, the P hand-over layout and the S chain (NVIDIA sm_90a).
#ifndef MLA_KERNELS_WS_COMMON_H
#define MLA_KERNELS_WS_COMMON_H

#include "../device/bf16.h"
#include "../device/sync.h"
#include "../device/wgmma_sm90.h"
#include "stage1_common.h"

#ifndef MLA_HIP_MINIMAL
#include <math.h>
#endif

#if defined(MLA_TARGET_NVIDIA)

namespace mla_dev {

// exp2 of the softmax: ex2.approx.ftz, without exp2f's two multiplies that
// rescale results below 2^-126 (weights that small vanish beside the row's
// largest, 1, in l and in bf16 P anyway). On the producer's path: 8% of K3
// bs 32 / 16k (docs/perf/2026-12-01-ws-pvg.md, "The software-pipelined producer").
__device__ __forceinline__ float ws_exp2(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}
// One row's online-softmax step from its block maximum tmax (scaled
// scores): m_run moves to the new running max. Returns the factor
// exp2(m_old - m_use) for what was accumulated before; m_use is the offset
// of the new probabilities: the new max, or 0 for a row whose max is still
// -inf (it has seen nothing: keeps exp2 away from (-inf) - (-inf)).
__device__ __forceinline__ float ws_max_step(float tmax, float &m_run, float &m_use)
{
    const float m_new = fmaxf(m_run, tmax);
    m_use = m_new == -INFINITY ? 0.f : m_new;
    const float alpha = ws_exp2(m_run - m_use);
    m_run = m_new;
    return alpha;
}
// The same over a quad (the four lanes that share a row in the wgmma
// accumulator layouts): tmax, this lane's largest scaled score, becomes the
// quad's first.
__device__ __forceinline__ float ws_quad_max_step(float tmax, float &m_run, float &m_use)
{
    tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, 1));
    tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, 2));
    return ws_max_step(tmax, m_run, m_use);
}
// The quad's sum of this lane's row sum.
__device__ __forceinline__ float ws_quad_sum(float sum)
{
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    return sum + __shfl_xor_sync(0xffffffffu, sum, 2);
}
// Online softmax (base 2) of two rows held as a wgmma m64n32 accumulator
// quarter: acc[4j + 0/1] is row r0, tokens 8j + 2t (+1); acc[4j + 2/3] row
// r0 + 8. The four lanes of a quad share a row. The probabilities stay in
// registers as packed bf16 (pk[h][j]: row r0 + 8h, tokens 8j + 2t, +1) until
// the P tile is free: the next chain's wgmma reuses the accumulators.
// FULL: a whole tile (valid == TN), no key masked: the caller branches once
// per tile, so full tiles skip the 32 compare-selects per thread.
// PROBS: the probabilities go to probs[] as fp32 in acc's order instead of
// pk (probs may be acc itself), for a caller that may pack them only later.
// valid8: the visible tokens of row r0 + 8 when they differ from row r0's
// (the causal draft tile, Stage1Draft); < 0: valid.
template <bool FULL = false, bool PROBS = false>
__device__ __forceinline__ void ws_softmax_rows(const float (&acc)[16], int valid, float scale,
                                                float (&m_run)[2], float (&l_run)[2],
                                                uint32_t (&pk)[2][4], float (&alpha)[2],
                                                float *probs = nullptr, int valid8 = -1)
{
    const int t = threadIdx.x & 3;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        float v[8];
        float tmax = -INFINITY;
        const int vr = h == 1 && valid8 >= 0 ? valid8 : valid;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int tok = 8 * j + 2 * t;
            v[2 * j] = FULL || tok < vr ? acc[4 * j + 2 * h] * scale : -INFINITY;
            v[2 * j + 1] = FULL || tok + 1 < vr ? acc[4 * j + 2 * h + 1] * scale : -INFINITY;
            tmax = fmaxf(tmax, fmaxf(v[2 * j], v[2 * j + 1]));
        }
        float m_use;
        alpha[h] = ws_quad_max_step(tmax, m_run[h], m_use);
        float sum = 0.f;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const float p0 = ws_exp2(v[2 * j] - m_use), p1 = ws_exp2(v[2 * j + 1] - m_use);
            if constexpr (PROBS) {
                probs[4 * j + 2 * h] = p0;
                probs[4 * j + 2 * h + 1] = p1;
            } else {
                pk[h][j] = pack_bf2(p0, p1);
            }
            sum += p0 + p1;
        }
        l_run[h] = l_run[h] * alpha[h] + ws_quad_sum(sum);
    }
}
// O *= alpha for the rows r0 / r0 + 8 of a PV thread's m64n256 accumulators.
// Once a row's running max settles, alpha is exactly 1 (exp2 of 0) and the
// rescale is an identity: skipped per warp. Its 128 multiplies per thread
// compete for the issue slots of each SM sub-partition with the producer
// warp right after P_FULL; skipping them gained 3-5% on the large shapes
// together with the whole-line gather (docs/perf/2026-11-29-ws-kernel.md,
// "Whole-line gather requests and the skipped rescale").
// A NaN alpha is != 1 and still propagates.
__device__ __forceinline__ void ws_rescale_o(float (&acc)[128], float a0, float a1)
{
    if (__any_sync(0xffffffffu, a0 != 1.f || a1 != 1.f)) {
#pragma unroll
        for (int j = 0; j < 32; ++j) {
            acc[4 * j] *= a0;
            acc[4 * j + 1] *= a0;
            acc[4 * j + 2] *= a1;
            acc[4 * j + 3] *= a1;
        }
    }
}
// The draft tile's causal mask (Stage1Draft) for row r0 + h8 of a PV
// thread's m64 layout (r0 = 16 (warp % 4) + lane / 4): draft row i =
// flattened row / H sees drafts 0 .. i; padding rows past H L see all L.
// Recomputed from the special registers where used (asm volatile, so not
// hoisted): kept live across the tile loop, the values spilled 12 bytes of
// the PV warps' registers.
template <int ROWS>
__device__ __forceinline__ int ws_draft_visible(int H, int L, int h8)
{
    uint32_t tx, cy;
    asm volatile("mov.u32 %0, %%tid.x;" : "=r"(tx));
    asm volatile("mov.u32 %0, %%ctaid.y;" : "=r"(cy));
    const int r = (int)cy * ROWS + 16 * (int)((tx >> 5) & 3) + (int)((tx & 31) >> 2) + h8;
    return min(r / H + 1, L);
}
// Whether any of the L draft value rows holds a NaN or Inf in the 256
// columns of a PV warpgroup (vs: the values' stage at the warpgroup's first
// atom; 4 atoms of 32 128-byte token rows, the swizzle only permutes 16-byte
// chunks within a row). Every warp of the warpgroup reads the same 4 L rows
// and so decides alike; the shuffle tells ptxas the result is warp-uniform
// (a wgmma in a branch it cannot prove uniform is serialized, C7520).
__device__ __forceinline__ bool ws_draft_values_nonfinite(const bf16_t *vs, int L)
{
    const unsigned char *b = (const unsigned char *)vs;
    const int lane = threadIdx.x & 31;
    uint32_t bad = 0;
    for (int idx = lane; idx < 4 * L * 8; idx += 32) {
        const int a = idx / (L * 8), j = (idx / 8) % L, c = idx & 7;
        const uint4 w = *(const uint4 *)(b + a * TN * 128 + j * 128 + c * 16);
        const uint32_t x[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
        for (int k = 0; k < 4; ++k)
            bad |= (x[k] & 0x7f80u) == 0x7f80u || (x[k] & 0x7f800000u) == 0x7f800000u;
    }
    return __shfl_sync(0xffffffffu, (int)__any_sync(0xffffffffu, bad != 0), 0) != 0;
}
// O += P V for the draft tile on CUDA cores, each row summing only the
// drafts it sees (vis0 / vis1 for rows r0 / r0 + 8): P in fp32 (the tile's
// probabilities sv, tokens 2 tq + e of its quad's lanes), V from the
// swizzled stage (token j's 16-byte chunk c at c ^ (j & 7)). L <= 8.
__device__ __forceinline__ void ws_draft_pv_exact(float (&acc)[128], const float (&sv)[16], const bf16_t *vs,
                                                  int L, int vis0, int vis1)
{
    const unsigned char *b = (const unsigned char *)vs;
    const int lane = threadIdx.x & 31, tq = lane & 3;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
        if (j >= L)
            break;
        // sv[2 h + e]: row r0 + 8 h, token 2 tq + e of this lane.
        const float p0 = __shfl_sync(0xffffffffu, sv[j & 1], (lane & ~3) | (j >> 1));
        const float p1 = __shfl_sync(0xffffffffu, sv[2 + (j & 1)], (lane & ~3) | (j >> 1));
        const bool s0 = j < vis0, s1 = j < vis1;
#pragma unroll
        for (int jj = 0; jj < 32; ++jj) {
            const uint32_t w = *(const uint32_t *)(b + (jj >> 3) * TN * 128 + j * 128 + (((jj & 7) ^ j) << 4) + 4 * tq);
            const float v0 = bf2_lo(w), v1 = bf2_hi(w);
            acc[4 * jj] = s0 ? fmaf(p0, v0, acc[4 * jj]) : acc[4 * jj];
            acc[4 * jj + 1] = s0 ? fmaf(p0, v1, acc[4 * jj + 1]) : acc[4 * jj + 1];
            acc[4 * jj + 2] = s1 ? fmaf(p1, v0, acc[4 * jj + 2]) : acc[4 * jj + 2];
            acc[4 * jj + 3] = s1 ? fmaf(p1, v1, acc[4 * jj + 3]) : acc[4 * jj + 3];
        }
    }
}
// Compile-time flags for generic lambdas (a tag argument's type).
struct ws_false {
    static constexpr bool value = false;
};
struct ws_true {
    static constexpr bool value = true;
};
// P of the PV operand: the 128-byte swizzled K-major layout of an m64 A
// operand (an atom of 64 columns, 32 used), and each row's rescale factor.
__device__ __forceinline__ void ws_store_rows(int r0, const uint32_t (&pk)[2][4], const float (&alpha)[2], bf16_t *Ps,
                                              float *Al)
{
    const int t = threadIdx.x & 3;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
#pragma unroll
        for (int j = 0; j < 4; ++j)
            *(uint32_t *)(Ps + toff<true>(r0 + 8 * h, 8 * j + 2 * t, 64)) = pk[h][j];
        if (t == 0)
            Al[r0 + 8 * h] = alpha[h];
    }
    // No reconvergence here: what follows is a full-warp shuffle or
    // nbar_sync, which begins with __syncwarp.
}

// S of the 64-row block of Q against the K tile (descriptor db) over
// the 576 columns (36 k16 steps; api.hip runs this kernel only for head_dim
// 576), fully
// unrolled: a rolled loop makes ptxas fence the accumulators in it (C7519;
// each wgmma then waits for the previous one, 15% slower on the 64-row
// shapes). The descriptors advance in place through an asm add (16-byte
// units; no carry out of the address field for shared addresses): written
// as base + immediate, ptxas materializes all 72 of them up front in
// uniform registers and spills (352 bytes at 56 registers).
// The first QR k16 steps take Q from registers (loaded once per piece), the
// rest from shared memory; da is the descriptor of step QR (a multiple of
// 4: an atom boundary).
template <int ROWS, int QR>
__device__ __forceinline__ void ws_s_chain_rq(float (&acc)[16], const uint32_t (&qf)[QR][4], uint64_t da,
                                              uint64_t db)
{
    static_assert(QR > 0 && QR % 4 == 0 && QR < D_MAX / 16, "register k16 steps");
    wg_fence();
    wgmma_m64n32k16_rs<0>(acc, qf[0], db);
#pragma unroll
    for (int k = 1; k < D_MAX / 16; ++k) {
        const uint64_t ib = (k & 3) ? 2 : (TN * 128 >> 4) - 6;
        asm volatile("add.s64 %0, %0, %1;\n" : "+l"(db) : "l"(ib));
        if (k < QR) {
            wgmma_m64n32k16_rs<1>(acc, qf[k < QR ? k : 0], db);
        } else {
            if (k > QR) {
                const uint64_t ia = (k & 3) ? 2 : (ROWS * 128 >> 4) - 6;
                asm volatile("add.s64 %0, %0, %1;\n" : "+l"(da) : "l"(ia));
            }
            wgmma_m64n32k16<1>(acc, da, db);
        }
    }
    wg_commit();
}

} // namespace mla_dev

#endif // MLA_TARGET_NVIDIA
#endif
