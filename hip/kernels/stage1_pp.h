// Stage 1 of the fast tier, ping-pong (NVIDIA sm_90a; fast_kernel ws-pp, not
// the default): two compute warpgroups take 64-token K/V blocks in turn, each
// computing S, the softmax and its half of O; a third warpgroup only gathers.
#ifndef MLA_KERNELS_STAGE1_PP_H
#define MLA_KERNELS_STAGE1_PP_H

#include "stage1_ws.h"
#include "../device/cluster_sm90.h"
#include "../device/tma_sm90.h"

#include <type_traits>

#if defined(MLA_TARGET_NVIDIA)

namespace mla_dev {
// ---------------------------------------------------------------------------
// Why: in stage1_ws_kernel a producer warpgroup computes every S chain and
// hands each 32-token tile over to the PV warpgroups; the hand-over around
// the chain costs ~800 of a tile's ~2,000 cycles against ~1,180 of tensor
// work (docs/perf-log.md, "Where it stands after step 34"). The first form
// of this kernel (steps 35-36) handed every block over between the two
// compute warpgroups, so each block's hand-over PV, S chain and softmax ran
// in series (36% of the compute warps' samples waited on it). This form
// follows the schedule of FlashMLA's sm90 decode kernel (its blocks in
// pairs, one max per pair; read from its source, step 40): compute
// warpgroup x (1 + x) computes S of block 2q + x, both chains side by side;
// warpgroup 0 runs its softmax and publishes the pair's first max,
// warpgroup 1 runs its own against it, and only these two are in series.
// Each warpgroup then adds both blocks to its half of O's columns, its own
// P from registers, the other's from shared memory, and issues its next
// chain. Measured on the H200 (step 40): 3,840 cycles a block at K3 bs 32 /
// 16k, 1.03x auto's time; the hand-over wait fell from 24% of the samples
// to 2%, and the compute warps now wait 21% for a half to land. Step 42:
// blocks whose slots run contiguously land as TMA box copies, each atom
// on its own mbarrier so that the chain follows the boxes in, and an odd
// block's chain reads the right half first (the half its own warpgroup
// frees first): 262 us at K3 bs 32 / 16k with 64-token pages, against
// auto's 277 and FlashMLA's 223 in the same run; the load waits fell from
// 19% of the samples to 9.6%. A buffer
// frees by halves (V's left half is warpgroup 0's to read,
// the right half warpgroup 1's), so the next block's left half is copied
// while the right half is still in use. The gather warpgroup (warps 0-1
// the even blocks, 2-3 the odd ones) issues no wgmma: wgmma.fence waits for
// the issuing warp's copies in flight (docs/perf-log.md step 27). Every
// hand-over is an mbarrier (compute-sanitizer racecheck models them, not
// barrier.arrive), none of which can run two phases ahead of its waiters
// (see the loop). Shared memory: config.h stage1_pp_smem_plan. Registers:
// 384 x 168 at launch; setmaxnreg gives the gather warpgroup 40 and each
// compute warpgroup 232 (O 128, S 32, P 16).
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

// S[64 x 64] += Q K^T over atom A of the 576 columns (4 k16 steps, 32
// bytes apart; Q and the block both in atoms of 64 rows x 128 bytes, da and
// db the atom's descriptors), once its bytes landed on mbarrier bar (phase
// parity ph): a box-copied block feeds the chain atom by atom as its boxes
// land (FlashMLA's per-tile barriers), not after a whole half (step 42:
// 3.7% of K3 bs 32 / 16k). INIT: the first step starts the sum. The
// descriptors advance by asm adds (a rolled loop fences the accumulators,
// base + immediate forms spill). One commit group per atom.
template <int A, bool INIT>
__device__ __forceinline__ void pp_s_chain_atom(float (&acc)[32], uint64_t da, uint64_t db, uint32_t bar, uint32_t ph)
{
    mbar_wait(bar, ph);
    wg_fence();
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        if (k > 0) {
            asm volatile("add.s64 %0, %0, %1;\n" : "+l"(da) : "l"((uint64_t)2));
            asm volatile("add.s64 %0, %0, %1;\n" : "+l"(db) : "l"((uint64_t)2));
        }
        if (INIT && k == 0)
            wgmma_m64n64k16<0>(acc, da, db);
        else
            wgmma_m64n64k16<1>(acc, da, db);
    }
    wg_commit();
}

