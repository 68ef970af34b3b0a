// Stage 1 of the fast tier on a CTA pair (NVIDIA sm_90a; fast_kernel pair):
// all NR query rows (96: Kimi-K3 TP8; 64: DeepSeek-V3 TP8) in one pass, no
// padding rows, the head dimension split over the two CTAs of a cluster.
#ifndef MLA_KERNELS_STAGE1_PAIR_H
#define MLA_KERNELS_STAGE1_PAIR_H

#include "../device/cluster_sm90.h"
#include "stage1_ws.h"

#if defined(MLA_TARGET_NVIDIA)

namespace mla_dev {
// ---------------------------------------------------------------------------
// Why: wgmma's M is 64, so every other stage 1 runs K3's 96 rows as two
// 64-row blocks, a quarter of the tensor work on padding (as FlashMLA,
// which the same-run table puts at 88% of that padded bound). Swapping the
// operands (SPEC section 10) puts the 64 tokens of a block in M and the
// query rows in N: S^T = K Q^T (m64nNRk16) and O^T = V^T P^T (m64nNRk16,
// dv in M). O^T of 96 rows x 512 columns in fp32 is 192 KB, too much for
// one SM's registers beside S, so a cluster of two CTAs shares each split:
// CTA r holds V columns 256 r .. + 255 (its O^T, 96 registers a thread in
// two warpgroups) and the matching half of every K row (nope 256 r .. and
// rope 512 + 32 r ..), so each CTA gathers half of each token row and the
// two together read every byte once. The S^T chain of a CTA covers its
// half of the 576 columns (18 k16 steps); the halves are summed across the
// pair through distributed shared memory: CTA r sends the partial scores of
// the partner's rows (query rows NR/2 (1 - r) ..) and receives those of its
// own, runs the online softmax of its own NR/2 rows (the running max never
// crosses CTAs), and writes P^T of its rows into both CTAs' P buffer with
// the rows' rescale factors. Each CTA's PV then covers all NR rows for its
// 256 columns.
// Warpgroups: 0 gathers (warps 0-1 the even blocks, 2-3 the odd), 1 runs the
// S^T chain, the exchange and the softmax, 2 and 3 the PV (m-tiles 2x,
// 2x + 1 of the CTA's four). Every hand-over is an mbarrier; those that
// cross CTAs arrive with release.cluster and are waited with
// acquire.cluster. Tensor work per block and CTA at NR = 96: S 18 x 48 +
// PV 16 x 48 = 1,632 cycles, against 2,176 for each of the two 64-row CTAs
// of the padded kernels.
// ---------------------------------------------------------------------------

template <int NR> struct PairMma;
template <> struct PairMma<96> {
    template <int SD> __device__ static void s(float (&d)[48], uint64_t a, uint64_t b) { wgmma_m64n96k16<SD>(d, a, b); }
    __device__ static void o(float (&d)[48], uint64_t a, uint64_t b) { wgmma_m64n96k16_ta(d, a, b); }
};
template <> struct PairMma<64> {
    template <int SD> __device__ static void s(float (&d)[32], uint64_t a, uint64_t b) { wgmma_m64n64k16<SD>(d, a, b); }
    __device__ static void o(float (&d)[32], uint64_t a, uint64_t b) { wgmma_m64n64k16_ta(d, a, b); }
};

// S^T[64 tokens x NR] over this CTA's 288 columns: 16 nope steps through
// the 128-byte swizzled atoms (32 bytes a step inside an atom, the next atom
// PR_ATOM bytes on for the block, NR * 128 for Q^T), then the two rope steps
// in the unswizzled core-matrix layout (256 bytes a step).
template <int NR>
__device__ __forceinline__ void pair_s_chain(float (&acc)[NR / 2], uint32_t stage_s, uint32_t q_s)
{
    uint64_t da = wg_desc_sw128(stage_s), db = wg_desc_sw128(q_s);
    wg_fence();
    PairMma<NR>::template s<0>(acc, da, db);
#pragma unroll
    for (int k = 1; k < 16; ++k) {
        const uint64_t ia = (k & 3) ? 2 : (PR_ATOM - 96) >> 4;
        const uint64_t ib = (k & 3) ? 2 : (NR * 128 - 96) >> 4;
        asm volatile("add.s64 %0, %0, %1;\n" : "+l"(da) : "l"(ia));
        asm volatile("add.s64 %0, %0, %1;\n" : "+l"(db) : "l"(ib));
        PairMma<NR>::template s<1>(acc, da, db);
    }
    const uint64_t ra = wg_desc_kint(stage_s + PR_ROPE), rb = wg_desc_kint(q_s + 4 * NR * 128);
    PairMma<NR>::template s<1>(acc, ra, rb);
    PairMma<NR>::template s<1>(acc, ra + (256 >> 4), rb + (256 >> 4));
    wg_commit();
}

// Where warpgroup 1 issues the S^T chain of block i + 1 in its iteration
// for block i: 0 after publishing P(i) (a late block i + 1 then delays
// nothing of block i), 1 first (the chain beside the exchange and the
// softmax), 2 after the exchange. -D for the A/B (docs/perf-log.md step 37).
#ifndef MLA_PAIR_AHEAD
#define MLA_PAIR_AHEAD 0
#endif
// The gather warps' L2 prefetch of their next block (1, default) or none.
#ifndef MLA_PAIR_L2_PREFETCH
#define MLA_PAIR_L2_PREFETCH 1
#endif

// a if c else b, as one selp: a C select of acc[lo] and acc[hi] becomes a
// load from acc[c ? lo : hi], which puts the accumulators in local memory.
__device__ __forceinline__ float pair_pick(bool c, float a, float b)
{
    float y;
    asm("{\n.reg .pred q;\nsetp.ne.b32 q, %3, 0;\nselp.f32 %0, %1, %2, q;\n}\n"
        : "=f"(y)
        : "f"(a), "f"(b), "r"((int)c));
    return y;
}

template <int NR>
__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(512, 1) stage1_pair_kernel(Stage1Params p)
{
    constexpr int NT = 512, NA = NR / 2, JH = NR / 16; // NA: accumulators; JH: 8-column blocks a CTA owns
    constexpr Stage1PairSmem SM = stage1_pair_smem_plan(NR);
    extern __shared__ __align__(16) unsigned char smem_raw[];
    unsigned char *base =
        smem_raw + ((1024u - ((uint32_t)__cvta_generic_to_shared(smem_raw) & 1023u)) & 1023u);
    const uint32_t base_s = (uint32_t)__cvta_generic_to_shared(base);
    const uint32_t q_s = base_s + SM.q, st_s = base_s + SM.stage, p_s = base_s + SM.p;
    float *Sx = (float *)(base + SM.sx);
    float *Alpha = (float *)(base + SM.alpha);
    float *Red = (float *)(base + SM.red);
    float *Fin = (float *)(base + SM.fin);
    // FULL[3] (32: gather warp s owns stage s): the block landed. EMPTY[3]
    // (12: the warps of warpgroups 1-3): done with the stage. SXF[2] (1
    // arrival, the local arm, + the partner's 12,288 bytes of st.async at
    // NR 96): its partial scores of my rows are in Sx. (Its slot is free
    // again without a barrier: the partner writes it for block i + 2 only
    // after it has my scores of block i + 1, which each of my threads sends
    // after reading the slot for block i.) MX[2] (128): the block's column
    // maxima are in Red. PF[2] (4: warpgroup 1's warps, one also arming the
    // partner's bytes of P^T and rescale factors): the block's P^T is in.
    // PE[2] (16: warpgroups 2-3's warps here and in the partner): both
    // CTAs' PV are done with the P slot. LX (128): the row sums are in Red.
    // QR (128): Q^T landed. FIN (4, one arming the partner's bytes): every
    // row's 1 / l is in Fin. Arrivals per warp: __syncwarp orders the
    // lanes' writes before lane 0's release. Data crosses CTAs only as
    // st.async (device/cluster_sm90.h says why), so every wait is a plain
    // CTA-scope wait.
    const uint32_t mb = base_s + SM.mbar;
    const uint32_t mb_full = mb, mb_empty = mb + 24, mb_sxf = mb + 48, mb_mx = mb + 80,
                   mb_pf = mb + 96, mb_pe = mb + 112, mb_lx = mb + 128, mb_qr = mb + 136, mb_fin = mb + 144;

    pdl_launch_dependents();
    const int r = (int)cluster_rank(), s = blockIdx.x >> 1, b = blockIdx.z;
    const uint32_t pr = (uint32_t)(1 - r);
    const int tid = threadIdx.x, lane = tid & 31;
    int kv0, beg, end;
    // Both CTAs of a cluster take the same split: an inactive one leaves as
    // a pair, before any cluster barrier.
    if (!cta_split(p, s, b, kv0, beg, end))
        return;
    const int n = end - beg;
    const int q0 = p.qo_indptr[b];
    const int nb = (n + PR_BN - 1) / PR_BN;
    if (tid == 0) {
        for (int i = 0; i < 3; ++i) {
            mbar_init(mb_full + 8u * i, 32);
            mbar_init(mb_empty + 8u * i, 12);
        }
        for (int i = 0; i < 2; ++i) {
            mbar_init(mb_sxf + 8u * i, 1);
            mbar_init(mb_mx + 8u * i, 128);
            mbar_init(mb_pf + 8u * i, 4);
            mbar_init(mb_pe + 8u * i, 16);
        }
        mbar_init(mb_lx, 128);
        mbar_init(mb_qr, 128);
        mbar_init(mb_fin, 4);
        fence_mbar_init_cluster();
    }
    __syncthreads();
    cluster_sync_all(); // the partner's barriers exist before any remote arrival
    const int wg = __shfl_sync(0xffffffffu, tid >> 7, 0);
    constexpr int OSP = 256 + 8; // staged partial rows: 256 columns of this CTA
    bf16_t *Os = (bf16_t *)(base + SM.stage);
    const long long part_row0 = ((long long)b * p.num_splits + s) * p.HL;
    // Lane 0 of each warp arrives for the warp, once every lane is past this
    // point (local or, with remote, the partner's copy of the barrier).
    auto warp_arrive = [&](uint32_t bar) {
        __syncwarp();
        if (lane == 0)
            mbar_arrive(bar);
    };

    if (wg == 0) {
        // Gather: warp g (0-2) owns stage g and takes the blocks j = g mod 3,
        // three blocks in flight; warp 3 has nothing to do. 8 lanes per token
        // row (chunk gc of each 128-byte nope line; gc < 4 also the rope
        // chunk), tokens tk + 4 i of the block.
        regs_dec<80>();
        const int g = tid >> 5, tk = lane >> 3, gc = lane & 7;
        const long long col0 = 256LL * r + 8 * gc, rope0 = 512LL + 32 * r + 8 * gc;
        if (g < PR_STAGES) {
            const uint32_t dst = st_s + (uint32_t)(g * PR_STAGE);
            // The slots of block j's tokens tk + 4 i (-1 past the split),
            // looked up one block of this warp ahead: the lookups' latency
            // stays off the path from EMPTY to the copies.
            int64_t sl[16];
            auto slots = [&](int j) {
#pragma unroll
                for (int i = 0; i < 16; ++i) {
                    const int gt = j * PR_BN + tk + 4 * i;
                    sl[i] = j < nb && gt < n ? p.kv_indices[kv0 + beg + gt] : (int64_t)-1;
                }
            };
            slots(g);
            for (int j = g, u = 0; j < nb; j += PR_STAGES, ++u) {
                if (u >= 1)
                    mbar_wait(mb_empty + 8u * g, (uint32_t)(u - 1) & 1);
#pragma unroll
                for (int i = 0; i < 16; ++i) {
                    const int t = tk + 4 * i;
                    // Tokens past the split's end are zero-filled (a masked
                    // key's zero weight must never meet a stale NaN).
                    const bf16_t *row = p.kv + (sl[i] >= 0 ? sl[i] : 0) * p.kv_ss;
                    const int nbytes = sl[i] >= 0 ? 16 : 0;
                    const uint32_t dn = dst + (uint32_t)(t * 128 + ((gc ^ (t & 7)) << 4));
#pragma unroll
                    for (int a = 0; a < 4; ++a)
                        cp_async16_s(dn + (uint32_t)(a * PR_ATOM), row + col0 + 64 * a, nbytes);
                    if (gc < 4)
                        cp_async16_s(dst + (uint32_t)(PR_ROPE + (t >> 3) * 512 + gc * 128 + (t & 7) * 16),
                                     row + rope0, nbytes);
                }
                cp_async_commit();
                slots(j + PR_STAGES);
#if MLA_PAIR_L2_PREFETCH
                // This warp's next block into L2 while its stage is in use
                // (it frees only after the block's PV): the copies that
                // follow EMPTY then wait for L2, not DRAM. Lane gc < 4 takes
                // nope line gc of this CTA's half, gc 4 the rope line.
#pragma unroll
                for (int i = 0; i < 16; ++i)
                    if (gc < 5 && sl[i] >= 0)
                        prefetch_l2((const unsigned char *)(p.kv + sl[i] * p.kv_ss) +
                                    (gc < 4 ? 512 * r + 128 * gc : 1024));
#endif
                cp_async_wait_group<0>();
                fence_proxy_async(); // wgmma (async proxy) reads the block
                mbar_arrive(mb_full + 8u * g);
            }
        }
        nbar_sync(BAR_END, NT);
        nbar_sync(BAR_END, NT);
    } else if (wg == 1) {
        // S^T chain, exchange and softmax of this CTA's rows; the chain of
        // block i + 1 where MLA_PAIR_AHEAD puts it.
        regs_inc<176>();
        const int ts = tid - 128, w = ts >> 5, t4 = lane & 3;
        const int tk0 = 16 * w + (lane >> 2); // token rows tk0, tk0 + 8
        const int oj0 = r * JH;
        // Q^T: all NR rows (zero past HL), this CTA's 288 columns.
        for (int idx = ts; idx < NR * 36; idx += 128) {
            const int nq = idx / 36, c = idx - nq * 36;
            bool ok;
            const int rr = row_of(p, NR, 0, nq, ok);
            const bf16_t *src = p.q;
            if (ok)
                src = p.q + (long long)(q0 + rr / p.H) * p.q_st + (long long)(rr % p.H) * p.q_sh +
                      (c < 32 ? 256 * r + 8 * c : 512 + 32 * r + 8 * (c - 32));
            const uint32_t dst = c < 32 ? q_s + (uint32_t)((c >> 3) * NR * 128 + nq * 128 + (((c & 7) ^ (nq & 7)) << 4))
                                        : q_s + (uint32_t)(4 * NR * 128 + (nq >> 3) * 512 + (c - 32) * 128 + (nq & 7) * 16);
            cp_async16_s(dst, src, ok ? 16 : 0);
        }
        cp_async_commit();
        cp_async_wait_group<0>();
        fence_proxy_async();
        mbar_arrive(mb_qr);
        mbar_wait(mb_qr, 0);
        const uint32_t sx_remote = cluster_map(base_s + SM.sx, pr);
        const uint32_t p_remote = cluster_map(p_s, pr);
        const uint32_t al_remote = cluster_map(base_s + SM.alpha, pr);
        float m_run[2 * JH], l_run[2 * JH]; // own columns 8 (oj0 + jj) + 2 t4 + e, index 2 jj + e
#pragma unroll
        for (int c = 0; c < 2 * JH; ++c) {
            m_run[c] = -INFINITY;
            l_run[c] = 0.f;
        }
        // Block i from acc (its chain done), the next chain into nxt, which
        // becomes acc at the end of the iteration (48 moves: swapping two
        // arrays between the halves of an unrolled pair let nvcc merge the
        // halves through a pointer, and both went to local memory).
        float acc[NA], nxt[NA];
        auto chain = [&](int i, float (&a)[NA]) {
            const int stg = i % PR_STAGES;
            mbar_wait(mb_full + 8u * stg, (uint32_t)(i / PR_STAGES) & 1);
            pair_s_chain<NR>(a, st_s + (uint32_t)(stg * PR_STAGE), q_s);
        };
        if (nb > 0) {
            chain(0, acc);
            wg_wait<0>();
        }
        for (int i = 0; i < nb; ++i) {
            const int sl2 = i & 1;
            const uint32_t ph2 = (uint32_t)(i >> 1) & 1;
            // A chain past the last block (i + 1 == nb) re-reads the last
            // block's stage, which nobody writes any more, and is
            // discarded: issuing it keeps the step one basic block, and
            // the wait at the step's end leaves no wgmma in flight across
            // the loop (ptxas serializes every wgmma otherwise, C7518).
            if (MLA_PAIR_AHEAD == 1)
                chain(i + 1 < nb ? i + 1 : i, nxt);
            fence_regs(acc);
            warp_arrive(mb_empty + 8u * (i % PR_STAGES));
            // The partner's rows to the partner (its Sx slot, once it has
            // read what it held), then mine from it. r is known at run time
            // only: select, so that acc stays in registers (an index by r
            // puts it in local memory).
            const uint32_t sxr = sx_remote + (uint32_t)(sl2 * NA * PR_BN * 4);
            const uint32_t sxf_r = cluster_map(mb_sxf + 8u * sl2, pr);
            float own[JH][4];
#pragma unroll
            for (int jj = 0; jj < JH; ++jj) {
                const int lo = 4 * jj, hi = 4 * (JH + jj);
                float4 out;
                out.x = pair_pick(r, acc[lo], acc[hi]);
                out.y = pair_pick(r, acc[lo + 1], acc[hi + 1]);
                out.z = pair_pick(r, acc[lo + 2], acc[hi + 2]);
                out.w = pair_pick(r, acc[lo + 3], acc[hi + 3]);
                st_async_v4(sxr + (uint32_t)((jj * 128 + ts) * 16), *(const uint4 *)&out, sxf_r);
#pragma unroll
                for (int k = 0; k < 4; ++k)
                    own[jj][k] = pair_pick(r, acc[hi + k], acc[lo + k]);
            }
            if (ts == 0)
                mbar_arrive_expect_tx(mb_sxf + 8u * sl2, NA * PR_BN * 4);
            mbar_wait(mb_sxf + 8u * sl2, ph2);
            const float *sxl = Sx + sl2 * NA * PR_BN;
#pragma unroll
            for (int jj = 0; jj < JH; ++jj) {
                const float4 v4 = *(const float4 *)(sxl + (jj * 128 + ts) * 4);
                own[jj][0] += v4.x;
                own[jj][1] += v4.y;
                own[jj][2] += v4.z;
                own[jj][3] += v4.w;
            }
            if (MLA_PAIR_AHEAD == 2)
                chain(i + 1 < nb ? i + 1 : i, nxt);
            // Online softmax (base 2) of my NR / 2 rows over the block's 64
            // tokens: the column maxima over the 16 tokens of each warp
            // (two per lane, then the lanes of equal t4), across the four
            // warps through Red.
            const int valid = n - i * PR_BN < PR_BN ? n - i * PR_BN : PR_BN;
            float v[JH][4];
            float cm[2 * JH];
#pragma unroll
            for (int jj = 0; jj < JH; ++jj) {
#pragma unroll
                for (int h = 0; h < 2; ++h)
#pragma unroll
                    for (int e = 0; e < 2; ++e)
                        v[jj][2 * h + e] = tk0 + 8 * h < valid ? own[jj][2 * h + e] * p.scale_log2 : -INFINITY;
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    float x = fmaxf(v[jj][e], v[jj][2 + e]);
                    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 4));
                    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 8));
                    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 16));
                    cm[2 * jj + e] = x;
                }
            }
            float *red = Red + sl2 * NA * 4;
            if (lane < 4) {
#pragma unroll
                for (int jj = 0; jj < JH; ++jj)
#pragma unroll
                    for (int e = 0; e < 2; ++e)
                        red[(8 * jj + 2 * t4 + e) * 4 + w] = cm[2 * jj + e];
            }
            mbar_arrive(mb_mx + 8u * sl2);
            // The P slot is free in both CTAs once both PVs of block i - 2
            // are done.
            if (i >= 2)
                mbar_wait(mb_pe + 8u * sl2, ph2 ^ 1);
            mbar_wait(mb_mx + 8u * sl2, ph2);
            float al[2 * JH];
            uint32_t pk[JH][2];
