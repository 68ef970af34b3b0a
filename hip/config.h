// Tile geometry, shared-memory plans and named barriers of the GPU kernels.
// Host and device agree on every size through these definitions: a
// launcher asks the plan for its dynamic shared-memory bytes, the kernel
// for its region offsets.
#ifndef MLA_GPU_CONFIG_H
#define MLA_GPU_CONFIG_H

#include "compat.h"
#include "split_policy.h"

#include <stdint.h>

namespace mla_dev {

typedef uint16_t bf16_t;

// Tile geometry shared by host and device.
constexpr int TN = 32;         // prefix tokens per tile
constexpr int D_MAX = 576;     // widest head_dim stage 1 handles (512 nope + 64 rope)
constexpr int DV_MAX = 512;    // widest v_head_dim
constexpr int DP = D_MAX + 8;  // smem row pitch (elements): +16 B keeps ldmatrix rows on distinct banks
constexpr int SSP = TN + 4;    // fp32 score tile pitch
constexpr int PSP = TN + 8;    // bf16 probability tile pitch (80 B: conflict-free ldmatrix)
constexpr int STAGES = 2;      // K/V tiles in flight
constexpr float LOG2E = 1.4426950408889634f;
constexpr float LN2 = 0.6931471805599453f;
constexpr int S2_THREADS = MLA_SP_S2_THREADS; // threads per stage-2 block
// bf16 partial chunks a stage-2 thread loads before its weights
// (stage2_merge.h): 4 keeps the kernel at 64 registers without spill (8
// spilled there); -DMLA_S2_PF=N for the A/B.
#ifndef MLA_S2_PF
#define MLA_S2_PF 4
#endif
constexpr int S2_PF = MLA_S2_PF;
static_assert(S2_PF >= 1 && S2_PF <= 16, "MLA_S2_PF: 1 to 16 prefetched chunks a stage-2 thread");
static_assert(TN == MLA_SP_TILE_TOKENS, "split_policy.c rounds splits to whole tiles");

// Named barriers of the warp-specialized stage 1. 0 is __syncthreads'.
// BAR_DRAFT: the draft tile's K/V copies landed (ws-pvsm with Stage1Draft,
// once, after the prefix tiles). BAR_P_FULL / BAR_P_FREE: the hand-over; BAR_END: all threads
// once the last tile is done (Linv, Lse ready; K/V stages free), then once
// the partial is staged. Every barrier spans all threads: a barrier of a
// subset (warpgroup 0 alone, to publish each tile's cp.async data) makes
// compute-sanitizer 2025.3 racecheck report hazards on accesses that the
// full barriers do order (hip/tests/racecheck_subset_barrier.cu reproduces
// it in 40 lines), so each tile's data is published by the P_FULL barrier
// of the tile before instead. BAR_PIECE: all threads, at the start of a
// piece (its Q and first tiles landed) and after its partial left shared
// memory; a named barrier, not __syncthreads, because the roles reach it
// from their own loops (compute-sanitizer synccheck reports bar 0 reached
// from different code as divergent).
enum NamedBarrier { BAR_DRAFT = 1, BAR_P_FULL = 2, BAR_P_FREE = 3, BAR_END = 4, BAR_PIECE = 5 };

// Shared-memory plan of a stage-1 CTA: byte offsets of each region from
// the (aligned) base, and the dynamic bytes to request (slack included).
struct Stage1Smem {
    int q;     // Q rows, bf16
    int kv;    // K/V tile stages, bf16
    int s;     // fp32 scores (single-role kernel) or P (warp-specialized)
    int p;     // bf16 probabilities (single-role kernel)
    int al;    // fp32 per-row rescale factors
    int linv;  // fp32 per-row 1 / l (times v_scale)
    int lse;   // fp32 per-row natural-log lse
    int qdesc; // two 64-bit wgmma descriptors of Q (warp-specialized)
    int f8;    // fp8 staging tiles (warp-specialized, fp8 pools; else unused)
    int bytes; // dynamic shared memory to request
};

// Single-role stage 1 (stage1_mma.h): ROWS query rows, QPITCH-element rows
// of Q and of the STAGES K/V tiles. QPITCH: DP (padded for ldmatrix), or
// PADK + 8 for the per-head tier's padded dot.
constexpr Stage1Smem stage1_smem_plan(int rows, int qpitch)
{
    Stage1Smem m{};
    m.q = 0;
    m.kv = m.q + rows * qpitch * 2;
    m.s = m.kv + STAGES * TN * qpitch * 2;
    m.p = m.s + rows * SSP * 4;
    m.al = m.p + rows * PSP * 2;
    m.linv = m.al + rows * 4;
    m.lse = m.linv + rows * 4;
    m.qdesc = m.lse + rows * 4;
    m.bytes = m.qdesc;
    return m;
}

#if !defined(MLA_TARGET_NVIDIA)
// AMD stage 1 (stage1_mma.h on MFMA), one plan per arch: the LDS a
// workgroup may use, the most rows one CTA takes, the row pitch of Q and of
// the K/V tiles (unpadded: MFMA operands are read by rows of 8 or 16 bytes,
// not ldmatrix), the K/V stages in flight and whether Q stays in LDS or in
// registers. The padded NVIDIA plan asks 164,608 B at 64 rows and
// 209,536 B at 96 rows: over both archs' LDS.
//   gfx950 (CDNA4, 160 KiB): 64-row blocks, Q in LDS, two K/V stages:
//          162,560 B; 96 rows run as two 64-row blocks.
//   gfx942 (CDNA3, 64 KiB): 32-row blocks of 4 waves; Q in registers (wave
//          w holds K steps w, w + 4, ... of the tile's 32 rows and computes a
//          partial S into its own score buffer), one K/V stage: 58,240 B.
struct AmdStage1Arch {
    int lds_limit; // bytes per workgroup
    int max_rows;  // rows per stage-1 CTA (32 or 64)
    int qpitch;    // elements per Q / K/V row in LDS
    int stages;    // K/V tiles in flight
    int q_regs;    // 1: Q in registers, one score buffer per wave
};
constexpr AmdStage1Arch AMD_GFX942{65536, 32, D_MAX, 1, 1};
constexpr AmdStage1Arch AMD_GFX950{163840, 64, D_MAX, 2, 0};
#if defined(__gfx942__) || defined(__gfx941__) || defined(__gfx940__) || defined(__gfx90a__)
constexpr AmdStage1Arch AMD_ARCH = AMD_GFX942;
#else // gfx950, and the host pass of a ROCm build (no arch macro: the
      // union of the instance lists, instances.h)
constexpr AmdStage1Arch AMD_ARCH = AMD_GFX950;
#endif

// Single-role stage 1 on AMD: ROWS rows with NW warps (NW / 2 waves) under
// arch plan a.
constexpr Stage1Smem amd_stage1_smem_plan(AmdStage1Arch a, int rows, int nw)
{
    Stage1Smem m{};
    m.q = 0;
    m.kv = m.q + (a.q_regs ? 0 : rows * a.qpitch * 2);
    m.s = m.kv + a.stages * TN * a.qpitch * 2;
    m.p = m.s + (a.q_regs ? nw / 2 : 1) * rows * SSP * 4;
    m.al = m.p + rows * PSP * 2;
    m.linv = m.al + rows * 4;
    m.lse = m.linv + rows * 4;
    m.qdesc = m.lse + rows * 4;
    m.bytes = m.qdesc;
    return m;
}
static_assert(amd_stage1_smem_plan(AMD_GFX942, 32, 8).bytes <= AMD_GFX942.lds_limit,
              "gfx942 stage 1 exceeds 64 KiB of LDS");
static_assert(amd_stage1_smem_plan(AMD_GFX950, 64, 8).bytes <= AMD_GFX950.lds_limit,
              "gfx950 stage 1 exceeds 160 KiB of LDS");
static_assert(amd_stage1_smem_plan(AMD_GFX950, 32, 8).bytes <= AMD_GFX950.lds_limit,
              "gfx950 32-row stage 1 exceeds 160 KiB of LDS");
#endif // !MLA_TARGET_NVIDIA

// The warp-specialized stage 1 (stage1_ws.h): 64 query rows, a producer
// warpgroup and two PV warpgroups.
constexpr int WS_ROWS = 64;
constexpr int WS_THREADS = 3 * 128;
// K/V stages in flight of the warp-specialized stage 1: 4 for bf16 pools
// (the gather runs three tiles ahead; ws-pvsm has a fifth, stage1_ws.h).
// fp8 pools: the PV warpgroups land fp8 codes
// in WS_F8_STAGING staging tiles (18 KB each) and, during their PV of tile
// t, decode tile t + 2 into a bf16 stage, so the bf16 stages are 3: tile t
// (PV), t + 1 (the producer's S) and t + 2 (being decoded); the gather runs
// two tiles ahead of the decode.
constexpr int WS_F8_STAGING = 2;
constexpr int ws_stages(int rows, bool f8 = false)
{
    return f8 ? 3 : rows == 64 ? 4 : 3;
}

// Warp-specialized stage 1 (stage1_ws.h): unpadded rows (D_MAX columns) in
// the 128-byte swizzled layout, whose atoms need 1024-byte alignment (the
// request carries 1024 bytes of slack). P: 128-byte swizzled K-major (an
// atom of 64 columns, 32 used).
constexpr Stage1Smem stage1_ws_smem_plan(int rows, bool f8 = false)
{
    Stage1Smem m{};
    m.q = 0;
    m.kv = m.q + rows * D_MAX * 2;
    m.f8 = m.kv + ws_stages(rows, f8) * TN * D_MAX * 2;
    m.s = m.f8 + (f8 ? WS_F8_STAGING * TN * D_MAX : 0);
    m.p = m.s;
    m.al = m.s + (rows == 64 ? rows * 128 : rows * TN * 2);
    m.linv = m.al + rows * 4;
    m.lse = m.linv + rows * 4;
    m.qdesc = m.lse + rows * 4;
    m.bytes = 1024 + m.qdesc + 16;
    return m;
}
static_assert(stage1_ws_smem_plan(64).bytes <= 232448, "64-row warp-specialized stage 1 exceeds 227 KB");
static_assert(stage1_ws_smem_plan(64, true).bytes <= 232448, "64-row fp8 warp-specialized stage 1 exceeds 227 KB");

// Stage 2 (stage2_merge.h), per block of cw output columns: fp32 draft
// scores [L][L], draft weights [L][L], split weights [L][NS], and partial
// sums [SG][items][8] when the splits are shared among SG thread groups;
// then, 16-byte aligned, bf16 q [L][D], k_extend [L][D], v_extend [L][cw].
__host__ __device__ constexpr int s2_items(int L, int cw)
{
    return L * (cw / 8);
}
__host__ __device__ constexpr int s2_groups(int L, int cw)
{
    return s2_items(L, cw) >= S2_THREADS ? 1 : S2_THREADS / s2_items(L, cw);
}
__host__ __device__ constexpr long long s2_bf16_offset(int L, int NS, int cw)
{
    return (4LL * (2LL * L * L + (long long)L * NS +
                   (s2_groups(L, cw) > 1 ? (long long)S2_THREADS * 8 : 0)) +
            15) &
           ~15LL;
}
__host__ __device__ constexpr long long stage2_smem(int L, int NS, int D, int cw)
{
    return s2_bf16_offset(L, NS, cw) + 2LL * (2LL * L * D + (long long)L * cw);
}

// Generic kernel (generic.h): fp32 q [D], four warps' accumulators [4][Dv],
// their running max and sum [4] each.
__host__ __device__ constexpr int generic_smem(int D, int Dv)
{
    return (D + 4 * Dv + 8) * 4;
}

} // namespace mla_dev

#endif
