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
// query rows in N: S^T = K Q^T and O^T = V^T P^T (m64nNRk16, dv in M). O^T
// of 96 rows x 512 columns in fp32 is 192 KB, too much for one SM's
// registers beside S, so a cluster of two CTAs shares each split: CTA r
// holds V columns 256 r .. + 255 (its O^T, 96 registers a thread in two
// warpgroups) and the matching half of every K row (nope 256 r .. and rope
// 512 + 32 r ..), so each CTA gathers half of each token row and the two
// together read every byte once. A CTA's S^T covers its half of the 576
// columns; the halves are summed across the pair through distributed
// shared memory. The query rows are four quarters: CTA r runs the online
// softmax of quarters 2r and 2r + 1 (the running max never crosses CTAs),
// one per S warpgroup, whose chain (m64n48k16 at NR = 96) covers its own
// quarter and the partner-bound one (Q^T's rows are stored in that order);
// it sends the partial scores of the latter to the partner's S warpgroup of
// the same index, adds the partner's to its own quarter, and writes P^T of
// its quarter into both CTAs' P buffer with the rows' rescale factors. Each
// CTA's PV then covers all NR rows for its 256 columns.
// Warpgroups: 0 gathers (warp g owns stage g), 1 and 2 the S warpgroups, 3
// and 4 the PV (m-tiles 2x, 2x + 1 of the CTA's four). Every hand-over is
// an mbarrier; data crosses CTAs as st.async only. Tensor work per block
// and CTA at NR = 96: S 2 x 18 x 24 + PV 16 x 48 = 1,632 cycles, against
// 2,176 for each of the two 64-row CTAs of the padded kernels.
// Measured (H200, docs/perf-log.md step 37): correct and sanitizer-clean,
// but slower than auto (K3 bs 32 / 16k 308.6 against 275.4 us; FlashMLA
// 227.7): ~4,200 cycles a block, where each S warpgroup's path is serial:
// its chain and the wait for it 30%, the partner's partial scores 18%, the
// softmax 30%, the copies to the partner 10%. Opt-in; auto never picks it.
// ---------------------------------------------------------------------------

// x reduced (max or sum) over the eight lanes of a warp that share t4 =
// lane % 4, i.e. over the 16 token rows of the warp in the m64 accumulator
// layout.
template <bool MAX> __device__ __forceinline__ float pair_over_tokens(float x)
{
#pragma unroll
    for (int m = 4; m <= 16; m <<= 1) {
        const float y = __shfl_xor_sync(0xffffffffu, x, m);
        x = MAX ? fmaxf(x, y) : x + y;
    }
    return x;
}
// A warp's per-column values (after pair_over_tokens: column 8 jj + 2 t4 +
// e at index 2 jj + e, equal over the lanes of a t4) into red[column][warp],
// by lanes 0-3.
template <int JQ>
__device__ __forceinline__ void pair_cols_to_red(float *red, const float (&v)[2 * JQ], int lane, int w)
{
    if (lane < 4) {
#pragma unroll
        for (int jj = 0; jj < JQ; ++jj)
#pragma unroll
            for (int e = 0; e < 2; ++e)
                red[(8 * jj + 2 * lane + e) * 4 + w] = v[2 * jj + e];
    }
}

template <int NR> struct PairMma;
template <> struct PairMma<96> {
    template <int SD> __device__ static void s(float (&d)[24], uint64_t a, uint64_t b) { wgmma_m64n48k16<SD>(d, a, b); }
    __device__ static void o(float (&d)[48], uint64_t a, uint64_t b) { wgmma_m64n96k16_ta(d, a, b); }
};
template <> struct PairMma<64> {
    template <int SD> __device__ static void s(float (&d)[16], uint64_t a, uint64_t b) { wgmma_m64n32k16<SD>(d, a, b); }
    __device__ static void o(float (&d)[32], uint64_t a, uint64_t b) { wgmma_m64n64k16_ta(d, a, b); }
};