#pragma unroll
            for (int jj = 0; jj < JH; ++jj)
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    const int c = 2 * jj + e;
                    const float4 m4 = *(const float4 *)(red + (8 * jj + 2 * t4 + e) * 4);
                    const float bm = fmaxf(fmaxf(m4.x, m4.y), fmaxf(m4.z, m4.w));
                    const float m_new = fmaxf(m_run[c], bm);
                    const float m_use = m_new == -INFINITY ? 0.f : m_new;
                    al[c] = ws_exp2(m_run[c] - m_use);
                    m_run[c] = m_new;
                    const float p0 = ws_exp2(v[jj][e] - m_use), p1 = ws_exp2(v[jj][2 + e] - m_use);
                    l_run[c] = l_run[c] * al[c] + p0 + p1;
                    v[jj][e] = p0;
                    v[jj][2 + e] = p1;
                }
#pragma unroll
            for (int jj = 0; jj < JH; ++jj)
#pragma unroll
                for (int h = 0; h < 2; ++h)
                    pk[jj][h] = pack_bf2(v[jj][2 * h], v[jj][2 * h + 1]);
            // P^T rows 8 (oj0 + jj) .. + 7, tokens 16 w + 8 h .. + 7: tile
            // (jj, h) is 8 x 8 in the accumulator layout; stmatrix.trans
            // stores it as 8 P^T rows of 16 bytes (chunk 2 w + h of the
            // 128-byte swizzled row).
            const uint32_t pl = p_s + (uint32_t)(sl2 * NR * 128);
            {
                const int q = lane >> 3, ci = lane & 7;
#pragma unroll
                for (int g = 0; g < JH / 2; ++g) {
                    const int bi = 4 * g + q, jj = bi >> 1, h = bi & 1;
                    const int nrow = 8 * (oj0 + jj) + ci;
                    const uint32_t a = pl + (uint32_t)(nrow * 128 + (((2 * w + h) ^ ci) << 4));
                    stsm_x4_t(a, pk[2 * g][0], pk[2 * g][1], pk[2 * g + 1][0], pk[2 * g + 1][1]);
                }
            }
            __syncwarp();
            // The same bytes to the partner: this warp's two chunks of each
            // of my NR / 2 rows.
            const uint32_t pr_dst = p_remote + (uint32_t)(sl2 * NR * 128);
            const uint32_t pf_r = cluster_map(mb_pf + 8u * sl2, pr);
