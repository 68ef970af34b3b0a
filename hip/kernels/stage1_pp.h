// Stage 1 of the fast tier, ping-pong (NVIDIA sm_90a; fast_kernel ws-pp, not
// the default): two compute warpgroups take 64-token K/V blocks in turn, each
// computing S, the softmax and its half of O; a third warpgroup only gathers.
#ifndef MLA_KERNELS_STAGE1_PP_H
#define MLA_KERNELS_STAGE1_PP_H

#include "stage1_ws.h"

#if defined(MLA_TARGET_NVIDIA)

namespace mla_dev {
// ---------------------------------------------------------------------------
// Why: in stage1_ws_kernel a producer warpgroup computes every S chain and
// hands each 32-token tile over to the PV warpgroups; the hand-over around
// the chain (wait, S store, barrier, the PV warps' S loads) costs ~800 of a
// tile's ~2,000 cycles against ~1,180 of tensor work (docs/perf-log.md,
// "Where it stands after step 34"). Here no warpgroup waits for another's
// S: compute warpgroup x (1 + x, x = 0 or 1) owns the blocks i with
// i % 2 == x, which always land in buffer x. For its block i it
//   1. takes block i - 1's row statistics and P from the other warpgroup
//      (READY), rescales its O and adds P(i - 1) V(i - 1) for its 256
//      output columns (P from shared memory), then releases buffer 1 - x;
//   2. computes S(i) = Q K(i)^T (36 m64n64k16) once block i has landed
//      (FULL), runs the softmax of the 64 tokens against the running max
//      the other warpgroup published, stores P(i) into block i's rope
//      atom (read by nobody once the chain is done), publishes the row
//      statistics (READY), and adds P(i) V(i) for its columns (P from
//      registers); then releases buffer x (EMPTY).
// The intent: the softmax of one warpgroup overlaps the other's S chain and
// PV on the tensor pipe, and a block costs one hand-over per 64 tokens
// instead of one per 32. Measured on the H200 it does not pay: the READY
// chain runs through each block's hand-over PV, chain and softmax in turn
// (36% of the compute warps' samples wait on READY), 2.26 us a block
// against ws-pvg's 2.1 (docs/perf-log.md steps 35-36). The gather warpgroup (warps 0-1 the even blocks, 2-3 the odd
// ones) issues no wgmma: wgmma.fence waits for the issuing warp's copies in
// flight (docs/perf-log.md step 27). Every hand-over is an mbarrier
// (compute-sanitizer racecheck models them, not barrier.arrive), none of
// which can run two phases ahead of its waiters (see the loop). Shared
// memory: config.h stage1_pp_smem_plan. Registers: 384 x 168 at launch;
// setmaxnreg gives the gather warpgroup 40 and each compute warpgroup 232
// (O 128, S 32, P 16).
// ---------------------------------------------------------------------------

// Online softmax (base 2) of one 64-token block held as m64n64 accumulators:
// acc[4j + 2h + e] is row r0 + 8h, token 8j + 2t + e (t = lane % 4; the four
// lanes of a quad share a row). In place: the scores become the
// probabilities exp2(s * scale - m_new). sc: the factor exp2(m_old - m_new)
// for what was accumulated before; rs: the block's row sums. Tokens at or
// past valid are masked (FULL: none).
template <bool FULL>
__device__ __forceinline__ void pp_softmax(float (&acc)[32], int valid, float scale, float (&m)[2],
                                           float (&l)[2], float (&sc)[2], float (&rs)[2])
{
    const int t = threadIdx.x & 3;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        float tmax = -INFINITY;
#pragma unroll
        for (int j = 0; j < 8; ++j)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                float &v = acc[4 * j + 2 * h + e];
                v = FULL || 8 * j + 2 * t + e < valid ? v * scale : -INFINITY;
                tmax = fmaxf(tmax, v);
            }
        float m_use;
        sc[h] = ws_quad_max_step(tmax, m[h], m_use);
        float sum = 0.f;
#pragma unroll
        for (int j = 0; j < 8; ++j)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                float &v = acc[4 * j + 2 * h + e];
                v = ws_exp2(v - m_use);
                sum += v;
            }
        rs[h] = ws_quad_sum(sum);
        l[h] = l[h] * sc[h] + rs[h];
    }
}