// One S warpgroup's S^T[64 tokens x NR / 2] over this CTA's 288 columns: 16
// nope steps through the 128-byte swizzled atoms (32 bytes a step inside an
// atom, the next atom PR_ATOM bytes on for the block, NR * 128 for Q^T),
// then the two rope steps in the unswizzled core-matrix layout (256 bytes a
// step). q_s: the warpgroup's first Q^T row in atom 0; q_rope: in the rope
// part.
template <int NR>
__device__ __forceinline__ void pair_s_chain(float (&acc)[NR / 4], uint32_t stage_s, uint32_t q_s, uint32_t q_rope)
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
    const uint64_t ra = wg_desc_kint(stage_s + PR_ROPE), rb = wg_desc_kint(q_rope);
    PairMma<NR>::template s<1>(acc, ra, rb);
    PairMma<NR>::template s<1>(acc, ra + (256 >> 4), rb + (256 >> 4));
    wg_commit();
}

// The gather warps' L2 prefetch of their next block: 0 (default: with it
// K3 bs 32 / 16k took 328.6 us against 308.6 and DeepSeek-V3 bs 32 / 16k
// 260.3 against 246.8, same run, docs/perf-log.md step 37) or 1.
#ifndef MLA_PAIR_L2_PREFETCH
#define MLA_PAIR_L2_PREFETCH 0
#endif

