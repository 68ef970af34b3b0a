// The roles of the warp-specialized stage 1 (stage1_ws.h), one piece at a
// time: the prologue both roles run, the producer (gather, S, softmax), the
// PV consumer and the epilogue. Included by stage1_ws.h inside namespace
// mla_dev, after WsPiece and its gathers.

// Registers a thread of the plain and fp8 kernels holds after setmaxnreg:
// the producer keeps Q's 32 nope k16 steps in registers for the whole
// piece (RS-form wgmma; docs/perf/2026-11-29-ws-kernel.md, "Q in registers for the 64-row S chain": 6-9% on the
// producer-bound shapes), 184 there and 160 in the PV warpgroups (of the
// 168 x 384 at launch); all 36 steps would need the PV warps below 152,
// which ptxas refuses. ws-pvsm goes the other way, 152 and 176: its PV
// warps hold the scores, their softmax and P beside O (at the 168 of the
// launch ptxas serialized their wgmma, C7512), its producer 24 steps of Q,
// one set of S accumulators and the gather.
constexpr int WS_REGS_PRODUCER = 184;
constexpr int WS_REGS_PV = (504 - WS_REGS_PRODUCER) / 2;
constexpr int WS_REGS_PVSM_PRODUCER = 152;
constexpr int WS_REGS_PVSM_PV = (504 - WS_REGS_PVSM_PRODUCER) / 2;
static_assert(WS_REGS_PV % 8 == 0 && WS_REGS_PVSM_PV % 8 == 0, "setmaxnreg counts are multiples of 8");
// setmaxnreg to N from the 168 of the launch: up or down.
template <int N> __device__ __forceinline__ void regs_dec_or_inc()
{
    if constexpr (N > 168)
        regs_inc<N>();
    else if constexpr (N < 168)
        regs_dec<N>();
}

// Both roles: Q into shared memory and the first tiles in flight, then the
// barrier that publishes them (and the Q descriptors). Only a piece with
// work loads anything.
template <bool F8, bool PVSM>
__device__ __forceinline__ void ws_prologue_q(const WsPiece<F8, PVSM> &w, const Stage1Params &p)
{
    load_q<WS_ROWS, WS_THREADS, true, DP>(p, w.y, w.q0, p.D >> 3, w.Qs);
    cp_async_commit();
}
__device__ __forceinline__ void ws_prologue_end()
{
    fence_proxy_async();
}
__device__ __forceinline__ void ws_prologue_barrier()
{
    nbar_sync(BAR_PIECE, WS_THREADS);
}

// The piece's partial rows, published to both roles through shared memory
// (the plan's qdesc slot).
struct WsOut {
    long long row0;
    int direct;
};
static_assert(sizeof(WsOut) <= 16, "WsOut fits the plan's qdesc slot");

// Both roles, after the piece: the scaled bf16 partial goes through shared
// memory (the K/V stages, free once every thread passed the first BAR_END)
// so that it leaves in coalesced 16-byte rows instead of 2- or 4-byte
// scattered stores; then every thread is done with shared memory before the
// next piece's loads. Pitch + 8: conflict-light fills.
constexpr int WS_OSP = DV_MAX + 8;
template <bool F8, bool PVSM>
__device__ __forceinline__ void ws_epilogue(const WsPiece<F8, PVSM> &w, const Stage1Params &p, const Stage1Draft &dr)
{
    static_assert(WS_ROWS * WS_OSP <= ws_stages(WS_ROWS, F8) * TN * D_MAX, "partial staging fits the K/V stages");
    nbar_sync(BAR_END, WS_THREADS);
    // Where the partial goes, as the producer published it before the
    // first BAR_END (WsOut): the PV warpgroups hold no piece data across
    // their tile loop, whose accumulators need every register.
    const volatile WsOut *out = (const volatile WsOut *)(w.base + w.SM.qdesc);
    const long long row0 = out->row0;
    const bool direct = out->direct != 0;
    store_partial<WS_ROWS, WS_THREADS>(p, direct ? (void *)dr.o : p.part_o, w.y, row0, w.Ks, WS_OSP);
    nbar_sync(BAR_PIECE, WS_THREADS);
}

