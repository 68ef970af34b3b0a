// Stage 1 of the fast tier, warp-specialized (NVIDIA sm_90a; the fast path
// of every 64-row block of 576-wide heads). Why (docs/perf/2026-11-29-ws-kernel.md,
// "Roles"): the single-role kernel (stage1_mma.h) runs
// gather -> S -> softmax -> PV of a tile one after the other behind
// __syncthreads, so a CTA is latency-bound (~4.3 us per 32-token tile even
// alone on an SM). Here warpgroup 0, the producer, gathers the tiles and
// computes S on wgmma (m64n32k16, Q's first k16 steps in registers) with the
// softmax in the wgmma accumulators, while warpgroups 1 and 2 only run the
// PV product, also on wgmma (O = P V, m64n256k16, 256 output columns each):
// S of tile t + 1 overlaps PV of tile t. The gather runs STG - 1 tiles
// ahead. The roles hand over through named barriers, both sides bar.sync
// (compute-sanitizer racecheck models only bar.sync):
//   BAR_P_FULL: the producer has written P(t) and alpha(t);
//   BAR_P_FREE: the PV warpgroups are done with P(t) and tile t's K/V
//               stage, which the producer then overwrites.
// setmaxnreg moves registers to the producer (184, against 160 in the PV
// warpgroups, of the 168 x 384 at launch): it holds Q's 32 nope k16 steps
// in registers for its S chain (RS-form wgmma).
//
// Variants (template arguments):
// F8: the pool holds fp8 codes (p.kv read as bytes, p.kv_fmt). The PV
// warpgroups, idle at their barriers most of a tile in the bf16 kernel,
// gather the codes into staging tiles (cp.async) and decode tile t + 2 into
// its bf16 stage while their PV wgmma of tile t runs (config.h ws_stages);
// the P_FREE barrier of tile t publishes it to the producer, whose S chain
// reads it two iterations later. Each thread decodes exactly the bytes it
// copied, so the staging tiles need no barrier of their own. (Decoding in
// the producer added its ~2000 cycles a tile to the producer-bound tile
// period: docs/perf/2026-12-01-fp8-pools.md.)
// PVSM (bf16; fast_kernel ws-pvsm): the softmax runs in the PV warpgroups.
// The producer gathers and issues the S chains only, handing raw scores over
// through shared memory (BAR_P_FULL: S(t) written; BAR_P_FREE: the PV warps
// have read it); each PV warpgroup runs the softmax of the whole tile (the
// same rows as its accumulators: the m64 layouts match thread for thread)
// and takes P from registers (RS-form wgmma). Five K/V stages, the fifth in
// Q's register-held atoms, and (Stage1Draft) the draft block as one more
// tile of each sequence's last piece (docs/perf/2026-12-01-ws-pvg.md,
// docs/perf/2026-12-02-draft-fold.md).
//
// A CTA takes the pieces of its chunk of the balanced partition one after
// the other (PieceWalk, split_policy.h): each role loops over them on its
// own, meeting the others at the barriers of each piece (as CUTLASS's
// persistent warp-specialized kernels do), so that setmaxnreg runs once.
#ifndef MLA_KERNELS_STAGE1_WS_H
#define MLA_KERNELS_STAGE1_WS_H

#include "../device/fp8.h"
#include "../device/mma_sm80.h"
#include "ws_common.h"

#if defined(MLA_TARGET_NVIDIA)