// Q's first k16 steps held in registers by each compute warpgroup (RS-form
// wgmma, as the ws producer's QR): each step takes 2 KB of shared-memory
// reads off the chain (an SS m64n64k16 reads 4 KB in its ~32 cycles). 0 by
// default; -DMLA_PP_QR=8 (a multiple of 4, 4 registers a step) for the A/B:
// 8 compiles to R225 of the 232 and no spill, 12
// spilled 32 bytes.
#ifndef MLA_PP_QR
#define MLA_PP_QR 0
#endif
constexpr int PP_QR = MLA_PP_QR;
static_assert(PP_QR >= 0 && PP_QR % 4 == 0 && PP_QR <= 8, "PP_QR: whole atoms, within the registers");

// S[64 x 64] = Q K^T over the 576 columns: 36 m64n64k16, Q and the block
// (db) both in atoms of 64 rows x 128 bytes, so both descriptors take the
// same steps: 32 bytes inside an atom, 8 KB to the next. Steps below QR
// take Q from registers (qf), the rest from shared memory (da: the
// descriptor of step QR). Fully unrolled, the descriptors advanced by asm
// adds (see ws_s_chain: a rolled loop fences the accumulators, base +
// immediate forms spill).
template <int QR>
__device__ __forceinline__ void pp_s_chain(float (&acc)[32], const uint32_t (&qf)[QR > 0 ? QR : 1][4],
                                           uint64_t da, uint64_t db)
{
    wg_fence();
    if constexpr (QR > 0)
        wgmma_m64n64k16_rs<0>(acc, qf[0], db);
    else
        wgmma_m64n64k16<0>(acc, da, db);
#pragma unroll
    for (int k = 1; k < D_MAX / 16; ++k) {
        const uint64_t inc = (k & 3) ? 2 : (PP_ATOM >> 4) - 6;
        asm volatile("add.s64 %0, %0, %1;\n" : "+l"(db) : "l"(inc));
        if (k < QR) {
            wgmma_m64n64k16_rs<1>(acc, qf[k < QR ? k : 0], db);
        } else {
            if (k > QR)
                asm volatile("add.s64 %0, %0, %1;\n" : "+l"(da) : "l"(inc));
            wgmma_m64n64k16<1>(acc, da, db);
        }
    }
    wg_commit();
}

