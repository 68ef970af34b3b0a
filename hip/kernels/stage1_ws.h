// Stage 1 of the fast tier, warp-specialized (NVIDIA sm_90a): a producer
// warpgroup gathers the K/V tiles and computes S and the softmax on wgmma,
// two PV warpgroups accumulate O on wgmma; named barriers hand P over.
#ifndef MLA_KERNELS_STAGE1_WS_H
#define MLA_KERNELS_STAGE1_WS_H

#include "../device/bf16.h"
#include "../device/fp8.h"
#include "../device/sync.h"
#include "../device/mma_sm80.h"
#include "../device/wgmma_sm90.h"
#include "stage1_common.h"

#ifndef MLA_HIP_MINIMAL
#include <math.h>
#endif

#if defined(MLA_TARGET_NVIDIA)

namespace mla_dev {
// ---------------------------------------------------------------------------
// Stage 1, warp-specialized (sm_90a; the default fast path for every 64-row
// block on NVIDIA; 96-row CTAs when the options ask for them, see
// docs/perf-log.md "64-row blocks for the 96-row shapes"). Why: the
// single-role kernel (stage1_mma.h) runs gather -> S -> softmax -> PV of a
// tile one after the other behind __syncthreads, so a CTA is latency-bound
// (docs/perf-log.md "Smallest split for launch-bound calls (first sweep)":
// ~4.3 us per 32-token tile even alone on an SM). Here warpgroup 0 gathers the tiles and computes S on
// wgmma (m64n32k16; 96 rows as two 64-row chains, rows 0-63 and 32-95) with
// the softmax in the wgmma accumulators, while warpgroups 1 and 2 only run
// the PV product, also on wgmma (64 rows: O = P V, m64n256k16; 96 rows:
// O^T = V^T P^T, m64n96k16, since 96 is no multiple of wgmma's 64 rows):
// S of tile t+1 overlaps PV of tile t. The gather runs STG - 1 tiles ahead.
// The roles hand over through two named barriers, both sides bar.sync (a
// bar.arrive would let warpgroup 0 run on, but it waits at the next barrier
// anyway, and compute-sanitizer racecheck models only bar.sync):
//   BAR_P_FULL: warpgroup 0 has written P(t) and alpha(t);
//   BAR_P_FREE: the PV warpgroups are done with P(t) and tile t's K/V stage,
//               which warpgroup 0 then overwrites.
// 96 rows: 192 PV accumulators per thread; setmaxnreg moves registers from
// warpgroup 0 (56) to the PV warpgroups (224) of the 384 x 168 at launch.
// 64 rows: the other way (184 / 160): warpgroup 0 holds most of Q in
// registers for its S chain (RS-form wgmma, docs/perf-log.md "Q in
// registers for the 64-row S chain").
// ---------------------------------------------------------------------------


// Whether the ws-pvg kernel runs the softmax in the PV warpgroups (SC in
// stage1_ws_kernel); MLA_AB_NO_SC builds the pipelined producer instead,
// for A/B runs.
__host__ __device__ constexpr bool ws_softmax_in_pv(bool pvg)
{
#ifdef MLA_AB_NO_SC
    return false && pvg;
#else
    return pvg;
#endif
}

// exp2 of the softmax: ex2.approx.ftz, without exp2f's two multiplies that
// rescale results below 2^-126 (weights that small vanish beside the row's
// largest, 1, in l and in bf16 P anyway). On the producer's path: 8% of K3
// bs 32 / 16k in ws-pvg (docs/perf-log.md, step 24). MLA_AB_EXACT_EX2: exp2f.
__device__ __forceinline__ float ws_exp2(float x)
{
#ifdef MLA_AB_EXACT_EX2
    return exp2f(x);
#else
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
#endif
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
// together with the whole-line gather (docs/perf-log.md, steps 18 and 20).
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
// P layouts of the PV operand: 64 rows, the 128-byte swizzled K-major layout
// of an m64 A operand; 96 rows, K-major without swizzle (8 x 16-byte core
// matrices, 4 per 8-row group: 64-byte rows, the 6 KB that fit).
template <bool SW>
__device__ __forceinline__ void ws_store_rows(int r0, const uint32_t (&pk)[2][4],
                                              const float (&alpha)[2], bf16_t *Ps, float *Al)
{
    const int t = threadIdx.x & 3;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int r = r0 + 8 * h, c = 8 * j + 2 * t;
            *(uint32_t *)(Ps + (SW ? toff<true>(r, c, 64) : (r >> 3) * 256 + (c >> 3) * 64 + (r & 7) * 8 + (c & 7))) =
                pk[h][j];
        }
        if (t == 0)
            Al[r0 + 8 * h] = alpha[h];
    }
    // No reconvergence here: what follows is a full-warp shuffle or
    // nbar_sync, which begins with __syncwarp.
}

// S of one 64-row block of Q (descriptor da) against the K tile (db) over
// the 576 columns (36 k16 steps; api.hip runs this kernel only for head_dim
// 576), fully
// unrolled: a rolled loop makes ptxas fence the accumulators in it (C7519;
// each wgmma then waits for the previous one, 15% slower on the 64-row
// shapes). The descriptors advance in place through an asm add (16-byte
// units; no carry out of the address field for shared addresses): written
// as base + immediate, ptxas materializes all 72 of them up front in
// uniform registers and spills (352 bytes at 56 registers).
template <int ROWS>
__device__ __forceinline__ void ws_s_chain(float (&acc)[16], uint64_t da, uint64_t db)
{
    wg_fence();
    wgmma_m64n32k16<0>(acc, da, db);
#pragma unroll
    for (int k = 1; k < D_MAX / 16; ++k) {
        // Next k16 step: 32 bytes on inside a 64-column atom, else the next
        // atom (ROWS x 128 or TN x 128 bytes) minus the three steps taken.
        const uint64_t ia = (k & 3) ? 2 : (ROWS * 128 >> 4) - 6, ib = (k & 3) ? 2 : (TN * 128 >> 4) - 6;
        asm volatile("add.s64 %0, %0, %2;\nadd.s64 %1, %1, %3;\n" : "+l"(da), "+l"(db) : "l"(ia), "l"(ib));
        wgmma_m64n32k16<1>(acc, da, db);
    }
    wg_commit();
}
// ws_s_chain with the first QR k16 steps taking Q from registers (loaded
// once per CTA), the rest from shared memory; da is the descriptor of step
// QR (a multiple of 4: an atom boundary).
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