namespace mla_dev {

// What a piece of the warp-specialized stage 1 shares between its roles:
// the variant's constants, the shared-memory plan, the piece's token range
// and the gathers of its tiles (by thread maps fixed per CTA).
template <bool F8, bool PVSM> struct WsPiece {
    static constexpr int ROWS = WS_ROWS;
    static constexpr int NT = WS_THREADS;
    // PVSM: a fifth stage in Q's nope atoms 0-4 (stage_el).
    static constexpr int STG = PVSM ? 5 : ws_stages(ROWS, F8);
    // Tiles gathered ahead. PVSM: 3 (by the producer), into tile t - 2's
    // stage, the newest one both PV warpgroups are known to be done with at
    // P_FULL(t) (each waited for its PV(t - 2) before P_FREE(t - 1)).
    static constexpr int GA = PVSM ? 3 : STG - 1;
    // Q's k16 steps the producer holds in registers: 32 (the 512 nope
    // columns); PVSM 24 (384 columns), as its producer also gathers and
    // gives registers to the PV warpgroups (WS_REGS_*), and its fifth stage
    // lies in the atoms of the other four.
    static constexpr int QR = PVSM ? 24 : 32;
    static constexpr Stage1Smem SM = stage1_ws_smem_plan(ROWS, F8);
    static_assert(!PVSM || TN * D_MAX * 2 <= QR / 4 * ROWS * 128,
                  "PVSM: the fifth stage lies in Q's register-held atoms");
    static_assert(TN == 32 && D_MAX == 576, "gather unrolling");

    unsigned char *base;
    bf16_t *Qs, *Ks, *Ps;
    float *Al, *Linv, *Lse;
    int tid, y;
    // The piece: prefix tokens [beg, end) of its sequence, kv0 the
    // sequence's first index, q0 its first query row; draft: this piece also
    // runs the draft tile, td = ntiles (PVSM only).
    int beg, end, n, ntiles, kv0, q0, td;
    bool draft;
    Piece pc;

    __device__ __forceinline__ WsPiece(unsigned char *b, const Stage1Params &p, const Stage1Draft &dr,
                                       const Piece &piece)
        : base(b), pc(piece)
    {
        Qs = (bf16_t *)(base + SM.q);
        Ks = (bf16_t *)(base + SM.kv);
        Ps = (bf16_t *)(base + SM.p); // 1024-byte aligned
        Al = (float *)(base + SM.al);
        Linv = (float *)(base + SM.linv);
        Lse = (float *)(base + SM.lse);
        tid = threadIdx.x;
        y = blockIdx.y;
        beg = pc.beg;
        end = pc.end;
        n = end - beg;
        kv0 = pc.kv0;
        q0 = pc.q0;
        ntiles = (n + TN - 1) / TN;
        td = ntiles;
        draft = PVSM && dr.on && pc.last;
    }
    __device__ __forceinline__ bool has_work() const { return ntiles > 0 || draft; }

    // Element offset of tile t's K/V stage from Ks. PVSM: the fifth stage
    // (t % 5 == 4) lies over Q's atoms 0-4 at the start of shared memory
    // (40 of the 56 KB of nope columns the producer holds in registers; its
    // shared-memory steps read atoms 7 and 8 only). Tile 4, the first there,
    // is gathered after the producer's register loads of Q.
    __device__ __forceinline__ int stage_el(int t) const
    {
        const int st = t % STG;
        if constexpr (PVSM)
            return st == 4 ? -(int)(SM.kv - SM.q) / 2 : st * TN * D_MAX;
        return st * TN * D_MAX;
    }
    __device__ __forceinline__ uint64_t kdesc(int t) const
    {
        return wg_desc_sw128((uint32_t)__cvta_generic_to_shared(Ks + stage_el(t)));
    }

    // The partial this piece writes: its slot of the workspace, or o and
    // lse themselves for a sequence's only piece under Stage1Draft direct.
    __device__ __forceinline__ bool direct(const Stage1Draft &dr) const { return draft && dr.direct && pc.only; }
    __device__ __forceinline__ long long part_row0(const Stage1Params &p, const Stage1Draft &dr) const
    {
        return (long long)(direct(dr) ? pc.b : pc.slot(p)) * (p.H * p.L);
    }
};

// The gathers of the bf16 producer (plain ws): 8 threads per token, tokens
// my_tok and my_tok + 16 of a tile, their slots looked up a tile ahead.
// Thread (my_tok, my_c) copies chunk my_c of each 128-byte atom j < 9 of
// both rows: a warp's request is 4 whole 128-byte lines (with 4 threads per
// token it was 8 half lines); the swizzled destination is one per-thread
// offset plus immediates ((my_tok + 16) & 7 == my_tok & 7), the sources a
// base per row plus immediates. Address arithmetic per chunk was half of
// the producer's time (ncu source counters; docs/perf/2026-11-29-ws-kernel.md, "Whole-line gather requests and the skipped rescale").
struct WsSlots {
    int64_t a, b; // tokens my_tok, my_tok + 16; -1: none (zero fill)
};
template <bool F8, bool PVSM>
__device__ __forceinline__ WsSlots ws_slots(const WsPiece<F8, PVSM> &w, const Stage1Params &p, int t)
{
    const int my_tok = (w.tid & 127) >> 3;
    const int gt = w.beg + t * TN + my_tok;
    const bool in = t < w.ntiles;
    return {in && gt < w.end ? p.kv_indices[w.kv0 + gt] : (int64_t)-1,
            in && gt + 16 < w.end ? p.kv_indices[w.kv0 + gt + 16] : (int64_t)-1};
}
template <bool F8, bool PVSM>
__device__ __forceinline__ void ws_load_tile(const WsPiece<F8, PVSM> &w, const Stage1Params &p, int t, WsSlots sl)
{
    if (t >= w.ntiles)
        return;
    const int my_tok = (w.tid & 127) >> 3, my_c = w.tid & 7;
    const unsigned char *sa = (const unsigned char *)(p.kv + (sl.a >= 0 ? sl.a : 0) * p.kv_ss + my_c * 8);
    const unsigned char *sb = (const unsigned char *)(p.kv + (sl.b >= 0 ? sl.b : 0) * p.kv_ss + my_c * 8);
    const uint32_t st = (uint32_t)__cvta_generic_to_shared(w.Ks) + (uint32_t)(w.stage_el(t) * 2) +
                        (uint32_t)(my_tok * 128 + ((my_c ^ (my_tok & 7)) << 4));
    const int na = sl.a >= 0 ? 16 : 0, nb = sl.b >= 0 ? 16 : 0;
#pragma unroll
    for (int j = 0; j < D_MAX / 64; ++j) {
        cp_async16_s(st + (uint32_t)(j * TN * 128), sa + 128 * j, na);
        cp_async16_s(st + (uint32_t)(j * TN * 128 + 16 * 128), sb + 128 * j, nb);
    }
}

// The gathers of the PVSM producer, by tile parity (warps 0-1 even tiles,
// 2-3 odd), 64 threads a tile: 8 per token, tokens my_tok8 + 8k (k < 4),
// each with ws_load_tile's whole-line requests and swizzle ((my_tok8 + 8k)
// & 7 == my_tok8 & 7).
struct WsHalf {
    int64_t s[4]; // -1: none (zero fill)
};
template <bool F8, bool PVSM>
__device__ __forceinline__ WsHalf ws_half(const WsPiece<F8, PVSM> &w, const Stage1Params &p, int t)
{
    const int my_tok8 = (w.tid & 63) >> 3;
    WsHalf h;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        const int gt = w.beg + t * TN + my_tok8 + 8 * k;
        h.s[k] = t < w.ntiles && gt < w.end ? p.kv_indices[w.kv0 + gt] : (int64_t)-1;
    }
    return h;
}
template <bool F8, bool PVSM> __device__ __forceinline__ uint32_t ws_half_dst(const WsPiece<F8, PVSM> &w, int t)
{
    const int my_tok8 = (w.tid & 63) >> 3, my_c = w.tid & 7;
    return (uint32_t)__cvta_generic_to_shared(w.Ks) + (uint32_t)(w.stage_el(t) * 2) +
           (uint32_t)(my_tok8 * 128 + ((my_c ^ (my_tok8 & 7)) << 4));
}
template <bool F8, bool PVSM>
__device__ __forceinline__ void ws_load_half(const WsPiece<F8, PVSM> &w, const Stage1Params &p, int t, const WsHalf &h)
{
    if (t >= w.ntiles)
        return;
    const int my_c = w.tid & 7;
    const uint32_t st = ws_half_dst(w, t);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        const unsigned char *src = (const unsigned char *)(p.kv + (h.s[k] >= 0 ? h.s[k] : 0) * p.kv_ss + my_c * 8);
        const int nb = h.s[k] >= 0 ? 16 : 0;
#pragma unroll
        for (int j = 0; j < D_MAX / 64; ++j)
            cp_async16_s(st + (uint32_t)(j * TN * 128 + k * 1024), src + 128 * j, nb);
    }
}
// The draft tiles in ws_load_half's map: tile td the keys (576 columns),
// td + 1 the values (512, the last atom zero-filled: v_extend rows must be
// 512 wide, so api.hip folds only for Dv == 512); tokens past L zero-filled,
// so that a masked key's zero weight never meets a stale non-finite value.
template <bool F8, bool PVSM>
__device__ __forceinline__ void ws_load_draft_half(const WsPiece<F8, PVSM> &w, const Stage1Params &p,
                                                   const Stage1Draft &dr, int t)
{
    const int my_tok8 = (w.tid & 63) >> 3, my_c = w.tid & 7;
    const uint32_t st = ws_half_dst(w, t);
    const bool val = t != w.td; // t == td + 1
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        const int j = my_tok8 + 8 * k;
        const bool ok = j < p.L;
        const bf16_t *row = !ok ? dr.k_ext : val ? dr.v_ext + (w.q0 + j) * dr.v_st : dr.k_ext + (w.q0 + j) * dr.k_st;
        const unsigned char *src = (const unsigned char *)(row + my_c * 8);
#pragma unroll
        for (int a = 0; a < D_MAX / 64; ++a)
            cp_async16_s(st + (uint32_t)(a * TN * 128 + k * 1024), src + 128 * a,
                         ok && !(val && a == D_MAX / 64 - 1) ? 16 : 0);
    }
}