// Atoms A0 .. A0 + sizeof...(I) - 1 in order, atom a on mbarrier bar0 + 8 a
// (the ATOM barriers are consecutive); INIT: the first starts the sum.
template <int A0, bool INIT, int... I>
__device__ __forceinline__ void pp_s_chain_atoms(float (&acc)[32], uint32_t q_s, uint32_t bx, uint32_t bar0,
                                                 uint32_t ph, std::integer_sequence<int, I...>)
{
    (pp_s_chain_atom<A0 + I, INIT && I == 0>(acc, wg_desc_sw128(q_s + (uint32_t)(A0 + I) * PP_ATOM),
                                             wg_desc_sw128(bx + (uint32_t)(A0 + I) * PP_ATOM),
                                             bar0 + 8u * (uint32_t)(A0 + I), ph),
     ...);
}

// A 64 x 64 bf16 P tile (K-major, 128-byte swizzled, one atom) from the
// packed A fragments w[k][e] of a wgmma m64 layout: e 0 row r0 tokens 16k +
// 2t4 (+1), 1 row r0 + 8, 2 and 3 the same rows at 16k + 8 + 2t4.
__device__ __forceinline__ void pp_store_p(bf16_t *dst, const uint32_t (&w)[4][4], int r0, int t4)
{
#pragma unroll
    for (int k = 0; k < 4; ++k)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int r = r0 + 8 * (e & 1), c = 16 * k + 8 * (e >> 1) + 2 * t4;
            *(uint32_t *)(dst + toff<true>(r, c, 64)) = w[k][e];
        }
}

// Whether block j of a split (tokens first + 64 j ..) is whole and its 64
// slots run contiguously from s0, a row a box copy can name: then it lands
// as nine box copies (tma_sm90.h) instead of the per-line gather. Each lane
// reads two of the slots, so the two warps of a parity decide alike
// without a word between them (a barrier of the 64 gather threads would be
// a subset barrier, config.h). Partial blocks keep the gather: their
// masked tokens must be zeros, and a box copies whole rows.
__device__ __forceinline__ bool pp_block_run(const Stage1Params &p, int first, int j, int nb, int n, int &s0)
{
    static_assert(PP_BN == TMA_BOX_ROWS, "one box copy per atom of a block");
    if (j >= nb || (j + 1) * PP_BN > n)
        return false;
    const int lane = threadIdx.x & 31;
    const int64_t *ix = p.kv_indices + first + j * PP_BN;
    const int64_t a = ix[lane], b = ix[32 + lane];
    const int64_t base = __shfl_sync(0xffffffffu, a, 0);
    const bool ok = base >= 0 && base <= (int64_t)INT32_MAX - (PP_BN - 1) && a == base + lane && b == base + 32 + lane;
    s0 = (int)base;
    return __all_sync(0xffffffffu, ok);
}