__global__ void __launch_bounds__(384, 1) stage1_pp_kernel(Stage1Params p)
{
    constexpr int ROWS = 64, NT = 384;
    constexpr Stage1PpSmem SM = stage1_pp_smem_plan();
    extern __shared__ __align__(16) unsigned char smem_raw[];
    unsigned char *base =
        smem_raw + ((1024u - ((uint32_t)__cvta_generic_to_shared(smem_raw) & 1023u)) & 1023u);
    bf16_t *Qs = (bf16_t *)(base + SM.q);
    float *Pub = (float *)(base + SM.pub);
    const uint32_t q_s = (uint32_t)__cvta_generic_to_shared(Qs);
    const uint32_t buf_s = (uint32_t)__cvta_generic_to_shared(base + SM.buf);
    // FULL[b] (64 threads: the gather warps of parity b): the block in
    // buffer b landed and was proxy-fenced. EMPTY[b] (256: both compute
    // warpgroups): done with it. READY[x] (128: compute warpgroup x): its
    // block's P and row statistics are out. QREADY (256, once): Q landed.
    // SDONE[x] (128: compute warpgroup x): every warp of it has waited for
    // its chain, so the rope atom that chain read may take P (wait_group
    // speaks for the waiting warp's view; the four warps' chains all read
    // the atom's 64 rows).
    const uint32_t mb = (uint32_t)__cvta_generic_to_shared(base + SM.mbar);
    const uint32_t mb_full = mb, mb_empty = mb + 16, mb_ready = mb + 32, mb_q = mb + 48, mb_sdone = mb + 56;

    pdl_launch_dependents();
    const int s = blockIdx.x, y = blockIdx.y, b = blockIdx.z;
    const int tid = threadIdx.x;
    int kv0, beg, end;
    if (!cta_split(p, s, b, kv0, beg, end))
        return;
    const int n = end - beg;
    const int q0 = p.qo_indptr[b];
    const int nb = (n + PP_BN - 1) / PP_BN;
    if (tid == 0) {
        for (int i = 0; i < 2; ++i) {
            mbar_init(mb_full + 8u * i, 64);
            mbar_init(mb_empty + 8u * i, 256);
            mbar_init(mb_ready + 8u * i, 128);
        }
        mbar_init(mb_q, 256);
        mbar_init(mb_sdone, 128);
        mbar_init(mb_sdone + 8u, 128);
    }
    __syncthreads();
    // Warp-uniform for the compiler as well (a broadcast): wgmma inside a
    // branch it cannot prove uniform is serialized (C7520).
    const int wg = __shfl_sync(0xffffffffu, tid >> 7, 0);
    constexpr int OSP = DV_MAX + 8; // staged partial rows (conflict-light fills)
    bf16_t *Os = (bf16_t *)(base + SM.buf);
    const long long part_row0 = ((long long)b * p.num_splits + s) * p.HL;

    if (wg == 0) {
        // Gather: warps 2 pw, 2 pw + 1 take the blocks of parity pw into
        // buffer pw, one at a time. 8 threads per token (whole 128-byte
        // lines), tokens tk + 8 r (r < 8) of the block: destination rows
        // tk + 8 r share tk's swizzle. The next block's slots are looked up
        // while this one's copies fly.
        regs_dec<40>();
        const int pw = (tid >> 6) & 1, lt = tid & 63, tk = lt >> 3, gc = lt & 7;
        const uint32_t dst = buf_s + (uint32_t)(pw * PP_BUF + tk * 128 + ((gc ^ tk) << 4));
        int64_t sl[8];
        auto slots = [&](int j) { block_slots(p, kv0 + beg, j, PP_BN, nb, n, tk, 8, sl); };
        slots(pw);
        for (int j = pw; j < nb; j += 2) {
            if (j >= 2)
                mbar_wait(mb_empty + 8u * pw, ((j >> 1) - 1) & 1); // block j - 2 done with
#pragma unroll
            for (int r = 0; r < 8; ++r) {
                // Tokens past the split's end are zero-filled: a masked
                // key's zero weight must never meet a stale non-finite value.
                const unsigned char *src =
                    (const unsigned char *)(p.kv + (sl[r] >= 0 ? sl[r] : 0) * p.kv_ss + gc * 8);
                const int nbytes = sl[r] >= 0 ? 16 : 0;
#pragma unroll
                for (int a = 0; a < D_MAX / 64; ++a)
                    cp_async16_s(dst + (uint32_t)(r * 1024 + a * PP_ATOM), src + 128 * a, nbytes);
            }
            cp_async_commit();
            slots(j + 2);
            cp_async_wait_group<0>();
            fence_proxy_async(); // wgmma (async proxy) reads the block
            mbar_arrive(mb_full + 8u * pw);
#ifndef MLA_PP_NO_L2_PREFETCH
            // Block j + 2's lines into L2 while blocks j and j + 1 are
            // computed: its buffer frees only after block j's two PV halves,
            // and the copies then wait for DRAM on the critical path (one
            // load per two blocks, docs/perf-log.md step 35). Thread gc takes
            // line gc of each of its 8 rows, and gc 0 the rope line too.
#pragma unroll
            for (int r = 0; r < 8; ++r) {
                if (sl[r] >= 0) {
                    const unsigned char *row = (const unsigned char *)(p.kv + sl[r] * p.kv_ss);
                    prefetch_l2(row + 128 * gc);
                    if (gc == 0)
                        prefetch_l2(row + 128 * 8);
                }
            }
#endif
        }
        nbar_sync(BAR_END, NT); // the compute warpgroups are done
        nbar_sync(BAR_END, NT); // the partial is staged
    } else {
        regs_inc<232>();
        const int lane = tid & 31, t4 = lane & 3, r0 = 16 * ((tid >> 5) & 3) + (lane >> 2);
        const int x = wg - 1;
        float o[128];
        float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
        if (nb > 0) {
            // Q (both compute warpgroups, 256 threads), zero rows past the
            // last valid one.
            load_q<ROWS, 256, true, DP>(p, y, q0, p.D >> 3, Qs, tid - 128);
            cp_async_commit();
            cp_async_wait_group<0>();
            fence_proxy_async();
            mbar_arrive(mb_q);
            mbar_wait(mb_q, 0);
        }
        // Q's first PP_QR k16 steps as A fragments (ldmatrix x4 of rows 16w
        // .. 16w + 15: lanes 0-7 / 8-15 rows 0-7 / 8-15 at column 16k, lanes
        // 16-31 the same rows at 16k + 8), and the descriptor of step QR.
        uint32_t qf[PP_QR > 0 ? PP_QR : 1][4];
        if (PP_QR > 0 && nb > 0) {
            const int lr = 16 * ((tid >> 5) & 3) + (lane & 7) + ((lane >> 3) & 1) * 8;
#pragma unroll
            for (int k = 0; k < PP_QR; ++k)
                ldsm_x4(qf[k][0], qf[k][1], qf[k][2], qf[k][3], Qs + toff<true>(lr, 16 * k + (lane >> 4) * 8, ROWS));
        }
        const uint64_t qda = wg_desc_sw128(q_s + (uint32_t)(PP_QR / 4 * PP_ATOM));
#pragma unroll
        for (int i = 0; i < 128; ++i)
            o[i] = 0.f;
        const int xo = 1 - x;
        const uint32_t bx = buf_s + (uint32_t)(x * PP_BUF), by = buf_s + (uint32_t)(xo * PP_BUF);
        float *pub_x = Pub + 192 * x;
        const float *pub_y = Pub + 192 * xo;
        // V columns 256 x .. 256 x + 255: atoms 4 x .. 4 x + 3 of a block,
        // MN-major, atoms 8 KB apart; a k16 step is 16 token rows (2 KB).
        const uint32_t vcol = (uint32_t)(4 * x * PP_ATOM);
        // Iteration i: block i - 1 (the other's, when i >= 1; i - 1 < nb),
        // then block i (this warpgroup's, when i < nb). Why no barrier runs
        // two phases ahead: this warpgroup arrives READY[x] for block i + 2
        // only after waiting READY[1 - x] for block i + 1, which the other
        // arrives after waiting READY[x] for block i; EMPTY[b] for block j +
        // 2 needs FULL[b] for block j + 2, which the gather arrives after
        // waiting EMPTY[b] for block j; FULL[b] for block j + 2 needs that
        // EMPTY[b], which needs FULL[b] for block j waited.
        for (int i = x; i <= nb; i += 2) {
            // S(i) once block i has landed, after the hand-over, so that the
            // other block's PV, and with it the release of that buffer, does
            // not queue behind a chain in this warpgroup's wgmma order (perf
            // log step 35). (Block 1's chain once went before block 0's
            // hand-over: ptxas then injected a wait into the hand-over's
            // rescale (C7517), and compute-sanitizer synccheck reported a
            // warpgroup MMA sequence mismatch between the warps there, on
            // k3-edges; perf log step 36.)
            float acc[32];
            auto chain = [&] {
                mbar_wait(mb_full + 8u * x, (i >> 1) & 1);
                pp_s_chain<PP_QR>(acc, qf, qda, wg_desc_sw128(bx));
            };
            if (i >= 1) {
                mbar_wait(mb_ready + 8u * xo, ((i - 1) >> 1) & 1);
                const float sc0 = pub_y[64 + r0], sc1 = pub_y[64 + r0 + 8];
                l[0] = l[0] * sc0 + pub_y[128 + r0];
                l[1] = l[1] * sc1 + pub_y[128 + r0 + 8];
                m[0] = pub_y[r0];
                m[1] = pub_y[r0 + 8];
                fence_regs(o);
                ws_rescale_o(o, sc0, sc1);
                // P(i - 1) from its block's rope atom (K-major, 32 bytes a
                // k16 step), V(i - 1) from the same buffer.
                const uint64_t dp = wg_desc_sw128(by + 8u * PP_ATOM);
                const uint64_t dv = wg_desc_mn_sw128_lbo(by + vcol, PP_ATOM);
                wg_fence();
#pragma unroll
                for (int k = 0; k < 4; ++k)
                    wgmma_m64n256k16_tb(o, dp + 2 * k, dv + (uint64_t)k * (2048 >> 4));
                wg_commit();
                wg_wait<0>();
                fence_regs(o);
                mbar_arrive(mb_empty + 8u * xo);
            }
            if (i < nb) {
                chain();
                wg_wait<0>();
                fence_regs(acc);
                mbar_arrive(mb_sdone + 8u * x); // waited for before the P store
                const int valid = n - i * PP_BN < PP_BN ? n - i * PP_BN : PP_BN;
                float sc[2], rs[2];
                if (valid == PP_BN)
                    pp_softmax<true>(acc, valid, p.scale_log2, m, l, sc, rs);
                else
                    pp_softmax<false>(acc, valid, p.scale_log2, m, l, sc, rs);
                // P(i) as bf16: the A fragments of the four k16 steps (rows
                // r0 / r0 + 8, tokens 16k + 2 t4 (+1), 16k + 8 + 2 t4 (+1)),
                // and the same words into the rope atom for the other
                // warpgroup.
                uint32_t pa[4][4];
#pragma unroll
                for (int k = 0; k < 4; ++k)
#pragma unroll
                    for (int e = 0; e < 4; ++e)
                        pa[k][e] = pack_bf2(acc[8 * k + 2 * e], acc[8 * k + 2 * e + 1]);
                bf16_t *Pst = (bf16_t *)(base + SM.buf + x * PP_BUF + 8 * PP_ATOM);
                mbar_wait(mb_sdone + 8u * x, (i >> 1) & 1); // the atom's last chain reads are done
#pragma unroll
                for (int k = 0; k < 4; ++k)
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        // e: 0 row r0 tokens 16k + 2t4, 1 row r0 + 8, 2 and 3 the
                        // same rows at 16k + 8 + 2t4.
                        const int r = r0 + 8 * (e & 1), c = 16 * k + 8 * (e >> 1) + 2 * t4;
                        *(uint32_t *)(Pst + toff<true>(r, c, ROWS)) = pa[k][e];
                    }
                if (t4 == 0) {
#pragma unroll
                    for (int h = 0; h < 2; ++h) {
                        pub_x[r0 + 8 * h] = m[h];
                        pub_x[64 + r0 + 8 * h] = sc[h];
                        pub_x[128 + r0 + 8 * h] = rs[h];
                    }
                }
                fence_proxy_async(); // the other warpgroup's wgmma reads P
                mbar_arrive(mb_ready + 8u * x);
                ws_rescale_o(o, sc[0], sc[1]);
                const uint64_t dv = wg_desc_mn_sw128_lbo(bx + vcol, PP_ATOM);
                wg_fence();
#pragma unroll
                for (int k = 0; k < 4; ++k)
                    wgmma_m64n256k16_rs_tb(o, pa[k], dv + (uint64_t)k * (2048 >> 4));
                wg_commit();
                wg_wait<0>();
                fence_regs(o);
                mbar_arrive(mb_empty + 8u * x);
            }
        }
        // Every wgmma and copy is done: the blocks' memory takes the
        // partial, staged so that it leaves in coalesced 16-byte rows.
        nbar_sync(BAR_END, NT);
        const float s0 = split_out_scale(p.v_scale, l[0]);
        const float s1 = split_out_scale(p.v_scale, l[1]);
        const int c0 = 256 * x;
#pragma unroll
        for (int j = 0; j < 32; ++j) {
            const int col = c0 + 8 * j + 2 * t4;
            *(uint32_t *)(Os + r0 * OSP + col) = pack_bf2(o[4 * j] * s0, o[4 * j + 1] * s0);
            *(uint32_t *)(Os + (r0 + 8) * OSP + col) = pack_bf2(o[4 * j + 2] * s1, o[4 * j + 3] * s1);
        }
        // Both warpgroups hold the same m and, up to the rounding of how
        // each contracts l * sc + rs, the same l (the same statistics in the
        // same order); the first writes the lse.
        if (x == 0 && t4 == 0) {
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                bool ok;
                const int r = row_of(p, ROWS, y, r0 + 8 * h, ok);
                if (ok)
                    p.part_lse[part_row0 + r] = split_lse(m[h], l[h]);
            }
        }
        nbar_sync(BAR_END, NT);
    }
    store_partial<ROWS, NT>(p, y, part_row0, Os, OSP);
}

} // namespace mla_dev

#endif // MLA_TARGET_NVIDIA
#endif