// The producer warpgroup (warps 0-3) on one piece.
template <bool F8, bool PVSM>
__device__ __forceinline__ void ws_producer(const WsPiece<F8, PVSM> &w, const Stage1Params &p, const Stage1Draft &dr)
{
    using W = WsPiece<F8, PVSM>;
    constexpr int ROWS = W::ROWS, NT = W::NT, STG = W::STG, GA = W::GA, QR = W::QR;
    const int tid = w.tid;
    const int wp = __shfl_sync(0xffffffffu, tid >> 5, 0), lane = tid & 31;
    // PVSM: the producer gathers (the PV warps' copies sat in front of their
    // softmax), its warps 0-1 the even tiles, 2-3 the odd ones.
    const int par = wp >> 1;
    WsSlots slot_next = {-1, -1};
    WsHalf half_next{};
    if (w.has_work()) {
        ws_prologue_q(w, p);
        if constexpr (PVSM) {
            // Tiles 0 .. GA - 1, each by its parity's warps; Q and tiles 0
            // and 1 landed (chain 1 is issued before the first hand-over).
            for (int t = par; t < GA; t += 2) {
                ws_load_half(w, p, t, ws_half(w, p, t));
                cp_async_commit();
            }
            half_next = ws_half(w, p, GA + ((GA + par) & 1)); // its next tile
            if (par == 0)
                cp_async_wait_group<1>();
            else
                cp_async_wait_group<0>();
        } else if constexpr (F8) {
            cp_async_wait_all(); // the PV warpgroups gather the tiles
        } else {
            // Tiles 0 .. STG - 2 ahead, one group each; iteration t then
            // issues tile t + STG - 1 into the stage tile t - 1 leaves.
            for (int t = 0; t < STG - 1; ++t) {
                ws_load_tile(w, p, t, ws_slots(w, p, t));
                cp_async_commit();
            }
            slot_next = ws_slots(w, p, STG - 1);
            cp_async_wait_group<STG - 2>(); // Q and tile 0
        }
        ws_prologue_end();
    }
    ws_prologue_barrier();

    uint32_t qf[QR][4];
    uint64_t qda = 0;
    if (w.has_work()) { // Q was loaded only for a piece with work
        // ldmatrix x4 of rows 16 wp .. 16 wp + 15, columns 16k .. 16k + 15:
        // lanes 0-7 / 8-15 rows 0-7 / 8-15 at column 16k, lanes 16-31 the
        // same rows at 16k + 8 (a0..a3 of the A fragment).
        const int lr = 16 * wp + (lane & 7) + ((lane >> 3) & 1) * 8;
#pragma unroll
        for (int k = 0; k < QR; ++k)
            ldsm_x4(qf[k][0], qf[k][1], qf[k][2], qf[k][3], w.Qs + toff<true>(lr, 16 * k + (lane >> 4) * 8, ROWS));
        qda = wg_desc_sw128((uint32_t)__cvta_generic_to_shared(w.Qs + toff<true>(0, 16 * QR, ROWS)));
    }
    const int rA = 16 * wp + (lane >> 2); // rows rA, rA + 8
    float mA[2] = {-INFINITY, -INFINITY}, lA[2] = {0.f, 0.f};
    const int ntiles = w.ntiles, n = w.n;
    if constexpr (PVSM) {
        // Per tile: wait for chain t, S(t) out, P_FULL(t), then P_FREE(t),
        // which the PV warps reach once they have read S(t) into registers
        // (their loads are not queued behind the chain's shared-memory
        // reads), chain t + 1, which overlaps their softmax and PV(t). The
        // chain past the last tile reads a stage nobody writes any more and
        // is discarded (no branch around the wgmma). Tile t + 3 goes into
        // tile t - 2's stage after chain t + 1 is issued. The proxy fence
        // waits for every copy of its thread in flight, so each thread
        // fences only the tile it publishes, with none of its own newer than
        // that in flight: half of the warps wait for tile t + 1 (issued two
        // tiles earlier) before P_FULL(t).
        float4 *Sw = (float4 *)w.Ps + tid;
        float acc[16];
        if (ntiles > 0)
            ws_s_chain_rq<ROWS, QR>(acc, qf, qda, w.kdesc(0));
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
            ws_s_chain_rq<ROWS, QR>(acc, qf, qda, w.kdesc(t + 1));
            if (((t + GA) & 1) == par) {
                ws_load_half(w, p, t + GA, half_next);
                cp_async_commit();
                half_next = ws_half(w, p, t + GA + 2);
            }
        }
        wg_wait<0>();
        if (w.draft) {
            // The draft tile: keys into stage td % STG (warps 0-1), values
            // into the next (warps 2-3). Both stages' tiles, td - 5 and td -
            // 4, were done with by both PV warpgroups before they reached
            // P_FREE(td - 1); the discarded chain of tile td finished at the
            // wait above. BAR_DRAFT publishes the copies (every thread fenced
            // its own) to the chain and to PV.
            ws_load_draft_half(w, p, dr, w.td + par);
            cp_async_commit();
            cp_async_wait_group<0>();
            fence_proxy_async();
            nbar_sync(BAR_DRAFT, NT);
            ws_s_chain_rq<ROWS, QR>(acc, qf, qda, w.kdesc(w.td));
            wg_wait<0>();
#pragma unroll
            for (int j = 0; j < 4; ++j)
                Sw[128 * j] = make_float4(acc[4 * j], acc[4 * j + 1], acc[4 * j + 2], acc[4 * j + 3]);
            nbar_sync(BAR_P_FULL, NT);
            nbar_sync(BAR_P_FREE, NT);
        }
    } else {
        for (int t = 0; t < ntiles; ++t) {
            // Tile t landed and is visible to the whole warpgroup: waited
            // for by every thread before the previous P_FULL barrier (or the
            // prologue's __syncthreads). The product and the softmax run
            // before the P tile is free: the PV warps may still be reading
            // tile t - 1.
            const int valid = n - t * TN < TN ? n - t * TN : TN;
            float acc[16];
            uint32_t pk[2][4];
            float al[2];
            ws_s_chain_rq<ROWS, QR>(acc, qf, qda, w.kdesc(t));
            wg_wait<0>();
            if (valid == TN)
                ws_softmax_rows<true>(acc, valid, p.scale_log2, mA, lA, pk, al);
            else
                ws_softmax_rows(acc, valid, p.scale_log2, mA, lA, pk, al);
            // P is free once the PV warps are done with tile t - 1; so is
            // that tile's K/V stage, which then takes tile t + STG - 1
            // (issued after the hand-over, off its path).
            if (t > 0)
                nbar_sync(BAR_P_FREE, NT);
            ws_store_rows(rA, pk, al, w.Ps, w.Al);
            if constexpr (F8) { // the PV warpgroups gather
                fence_proxy_async(); // wgmma (async proxy) reads P
                nbar_sync(BAR_P_FULL, NT);
                continue;
            }
            // Tile t + 1 must have landed (this thread's copies; the barrier
            // publishes everyone's) before it is read by wgmma after the
            // barrier. Groups: Q, tiles 0 .. STG - 2, then one per iteration
            // before this one (t + STG in all); tile t + 1 is group t + 2,
            // so STG - 3 may still be in flight.
            cp_async_wait_group<STG - 3>();
            fence_proxy_async(); // wgmma (async proxy) reads P and the tile
            nbar_sync(BAR_P_FULL, NT);
            ws_load_tile(w, p, t + STG - 1, slot_next);
            cp_async_commit(); // possibly empty: keeps one group per tile
            slot_next = ws_slots(w, p, t + STG);
        }
        if (ntiles > 0)
            nbar_sync(BAR_P_FREE, NT); // the last tile's release
        if ((lane & 3) == 0) {
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                w.Linv[rA + 8 * h] = split_out_scale(p.v_scale, lA[h]);
                w.Lse[rA + 8 * h] = split_lse(mA[h], lA[h]);
            }
        }
    }
    const long long row0 = w.part_row0(p, dr);
    const bool direct = w.direct(dr);
    if (tid == 0) {
        volatile WsOut *out = (volatile WsOut *)(w.base + w.SM.qdesc);
        out->row0 = row0;
        out->direct = direct ? 1 : 0;
    }
    nbar_sync(BAR_END, NT);
    if (tid < ROWS) {
        bool ok;
        const int r = row_of(p, ROWS, w.y, tid, ok);
        float *lse = direct && dr.lse ? dr.lse : p.part_lse;
        if (ok)
            lse[row0 + r] = w.Lse[tid];
    }
    ws_epilogue(w, p, dr);
}