#pragma unroll
            for (int k = 0; k < NR / 32; ++k) {
                const int idx = lane + 32 * k, nrow = 8 * oj0 + (idx >> 1), cc = 2 * w + (idx & 1);
                const uint32_t off = (uint32_t)(nrow * 128 + ((cc ^ (nrow & 7)) << 4));
                uint4 d;
                asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
                             : "=r"(d.x), "=r"(d.y), "=r"(d.z), "=r"(d.w)
                             : "r"(pl + off));
                st_async_v4(pr_dst + off, d, pf_r);
            }
            if (w == 0 && lane < 4) {
                float *alx = Alpha + sl2 * NR;
#pragma unroll
                for (int jj = 0; jj < JH; ++jj)
#pragma unroll
                    for (int e = 0; e < 2; ++e) {
                        const int col = 8 * (oj0 + jj) + 2 * t4 + e;
                        alx[col] = al[2 * jj + e];
                        st_async_f(al_remote + (uint32_t)((sl2 * NR + col) * 4), al[2 * jj + e], pf_r);
                    }
            }
            fence_proxy_async(); // this CTA's wgmma read the local P^T
            __syncwarp();
            if (lane == 0) {
                // Warp 0 also arms the partner's bytes: its NR / 2 rows of
                // P^T and their rescale factors.
                if (w == 0)
                    mbar_arrive_expect_tx(mb_pf + 8u * sl2, NA * 128 + NA * 4);
                else
                    mbar_arrive(mb_pf + 8u * sl2);
            }
            if (MLA_PAIR_AHEAD == 0) {
                // acc is dead here: the next chain writes it directly.
                chain(i + 1 < nb ? i + 1 : i, acc);
                wg_wait<0>();
                fence_regs(acc);
            } else {
                wg_wait<0>();
                fence_regs(nxt);
#pragma unroll
                for (int k = 0; k < NA; ++k)
                    acc[k] = nxt[k];
            }
        }
        // Row sums: over the lanes of equal t4, then the four warps.
        float lsum[2 * JH];