template <int NR>
__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(640, 1) stage1_pair_kernel(Stage1Params p)
{
    // Query rows in quarters of NQ: CTA r owns quarters 2r and 2r + 1 (its
    // softmax rows); S warpgroup s (0, 1) owns quarter 2r + s and computes
    // the partial scores of quarter 2(1 - r) + s for the partner's S
    // warpgroup s. NS: its accumulators (N = NR / 2); JQ: 8-column blocks a
    // quarter.
    constexpr int NT = 640, NQ = NR / 4, NS = NR / 4, JQ = NQ / 8, NA = NR / 2;
    constexpr Stage1PairSmem SM = stage1_pair_smem_plan(NR);
    extern __shared__ __align__(16) unsigned char smem_raw[];
    unsigned char *base =
        smem_raw + ((1024u - ((uint32_t)__cvta_generic_to_shared(smem_raw) & 1023u)) & 1023u);
    const uint32_t base_s = (uint32_t)__cvta_generic_to_shared(base);
    const uint32_t q_s = base_s + SM.q, st_s = base_s + SM.stage, p_s = base_s + SM.p;
    float *Alpha = (float *)(base + SM.alpha);
    float *Red = (float *)(base + SM.red);
    float *Fin = (float *)(base + SM.fin);
    // FULL[3] (32: gather warp s owns stage s): the block landed. EMPTY[3]
    // (16: the warps of warpgroups 1-4): done with the stage. SXF[s][2] (1
    // arrival, S warpgroup s's arm, + its partner's NQ x 64 x 4 bytes of
    // st.async): the partner's partial scores of its quarter are in Sx.
    // (A slot is free again without a barrier: the partner writes it for
    // block i + 2 only after it has this warpgroup's scores of block i + 1,
    // which each of its threads sends after reading the slot for block i.)
    // MX[s][2] (128): the block's column maxima of warpgroup s are in Red.
    // PF[2] (14: lane 0 of each S warp, and lanes 1-3 of each S
    // warpgroup's warp 0, whose lane 0 also arms its partner's bytes of P^T
    // and rescale factors): the block's P^T is in.
    // PE[2] (16: the PV warps here and in the partner): both CTAs' PV are
    // done with the P slot. LX[s] (128): the row sums are in Red. QR (8: the
    // S warps): Q^T landed. FIN (14, as PF): every row's 1 / l is in Fin.
    // Arrivals per warp: __syncwarp orders the lanes' writes before lane 0's
    // release. Data crosses CTAs only as st.async (device/cluster_sm90.h
    // says why), so every wait is a plain CTA-scope wait.
    const uint32_t mb = base_s + SM.mbar;
    const uint32_t mb_full = mb, mb_empty = mb + 24, mb_sxf = mb + 48, mb_mx = mb + 80, mb_pf = mb + 112,
                   mb_pe = mb + 128, mb_lx = mb + 144, mb_qr = mb + 160, mb_fin = mb + 168;

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
            mbar_init(mb_empty + 8u * i, 16);
        }
        for (int i = 0; i < 4; ++i) {
            mbar_init(mb_sxf + 8u * i, 1);
            mbar_init(mb_mx + 8u * i, 128);
        }
        for (int i = 0; i < 2; ++i) {
            mbar_init(mb_pf + 8u * i, 14);
            mbar_init(mb_pe + 8u * i, 16);
            mbar_init(mb_lx + 8u * i, 128);
        }
        mbar_init(mb_qr, 8);
        mbar_init(mb_fin, 14);
        fence_mbar_init_cluster();
    }
    __syncthreads();
    cluster_sync_all(); // the partner's barriers exist before any remote arrival
    const int wg = __shfl_sync(0xffffffffu, tid >> 7, 0);
    constexpr int OSP = 256 + 8; // staged partial rows: 256 columns of this CTA
    bf16_t *Os = (bf16_t *)(base + SM.stage);
    const long long part_row0 = ((long long)b * p.num_splits + s) * p.HL;
    // Lane 0 of each warp arrives for the warp once every lane is past this
    // point.
    auto warp_arrive = [&](uint32_t bar) {
        __syncwarp();
        if (lane == 0)
            mbar_arrive(bar);
    };

    // Registers: 640 threads launch with 96 each, and setmaxnreg only moves
    // registers within the CTA's allocation (an increase waits until others
    // have given back enough: a plan over budget hangs, as the first
    // 640-thread form did): gather 80 (its 16 slots held a block ahead), S
    // 72, PV 128: 16 + 2 x 24 given back cover the PV warpgroups' 2 x 32
    // (the S code needs 62 registers, the PV code 124).
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
            // The slots of block j's tokens tk + 4 i, looked up one block of
            // this warp ahead (without, the S warpgroups waited on FULL 45%
            // of their time: perf log step 37).
            int64_t sl[16];
            auto slots = [&](int j) { block_slots(p, kv0 + beg, j, PR_BN, nb, n, tk, 4, sl); };
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
                // This warp's next block into L2 while its stage is in use.
                // Lane gc < 4 takes nope line gc of this CTA's half, gc 4
                // the rope line.
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
    } else if (wg <= 2) {
        // S warpgroup sw: the S^T chain of its N = NR / 2 columns (Q^T rows
        // NA sw .. : its own quarter, then the partner's), the exchange, the
        // softmax of its quarter; the next block's chain after P is
        // published (so a late block delays nothing of this one).
        regs_dec<72>();
        const int sw = wg - 1, ts = tid & 127, w = ts >> 5, t4 = lane & 3;
        const int tk0 = 16 * w + (lane >> 2); // token rows tk0, tk0 + 8
        const int qown = 2 * r + sw, qpart = 2 * (1 - r) + sw;
        // Q^T rows NA sw + c (c < NA): query row NQ qown + c (c < NQ), else
        // NQ qpart + c - NQ; zero past HL. This CTA's 288 columns.
        for (int idx = ts; idx < NA * 36; idx += 128) {
            const int c = idx / 36, ch = idx - c * 36, m = NA * sw + c;
            const int qrow = c < NQ ? NQ * qown + c : NQ * qpart + c - NQ;
            bool ok;
            const int rr = row_of(p, NR, 0, qrow, ok);
            const bf16_t *src = p.q;
            if (ok)
                src = p.q + (long long)(q0 + rr / p.H) * p.q_st + (long long)(rr % p.H) * p.q_sh +
                      (ch < 32 ? 256 * r + 8 * ch : 512 + 32 * r + 8 * (ch - 32));
            const uint32_t dst = ch < 32 ? q_s + (uint32_t)((ch >> 3) * NR * 128 + m * 128 + (((ch & 7) ^ (m & 7)) << 4))
                                         : q_s + (uint32_t)(4 * NR * 128 + (m >> 3) * 512 + (ch - 32) * 128 + (m & 7) * 16);
            cp_async16_s(dst, src, ok ? 16 : 0);
        }
        cp_async_commit();
        cp_async_wait_group<0>();
        fence_proxy_async();
        warp_arrive(mb_qr);
        mbar_wait(mb_qr, 0);
        const uint32_t qa = q_s + (uint32_t)(NA * sw * 128), qr = q_s + (uint32_t)(4 * NR * 128 + NA * sw * 64);
        const uint32_t sxs = SM.sx + (uint32_t)(sw * 2 * NQ * PR_BN * 4); // this warpgroup's two Sx slots
        const uint32_t sx_remote = cluster_map(base_s + sxs, pr);
        const uint32_t p_remote = cluster_map(p_s, pr);
        const uint32_t al_remote = cluster_map(base_s + SM.alpha, pr);
        const float *SxW = (const float *)(base + sxs);
        float *RedW = Red + sw * 2 * NQ * 4;
        const uint32_t mb_sxw = mb_sxf + 16u * sw, mb_mxw = mb_mx + 16u * sw;
        float m_run[2 * JQ], l_run[2 * JQ]; // own columns 8 jj + 2 t4 + e, index 2 jj + e
#pragma unroll
        for (int c = 0; c < 2 * JQ; ++c) {
            m_run[c] = -INFINITY;
            l_run[c] = 0.f;
        }
        float acc[NS];
        auto chain = [&](int i) {
            const int stg = i % PR_STAGES;
            mbar_wait(mb_full + 8u * stg, (uint32_t)(i / PR_STAGES) & 1);
            pair_s_chain<NR>(acc, st_s + (uint32_t)(stg * PR_STAGE), qa, qr);
        };
        for (int i = 0; i < nb; ++i) {
            const int sl2 = i & 1;
            const uint32_t ph2 = (uint32_t)(i >> 1) & 1;
            // The chain at the top of the body, after the previous block's
            // P went out (a late block delays nothing of the one before;
            // a chain before the loop made ptxas serialize every wgmma,
            // C7511).
            chain(i);
            wg_wait<0>();
            fence_regs(acc);
            warp_arrive(mb_empty + 8u * (i % PR_STAGES));
            // The partner's quarter (accumulator blocks JQ ..) to the
            // partner's S warpgroup sw, then mine from it.
            const uint32_t sxr = sx_remote + (uint32_t)(sl2 * NQ * PR_BN * 4);
            const uint32_t sxf_r = cluster_map(mb_sxw + 8u * sl2, pr);
#pragma unroll
            for (int jj = 0; jj < JQ; ++jj) {
                const float4 out = make_float4(acc[4 * (JQ + jj)], acc[4 * (JQ + jj) + 1], acc[4 * (JQ + jj) + 2],
                                               acc[4 * (JQ + jj) + 3]);
                st_async_v4(sxr + (uint32_t)((jj * 128 + ts) * 16), *(const uint4 *)&out, sxf_r);
            }
            if (ts == 0)
                mbar_arrive_expect_tx(mb_sxw + 8u * sl2, NQ * PR_BN * 4);
            mbar_wait(mb_sxw + 8u * sl2, ph2);
            const float *sxl = SxW + sl2 * NQ * PR_BN;
            float v[JQ][4];
            const int valid = n - i * PR_BN < PR_BN ? n - i * PR_BN : PR_BN;
#pragma unroll
            for (int jj = 0; jj < JQ; ++jj) {
                const float4 v4 = *(const float4 *)(sxl + (jj * 128 + ts) * 4);
                const float sum[4] = {acc[4 * jj] + v4.x, acc[4 * jj + 1] + v4.y, acc[4 * jj + 2] + v4.z,
                                      acc[4 * jj + 3] + v4.w};
                // Online softmax (base 2) of my quarter over the block's 64
                // tokens; masked tokens (past the split) to -inf.
#pragma unroll
                for (int h = 0; h < 2; ++h)
#pragma unroll
                    for (int e = 0; e < 2; ++e)
                        v[jj][2 * h + e] = tk0 + 8 * h < valid ? sum[2 * h + e] * p.scale_log2 : -INFINITY;
            }
            // Column maxima over the 16 tokens of each warp (two per lane,
            // then the lanes of equal t4), across the four warps via Red.
            float cm[2 * JQ];
#pragma unroll
            for (int jj = 0; jj < JQ; ++jj)
#pragma unroll
                for (int e = 0; e < 2; ++e)
                    cm[2 * jj + e] = pair_over_tokens<true>(fmaxf(v[jj][e], v[jj][2 + e]));
            float *red = RedW + sl2 * NQ * 4;
            pair_cols_to_red<JQ>(red, cm, lane, w);
            mbar_arrive(mb_mxw + 8u * sl2);
            // The P slot is free in both CTAs once both PVs of block i - 2
            // are done.
            if (i >= 2)
                mbar_wait(mb_pe + 8u * sl2, ph2 ^ 1);
            mbar_wait(mb_mxw + 8u * sl2, ph2);
            float al[2 * JQ];
            uint32_t pk[JQ][2];
#pragma unroll
            for (int jj = 0; jj < JQ; ++jj)
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    const int c = 2 * jj + e;
                    const float4 m4 = *(const float4 *)(red + (8 * jj + 2 * t4 + e) * 4);
                    float m_use;
                    al[c] = ws_max_step(fmaxf(fmaxf(m4.x, m4.y), fmaxf(m4.z, m4.w)), m_run[c], m_use);
                    const float p0 = ws_exp2(v[jj][e] - m_use), p1 = ws_exp2(v[jj][2 + e] - m_use);
                    l_run[c] = l_run[c] * al[c] + p0 + p1;
                    v[jj][e] = p0;
                    v[jj][2 + e] = p1;
                }
#pragma unroll
            for (int jj = 0; jj < JQ; ++jj)
#pragma unroll
                for (int h = 0; h < 2; ++h)
                    pk[jj][h] = pack_bf2(v[jj][2 * h], v[jj][2 * h + 1]);
            // P^T rows NQ qown + 8 jj .. + 7, tokens 16 w + 8 h .. + 7: tile
            // (jj, h) is 8 x 8 in the accumulator layout; stmatrix.trans
            // stores it as 8 P^T rows of 16 bytes (chunk 2 w + h of the
            // 128-byte swizzled row).
            const uint32_t pl = p_s + (uint32_t)(sl2 * NR * 128);
            {
                const int q = lane >> 3, ci = lane & 7;
                auto prow = [&](int bi) {
                    const int jj = bi >> 1, h = bi & 1, nrow = NQ * qown + 8 * jj + ci;
                    return pl + (uint32_t)(nrow * 128 + (((2 * w + h) ^ (nrow & 7)) << 4));
                };
#pragma unroll
                for (int g = 0; g < JQ / 2; ++g)
                    stsm_x4_t(prow(4 * g + q), pk[2 * g][0], pk[2 * g][1], pk[2 * g + 1][0], pk[2 * g + 1][1]);
                if constexpr (JQ % 2)
                    stsm_x2_t(prow(4 * (JQ / 2) + (q & 1)), pk[JQ - 1][0], pk[JQ - 1][1]);
            }
            __syncwarp();
            // The same bytes to the partner: this warp's two chunks of each
            // of my NQ rows.
            const uint32_t pr_dst = p_remote + (uint32_t)(sl2 * NR * 128);
            const uint32_t pf_r = cluster_map(mb_pf + 8u * sl2, pr);
#pragma unroll
            for (int k = 0; k < (2 * NQ + 31) / 32; ++k) {
                const int idx = lane + 32 * k;
                if (idx < 2 * NQ) {
                    const int nrow = NQ * qown + (idx >> 1), cc = 2 * w + (idx & 1);
                    const uint32_t off = (uint32_t)(nrow * 128 + ((cc ^ (nrow & 7)) << 4));
                    uint4 d;
                    asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
                                 : "=r"(d.x), "=r"(d.y), "=r"(d.z), "=r"(d.w)
                                 : "r"(pl + off));
                    st_async_v4(pr_dst + off, d, pf_r);
                }
            }
            if (w == 0 && lane < 4) {
                float *alx = Alpha + sl2 * NR;
#pragma unroll
                for (int jj = 0; jj < JQ; ++jj)
#pragma unroll
                    for (int e = 0; e < 2; ++e) {
                        const int col = NQ * qown + 8 * jj + 2 * t4 + e;
                        alx[col] = al[2 * jj + e];
                        st_async_f(al_remote + (uint32_t)((sl2 * NR + col) * 4), al[2 * jj + e], pf_r);
                    }
            }
            fence_proxy_async(); // this CTA's wgmma read the local P^T
            __syncwarp();
            // Lane 0 arrives for its warp; warp 0's lanes 1-3, which wrote
            // rescale factors, arrive for themselves (racecheck orders a
            // thread's writes by its own arrival only); warp 0's lane 0 also
            // arms the partner's bytes: the NQ rows of P^T of its S
            // warpgroup sw and their rescale factors.
            if (lane == 0 || (w == 0 && lane < 4)) {
                if (w == 0 && lane == 0)
                    mbar_arrive_expect_tx(mb_pf + 8u * sl2, NQ * 128 + NQ * 4);
                else
                    mbar_arrive(mb_pf + 8u * sl2);
            }
        }
        // Row sums: over the lanes of equal t4, then the four warps.
        float lsum[2 * JQ];
