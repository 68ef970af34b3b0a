// Stage 1 of the fast and per-head tiers, single-role: every warp of the
// CTA runs gather -> S -> softmax -> PV of a tile in turn, behind
// __syncthreads. Grid (chunk, row block) for the fast tier, (split, row
// block, seq) for the per-head one: one CTA takes ROWS = 16 MT query rows
// and the pieces of its chunk one after the other (PieceWalk); every
// 32-token latent tile it gathers serves all of those rows. QK^T and PV on tensor cores
// (mma.sync m16n8k16 on NVIDIA, MFMA 32x32x8 on AMD), fp32 accumulation,
// online softmax in base 2. Partials of type PT (bf16: fast tier; fp32:
// per-head tier) with an fp32 natural-log lse. On NVIDIA this kernel runs
// the blocks of up to 32 rows, the per-head tier, and the 64-row blocks of
// heads other than 576 wide; on AMD it is the whole fast tier.
#ifndef MLA_KERNELS_STAGE1_MMA_H
#define MLA_KERNELS_STAGE1_MMA_H

#include "../device/bf16.h"
#include "../device/fp8.h"
#include "../device/sync.h"
#include "../device/mfma_gfx9.h"
#include "../device/mma_sm80.h"
#include "stage1_common.h"

#ifndef MLA_HIP_MINIMAL
#include <math.h>
#endif