// PVSM: one tile of a PV warpgroup: S(t) in, P_FREE, the softmax, PV(t)
// issued. DT: the draft tile (per-row causal counts, values in the next
// stage); a template argument, so the loop's code is the prefix's alone.
template <bool DT, bool F8, bool PVSM>
__device__ __forceinline__ void ws_pv_softmax_tile(const WsPiece<F8, PVSM> &w, const Stage1Params &p, int t, int c0,
                                                   uint32_t sv_addr, float (&acc)[128], float (&mS)[2],
                                                   float (&lS)[2])
{
    constexpr int ROWS = WS_ROWS, NT = WS_THREADS;
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
    const int valid = w.n - t * TN < TN ? w.n - t * TN : TN;
    // The probabilities stay fp32 in sv until PV(t - 1) is done: its wgmma
    // reads the P registers until then, and ptxas packed the next P into
    // them before the wait (wrong sums once the hand-over got faster).
    if constexpr (DT)
        ws_softmax_rows<false, true>(sv, ws_draft_visible<ROWS>(p.H, p.L, 0), p.scale_log2, mS, lS, pk, al, sv,
                                     ws_draft_visible<ROWS>(p.H, p.L, 8));
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
    const bf16_t *vs = w.Ks + w.stage_el(DT ? t + 1 : t) + (c0 / 64) * TN * 64;
    if constexpr (DT) {
        // The masked drafts weigh exactly 0, so the tensor-core product adds
        // nothing for them while their values are finite; a NaN or Inf value
        // would make 0 x NaN = NaN in rows that cannot see it (k3-nan-draft).
        // So: the exact per-row sum when any of the L value rows is not.
        if (ws_draft_values_nonfinite(vs, p.L)) {
            ws_draft_pv_exact(acc, sv, vs, p.L, ws_draft_visible<ROWS>(p.H, p.L, 0),
                              ws_draft_visible<ROWS>(p.H, p.L, 8));
            return;
        }
    }
    const uint64_t dv = wg_desc_mn_sw128((uint32_t)__cvta_generic_to_shared(vs));
    // A fragments of k16 steps 0 and 1: rows r0 / r0 + 8, tokens 16k + 2tq
    // (+1) and 16k + 8 + 2tq (+1).
    const uint32_t a0[4] = {pk[0][0], pk[1][0], pk[0][1], pk[1][1]};
    const uint32_t a1[4] = {pk[0][2], pk[1][2], pk[0][3], pk[1][3]};
    wg_fence();
    wgmma_m64n256k16_rs_tb(acc, a0, dv);
    wgmma_m64n256k16_rs_tb(acc, a1, dv + (2048 >> 4));
    wg_commit();
}