#pragma unroll
        for (int c = 0; c < 2 * JH; ++c) {
            float x = l_run[c];
            x += __shfl_xor_sync(0xffffffffu, x, 4);
            x += __shfl_xor_sync(0xffffffffu, x, 8);
            x += __shfl_xor_sync(0xffffffffu, x, 16);
            lsum[c] = x;
        }
        // Red's slot (nb & 1) was last read for block nb - 2, before each
        // thread's MX arrival for block nb - 1.
        float *red = Red + (nb & 1) * NA * 4;
        mbar_wait(mb_mx + 8u * ((nb + 1) & 1), nb >= 1 ? ((uint32_t)((nb - 1) >> 1) & 1) : 1u);
        if (lane < 4) {
#pragma unroll
            for (int jj = 0; jj < JH; ++jj)
#pragma unroll
                for (int e = 0; e < 2; ++e)
                    red[(8 * jj + 2 * t4 + e) * 4 + w] = lsum[2 * jj + e];
        }
        mbar_arrive(mb_lx);
        mbar_wait(mb_lx, 0);
        if (w == 0 && lane < 4) {
            const uint32_t fin_remote = cluster_map(base_s + SM.fin, pr), fin_r = cluster_map(mb_fin, pr);
#pragma unroll
            for (int jj = 0; jj < JH; ++jj)
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    const int c = 2 * jj + e, col = 8 * (oj0 + jj) + 2 * t4 + e;
                    const float4 l4 = *(const float4 *)(red + (8 * jj + 2 * t4 + e) * 4);
                    const float l = (l4.x + l4.y) + (l4.z + l4.w);
                    const float f = l != 0.f ? p.v_scale / l : 0.f;
                    Fin[col] = f;
                    st_async_f(fin_remote + (uint32_t)(col * 4), f, fin_r);
                    bool ok;
                    const int rr = row_of(p, NR, 0, col, ok);
                    // NaN (a NaN score): NaN lse, not -inf.
                    if (ok)
                        p.part_lse[part_row0 + rr] = l != 0.f ? (m_run[c] + __log2f(l)) * LN2 : -INFINITY;
                }
        }
        __syncwarp();
        if (lane == 0) {
            if (w == 0)
                mbar_arrive_expect_tx(mb_fin, NA * 4);
            else
                mbar_arrive(mb_fin);
        }
        nbar_sync(BAR_END, NT);
        nbar_sync(BAR_END, NT);
    } else {
        // O^T[256 r + 64 mt .. + 63][NR] for m-tiles mt = 2x, 2x + 1: thread
        // rows (dv) 16 w + lane / 4 (+ 8), columns (query rows) 8j + 2 t4 (+1).
        const int x = wg - 2, ts = tid & 127, w = ts >> 5, t4 = lane & 3;
        float o[2][NA];
#pragma unroll
        for (int i = 0; i < 2; ++i)
#pragma unroll
            for (int k = 0; k < NA; ++k)
                o[i][k] = 0.f;
        for (int i = 0; i < nb; ++i) {
            const int stg = i % PR_STAGES, sl2 = i & 1;
            const uint32_t ph2 = (uint32_t)(i >> 1) & 1;
            mbar_wait(mb_full + 8u * stg, (uint32_t)(i / PR_STAGES) & 1);
            mbar_wait(mb_pf + 8u * sl2, ph2);
            fence_proxy_async(); // the partner's rows of P^T came as st.async (generic proxy)
            const float *al = Alpha + sl2 * NR;
            float2 a[JH * 2];
            bool moved = false;
#pragma unroll
            for (int j = 0; j < 2 * JH; ++j) {
                a[j] = *(const float2 *)(al + 8 * j + 2 * t4);
                moved |= a[j].x != 1.f || a[j].y != 1.f;
            }
            if (__any_sync(0xffffffffu, moved)) {
#pragma unroll
                for (int j = 0; j < 2 * JH; ++j)
#pragma unroll
                    for (int m = 0; m < 2; ++m) {
                        o[m][4 * j] *= a[j].x;
                        o[m][4 * j + 1] *= a[j].y;
                        o[m][4 * j + 2] *= a[j].x;
                        o[m][4 * j + 3] *= a[j].y;
                    }
            }
            const uint32_t vs = st_s + (uint32_t)(stg * PR_STAGE);
            const uint64_t dp = wg_desc_sw128(p_s + (uint32_t)(sl2 * NR * 128));
            wg_fence();
#pragma unroll
            for (int m = 0; m < 2; ++m) {
                const uint64_t dv = wg_desc_mn_sw128_lbo(vs + (uint32_t)((2 * x + m) * PR_ATOM), PR_ATOM);
#pragma unroll
                for (int k = 0; k < 4; ++k)
                    PairMma<NR>::o(o[m], dv + (uint64_t)k * (2048 >> 4), dp + 2 * k);
            }
            wg_commit();
            wg_wait<0>();
            fence_regs(o[0]);
            fence_regs(o[1]);
            warp_arrive(mb_empty + 8u * stg);
            if (lane == 0) {
                mbar_arrive(mb_pe + 8u * sl2);
                mbar_arrive_remote(cluster_map(mb_pe + 8u * sl2, pr));
            }
        }
        nbar_sync(BAR_END, NT); // every wgmma and copy of this CTA is done
        mbar_wait(mb_fin, 0);
#pragma unroll
        for (int j = 0; j < 2 * JH; ++j)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                const int col = 8 * j + 2 * t4 + e;
                const float f = Fin[col];
#pragma unroll
                for (int m = 0; m < 2; ++m) {
                    const int c = 64 * (2 * x + m) + 16 * w + (lane >> 2);
                    Os[col * OSP + c] = f2bf(o[m][4 * j + e] * f);
                    Os[col * OSP + c + 8] = f2bf(o[m][4 * j + 2 + e] * f);
                }
            }
        nbar_sync(BAR_END, NT);
    }
    // The staged partial: rows < HL, this CTA's 256 columns, 16-byte chunks.
    for (int idx = tid; idx < NR * 32; idx += NT) {
        const int k = idx >> 5, c = (idx & 31) * 8;
        bool ok;
        const int rr = row_of(p, NR, 0, k, ok);
        if (ok)
            *(uint4 *)((bf16_t *)p.part_o + (part_row0 + rr) * p.Dv + 256 * r + c) =
                *(const uint4 *)(Os + k * OSP + c);
    }
    cluster_sync_all(); // no remote arrival or store may reach a CTA that has left
}

} // namespace mla_dev

#endif // MLA_TARGET_NVIDIA
#endif