// fp8 (PV warpgroups, thread v = tid - 128 < 256): token v / 8 of the tile,
// 8-code pieces q = v % 8 + 8j, j < 9, of its row: copied into staging tile
// t % WS_F8_STAGING, decoded into the bf16 chunk q (atom j, swizzled chunk
// v % 8 of row v / 8). The helpers take copies of the parameters they read,
// never p itself: a closure holding p's address, even unused, made the bf16
// instantiation read its parameters through a pointer inside the tile loop
// (1% slower; PTX compared with the bf16-only kernel).
struct WsF8 {
    const int64_t *kv_idx;
    const uint8_t *kv8;
    long long kv_ss;
    int kv_fmt, beg, end, kv0, ntiles, tok8, sub8;
    uint32_t f8_base;
    const unsigned char *stg; // this thread's bytes of staging tile 0
    unsigned char *dst;       // this thread's chunk of stage 0
    template <bool F8, bool PVSM>
    __device__ __forceinline__ WsF8(const WsPiece<F8, PVSM> &w, const Stage1Params &p)
    {
        const int v8 = w.tid - 128;
        tok8 = (v8 >> 3) & (TN - 1);
        sub8 = v8 & 7;
        kv_idx = p.kv_indices;
        kv8 = (const uint8_t *)p.kv;
        kv_ss = p.kv_ss;
        kv_fmt = p.kv_fmt;
        beg = w.beg;
        end = w.end;
        kv0 = w.kv0;
        ntiles = w.ntiles;
        f8_base = (uint32_t)__cvta_generic_to_shared(w.base + w.SM.f8) + (uint32_t)(tok8 * D_MAX + sub8 * 8);
        stg = w.base + w.SM.f8 + tok8 * D_MAX + sub8 * 8;
        dst = (unsigned char *)w.Ks + tok8 * 128 + ((sub8 ^ (tok8 & 7)) << 4);
    }
    __device__ __forceinline__ int64_t slot_of(int t) const
    {
        const int gt = beg + t * TN + tok8;
        return (t < ntiles && gt < end) ? kv_idx[kv0 + gt] : (int64_t)-1;
    }
    // slot: slot_of(t), looked up a tile ahead by the caller (waiting for
    // the index load in front of the copies was the PV warps' largest stall).
    __device__ __forceinline__ void load(int t, int64_t slot) const
    {
        if (t >= ntiles)
            return;
        const bool ok = slot >= 0;
        const uint8_t *src = kv8 + (ok ? slot : 0) * kv_ss + sub8 * 8;
        const uint32_t st = f8_base + (uint32_t)((t % WS_F8_STAGING) * TN * D_MAX);
        const int nb = ok ? 8 : 0;
#pragma unroll
        for (int j = 0; j < D_MAX / 64; ++j)
            cp_async_s<8>(st + 64 * j, src + 64 * j, nb);
    }
    // Into stage t % stages (fp8 has no fifth stage).
    __device__ __forceinline__ void decode(int t, int stages) const
    {
        if (t >= ntiles)
            return;
        const unsigned char *src = stg + (t % WS_F8_STAGING) * TN * D_MAX;
        unsigned char *d = dst + (t % stages) * TN * D_MAX * 2;
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
                *(uint4 *)(d + (j0 + j) * TN * 128) = a;
            }
        }
        if (nan) {
            // A NaN code among this thread's 72: redo them one at a time (a
            // rolled loop: little code on a path data rarely takes).
#pragma unroll 1
            for (int e = 0; e < D_MAX / 8; ++e)
                *(bf16_t *)(d + (e >> 3) * TN * 128 + 2 * (e & 7)) = fp8_to_bf16(src[64 * (e >> 3) + (e & 7)], fmt);
        }
    }
};