// F8: the pool holds fp8 codes (p.kv read as bytes, p.kv_fmt); 64 rows only. The PV
// warpgroups, idle at their barriers most of a tile in the bf16 kernel,
// gather the codes into staging tiles (cp.async) and decode tile t + 2 into
// its bf16 stage while their PV wgmma of tile t runs (config.h ws_stages);
// the P_FREE barrier of tile t publishes it to the producer, whose S chain
// reads it two iterations later. Each thread decodes exactly the bytes it
// copied, so the staging tiles need no barrier of their own. (Decoding in
// the producer added its ~2000 cycles a tile to the producer-bound tile
// period: docs/perf-log.md "fp8 pools".)
// PVG (bf16, 64 rows; fast_kernel ws-pvg): five K/V stages and, by default
// (SC below), the softmax in the PV warpgroups: the producer gathers and
// issues the S chains only, handing raw scores over (BAR_P_FULL: S(t)
// written; BAR_P_FREE: the PV warps have read it). With MLA_AB_NO_SC
// the earlier form: the PV warpgroups gather the bf16 tiles, issuing tile
// t + STG - 1 into the stage tile t - 1 left while their PV wgmma of tile t
// runs, and the producer pipelines S with its softmax and the P stores.
template <int MT, int NPW, bool F8, bool PVG>
__global__ void __launch_bounds__((NPW + 4) * 32, 1) stage1_ws_kernel(Stage1Params p, Stage1Draft dr)
{
    constexpr int ROWS = 16 * MT;
    constexpr int NT = (NPW + 4) * 32;
    static_assert(ROWS == 64 || ROWS == 96, "warp-specialized stage 1 takes 64 or 96 rows");
    static_assert(!F8 || ROWS == 64, "fp8 pools: 64-row blocks only");
    static_assert(!PVG || (ROWS == 64 && !F8), "PV-warp gather: bf16, 64-row blocks");
    constexpr bool TWO = ROWS == 96; // second wgmma chain: rows 32-95, keeps 64-95
    // PVG: a fifth stage in Q's nope atoms 0-4 (see stage_el below).
    constexpr int STG = PVG ? 5 : ws_stages(ROWS, F8);
    // SC (PVG's kernel): the softmax runs in the PV warpgroups (docs/perf-log.md,
    // step 26). The producer only issues the S chains and hands the raw
    // scores over through shared memory; each PV warpgroup runs the softmax
    // of the whole tile (the same rows as its accumulators: the m64 layouts
    // match thread for thread) and takes P from registers (RS-form wgmma).
    // MLA_AB_NO_SC builds the earlier pipelined producer for A/B runs.
    constexpr bool SC = ws_softmax_in_pv(PVG);
    // Tiles gathered ahead. SC: 3 (by the producer), into tile t - 2's
    // stage, the newest one both PV warpgroups are known to be done with at
    // P_FULL(t) (each waited for its PV(t - 2) before P_FREE(t - 1)).
    constexpr int GA = SC ? 3 : STG - 1;
    // PV on wgmma in two warpgroups. 64 rows: O[64 x 512] as m64n256k16
    // (256 output columns each, 128 accumulators). 96 rows do not fit
    // wgmma's 64-row blocks, so the product is swapped: O^T[512 x 96] =
    // V^T P^T as m64n96k16 over four 64-column dv blocks per warpgroup (192
    // accumulators; setmaxnreg gives the PV warps 224 registers).
    constexpr bool PVWG = ROWS == 64;
    static_assert(NPW == 8, "PV: two warpgroups");
    // P: 64 rows, 128-byte swizzled K-major (an atom of 64 columns, 32
    // used); 96 rows, K-major without swizzle (64-byte rows).
    constexpr Stage1Smem SM = stage1_ws_smem_plan(ROWS, F8);

    // Element offset of tile t's K/V stage from Ks. PVG: the fifth stage
    // (t % 5 == 4) lies over Q's atoms 0-4 at the start of shared memory
    // (40 of the 56 KB of nope columns the producer holds in registers,
    // QR = 28 below; its shared-memory steps read atoms 7 and 8 only). Tile
    // 4, the first there, is gathered after the producer's register loads
    // of Q: SC's producer gathers it itself after P_FREE(1); with
    // MLA_AB_NO_SC the PV warps gather it after P_FULL(0), four tiles ahead,
    // so that tile t + 2 has two periods to land before the P_FULL(t) that
    // publishes it (docs/perf-log.md, steps 24 and 26).
    auto stage_el = [&](int t) -> int {
        const int st = t % STG;
        if constexpr (PVG)
            return st == 4 ? -(int)(SM.kv - SM.q) / 2 : st * TN * D_MAX;
        return st * TN * D_MAX;
    };
    extern __shared__ __align__(16) unsigned char smem_raw[];
    unsigned char *base =
        smem_raw + ((1024u - ((uint32_t)__cvta_generic_to_shared(smem_raw) & 1023u)) & 1023u);
    bf16_t *Qs = (bf16_t *)(base + SM.q);
    bf16_t *Ks = (bf16_t *)(base + SM.kv);
    bf16_t *Ps = (bf16_t *)(base + SM.p); // 1024-byte aligned
    float *Al = (float *)(base + SM.al);
    float *Linv = (float *)(base + SM.linv);
    float *Lse = (float *)(base + SM.lse);
    // The two Q descriptors, re-read from shared memory every tile: ptxas
    // would otherwise hoist all tile-invariant Q descriptors out of the
    // tile loop into registers.
    uint64_t *Qdesc = (uint64_t *)(base + SM.qdesc);

    pdl_launch_dependents();
    const int s = blockIdx.x, y = blockIdx.y, b = blockIdx.z;
    const int tid = threadIdx.x;
    const int kv0 = p.kv_indptr[b];
    const int P = p.kv_indptr[b + 1] - kv0;
    const int act = active_splits(p.split_mode, P, p.num_splits, p.min_split);
    if (s >= act)
        return; // whole block: stage 2 reads active splits only
    int beg, end;
    split_range(p.split_mode, P, p.num_splits, p.min_split, s, beg, end);
    const int n = end - beg;
    const int q0 = p.qo_indptr[b];
    const int D = p.D;
    // The draft block (Stage1Draft; SC's kernel only): after its prefix
    // tiles, the last split's CTA runs one more tile, td = ntiles, outside
    // the tile loops (whose code stays that of the prefix alone: a draft
    // tile inside them cost 5-30%, docs/perf-log.md step 30): the L draft
    // keys (k_ext rows, a causal mask per row) in stage td % STG, their
    // values (v_ext rows) in the next stage, both free by then.
    const bool draft = SC && dr.on && s == act - 1;
    if (tid == 0) {
        Qdesc[0] = wg_desc_sw128((uint32_t)__cvta_generic_to_shared(Qs));
        Qdesc[1] = wg_desc_sw128((uint32_t)__cvta_generic_to_shared(Qs + toff<true>(32, 0, ROWS)));
    }
    const int chunks = D >> 3;
    const int ntiles = (n + TN - 1) / TN;
    const int td = ntiles; // the draft tile, when draft
    // Warp-uniform for the compiler as well (a broadcast, as CUTLASS does):
    // wgmma inside a branch it cannot prove uniform is serialized (C7520).
    const int wg_idx = __shfl_sync(0xffffffffu, tid >> 7, 0);
    const bool producer = wg_idx == 0;

    // Gather (warpgroup 0): 8 threads per token, tokens my_tok and
    // my_tok + 16 of a tile, their slots looked up a tile ahead. Thread
    // (my_tok, my_c) copies chunk my_c of each 128-byte atom j < 9 of both
    // rows: a warp's request is 4 whole 128-byte lines (with 4 threads per
    // token it was 8 half lines, docs/perf-log.md "Whole-line gather
    // requests"); the swizzled destination is one per-thread offset plus
    // immediates ((my_tok + 16) & 7 == my_tok & 7), the sources a base per
    // row plus immediates (D == 576 here). Address arithmetic per chunk was
    // half of warpgroup 0's time (ncu source counters).
    static_assert(TN == 32 && D_MAX == 576, "gather unrolling");
    const int my_tok = (tid & 127) >> 3, my_c = tid & 7;
    struct Slots {
        int64_t a, b; // tokens my_tok, my_tok + 16; -1: none (zero fill)
    };
    auto slot_of = [&](int t) -> Slots {
        const int gt = beg + t * TN + my_tok;
        const bool in = t < ntiles;
        return {in && gt < end ? p.kv_indices[kv0 + gt] : (int64_t)-1,
                in && gt + 16 < end ? p.kv_indices[kv0 + gt + 16] : (int64_t)-1};
    };
    const uint32_t ks_base = (uint32_t)__cvta_generic_to_shared(Ks);
    const uint32_t dst_row = (uint32_t)(my_tok * 128 + ((my_c ^ (my_tok & 7)) << 4));
    auto load_tile = [&](int t, Slots sl) {
        if (t >= ntiles)
            return;
        const unsigned char *sa = (const unsigned char *)(p.kv + (sl.a >= 0 ? sl.a : 0) * p.kv_ss + my_c * 8);
        const unsigned char *sb = (const unsigned char *)(p.kv + (sl.b >= 0 ? sl.b : 0) * p.kv_ss + my_c * 8);
        const uint32_t st = ks_base + (uint32_t)(stage_el(t) * 2) + dst_row;
        const int na = sl.a >= 0 ? 16 : 0, nb = sl.b >= 0 ? 16 : 0;
#pragma unroll
        for (int j = 0; j < D_MAX / 64; ++j) {
            cp_async16_s(st + (uint32_t)(j * TN * 128), sa + 128 * j, na);
            cp_async16_s(st + (uint32_t)(j * TN * 128 + 16 * 128), sb + 128 * j, nb);
        }
    };

    // SC: the producer gathers by tile parity (warps 0-1 even tiles, 2-3
    // odd), 64 threads a tile: 8 per token, tokens my_tok8 + 8k (k < 4),
    // each with load_tile's whole-line requests and swizzle ((my_tok8 + 8k)
    // & 7 == my_tok8 & 7).
    const int my_tok8 = (tid & 63) >> 3;
    struct Half {
        int64_t s[4]; // -1: none (zero fill)
    };
    auto half_of = [&](int t) -> Half {
        Half h;
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            const int gt = beg + t * TN + my_tok8 + 8 * k;
            h.s[k] = t < ntiles && gt < end ? p.kv_indices[kv0 + gt] : (int64_t)-1;
        }
        return h;
    };
    const uint32_t dst_half = (uint32_t)(my_tok8 * 128 + ((my_c ^ (my_tok8 & 7)) << 4));
    // The draft tiles in load_half's map: tile td the keys (576 columns),
    // td + 1 the values (512, the last atom zero-filled: v_extend rows must
    // be 512 wide, so api.hip folds only for Dv == 512); tokens past L
    // zero-filled, so that a masked key's zero weight never meets a stale
    // non-finite value. (dr is read where it is used, as p is by
    // load_half: copies would stay live in registers across the tile loop.)
    auto load_draft_half = [&](int t, uint32_t st) {
        const bool val = t != td; // t == td + 1
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            const int j = my_tok8 + 8 * k;
            const bool ok = j < p.L;
            const bf16_t *row = !ok ? dr.k_ext : val ? dr.v_ext + (q0 + j) * dr.v_st : dr.k_ext + (q0 + j) * dr.k_st;
            const unsigned char *src = (const unsigned char *)(row + my_c * 8);
#pragma unroll
            for (int a = 0; a < D_MAX / 64; ++a)
                cp_async16_s(st + (uint32_t)(a * TN * 128 + k * 1024), src + 128 * a,
                             ok && !(val && a == D_MAX / 64 - 1) ? 16 : 0);
        }
    };
    auto load_half = [&](int t, const Half &h) {
        if (t >= ntiles)
            return;
        const uint32_t st = ks_base + (uint32_t)(stage_el(t) * 2) + dst_half;
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            const unsigned char *src =
                (const unsigned char *)(p.kv + (h.s[k] >= 0 ? h.s[k] : 0) * p.kv_ss + my_c * 8);
            const int nb = h.s[k] >= 0 ? 16 : 0;
#pragma unroll
            for (int j = 0; j < D_MAX / 64; ++j)
                cp_async16_s(st + (uint32_t)(j * TN * 128 + k * 1024), src + 128 * j, nb);
        }
    };
    Half half_next{};

    // fp8 (PV warpgroups, thread v = tid - 128 < 256): token v / 8 of the
    // tile, 8-code pieces q = v % 8 + 8j, j < 9, of its row: copied into
    // staging tile t % WS_F8_STAGING, decoded into the bf16 chunk q (atom j,
    // swizzled chunk v % 8 of row v / 8).
    // The fp8 helpers capture copies, never p itself: a closure holding p's
    // address, even unused, made the bf16 instantiation read its parameters
    // through a pointer inside the tile loop (1% slower; PTX compared with
    // the bf16-only kernel).
    const int v8 = tid - 128, tok8 = (v8 >> 3) & (TN - 1), sub8 = v8 & 7;
    const int64_t *const kv_idx = p.kv_indices;
    const uint8_t *const kv8 = (const uint8_t *)p.kv;
    const long long kv_ss = p.kv_ss;
    const int kv_fmt = p.kv_fmt;
    auto slot8_of = [=](int t) -> int64_t {
        const int gt = beg + t * TN + tok8;
        return (t < ntiles && gt < end) ? kv_idx[kv0 + gt] : (int64_t)-1;
    };
    const uint32_t f8_base = (uint32_t)__cvta_generic_to_shared(base + SM.f8) + (uint32_t)(tok8 * D_MAX + sub8 * 8);
    // slot: slot8_of(t), looked up a tile ahead by the caller (waiting for
    // the index load in front of the copies was the PV warps' largest stall).
    auto load_tile8 = [=](int t, int64_t slot) {
        if (t >= ntiles)
            return;
        const bool ok = slot >= 0;
        const uint8_t *src = kv8 + (ok ? slot : 0) * kv_ss + sub8 * 8;
        const uint32_t st = f8_base + (uint32_t)((t % WS_F8_STAGING) * TN * D_MAX);
        const int nb = ok ? 8 : 0;
#pragma unroll
        for (int j = 0; j < D_MAX / 64; ++j)
            cp_async_s<8>(st + 64 * j, src + 64 * j, nb);
    };
    // PVG: the same thread -> (token, piece) map with 16-byte bf16 chunks:
    // chunk sub8 + 8j of the row is atom j, swizzled chunk sub8.
    const uint32_t g16_base = ks_base + (uint32_t)(tok8 * 128 + ((sub8 ^ (tok8 & 7)) << 4));
    auto load_tile16 = [=](int t, int64_t slot) {
        if (t >= ntiles)
            return;
        const bool ok = slot >= 0;
        const uint8_t *src = kv8 + (ok ? slot : 0) * kv_ss * 2 + sub8 * 16;
        const uint32_t st = g16_base + (uint32_t)(stage_el(t) * 2);
        const int nb = ok ? 16 : 0;
#pragma unroll
        for (int j = 0; j < D_MAX / 64; ++j)
            cp_async16_s(st + (uint32_t)(j * TN * 128), src + 128 * j, nb);
    };
    auto decode_tile8 = [=](int t) {
        if (t >= ntiles)
            return;
        const unsigned char *src = base + SM.f8 + (t % WS_F8_STAGING) * TN * D_MAX + tok8 * D_MAX + sub8 * 8;
        // (t % STG: fp8 has no fifth stage, and stage_el here changed this
        // kernel's PTX.)
        unsigned char *dst =
            (unsigned char *)Ks + (t % STG) * TN * D_MAX * 2 + tok8 * 128 + ((sub8 ^ (tok8 & 7)) << 4);
        const int fmt = kv_fmt;
        uint32_t nan = 0;
        // Loads in batches of 3: one shared-memory latency per batch instead
        // of one per piece (ncu: the decode was latency-bound, ~290 cycles a
        // piece); all 9 at once spill (the PV warps hold 128 accumulators).
#pragma unroll
        for (int j0 = 0; j0 < D_MAX / 64; j0 += 3) {
            uint2 w[3];
#pragma unroll
            for (int j = 0; j < 3; ++j)
                w[j] = *(const uint2 *)(src + 64 * (j0 + j));
#pragma unroll
            for (int j = 0; j < 3; ++j) {
                uint4 a;
                nan |= fp8x4_to_bf16x4_nonan(w[j].x, fmt, a.x, a.y);
                nan |= fp8x4_to_bf16x4_nonan(w[j].y, fmt, a.z, a.w);
                *(uint4 *)(dst + (j0 + j) * TN * 128) = a;
            }
        }
        if (nan) {
            // A NaN code among this thread's 72: redo them one at a time (a
            // rolled loop: little code on a path data rarely takes).
#pragma unroll 1
            for (int e = 0; e < D_MAX / 8; ++e)
                *(bf16_t *)(dst + (e >> 3) * TN * 128 + 2 * (e & 7)) = fp8_to_bf16(src[64 * (e >> 3) + (e & 7)], fmt);
        }
    };

    Slots slot_next = {-1, -1};
    int64_t slot8_next = -1;
    if (ntiles > 0 || draft) {
        load_q<ROWS, NT, true, DP>(p, y, q0, chunks, Qs);
        cp_async_commit();
        // (The bf16 branches keep the order of the bf16-only kernel: its
        // code, and speed, are unchanged by the fp8 variant.)
        if (producer) {
            if constexpr (F8 || PVG) {
                if constexpr (SC) {
                    // Tiles 0 .. GA - 1, each by its parity's warps (see
                    // load_half); Q and tiles 0 and 1 landed (chain 1 is
                    // issued before the first hand-over).
                    const int par = (tid >> 6) & 1;
                    for (int t = par; t < GA; t += 2) {
                        load_half(t, half_of(t));
                        cp_async_commit();
                    }
                    half_next = half_of(GA + ((GA + par) & 1)); // its next tile
                    if (par == 0)
                        cp_async_wait_group<1>();
                    else
                        cp_async_wait_group<0>();
                } else {
                    cp_async_wait_all(); // the PV warpgroups gather the tiles
                }
            } else {
                // Tiles 0 .. STG - 2 ahead, one group each; iteration t then
                // issues tile t + STG - 1 into the stage tile t - 1 leaves.
                for (int t = 0; t < STG - 1; ++t) {
                    load_tile(t, slot_of(t));
                    cp_async_commit();
                }
                slot_next = slot_of(STG - 1);
                cp_async_wait_group<STG - 2>(); // Q and tile 0
            }
        } else {
            if constexpr (F8) {
                // Groups: Q, F0, F1, then F2 into F0's staging tile once
                // tile 0 is decoded, F3 into F1's after tile 1. PV iteration
                // t decodes tile t + 2 and issues F(t + 4) into its staging
                // tile.
                const int64_t s2 = slot8_of(2), s3 = slot8_of(3);
                load_tile8(0, slot8_of(0));
                cp_async_commit();
                load_tile8(1, slot8_of(1));
                cp_async_commit();
                slot8_next = slot8_of(4);
                cp_async_wait_group<1>();
                decode_tile8(0);
                load_tile8(2, s2);
                cp_async_commit();
                cp_async_wait_group<1>();
                decode_tile8(1);
                load_tile8(3, s3);
                cp_async_commit();
            } else if constexpr (PVG && !SC) {
                // Tiles 0 .. STG - 2, one group each (as the producer
                // issues them in the other kernels).
                for (int t = 0; t < GA; ++t) {
                    load_tile16(t, slot8_of(t));
                    cp_async_commit();
                }
                slot8_next = slot8_of(GA);
                // Q and tiles 0 and 1: the producer issues the chain of
                // tile 1 before the first hand-over.
                cp_async_wait_group<GA - 2>();
            } else {
                cp_async_wait_all();
            }
        }
        fence_proxy_async();
    }
    __syncwarp();
    __syncthreads();

    // 64 rows: warpgroup 0 keeps Q's k16 steps 0-31 (the 512 nope columns)
    // in registers for the whole CTA, so its S chain reads only K from
    // shared memory on those steps (RS-form wgmma; docs/perf-log.md "Q in
    // registers for the 64-row S chain": 6-9% on the producer-bound shapes). setmaxnreg moves registers to warpgroup 0:
    // 184 there, 160 in the PV warpgroups (of 168 x 384 at launch); all 36
    // steps would need the PV warps below 152, which ptxas refuses. PVG
    // keeps 28 steps (448 columns): its second set of 16 S accumulators
    // does not fit beside 32 (ptxas spilled and serialized the wgmma,
    // C7512); so does SC, whose producer holds one set but gathers.
    constexpr int QR = TWO ? 0 : PVG ? 28 : 32;
    static_assert(!PVG || TN * D_MAX * 2 <= QR / 4 * ROWS * 128, "PVG: the fifth stage lies in Q's register-held atoms");
    // SC: 168 each, as launched (the PV warps hold the scores, their
    // softmax and P beside O; the producer Q, one set of S accumulators and
    // the gather).
    constexpr int RPROD = 184, RPV = (504 - RPROD) / 2;
    if (producer) {
        if constexpr (TWO)
            regs_dec<56>();
        if constexpr (QR > 0 && !SC)
            regs_inc<RPROD>();
        const int w = __shfl_sync(0xffffffffu, tid >> 5, 0), lane = tid & 31;
        uint32_t qf[QR > 0 ? QR : 1][4];
        uint64_t qda = 0;
        if (QR > 0 && (ntiles > 0 || draft)) { // Q was loaded only for a CTA with work
            // ldmatrix x4 of rows 16w .. 16w + 15, columns 16k .. 16k + 15:
            // lanes 0-7 / 8-15 rows 0-7 / 8-15 at column 16k, lanes 16-31
            // the same rows at 16k + 8 (a0..a3 of the A fragment).
            const int lr = 16 * w + (lane & 7) + ((lane >> 3) & 1) * 8;
#pragma unroll
            for (int k = 0; k < QR; ++k)
                ldsm_x4(qf[k][0], qf[k][1], qf[k][2], qf[k][3],
                        Qs + toff<true>(lr, 16 * k + (lane >> 4) * 8, ROWS));
            qda = wg_desc_sw128((uint32_t)__cvta_generic_to_shared(Qs + toff<true>(0, 16 * QR, ROWS)));
        }
        const int rA = 16 * w + (lane >> 2);      // chain A rows rA, rA + 8
        const int rB = 32 + 16 * w + (lane >> 2); // chain B rows (kept for w >= 2)
        float mA[2] = {-INFINITY, -INFINITY}, lA[2] = {0.f, 0.f};
        float mB[2] = {-INFINITY, -INFINITY}, lB[2] = {0.f, 0.f};
        auto kdesc = [&](int t) {
            return wg_desc_sw128((uint32_t)__cvta_generic_to_shared(Ks + stage_el(t)));
        };
        if constexpr (SC) {
            // Per tile: wait for chain t, S(t) out, P_FULL(t), then
            // P_FREE(t), which the PV warps reach once they have read S(t)
            // into registers (their loads are not queued behind the chain's
            // shared-memory reads: step 26), chain t + 1, which overlaps
            // their softmax and PV(t). The chain past the last tile reads a
            // stage nobody writes any more and is discarded (no branch
            // around the wgmma).
            // The producer gathers (the PV warps' copies sat in front of
            // their softmax, step 26), its warps 0-1 the even tiles, 2-3 the
            // odd ones: tile t + 3 into tile t - 2's stage after chain t + 1
            // is issued. The proxy fence waits for every copy of its thread
            // in flight, so each thread fences only the tile it publishes,
            // with none of its own newer than that in flight: half of the
            // warps wait for tile t + 1 (issued two tiles earlier) before
            // P_FULL(t).
            const int par = w >> 1;
            float4 *Sw = (float4 *)Ps + tid;
            float acc[16];
            if (ntiles > 0)
                ws_s_chain_rq<ROWS, QR>(acc, qf, qda, kdesc(0));
            for (int t = 0; t < ntiles; ++t) {
                wg_wait<0>();
#pragma unroll
                for (int j = 0; j < 4; ++j)
                    Sw[128 * j] = make_float4(acc[4 * j], acc[4 * j + 1], acc[4 * j + 2], acc[4 * j + 3]);
                if (((t + 1) & 1) == par) {
                    cp_async_wait_group<0>(); // tile t + 1, this thread's only copies in flight
                    fence_proxy_async();      // wgmma (async proxy) reads it
                }
                nbar_sync(BAR_P_FULL, NT);
                nbar_sync(BAR_P_FREE, NT);
                ws_s_chain_rq<ROWS, QR>(acc, qf, qda, kdesc(t + 1));
                if (((t + GA) & 1) == par) {
                    load_half(t + GA, half_next);
                    cp_async_commit();
                    half_next = half_of(t + GA + 2);
                }
            }
            wg_wait<0>();
            if (draft) {
                // The draft tile: keys into stage td % STG (warps 0-1), values
                // into the next (warps 2-3). Both stages' tiles, td - 5 and
                // td - 4, were done with by both PV warpgroups before they
                // reached P_FREE(td - 1); the discarded chain of tile td
                // finished at the wait above. BAR_DRAFT publishes the copies
                // (every thread fenced its own) to the chain and to PV.
                load_draft_half(td + par, ks_base + (uint32_t)(stage_el(td + par) * 2) + dst_half);
                cp_async_commit();
                cp_async_wait_group<0>();
                fence_proxy_async();
                nbar_sync(BAR_DRAFT, NT);
                ws_s_chain_rq<ROWS, QR>(acc, qf, qda, kdesc(td));
                wg_wait<0>();
#pragma unroll
                for (int j = 0; j < 4; ++j)
                    Sw[128 * j] = make_float4(acc[4 * j], acc[4 * j + 1], acc[4 * j + 2], acc[4 * j + 3]);
                nbar_sync(BAR_P_FULL, NT);
                nbar_sync(BAR_P_FREE, NT);
            }
        } else if constexpr (PVG) {
            // Software-pipelined (docs/perf-log.md, step 24): iteration t
            // issues the S chain of tile t + 1 into the other accumulators
            // and, in the same basic block, the softmax of tile t from the
            // finished ones, so the softmax can run while the warps wait on
            // wgmma issue slots (a chain of 36 m64n32k16 keeps its warps
            // issuing for ~3/4 of its time: hip/tests/wgmma_rate.cu; where
            // ptxas puts it differs between the two steps of the unrolled
            // pair: scripts/sass_seq.sh, docs/perf-log.md step 25); then
            // P_FREE(t - 1), P(t), P_FULL(t), and the wait for chain t + 1.
            // The chain of tile t + 1 overlaps PV(t - 1) on the tensor
            // pipe instead of following the softmax. Tile t + 1 was
            // published by P_FULL(t - 1) (the PV warps wait for it before
            // that barrier). A chain past the last tile (t + 1 == ntiles)
            // reads a stage nobody writes any more and is discarded:
            // issuing it keeps the loop body one basic block.
            float acc0[16], acc1[16];
            if (ntiles > 0) {
                ws_s_chain_rq<ROWS, QR>(acc0, qf, qda, kdesc(0));
                wg_wait<0>();
            }
            auto step = [&](int t, float (&cur)[16], float (&nxt)[16]) {
                ws_s_chain_rq<ROWS, QR>(nxt, qf, qda, kdesc(t + 1));
                uint32_t pk[2][4];
                float al[2];
                // The masked form on every tile (branch-free beside the
                // chain; a full tile's masks all pass).
                ws_softmax_rows(cur, n - t * TN < TN ? n - t * TN : TN, p.scale_log2, mA, lA, pk, al);
                if (t > 0)
                    nbar_sync(BAR_P_FREE, NT);
                ws_store_rows<PVWG>(rA, pk, al, Ps, Al);
                fence_proxy_async(); // wgmma (async proxy) reads P
                nbar_sync(BAR_P_FULL, NT);
                wg_wait<0>();
            };
            for (int t = 0; t < ntiles; t += 2) {
                step(t, acc0, acc1);
                if (t + 1 < ntiles)
                    step(t + 1, acc1, acc0);
            }
        }
        for (int t = 0; t < (PVG ? 0 : ntiles); ++t) {
            // Tile t landed and is visible to the whole warpgroup: waited
            // for by every thread before the previous P_FULL barrier (or the
            // prologue's __syncthreads).
            const uint64_t kb = kdesc(t);
            const int valid = n - t * TN < TN ? n - t * TN : TN;
            // The products (and as much of the softmax as registers allow)
            // run before the P tile is free: the PV warps may still be
            // reading tile t - 1. 96 rows: chain B (rows 32-95, kept 64-95)
            // first, its probabilities held packed; then chain A, whose
            // softmax goes straight to shared memory after the wait, so at
            // most 16 accumulators + 8 packed words are live (warpgroup 0
            // has 56 registers next to the PV warps' 224).
            float acc[16];
            uint32_t pk[2][4];
            float al[2];
            if constexpr (TWO) {
                ws_s_chain<ROWS>(acc, ((volatile uint64_t *)Qdesc)[1], kb);
                wg_wait<0>();
                if (w >= 2)
                    ws_softmax_rows(acc, valid, p.scale_log2, mB, lB, pk, al);
            }
            if constexpr (QR > 0)
                ws_s_chain_rq<ROWS, QR>(acc, qf, qda, kb);
            else
                ws_s_chain<ROWS>(acc, ((volatile uint64_t *)Qdesc)[0], kb);
            wg_wait<0>();
            if constexpr (!TWO) {
                if (valid == TN)
                    ws_softmax_rows<true>(acc, valid, p.scale_log2, mA, lA, pk, al);
                else
                    ws_softmax_rows(acc, valid, p.scale_log2, mA, lA, pk, al);
            }
            // P is free once the PV warps are done with tile t - 1; so is
            // that tile's K/V stage, which then takes tile t + STG - 1
            // (issued after the hand-over, off its path).
            if (t > 0)
                nbar_sync(BAR_P_FREE, NT);
            if constexpr (TWO) {
                if (w >= 2)
                    ws_store_rows<PVWG>(rB, pk, al, Ps, Al);
                ws_softmax_rows(acc, valid, p.scale_log2, mA, lA, pk, al);
            }
            ws_store_rows<PVWG>(rA, pk, al, Ps, Al);
            if constexpr (F8) { // the PV warpgroups gather
                fence_proxy_async(); // wgmma (async proxy) reads P
                nbar_sync(BAR_P_FULL, NT);
                continue;
            }
            // Tile t + 1 must have landed (this thread's copies; the
            // barrier publishes everyone's) before it is read by wgmma
            // after the barrier. Groups: Q, tiles 0 .. STG - 2, then one per
            // iteration before this one (t + STG in all); tile t + 1 is
            // group t + 2, so STG - 3 may still be in flight.
            cp_async_wait_group<STG - 3>();
            fence_proxy_async(); // wgmma (async proxy) reads P and the tile
            nbar_sync(BAR_P_FULL, NT);
            load_tile(t + STG - 1, slot_next);
            cp_async_commit(); // possibly empty: keeps one group per tile
            slot_next = slot_of(t + STG);
        }
        if constexpr (!SC) {
            if (ntiles > 0)
                nbar_sync(BAR_P_FREE, NT); // the last tile's release
        }
        if (!SC && (lane & 3) == 0) {
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                Linv[rA + 8 * h] = split_out_scale(p.v_scale, lA[h]);
                Lse[rA + 8 * h] = split_lse(mA[h], lA[h]);
                if (TWO && w >= 2) {
                    Linv[rB + 8 * h] = split_out_scale(p.v_scale, lB[h]);
                    Lse[rB + 8 * h] = split_lse(mB[h], lB[h]);
                }
            }
        }
        nbar_sync(BAR_END, NT);
        if (tid < ROWS) {
            bool ok;
            const int r = row_of(p, ROWS, y, tid, ok);
            if (ok)
                p.part_lse[((long long)b * p.num_splits + s) * p.HL + r] = Lse[tid];
        }
    }

    const long long part_row0 = ((long long)b * p.num_splits + s) * p.HL;
    // Epilogue: the scaled bf16 partial goes through shared memory (the K/V
    // stages, free once every thread passed the first BAR_END) so
    // that it leaves in coalesced 16-byte rows instead of 2- or 4-byte
    // scattered stores. Pitch + 8: conflict-light fills.
    constexpr int OSP = DV_MAX + 8;
    static_assert(ROWS * OSP <= STG * TN * D_MAX, "partial staging fits the K/V stages");
    bf16_t *Os = Ks;
    if (producer) {
        // Warpgroup 0 only joins the copy-out below.
    } else if constexpr (PVWG) {
        // PV warpgroup g (1 or 2) owns output columns 256 (g - 1) ..; each
        // thread the rows r0 and r0 + 8 of the m64 accumulator layout.
        if constexpr (QR > 0 && !SC)
            regs_dec<RPV>();
        const int c0 = 256 * (wg_idx - 1);
        const int lane = tid & 31, r0 = 16 * ((tid >> 5) & 3) + (lane >> 2), tq = lane & 3;
        const uint64_t dp = wg_desc_sw128((uint32_t)__cvta_generic_to_shared(Ps));
        float acc[128];
#pragma unroll
        for (int i = 0; i < 128; ++i)
            acc[i] = 0.f;
        float mS[2] = {-INFINITY, -INFINITY}, lS[2] = {0.f, 0.f};
        if constexpr (SC) {
            // (A 32-bit shared address, loaded by asm: ptxas rebuilt the
            // generic pointer from the thread index every tile, an S2R
            // that waited behind the MIO queue.)
            const uint32_t sv_addr = (uint32_t)__cvta_generic_to_shared(Ps) + 16u * (uint32_t)(tid & 127);
            // One tile: S(t) in, P_FREE, the softmax, PV(t) issued. DT: the
            // draft tile (per-row causal counts, values in the next stage);
            // a template argument, so the loop's code is the prefix's alone.
            auto pv_tile = [&](int t, auto dt_tag) {
                constexpr bool DT = decltype(dt_tag)::value;
                nbar_sync(BAR_P_FULL, NT);
                float sv[16];
#pragma unroll
                for (int j = 0; j < 4; ++j)
                    asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];"
                                 : "=f"(sv[4 * j]), "=f"(sv[4 * j + 1]), "=f"(sv[4 * j + 2]), "=f"(sv[4 * j + 3])
                                 : "r"(sv_addr + 2048u * j)
                                 : "memory");
                nbar_sync(BAR_P_FREE, NT); // S(t) read: the producer may issue chain t + 1
                uint32_t pk[2][4];
                float al[2];
                const int valid = n - t * TN < TN ? n - t * TN : TN;
                // The probabilities stay fp32 in sv until PV(t - 1) is done:
                // its wgmma reads the P registers until then, and ptxas
                // packed the next P into them before the wait (wrong sums
                // once the hand-over got faster; step 26).
                if constexpr (DT)
                    ws_softmax_rows<false, true>(sv, ws_draft_visible<ROWS>(p.H, p.L, 0), p.scale_log2, mS, lS,
                                                 pk, al, sv, ws_draft_visible<ROWS>(p.H, p.L, 8));
                else if (valid == TN)
                    ws_softmax_rows<true, true>(sv, valid, p.scale_log2, mS, lS, pk, al, sv);
                else
                    ws_softmax_rows<false, true>(sv, valid, p.scale_log2, mS, lS, pk, al, sv);
                wg_wait<0>(); // PV(t - 1): O and its P registers are free
                // Orders the packing below after the wait (as CUTLASS's
                // warpgroup_fence_operand does for accumulators).
#pragma unroll
                for (int i = 0; i < 16; ++i)
                    asm volatile("" : "+f"(sv[i])::"memory");
#pragma unroll
                for (int h = 0; h < 2; ++h)
#pragma unroll
                    for (int j = 0; j < 4; ++j)
                        pk[h][j] = pack_bf2(sv[4 * j + 2 * h], sv[4 * j + 2 * h + 1]);
                ws_rescale_o(acc, al[0], al[1]);
                if constexpr (DT) {
                    // The masked drafts weigh exactly 0, so the tensor-core
                    // product adds nothing for them while their values are
                    // finite; a NaN or Inf value would make 0 x NaN = NaN in
                    // rows that cannot see it (k3-nan-draft). So: the exact
                    // per-row sum when any of the L value rows is not.
                    if (ws_draft_values_nonfinite(Ks + stage_el(t + 1) + (c0 / 64) * TN * 64, p.L)) {
                        ws_draft_pv_exact(acc, sv, Ks + stage_el(t + 1) + (c0 / 64) * TN * 64, p.L,
                                          ws_draft_visible<ROWS>(p.H, p.L, 0), ws_draft_visible<ROWS>(p.H, p.L, 8));
                        return;
                    }
                }
                const uint64_t dv = wg_desc_mn_sw128(
                    (uint32_t)__cvta_generic_to_shared(Ks + stage_el(DT ? t + 1 : t) + (c0 / 64) * TN * 64));
                // A fragments of k16 steps 0 and 1: rows r0 / r0 + 8, tokens
                // 16k + 2tq (+1) and 16k + 8 + 2tq (+1).
                const uint32_t a0[4] = {pk[0][0], pk[1][0], pk[0][1], pk[1][1]};
                const uint32_t a1[4] = {pk[0][2], pk[1][2], pk[0][3], pk[1][3]};
                wg_fence();
                wgmma_m64n256k16_rs_tb(acc, a0, dv);
                wgmma_m64n256k16_rs_tb(acc, a1, dv + (2048 >> 4));
                wg_commit();
            };
            for (int t = 0; t < ntiles; ++t)
                pv_tile(t, ws_false{});
            if (draft) {
                nbar_sync(BAR_DRAFT, NT); // the draft tiles landed (the producer's copies)
                pv_tile(td, ws_true{});
            }
            wg_wait<0>();
            if (wg_idx == 1 && tq == 0) {
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    Lse[r0 + 8 * h] = split_lse(mS[h], lS[h]);
                }
            }
        }
        for (int t = 0; t < (SC ? 0 : ntiles); ++t) {
            if constexpr (PVG) {
                // Tile t + 2 (whose S chain the pipelined producer issues
                // right after P_FULL(t)) has landed: groups Q, tiles 0 ..
                // t + STG - 2 issued, so the newest STG - 4 may be in
                // flight; the barrier publishes every thread's copies.
                cp_async_wait_group<STG - 4>();
                fence_proxy_async();
            }
            nbar_sync(BAR_P_FULL, NT);
            const float a0 = Al[r0], a1 = Al[r0 + 8];
            ws_rescale_o(acc, a0, a1);
            // V columns c0 .. c0 + 255 of the tile: atoms c0 / 64 .., a
            // k16 step is 16 token rows (2048 bytes) further.
            const uint64_t dv = wg_desc_mn_sw128(
                (uint32_t)__cvta_generic_to_shared(Ks + stage_el(t) + (c0 / 64) * TN * 64));
            wg_fence();
            wgmma_m64n256k16_tb(acc, dp, dv);
            wgmma_m64n256k16_tb(acc, dp + 2, dv + (2048 >> 4));
            wg_commit();
            if constexpr (PVG) {
                // While PV(t) runs: tile t + STG - 1 into tile t - 1's stage
                // (every PV(t - 1) ended before P_FREE(t - 1), the producer's
                // S(t - 1) before P_FULL(t - 1)); possibly an empty group.
                load_tile16(t + STG - 1, slot8_next);
                cp_async_commit();
                slot8_next = slot8_of(t + STG);
            }
            if constexpr (F8) {
                // While PV(t) runs: tile t + 2 into its stage (tile t - 1's:
                // this warpgroup's PV(t - 1) is done, the producer's S(t - 1)
                // was before P_FULL(t - 1)). F(t + 2) has landed (groups
                // F0 .. F(t + 3) issued, F(t + 3) may be in flight); then
                // F(t + 4) into its staging tile (possibly an empty group:
                // one per tile).
                cp_async_wait_group<1>();
                decode_tile8(t + 2);
                // The producer's wgmma reads the decoded tile. Fenced before
                // the next copies are issued: the fence waits for this
                // thread's copies in flight too (ncu: a long-scoreboard
                // stall on the fence when it followed them).
                fence_proxy_async();
                load_tile8(t + 4, slot8_next);
                cp_async_commit();
                slot8_next = slot8_of(t + 5);
            }
            wg_wait<0>();
            nbar_sync(BAR_P_FREE, NT);
        }
        nbar_sync(BAR_END, NT);
        const float s0 = SC ? split_out_scale(p.v_scale, lS[0]) : Linv[r0];
        const float s1 = SC ? split_out_scale(p.v_scale, lS[1]) : Linv[r0 + 8];