// A PV warpgroup (wg_idx 1 or 2: output columns 256 (wg_idx - 1) ..) on one
// piece; each thread holds the rows r0 and r0 + 8 of the m64 accumulator
// layout.
template <bool F8, bool PVSM>
__device__ __forceinline__ void ws_pv(const WsPiece<F8, PVSM> &w, const Stage1Params &p, const Stage1Draft &dr,
                                      int wg_idx)
{
    constexpr int NT = WS_THREADS, STG = WsPiece<F8, PVSM>::STG;
    const int tid = w.tid;
    int64_t slot8_next = -1;
    if (w.has_work()) {
        ws_prologue_q(w, p);
        if constexpr (F8) {
            const WsF8 f8(w, p);
            // Groups: Q, F0, F1, then F2 into F0's staging tile once tile 0
            // is decoded, F3 into F1's after tile 1. PV iteration t decodes
            // tile t + 2 and issues F(t + 4) into its staging tile.
            const int64_t s2 = f8.slot_of(2), s3 = f8.slot_of(3);
            f8.load(0, f8.slot_of(0));
            cp_async_commit();
            f8.load(1, f8.slot_of(1));
            cp_async_commit();
            slot8_next = f8.slot_of(4);
            cp_async_wait_group<1>();
            f8.decode(0, STG);
            f8.load(2, s2);
            cp_async_commit();
            cp_async_wait_group<1>();
            f8.decode(1, STG);
            f8.load(3, s3);
            cp_async_commit();
        } else {
            cp_async_wait_all();
        }
        ws_prologue_end();
    }
    ws_prologue_barrier();

    const int c0 = 256 * (wg_idx - 1);
    const int lane = tid & 31, r0 = 16 * ((tid >> 5) & 3) + (lane >> 2), tq = lane & 3;
    float acc[128];
#pragma unroll
    for (int i = 0; i < 128; ++i)
        acc[i] = 0.f;
    float mS[2] = {-INFINITY, -INFINITY}, lS[2] = {0.f, 0.f};
    if constexpr (PVSM) {
        // (A 32-bit shared address, loaded by asm: ptxas rebuilt the generic
        // pointer from the thread index every tile, an S2R that waited
        // behind the MIO queue.)
        const uint32_t sv_addr = (uint32_t)__cvta_generic_to_shared(w.Ps) + 16u * (uint32_t)(tid & 127);
        for (int t = 0; t < w.ntiles; ++t)
            ws_pv_softmax_tile<false>(w, p, t, c0, sv_addr, acc, mS, lS);
        if (w.draft) {
            nbar_sync(BAR_DRAFT, NT); // the draft tiles landed (the producer's copies)
            ws_pv_softmax_tile<true>(w, p, w.td, c0, sv_addr, acc, mS, lS);
        }
        wg_wait<0>();
        if (wg_idx == 1 && tq == 0) {
#pragma unroll
            for (int h = 0; h < 2; ++h)
                w.Lse[r0 + 8 * h] = split_lse(mS[h], lS[h]);
        }
    } else {
        const uint64_t dp = wg_desc_sw128((uint32_t)__cvta_generic_to_shared(w.Ps));
        for (int t = 0; t < w.ntiles; ++t) {
            nbar_sync(BAR_P_FULL, NT);
            ws_rescale_o(acc, w.Al[r0], w.Al[r0 + 8]);
            // V columns c0 .. c0 + 255 of the tile: atoms c0 / 64 .., a k16
            // step is 16 token rows (2048 bytes) further.
            const uint64_t dv = wg_desc_mn_sw128(
                (uint32_t)__cvta_generic_to_shared(w.Ks + w.stage_el(t) + (c0 / 64) * TN * 64));
            wg_fence();
            wgmma_m64n256k16_tb(acc, dp, dv);
            wgmma_m64n256k16_tb(acc, dp + 2, dv + (2048 >> 4));
            wg_commit();
            if constexpr (F8) {
                const WsF8 f8(w, p);
                // While PV(t) runs: tile t + 2 into its stage (tile t - 1's:
                // this warpgroup's PV(t - 1) is done, the producer's S(t - 1)
                // was before P_FULL(t - 1)). F(t + 2) has landed (groups F0
                // .. F(t + 3) issued, F(t + 3) may be in flight); then F(t +
                // 4) into its staging tile (possibly an empty group: one per
                // tile).
                cp_async_wait_group<1>();
                f8.decode(t + 2, STG);
                // The producer's wgmma reads the decoded tile. Fenced before
                // the next copies are issued: the fence waits for this
                // thread's copies in flight too (ncu: a long-scoreboard stall
                // on the fence when it followed them).
                fence_proxy_async();
                f8.load(t + 4, slot8_next);
                cp_async_commit();
                slot8_next = f8.slot_of(t + 5);
            }
            wg_wait<0>();
            nbar_sync(BAR_P_FREE, NT);
        }
    }
    nbar_sync(BAR_END, NT);
    const float s0 = PVSM ? split_out_scale(p.v_scale, lS[0]) : w.Linv[r0];
    const float s1 = PVSM ? split_out_scale(p.v_scale, lS[1]) : w.Linv[r0 + 8];
    bf16_t *Os = w.Ks;
#pragma unroll
    for (int j = 0; j < 32; ++j) {
        const int col = c0 + 8 * j + 2 * tq;
        *(uint32_t *)(Os + r0 * WS_OSP + col) = pack_bf2(acc[4 * j] * s0, acc[4 * j + 1] * s0);
        *(uint32_t *)(Os + (r0 + 8) * WS_OSP + col) = pack_bf2(acc[4 * j + 2] * s1, acc[4 * j + 3] * s1);
    }
    ws_epilogue(w, p, dr);
}