#include "stage1_ws_roles.h"

template <bool F8, bool PVSM>
__global__ void __launch_bounds__(WS_THREADS, 1) stage1_ws_kernel(Stage1Params p, Stage1Draft dr)
{
    static_assert(!PVSM || !F8, "softmax in the PV warps: bf16 pools");
    using W = WsPiece<F8, PVSM>;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    unsigned char *base =
        smem_raw + ((1024u - ((uint32_t)__cvta_generic_to_shared(smem_raw) & 1023u)) & 1023u);
    pdl_launch_dependents();
    // Warp-uniform for the compiler as well (a broadcast, as CUTLASS does):
    // wgmma inside a branch it cannot prove uniform is serialized (C7520).
    const int wg_idx = __shfl_sync(0xffffffffu, threadIdx.x >> 7, 0);
    PieceWalk walk(p);
    Piece pc;
    if (wg_idx == 0) {
        regs_dec_or_inc<PVSM ? WS_REGS_PVSM_PRODUCER : WS_REGS_PRODUCER>();
        while (walk.next(p, pc))
            ws_producer<F8, PVSM>(W(base, p, dr, pc), p, dr);
    } else {
        regs_dec_or_inc<PVSM ? WS_REGS_PVSM_PV : WS_REGS_PV>();
        while (walk.next(p, pc))
            ws_pv<F8, PVSM>(W(base, p, dr, pc), p, dr, wg_idx);
    }
}

} // namespace mla_dev

#endif // MLA_TARGET_NVIDIA
#endif