#pragma unroll
        for (int j = 0; j < 32; ++j) {
            const int col = c0 + 8 * j + 2 * tq;
            *(uint32_t *)(Os + r0 * OSP + col) = pack_bf2(acc[4 * j] * s0, acc[4 * j + 1] * s0);
            *(uint32_t *)(Os + (r0 + 8) * OSP + col) = pack_bf2(acc[4 * j + 2] * s1, acc[4 * j + 3] * s1);
        }
    } else {
        // Swapped product: warpgroup g (1 or 2) owns dv blocks 4 (g - 1) ..
        // + 3; thread rows (dv) r0, r0 + 8 of each block, columns (query
        // rows) 8j + 2tq and + 1.
        regs_inc<224>();
        const int mb0 = 4 * (wg_idx - 1);
        const int lane = tid & 31, r0 = 16 * ((tid >> 5) & 3) + (lane >> 2), tq = lane & 3;
        const uint64_t dp = wg_desc_kint((uint32_t)__cvta_generic_to_shared(Ps));
        float acc[4][48];
#pragma unroll
        for (int m = 0; m < 4; ++m)
#pragma unroll
            for (int i = 0; i < 48; ++i)
                acc[m][i] = 0.f;
        for (int t = 0; t < ntiles; ++t) {
            nbar_sync(BAR_P_FULL, NT);
            float2 a[12];
            bool moved = false;
#pragma unroll
            for (int j = 0; j < 12; ++j) {
                a[j] = *(const float2 *)(Al + 8 * j + 2 * tq);
                moved |= a[j].x != 1.f || a[j].y != 1.f;
            }
            if (__any_sync(0xffffffffu, moved)) { // as in the 64-row loop
#pragma unroll
                for (int j = 0; j < 12; ++j)
#pragma unroll
                    for (int m = 0; m < 4; ++m) {
                        acc[m][4 * j] *= a[j].x;
                        acc[m][4 * j + 1] *= a[j].y;
                        acc[m][4 * j + 2] *= a[j].x;
                        acc[m][4 * j + 3] *= a[j].y;
                    }
            }
            const uint32_t vs =
                (uint32_t)__cvta_generic_to_shared(Ks + stage_el(t) + mb0 * TN * 64);
            wg_fence();
#pragma unroll
            for (int m = 0; m < 4; ++m) {
                const uint64_t dv = wg_desc_mn_sw128(vs + (uint32_t)(m * TN * 128));
                wgmma_m64n96k16_ta(acc[m], dv, dp);
                wgmma_m64n96k16_ta(acc[m], dv + (2048 >> 4), dp + (256 >> 4));
            }
            wg_commit();
            wg_wait<0>();
            nbar_sync(BAR_P_FREE, NT);
        }
        nbar_sync(BAR_END, NT);
#pragma unroll
        for (int j = 0; j < 12; ++j)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                const int k = 8 * j + 2 * tq + e;
                const float sc = Linv[k];
#pragma unroll
                for (int m = 0; m < 4; ++m) {
                    const int c = 64 * (mb0 + m) + r0;
                    Os[k * OSP + c] = f2bf(acc[m][4 * j + e] * sc);
                    Os[k * OSP + c + 8] = f2bf(acc[m][4 * j + 2 + e] * sc);
                }
            }
    }
    nbar_sync(BAR_END, NT);
    store_partial<ROWS, NT>(p, y, part_row0, Os, OSP);
}

} // namespace mla_dev

#endif // MLA_TARGET_NVIDIA
#endif