namespace mla_dev {

template <int MT, int NW, int RG, typename PT, int PADK>
__global__ void __launch_bounds__(NW * 32, 1) stage1_kernel(Stage1Params p)
{
    constexpr int ROWS = 16 * MT;
    constexpr int NT = NW * 32;
    constexpr int TPR = NT / ROWS; // softmax threads per row
    constexpr int TPT = TN / TPR;  // tokens per softmax thread
    static_assert(NT % ROWS == 0 && TN % TPR == 0 && TPR <= 32, "softmax tiling");

    extern __shared__ __align__(16) unsigned char smem_raw[];
    // PADK (per-head baseline): rows PADK + 8 wide, zero past D.
#if defined(MLA_TARGET_NVIDIA)
    constexpr int QPITCH = PADK ? PADK + 8 : DP;
    constexpr Stage1Smem SM = stage1_smem_plan(ROWS, QPITCH);
#else
    // AMD: the arch's plan (config.h): unpadded rows, its K/V stages, Q in
    // LDS or in registers.
    constexpr AmdStage1Arch ARCH = AMD_ARCH;
    static_assert(ROWS <= ARCH.max_rows, "more rows per CTA than this arch's plan takes");
    constexpr int QPITCH = ARCH.qpitch;
    constexpr int KV_STAGES = ARCH.stages;
    constexpr bool QREGS = ARCH.q_regs != 0;
    constexpr Stage1Smem SM = amd_stage1_smem_plan(ARCH, ROWS, NW);
    static_assert(SM.bytes <= ARCH.lds_limit, "stage 1 exceeds this arch's LDS");
#endif
    unsigned char *base = smem_raw;
    bf16_t *Qs = (bf16_t *)(base + SM.q);
    bf16_t *Ks = (bf16_t *)(base + SM.kv);
    float *Ss = (float *)(base + SM.s);
    bf16_t *Ps = (bf16_t *)(base + SM.p);
    float *Al = (float *)(base + SM.al);
    float *Linv = (float *)(base + SM.linv);
    float *Lse = (float *)(base + SM.lse);

    pdl_launch_dependents();
    const int y = blockIdx.y;
    const int tid = threadIdx.x;
    Piece pc;
#if defined(MLA_TARGET_NVIDIA)
    PieceWalk walk(p);
    while (walk.next(p, pc)) {
#else
    // AMD: one piece per CTA over the partial slots (PieceWalk::slot_piece).
    if (p.mode == S1_FAST ? PieceWalk::slot_piece(p, pc) : PieceWalk(p).next(p, pc)) {
#endif
    const int kv0 = pc.kv0, beg = pc.beg, end = pc.end;
    const int n = end - beg;
    const int q0 = pc.q0;
    const int chunks = p.D >> 3; // 16-byte chunks per row
    const int ntiles = (n + TN - 1) / TN;

    // Gather: TPK threads share one token of the tile, so each thread looks
    // up one slot per tile (prefetched a tile ahead: the index load's latency
    // never sits in front of the copies) and issues its row's 16-byte chunks.
    constexpr int TPK = NT / TN;
    static_assert(NT % TN == 0, "gather mapping");
    const int my_tok = tid / TPK, my_c0 = tid % TPK;
    const int D = p.D;
    auto slot_of = [&](int t) -> int64_t {
        const int gt = beg + t * TN + my_tok;
        return (t < ntiles && gt < end) ? p.kv_indices[kv0 + gt] : (int64_t)-1;
    };
    // fp8 pools: 8 codes per chunk through registers, decoded to bf16
    // (exact) on the way into shared memory; a synchronous load, so this
    // kernel's fp8 tile waits for its gather (the fp8 fast path on NVIDIA is
    // the warp-specialized kernel, which keeps its gather asynchronous).
    auto load_tile = [&](int buf, int64_t slot) {
        const bool ok = slot >= 0;
        bf16_t *dst = Ks + buf * TN * QPITCH + my_tok * QPITCH;
        if (p.kv_fmt != KV_BF16) {
            const uint8_t *src = (const uint8_t *)p.kv + (ok ? slot : 0) * p.kv_ss;
            for (int c = my_c0; c < chunks; c += TPK)
                *(uint4 *)(dst + c * 8) =
                    fp8x8_to_bf16x8(ok ? *(const uint2 *)(src + c * 8) : make_uint2(0u, 0u), p.kv_fmt);
            return;
        }
        const bf16_t *src = p.kv + (ok ? slot : 0) * p.kv_ss;
        for (int c = my_c0; c < chunks; c += TPK)
            cp_async16(dst + c * 8, src + c * 8, ok ? 16 : 0);
    };

    int64_t slot_next = -1;
#if !defined(MLA_TARGET_NVIDIA)
    QRegs<QREGS ? MT : 2, QREGS ? NW : 4> qr;
#endif
    if (n > 0) {
#if defined(MLA_TARGET_NVIDIA)
        load_q<ROWS, NT, false, QPITCH>(p, y, q0, chunks, Qs);
#else
        if constexpr (QREGS) {
            bool ok;
            const int r = row_of(p, ROWS, y, tid & 31, ok);
            qr.load(ok ? p.q + (long long)(q0 + r / p.H) * p.q_st + (long long)(r % p.H) * p.q_sh
                       : nullptr,
                    D);
        } else {
            load_q<ROWS, NT, false, QPITCH>(p, y, q0, chunks, Qs);
        }
#endif
        if constexpr (PADK > 0) {
            // Upstream's masked loads of columns D .. PADK - 1 read zeros;
            // here they are zeroed once in Q and in every K/V stage (the
            // gather never writes them).
            const int pc = (PADK - D) >> 3;
            for (int idx = tid; idx < (ROWS + STAGES * TN) * pc; idx += NT) {
                const int r = idx / pc, c = D + (idx - r * pc) * 8;
                bf16_t *row = r < ROWS ? Qs + r * QPITCH : Ks + (r - ROWS) * QPITCH;
                *(uint4 *)(row + c) = make_uint4(0, 0, 0, 0);
            }
        }
        load_tile(0, slot_of(0));
        cp_async_commit();
        slot_next = slot_of(1);
    }

    PvAcc<MT, NW, RG, false, QPITCH> pv;
    pv.zero();
    const int srow = tid / TPR, sub = tid % TPR;
    float m_run = -INFINITY, l_run = 0.f;

    for (int t = 0; t < ntiles; ++t) {
        cp_async_wait_all();
        __syncthreads(); // tile t landed; every warp is done with tile t-1
#if defined(MLA_TARGET_NVIDIA)
        if (t + 1 < ntiles) {
            load_tile((t + 1) & 1, slot_next);
            cp_async_commit();
            slot_next = slot_of(t + 2);
        }
        const bf16_t *Kb = Ks + (t & 1) * TN * QPITCH;
        s_tile<MT, NW, QPITCH, PADK>(Qs, Kb, Ss, D, p.Dv, p.scale_log2);
#else
        if (KV_STAGES > 1 && t + 1 < ntiles) { // one stage: loaded after P V below
            load_tile((t + 1) % KV_STAGES, slot_next);
            cp_async_commit();
            slot_next = slot_of(t + 2);
        }
        const bf16_t *Kb = Ks + (t % KV_STAGES) * TN * QPITCH;
        if constexpr (QREGS)
            s_tile_qregs<MT, NW, QPITCH>(qr, Kb, Ss, D, p.scale_log2);
        else
            s_tile<MT, NW, QPITCH, PADK>(Qs, Kb, Ss, D, p.Dv, p.scale_log2);
#endif
        __syncthreads(); // S of tile t complete

        // Online softmax of row srow over this tile (base 2).
        {
            const int valid = n - t * TN < TN ? n - t * TN : TN;
            float sv[TPT];
            float tmax = -INFINITY;
#pragma unroll
            for (int j = 0; j < TPT; j += 4) {
                const float4 v4 = *(const float4 *)(Ss + srow * SSP + sub * TPT + j);
                sv[j] = v4.x;
                sv[j + 1] = v4.y;
                sv[j + 2] = v4.z;
                sv[j + 3] = v4.w;
            }
#if !defined(MLA_TARGET_NVIDIA)
            if constexpr (QREGS) // add the other waves' partial S
#pragma unroll
                for (int w = 1; w < NW / 2; ++w)
#pragma unroll
                    for (int j = 0; j < TPT; ++j)
                        sv[j] += Ss[w * ROWS * SSP + srow * SSP + sub * TPT + j];
#endif
#pragma unroll
            for (int j = 0; j < TPT; ++j) {
                if (sub * TPT + j >= valid)
                    sv[j] = -INFINITY;
                tmax = fmaxf(tmax, sv[j]);
            }
#pragma unroll
            for (int off = TPR / 2; off > 0; off >>= 1)
                tmax = fmaxf(tmax, mla_shfl_xor(tmax, off, TPR));
            const float m_new = fmaxf(m_run, tmax);
            // A row whose max is still -inf has seen nothing: keep exp2 away
            // from (-inf) - (-inf).
            const float m_use = m_new == -INFINITY ? 0.f : m_new;
            const float alpha = exp2f(m_run - m_use);
            float sum = 0.f;
            uint32_t pk[TPT / 2];
#pragma unroll
            for (int j = 0; j < TPT; j += 2) {
                const float p0 = exp2f(sv[j] - m_use), p1 = exp2f(sv[j + 1] - m_use);
                pk[j / 2] = pack_bf2(p0, p1);
                sum += p0 + p1;
            }
            if constexpr (TPT == 8)
                *(uint4 *)(Ps + srow * PSP + sub * TPT) = make_uint4(pk[0], pk[1], pk[2], pk[3]);
            else
#pragma unroll
                for (int j = 0; j < TPT / 2; ++j)
                    *(uint32_t *)(Ps + srow * PSP + sub * TPT + 2 * j) = pk[j];
#pragma unroll
            for (int off = TPR / 2; off > 0; off >>= 1)
                sum += mla_shfl_xor(sum, off, TPR);
            l_run = l_run * alpha + sum;
            m_run = m_new;
            if (sub == 0)
                Al[srow] = alpha;
        }
        __syncthreads();
        pv.rescale_mma(Al, Ps, Kb, p.Dv);
#if !defined(MLA_TARGET_NVIDIA)
        if (KV_STAGES == 1 && t + 1 < ntiles) {
            __syncthreads(); // every wave is done with the one K/V stage
            load_tile(0, slot_next);
            cp_async_commit();
            slot_next = slot_of(t + 2);
        }
#endif
    }

    if (sub == 0) {
        Linv[srow] = split_out_scale(p.v_scale, l_run);
        Lse[srow] = split_lse(m_run, l_run);
    }
    __syncthreads();

    const long long part_row0 = (long long)pc.slot(p) * (p.H * p.L);
#if defined(MLA_TARGET_NVIDIA)
    pv.for_each(p.Dv, [&](int k, int col, float v0, float v1) {
        bool ok;
        const int r = row_of(p, ROWS, y, k, ok);
        if (ok) {
            const float sc = Linv[k];
            Partial<PT>::store2(p.part_o, (part_row0 + r) * p.Dv + col, v0 * sc, v1 * sc);
        }
    });
#else
    pv.for_each_single(p.Dv, [&](int k, int col, float v) {
        bool ok;
        const int r = row_of(p, ROWS, y, k, ok);
        if (ok) {
            const float x = v * Linv[k];
            if (sizeof(PT) == 2)
                ((bf16_t *)p.part_o)[(part_row0 + r) * p.Dv + col] = f2bf(x);
            else
                ((float *)p.part_o)[(part_row0 + r) * p.Dv + col] = x;
        }
    });
#endif
    if (tid < ROWS) {
        bool ok;
        const int r = row_of(p, ROWS, y, tid, ok);
        if (ok)
            p.part_lse[part_row0 + r] = Lse[tid];
    }
    __syncthreads(); // the next piece's loads reuse Q, K/V and the row buffers
    }
}

} // namespace mla_dev

#endif