// tm: the pool as a tensor for the box copies (tm.on 0: the gather alone).
__global__ void __launch_bounds__(384, 1) stage1_pp_kernel(Stage1Params p, const __grid_constant__ PoolTmaMap tm)
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
    const uint32_t px_s = (uint32_t)__cvta_generic_to_shared(base + SM.px);
    // Buffer b holds the blocks i with i % 2 == b; its left half is atoms
    // 0-3 (V columns 0-255), its right half atoms 4-8 (V columns 256-511
    // and the rope atom). FULL_L/R[b] (64: the gather warps of parity b):
    // that half landed (cp.async arrivals) or its boxes are issued (plain
    // arrivals; ATOM below carries their landing). EMPTY_L[b] (128: compute
    // warpgroup 0, the only reader of V's left half) and EMPTY_R[b] (128:
    // compute warpgroup 1, the right half's): done with it. QREADY (256,
    // once): Q landed. SC0 / SC1 (128: warpgroup 0 / 1): the pair's running
    // max and rescale factor of block 2q / 2q + 1 are out. P0R (128,
    // warpgroup 0): P(2q), rescaled to the pair's max, is in buffer 0's rope
    // atom. P1R (128, warpgroup 1): P(2q + 1) is in PX.
    const uint32_t mb = (uint32_t)__cvta_generic_to_shared(base + SM.mbar);
    auto full_l = [&](int b) { return mb + 8u * b; };
    auto full_r = [&](int b) { return mb + 16u + 8u * b; };
    auto empty_l = [&](int b) { return mb + 32u + 8u * b; };
    auto empty_r = [&](int b) { return mb + 48u + 8u * b; };
    const uint32_t mb_q = mb + 64, mb_sc0 = mb + 72, mb_sc1 = mb + 80, mb_p0r = mb + 88, mb_p1r = mb + 96;
    // ATOM[b][a] (1 + the box bytes): atom a of buffer b landed, for a
    // box-copied block; a gathered block's arrive at once (FULL carries
    // its bytes), so the consumer waits on both in either case.
    auto atom_mb = [&](int b, int a) { return mb + 104u + 8u * (uint32_t)(9 * b + a); };

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
            mbar_init(full_l(i), 64);
            mbar_init(full_r(i), 64);
            mbar_init(empty_l(i), 128);
            mbar_init(empty_r(i), 128);
        }
        mbar_init(mb_q, 256);
        mbar_init(mb_sc0, 128);
        mbar_init(mb_sc1, 128);
        mbar_init(mb_p0r, 128);
        mbar_init(mb_p1r, 128);
        for (int i = 0; i < 18; ++i)
            mbar_init(atom_mb(i / 9, i % 9), 1);
        fence_mbar_init();
    }
    __syncthreads();
    // Warp-uniform for the compiler as well (a broadcast): wgmma inside a
    // branch it cannot prove uniform is serialized (C7520).
    const int wg = __shfl_sync(0xffffffffu, tid >> 7, 0);
    constexpr int OSP = DV_MAX + 8; // staged partial rows (conflict-light fills)
    bf16_t *Os = (bf16_t *)(base + SM.buf);
    const long long part_row0 = ((long long)b * p.num_splits + s) * p.HL;
    // Pub: the running max [64], the factors of blocks 2q and 2q + 1 [2][64],
    // the two warpgroups' row sums at the end [2][64].
    float *sM = Pub, *sSc0 = Pub + 64, *sSc1 = Pub + 128, *sL = Pub + 192;

    if (wg == 0) {
        // Gather: warps 2 pw, 2 pw + 1 take the blocks of parity pw into
        // buffer pw, each half as soon as its readers released it. 8 threads
        // per token (whole 128-byte lines), tokens tk + 8 r (r < 8) of the
        // block: destination rows tk + 8 r share tk's swizzle. The copies
        // arrive on FULL by themselves (cp.async.mbarrier.arrive), so the
        // right half's copies issue while the left half's fly. The next
        // block's slots are looked up while this one's copies fly. A block
        // whose slots run contiguously (pp_block_run) lands as box copies
        // issued by thread 0 of the parity, each on its atom's barrier with
        // its byte count; all 64 arrive plainly on FULL, so FULL counts 64
        // arrivals either way.
        regs_dec<40>();
        const int pw = (tid >> 6) & 1, lt = tid & 63, tk = lt >> 3, gc = lt & 7;
        const uint32_t dst = buf_s + (uint32_t)(pw * PP_BUF + tk * 128 + ((gc ^ tk) << 4));
        int64_t sl[8];
        int s0 = 0;
        bool run = false;
        auto slots = [&](int j) {
            block_slots(p, kv0 + beg, j, PP_BN, nb, n, tk, 8, sl);
            run = tm.on && pp_block_run(p, kv0 + beg, j, nb, n, s0);
        };
        const uint32_t atom0 = buf_s + (uint32_t)(pw * PP_BUF);
        // A box-copied half: its 64 FULL arrivals at once, its bytes on
        // the atoms' barriers. A gathered half: the atoms' arrivals at once.
        auto boxes = [&](uint32_t bar, int a0, int a1) {
            mbar_arrive(bar);
            if (lt == 0)
                for (int a = a0; a < a1; ++a) {
                    mbar_arrive_expect_tx(atom_mb(pw, a), (uint32_t)PP_ATOM);
                    tma_load_2d(atom0 + (uint32_t)(a * PP_ATOM), tm.map, TMA_BOX_COLS * a, s0, atom_mb(pw, a));
                }
        };
        auto atoms_now = [&](int a0, int a1) {
            if (lt == 0)
                for (int a = a0; a < a1; ++a)
                    mbar_arrive(atom_mb(pw, a));
        };
        if (tm.on && lt == 0)
            tma_prefetch_map(tm.map);
        auto copy = [&](int a0, int a1) {
#pragma unroll
            for (int r = 0; r < 8; ++r) {
                // Tokens past the split's end are zero-filled: a masked
                // key's zero weight must never meet a stale non-finite value.
                const unsigned char *src =
                    (const unsigned char *)(p.kv + (sl[r] >= 0 ? sl[r] : 0) * p.kv_ss + gc * 8);
                const int nbytes = sl[r] >= 0 ? 16 : 0;
#pragma unroll
                for (int a = a0; a < a1; ++a)
                    cp_async16_s(dst + (uint32_t)(r * 1024 + a * PP_ATOM), src + 128 * a, nbytes);
            }
        };
        slots(pw);
        for (int j = pw; j < nb; j += 2) {
            const uint32_t ph = (uint32_t)((j >> 1) - 1) & 1; // block j - 2's release
            // One half of block j: after its readers released block j - 2's.
            auto half = [&](uint32_t empty, uint32_t full, int a0, int a1) {
                if (j >= 2)
                    mbar_wait(empty, ph);
                if (run) {
                    boxes(full, a0, a1);
                } else {
                    copy(a0, a1);
                    cp_async_mbar_arrive(full);
                    atoms_now(a0, a1);
                }
            };
            auto half_l = [&] { half(empty_l(pw), full_l(pw), 0, 4); };
            auto half_r = [&] { half(empty_r(pw), full_r(pw), 4, 9); };
            // The halves in the order their chain reads them (chain_odd).
#ifndef MLA_PP_ODD_L_FIRST
            if (pw == 1) {
                half_r();
                half_l();
            } else
#endif
            {
                half_l();
                half_r();
            }
            slots(j + 2);
#ifdef MLA_PP_L2_PREFETCH
            // A/B switch (off by default): block j + 2's lines into L2 now,
            // so that its copies, issued once block j's halves free, wait
            // for L2 rather than DRAM: a half has about one PV of lead in
            // this schedule. Thread gc takes line gc of each of its 8 rows,
            // and gc 0 the rope line too.
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
        cp_async_wait_all();
        nbar_sync(BAR_END, NT); // the compute warpgroups are done
        nbar_sync(BAR_END, NT); // the partial is staged
    } else {
        regs_inc<232>();
        const int lane = tid & 31, t4 = lane & 3, r0 = 16 * ((tid >> 5) & 3) + (lane >> 2);
        const int x = wg - 1;
        float o[128];
        float l[2] = {0.f, 0.f};
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
#pragma unroll
        for (int i = 0; i < 128; ++i)
            o[i] = 0.f;
        const uint32_t b0 = buf_s, b1 = buf_s + PP_BUF;
        bf16_t *P0st = (bf16_t *)(base + SM.buf + 8 * PP_ATOM); // buffer 0's rope atom
        bf16_t *P1st = (bf16_t *)(base + SM.px);
        const int npair = (nb + 1) >> 1;
        float acc[32];
        // S of block i (this warpgroup's) by halves, each atom as soon as it
        // landed: one commit group per atom (L_GROUPS for the left half).
        // first: a std::bool_constant, whether this half starts the sum.
        constexpr int L_GROUPS = 4;
        auto chain_l = [&](int i, auto first) {
            constexpr bool F = decltype(first)::value;
            const uint32_t bx = x ? b1 : b0, ph = (uint32_t)(i >> 1) & 1;
            mbar_wait(full_l(x), ph);
            fence_proxy_async(); // gathered atoms came by cp.async (generic proxy)
            pp_s_chain_atoms<0, F>(acc, q_s, bx, atom_mb(x, 0), ph, std::make_integer_sequence<int, 4>{});
        };
        auto chain_r = [&](int i, auto first) {
            constexpr bool F = decltype(first)::value;
            const uint32_t bx = x ? b1 : b0, ph = (uint32_t)(i >> 1) & 1;
            mbar_wait(full_r(x), ph);
            fence_proxy_async();
            pp_s_chain_atoms<4, F>(acc, q_s, bx, atom_mb(x, 0), ph, std::make_integer_sequence<int, 5>{});
        };
        // An odd block's chain (warpgroup 1): the right half first, as
        // FlashMLA's second warpgroup does. Buffer 1's right half is freed by
        // warpgroup 1's own PV, its left half only after warpgroup 0's PV of
        // the same block, just before this chain; the gather copies buffer
        // 1's halves in the same order. MLA_PP_ODD_L_FIRST: the left first.
        auto chain_odd = [&](int i) {
#ifdef MLA_PP_ODD_L_FIRST
            chain_l(i, std::true_type{});
            chain_r(i, std::false_type{});
#else
            chain_r(i, std::true_type{});
            chain_l(i, std::false_type{});
#endif
        };
        auto valid_of = [&](int i) { return n - i * PP_BN < PP_BN ? n - i * PP_BN : PP_BN; };
        // Block i's softmax against the running max m (l and m updated, sc
        // the factor for what came before); publish: the new max and the
        // factor to sM and the warpgroup's factor row sf.
        auto softmax = [&](int i, float (&m)[2], float (&sc)[2]) {
            float rs[2];
            const int valid = valid_of(i);
            if (valid == PP_BN)
                pp_softmax<true>(acc, valid, p.scale_log2, m, l, sc, rs);
            else
                pp_softmax<false>(acc, valid, p.scale_log2, m, l, sc, rs);
        };
        auto publish = [&](const float (&m)[2], const float (&sc)[2], float *sf) {
            __syncwarp(); // the quad's reads of sM come first (no shuffle between them without a block)
            if (t4 == 0) {
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    sM[r0 + 8 * h] = m[h];
                    sf[r0 + 8 * h] = sc[h];
                }
            }
        };
        // P as the A fragments of four k16 steps, row r0 + 8h scaled by f[h].
        auto pack_p = [&](uint32_t (&pa)[4][4], const float (&f)[2]) {
#pragma unroll
            for (int k = 0; k < 4; ++k)
#pragma unroll
                for (int e = 0; e < 4; ++e)
                    pa[k][e] = pack_bf2(acc[8 * k + 2 * e] * f[e & 1], acc[8 * k + 2 * e + 1] * f[e & 1]);
        };
        // O[:, 256x half] += P V's half: P from registers (pa) or from a
        // shared atom (descriptor dp), V's four k16 steps 2 KB apart. One
        // commit group.
        auto pv_regs = [&](const uint32_t (&pa)[4][4], uint64_t dv) {
            wg_fence();
#pragma unroll
            for (int k = 0; k < 4; ++k)
                wgmma_m64n256k16_rs_tb(o, pa[k], dv + (uint64_t)k * (2048 >> 4));
            wg_commit();
        };
        auto pv_smem = [&](uint64_t dp, uint64_t dv) {
            wg_fence();
#pragma unroll
            for (int k = 0; k < 4; ++k)
                wgmma_m64n256k16_tb(o, dp + 2 * k, dv + (uint64_t)k * (2048 >> 4));
            wg_commit();
        };
        // Pair q: blocks 2q (warpgroup 0's, buffer 0) and 2q + 1 (warpgroup
        // 1's, buffer 1; absent when nb is odd and q is the last pair). The
        // two chains of a pair run side by side; only the two softmaxes are
        // in series (warpgroup 1's needs block 2q's max). Then each
        // warpgroup adds both blocks to its half of O: warpgroup 0 the
        // columns 0-255 (P(2q) from registers, P(2q + 1) from PX),
        // warpgroup 1 the columns 256-511 (P(2q + 1) from registers, P(2q)
        // from buffer 0's rope atom, which block 2q's chain has read).
        // Why no barrier runs two phases ahead: SC0 of pair q + 1 follows
        // warpgroup 0's wait for SC1 of pair q, which follows warpgroup 1's
        // wait for SC0 of pair q; P0R of pair q + 1 follows warpgroup 0's
        // wait for SC1 of pair q + 1, which follows warpgroup 1's wait for
        // P0R of pair q, and P1R of pair q + 1 follows warpgroup 1's wait for
        // SC0 of pair q + 1, which follows warpgroup 0's wait for P1R of
        // pair q; a half's EMPTY for block j + 2 follows the read of block j
        // + 2, whose FULL (and ATOM) arrivals follow the gather's wait for
        // that EMPTY of block j, which follows the consumers' FULL and ATOM
        // waits of block j. Write-after-read: P1 of pair q + 1 is stored after SC0 of pair
        // q + 1, which warpgroup 0 arrives after its PV of P1 of pair q has
        // completed; P0 of pair q + 1 goes into the rope atom of block 2q +
        // 2, which the gather copies only after warpgroup 1's EMPTY_R(0) of
        // pair q; every warp of warpgroup 0 has waited for its chain before
        // SC0, so the P0 store after SC1 never meets the chain's reads.
        if (x == 0) {
            if (nb > 0) {
                chain_l(0, std::true_type{});
                chain_r(0, std::false_type{});
                wg_wait<0>();
            }
            for (int q = 0; q < npair; ++q) {
                const int i0 = 2 * q;
                const bool has1 = i0 + 1 < nb, next = i0 + 2 < nb;
                const uint32_t ph = (uint32_t)q & 1;
                fence_regs(acc);
                float m[2];
                m[0] = q > 0 ? sM[r0] : -INFINITY;
                m[1] = q > 0 ? sM[r0 + 8] : -INFINITY;
                float sc[2];
                softmax(i0, m, sc);
                publish(m, sc, sSc0);
                mbar_arrive(mb_sc0);
                ws_rescale_o(o, sc[0], sc[1]);
                uint32_t pa[4][4];
                const float one[2] = {1.f, 1.f};
                pack_p(pa, one);
                // O[:, 0:256] += P(2q) V(2q)'s left half; then that half is
                // free.
                pv_regs(pa, wg_desc_mn_sw128_lbo(b0, PP_ATOM));
                wg_wait<0>();
                fence_regs(o);
                mbar_arrive(empty_l(0));
                // Block 2q + 1's factor: P(2q) at the pair's max for the
                // other warpgroup, and this half of O and l rescaled.
                mbar_wait(mb_sc1, ph);
                const float s1[2] = {sSc1[r0], sSc1[r0 + 8]};
                pack_p(pa, s1);
                pp_store_p(P0st, pa, r0, t4);
                fence_proxy_async(); // the other warpgroup's wgmma reads P
                mbar_arrive(mb_p0r);
                ws_rescale_o(o, s1[0], s1[1]);
                l[0] *= s1[0];
                l[1] *= s1[1];
                // (!has1 implies !next. One branch for both, so that ptxas
                // sees no path with a PV in flight past it: C7517.)
                if (has1) {
                    // O[:, 0:256] += P(2q + 1) V(2q + 1)'s left half.
                    mbar_wait(mb_p1r, ph);
                    fence_proxy_async();
                    pv_smem(wg_desc_sw128(px_s), wg_desc_mn_sw128_lbo(b1, PP_ATOM));
                    if (next) {
                        // Block 2q + 2's chain behind that PV; buffer 1's
                        // left half frees once the PV is done.
                        chain_l(i0 + 2, std::true_type{});
                        wg_wait<L_GROUPS>(); // the PV, not chain_l's groups
                        mbar_arrive(empty_l(1));
                        chain_r(i0 + 2, std::false_type{});
                        wg_wait<0>();
                    } else {
                        wg_wait<0>();
                        mbar_arrive(empty_l(1));
                    }
                }
                fence_regs(o);
            }
        } else {
            if (nb > 1) {
                chain_odd(1);
                wg_wait<0>();
            }
            for (int q = 0; q < npair; ++q) {
                const int i1 = 2 * q + 1;
                const bool has1 = i1 < nb, next = i1 + 2 < nb;
                const uint32_t ph = (uint32_t)q & 1;
                fence_regs(acc);
                mbar_wait(mb_sc0, ph);
                float m[2] = {sM[r0], sM[r0 + 8]};
                const float s0[2] = {sSc0[r0], sSc0[r0 + 8]};
                l[0] *= s0[0];
                l[1] *= s0[1];
                float sc[2] = {1.f, 1.f};
                if (has1)
                    softmax(i1, m, sc);
                publish(m, sc, sSc1);
                mbar_arrive(mb_sc1);
                ws_rescale_o(o, s0[0] * sc[0], s0[1] * sc[1]);
                // O[:, 256:512] += P(2q) V(2q)'s right half (P at the pair's
                // max, from buffer 0's rope atom).
                auto pv0 = [&] {
                    mbar_wait(mb_p0r, ph);
                    fence_proxy_async();
                    pv_smem(wg_desc_sw128(b0 + 8u * PP_ATOM), wg_desc_mn_sw128_lbo(b0 + 4u * PP_ATOM, PP_ATOM));
                };
                if (has1) {
                    uint32_t pa[4][4];
                    const float one[2] = {1.f, 1.f};
                    pack_p(pa, one);
                    pp_store_p(P1st, pa, r0, t4);
                    fence_proxy_async(); // the other warpgroup's wgmma reads P
                    mbar_arrive(mb_p1r);
                    // O[:, 256:512] += P(2q + 1) V(2q + 1)'s right half.
                    pv_regs(pa, wg_desc_mn_sw128_lbo(b1 + 4u * PP_ATOM, PP_ATOM));
                    pv0();
                    wg_wait<1>();
                    mbar_arrive(empty_r(1));
                    wg_wait<0>();
                } else {
                    pv0();
                    wg_wait<0>();
                }
                fence_regs(o);
                mbar_arrive(empty_r(0));
                if (next) {
                    chain_odd(i1 + 2);
                    wg_wait<0>();
                }
            }
        }
        // Every wgmma and copy is done: the blocks' memory takes the
        // partial, staged so that it leaves in coalesced 16-byte rows. Each
        // warpgroup's l holds its own blocks' sums at the final max; the
        // row's sum is the two added in one order by both.
        if (t4 == 0) {
            sL[64 * x + r0] = l[0];
            sL[64 * x + r0 + 8] = l[1];
        }
        nbar_sync(BAR_END, NT);
        const float lt0 = sL[r0] + sL[64 + r0], lt1 = sL[r0 + 8] + sL[64 + r0 + 8];
        const float s0 = split_out_scale(p.v_scale, lt0);
        const float s1 = split_out_scale(p.v_scale, lt1);
        const int c0 = 256 * x;
#pragma unroll
        for (int j = 0; j < 32; ++j) {
            const int col = c0 + 8 * j + 2 * t4;
            *(uint32_t *)(Os + r0 * OSP + col) = pack_bf2(o[4 * j] * s0, o[4 * j + 1] * s0);
            *(uint32_t *)(Os + (r0 + 8) * OSP + col) = pack_bf2(o[4 * j + 2] * s1, o[4 * j + 3] * s1);
        }
        if (x == 0 && t4 == 0) {
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                bool ok;
                const int r = row_of(p, ROWS, y, r0 + 8 * h, ok);
                if (ok)
                    p.part_lse[part_row0 + r] =
                        split_lse(nb > 0 ? sM[r0 + 8 * h] : -INFINITY, h ? lt1 : lt0);
            }
        }
        nbar_sync(BAR_END, NT);
    }
    store_partial<ROWS, NT>(p, y, part_row0, Os, OSP);
}

} // namespace mla_dev

#endif // MLA_TARGET_NVIDIA
#endif