#pragma unroll
        for (int c = 0; c < 2 * JQ; ++c)
            lsum[c] = pair_over_tokens<false>(l_run[c]);
        // Red's slot (nb & 1) was last read for block nb - 2, before each
        // thread's MX arrival for block nb - 1.
        float *red = RedW + (nb & 1) * NQ * 4;
        mbar_wait(mb_mxw + 8u * ((nb + 1) & 1), nb >= 1 ? ((uint32_t)((nb - 1) >> 1) & 1) : 1u);
        pair_cols_to_red<JQ>(red, lsum, lane, w);
        mbar_arrive(mb_lx + 8u * sw);
        mbar_wait(mb_lx + 8u * sw, 0);
        const uint32_t fin_r = cluster_map(mb_fin, pr);
        if (w == 0 && lane < 4) {
            const uint32_t fin_remote = cluster_map(base_s + SM.fin, pr);
#pragma unroll
            for (int jj = 0; jj < JQ; ++jj)
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    const int c = 2 * jj + e, col = NQ * qown + 8 * jj + 2 * t4 + e;
                    const float4 l4 = *(const float4 *)(red + (8 * jj + 2 * t4 + e) * 4);
                    const float l = (l4.x + l4.y) + (l4.z + l4.w);
                    const float f = split_out_scale(p.v_scale, l);
                    Fin[col] = f;
                    st_async_f(fin_remote + (uint32_t)(col * 4), f, fin_r);
                    bool ok;
                    const int rr = row_of(p, NR, 0, col, ok);
                    if (ok)
                        p.part_lse[part_row0 + rr] = split_lse(m_run[c], l);
                }
        }
        __syncwarp();
        if (lane == 0 || (w == 0 && lane < 4)) { // as PF
            if (w == 0 && lane == 0)
                mbar_arrive_expect_tx(mb_fin, NQ * 4);
            else
                mbar_arrive(mb_fin);
        }
        nbar_sync(BAR_END, NT);
        nbar_sync(BAR_END, NT);
    } else {
        // O^T[256 r + 64 mt .. + 63][NR] for m-tiles mt = 2x, 2x + 1: thread
        // rows (dv) 16 w + lane / 4 (+ 8), columns (query rows) 8j + 2 t4 (+1).
        regs_inc<128>();
        const int x = wg - 3, ts = tid & 127, w = ts >> 5, t4 = lane & 3;
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
            bool moved = false;
#pragma unroll
            for (int j = 0; j < NR / 8; ++j) {
                const float2 a = *(const float2 *)(al + 8 * j + 2 * t4);
                moved |= a.x != 1.f || a.y != 1.f;
            }
            if (__any_sync(0xffffffffu, moved)) {
#pragma unroll
                for (int j = 0; j < NR / 8; ++j) {
                    const float2 a = *(const float2 *)(al + 8 * j + 2 * t4);
#pragma unroll
                    for (int m = 0; m < 2; ++m) {
                        o[m][4 * j] *= a.x;
                        o[m][4 * j + 1] *= a.y;
                        o[m][4 * j + 2] *= a.x;
                        o[m][4 * j + 3] *= a.y;
                    }
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
        for (int j = 0; j < NR / 8; ++j)
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
    // The staged partial: rows < HL, this CTA's 256 columns (store_partial
    // writes whole Dv rows), 16-byte chunks.
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
