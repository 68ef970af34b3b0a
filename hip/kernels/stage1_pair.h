// Stage 1 of the fast tier on a CTA pair (NVIDIA sm_90a; fast_kernel pair):
// all NR query rows (96: Kimi-K3 TP8; 64: DeepSeek-V3 TP8) with no padding
// rows, half of them in each CTA of a pair.
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
// query rows in N: S^T = K Q^T and O^T = V^T P^T (m64nNAk16, dv in M). Two
// CTAs share a split, CTA r the NA = NR / 2 rows NA r .. NA r + NA - 1, each
// over whole token rows: O^T of 512 x 48 in fp32 is 96 registers a thread
// over two warpgroups, and the CTAs exchange nothing (the form that split
// the head dimension over a cluster instead spent each block on a round
// trip between the SMs, perf log steps 37-38). The pair reads each block
// twice, the second time mostly from L2, as the padded kernels' two
// 64-row CTAs do.
// Warpgroups: 0 gathers (warp g owns stage g), 1 and 2 compute S^T and the
// softmax of alternate blocks (S warpgroup s takes blocks i = s mod 2, so
// one's chain runs beside the other's softmax; the running max passes
// between them through Mx), 3 and 4 the PV (dv 256 x .. 256 x + 255).
// Every hand-over is an mbarrier. Each 8 KB atom of a block lands on its
// own barrier (cp.async arrivals), so a chain starts on the first atom while
// the rest land, and each part of a stage is freed by its last reader: the
// rope atom after the chain, atoms 4x .. 4x + 3 after PV warpgroup x, as
// FlashMLA frees half-blocks. Tensor work per block and CTA at NR = 96:
// S 36 x 24 + PV 16 x 2 x 24 = 1,632 cycles, against 2,176 for each of the
// padded kernels' two 64-row CTAs.
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

template <int NA> struct PairMma;
template <> struct PairMma<48> {
    template <int SD> __device__ static void s(float (&d)[24], uint64_t a, uint64_t b) { wgmma_m64n48k16<SD>(d, a, b); }
    __device__ static void o(float (&d)[24], uint64_t a, uint64_t b) { wgmma_m64n48k16_ta(d, a, b); }
};
template <> struct PairMma<32> {
    template <int SD> __device__ static void s(float (&d)[16], uint64_t a, uint64_t b) { wgmma_m64n32k16<SD>(d, a, b); }
    __device__ static void o(float (&d)[16], uint64_t a, uint64_t b) { wgmma_m64n32k16_ta(d, a, b); }
};

// One block's S^T[64 tokens x NA] over the 576 columns: the atoms in the
// order they are freed and refilled (8, the rope, then 0 .. 7), each after
// its FULL barrier, four k16 steps (32 bytes apart) an atom. full: the
// stage's FULL[0].
template <int NA>
__device__ __forceinline__ void pair_s_chain(float (&acc)[NA / 2], uint32_t stage_s, uint32_t q_s, uint32_t full,
                                             uint32_t parity)
{
    wg_fence();
#pragma unroll
    for (int t = 0; t < 9; ++t) {
        const int a = t == 0 ? 8 : t - 1;
        mbar_wait(full + 8u * a, parity);
        fence_proxy_async(); // the atom came by cp.async (generic proxy)
        const uint64_t da = wg_desc_sw128(stage_s + (uint32_t)(a * PR_ATOM)),
                       db = wg_desc_sw128(q_s + (uint32_t)(a * NA * 128));
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) {
            if (t == 0 && kk == 0)
                PairMma<NA>::template s<0>(acc, da, db);
            else
                PairMma<NA>::template s<1>(acc, da + 2 * kk, db + 2 * kk);
        }
    }
    wg_commit();
}

template <int NR>
__global__ void __launch_bounds__(640, 1) stage1_pair_kernel(Stage1Params p)
{
    // CTA r owns query rows NA r .. NA r + NA - 1; JQ: their 8-column
    // blocks.
    constexpr int NT = 640, NA = NR / 2, JQ = NA / 8;
    constexpr Stage1PairSmem SM = stage1_pair_smem_plan(NR);
    extern __shared__ __align__(16) unsigned char smem_raw[];
    unsigned char *base =
        smem_raw + ((1024u - ((uint32_t)__cvta_generic_to_shared(smem_raw) & 1023u)) & 1023u);
    const uint32_t base_s = (uint32_t)__cvta_generic_to_shared(base);
    const uint32_t q_s = base_s + SM.q, st_s = base_s + SM.stage, p_s = base_s + SM.p;
    float *Alpha = (float *)(base + SM.alpha);
    float *Red = (float *)(base + SM.red);
    float *Fin = (float *)(base + SM.fin);
    float *Mx = (float *)(base + SM.mx);
    // FULL[g][a] (32: the cp.async arrivals of gather warp g's lanes): atom
    // a of stage g landed. EMPTY[g][part] (4: the warps of its reader): part
    // 0 / 1 (atoms 0-3 / 4-7) after PV warpgroup 0 / 1, part 2 (the rope
    // atom) after the block's chain. MX[s][2] (128): the block's column
    // maxima of S warpgroup s are in Red. MR (128, the block's S
    // warpgroup): the running max after the block is in Mx and its readers
    // of Mx are done. PF[s] (7: lane 0 of each warp of S warpgroup s and
    // lanes 1-3 of its warp 0, which wrote rescale factors): the block's
    // P^T is in P slot s. PE[s] (8: the PV warps): done with P slot s. QR
    // (8: the S warps): Q^T landed. FIN (NA, the threads that wrote a
    // factor): every row's 1 / l is in Fin. Arrivals per warp: __syncwarp
    // orders the lanes' writes before lane 0's release.
    const uint32_t mb = base_s + SM.mbar;
    const uint32_t mb_full = mb, mb_empty = mb + 144, mb_mx = mb + 192, mb_pf = mb + 224, mb_pe = mb + 240,
                   mb_mr = mb + 256, mb_qr = mb + 264, mb_fin = mb + 272;

    pdl_launch_dependents();
    const int r = blockIdx.x & 1, s = blockIdx.x >> 1, b = blockIdx.z;
    const int tid = threadIdx.x, lane = tid & 31;
    int kv0, beg, end;
    if (!cta_split(p, s, b, kv0, beg, end))
        return;
    const int n = end - beg;
    const int q0 = p.qo_indptr[b];
    const int nb = (n + PR_BN - 1) / PR_BN;
    if (tid == 0) {
        for (int i = 0; i < 2 * 9; ++i)
            mbar_init(mb_full + 8u * i, 32);
        for (int i = 0; i < 2 * 3; ++i)
            mbar_init(mb_empty + 8u * i, 4);
        for (int i = 0; i < 4; ++i)
            mbar_init(mb_mx + 8u * i, 128);
        for (int i = 0; i < 2; ++i) {
            mbar_init(mb_pf + 8u * i, 7);
            mbar_init(mb_pe + 8u * i, 8);
        }
        mbar_init(mb_mr, 128);
        mbar_init(mb_qr, 8);
        mbar_init(mb_fin, NA);
    }
    __syncthreads();
    const int wg = __shfl_sync(0xffffffffu, tid >> 7, 0);
    constexpr int OSP = DV_MAX + 8; // staged partial rows
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
    // have given back enough: a plan over budget hangs): gather PR_GREGS,
    // S PR_SREGS, PV 128 (static_assert in config.h).
    if (wg == 0) {
        // Gather: warp g (0-1) owns stage g and takes the blocks j = g mod 2;
        // warps 2-3 have nothing to do. 8 lanes per token row (chunk gc of
        // each 128-byte atom line), tokens tk + 4 i of the block. No wait
        // for its own copies: each lane's cp.async arrival on an atom's FULL
        // fires when its copies so far have landed.
        regs_dec<PR_GREGS>();
        const int g = tid >> 5, tk = lane >> 3, gc = lane & 7;
        if (g < PR_STAGES) {
            const uint32_t dst = st_s + (uint32_t)(g * PR_STAGE);
            // The slots of block j's tokens lane and lane + 32 (-1 past the
            // split), looked up one block of this warp ahead, so the
            // lookups' latency stays off the path from EMPTY to the copies.
            int64_t sl2[2];
            auto slots = [&](int j) {
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const int gt = j * PR_BN + lane + 32 * h;
                    sl2[h] = j < nb && gt < n ? p.kv_indices[kv0 + beg + gt] : (int64_t)-1;
                }
            };
            slots(g);
            for (int j = g, u = 0; j < nb; j += PR_STAGES, ++u) {
                // Tokens past the split's end are zero-filled (a masked
                // key's zero weight must never meet a stale NaN).
                const bf16_t *row[16];
                uint32_t live = 0;
#pragma unroll
                for (int i = 0; i < 16; ++i) {
                    const int64_t sli = __shfl_sync(0xffffffffu, sl2[i >> 3], (tk + 4 * i) & 31);
                    row[i] = p.kv + (sli >= 0 ? sli : 0) * p.kv_ss + 8 * gc;
                    live |= (sli >= 0 ? 1u : 0u) << i;
                }
                slots(j + PR_STAGES);
#pragma unroll
                for (int t9 = 0; t9 < 9; ++t9) {
                    const int a = t9 == 0 ? 8 : t9 - 1;
                    // The first atom of each part waits for that part of
                    // block j - 2 to be free.
                    if (u >= 1 && (t9 == 0 || t9 == 1 || t9 == 5))
                        mbar_wait(mb_empty + 8u * (3 * g + (a == 8 ? 2 : a >> 2)), (uint32_t)(u - 1) & 1);
#pragma unroll
                    for (int i = 0; i < 16; ++i) {
                        const int t = tk + 4 * i;
                        cp_async16_s(dst + (uint32_t)(a * PR_ATOM + t * 128 + ((gc ^ (t & 7)) << 4)), row[i] + 64 * a,
                                     (live >> i) & 1 ? 16 : 0);
                    }
                    cp_async_mbar_arrive(mb_full + 8u * (9 * g + a));
                }
            }
        }
        nbar_sync(BAR_END, NT);
        nbar_sync(BAR_END, NT);
    } else if (wg <= 2) {
        // S warpgroup sw takes the blocks i = sw mod 2 (always stage sw):
        // the chain, the softmax of the NA rows against the running max the
        // other S warpgroup published for block i - 1, P^T into P slot sw.
        regs_dec<PR_SREGS>();
        const int sw = wg - 1, ts = tid & 127, w = ts >> 5, t4 = lane & 3;
        const int tk0 = 16 * w + (lane >> 2); // token rows tk0, tk0 + 8
        // Q^T rows m < NA: query row NA r + m, zero past HL; 72 16-byte
        // chunks a row, by both S warpgroups.
        for (int idx = tid - 128; idx < NA * 72; idx += 256) {
            const int m = idx / 72, ch = idx - m * 72;
            bool ok;
            const int rr = row_of(p, NR, 0, NA * r + m, ok);
            const bf16_t *src = p.q;
            if (ok)
                src = p.q + (long long)(q0 + rr / p.H) * p.q_st + (long long)(rr % p.H) * p.q_sh + 8 * ch;
            cp_async16_s(q_s + (uint32_t)((ch >> 3) * NA * 128 + m * 128 + (((ch & 7) ^ (m & 7)) << 4)), src,
                         ok ? 16 : 0);
        }
        cp_async_commit();
        cp_async_wait_group<0>();
        fence_proxy_async();
        warp_arrive(mb_qr);
        mbar_wait(mb_qr, 0);
        float *RedW = Red + sw * 2 * NA * 4;
        const uint32_t mb_mxw = mb_mx + 16u * sw, mb_pfw = mb_pf + 8u * sw;
        const uint32_t pl = p_s + (uint32_t)(sw * NA * 128);
        float *alx = Alpha + sw * NA;
        // This warpgroup's row sums over its own blocks, referred to the
        // max after its latest block (still in Mx).
        float l_run[2 * JQ]; // columns 8 jj + 2 t4 + e, index 2 jj + e
#pragma unroll
        for (int c = 0; c < 2 * JQ; ++c)
            l_run[c] = 0.f;
        float acc[NA / 2];
        int k = 0; // this warpgroup's blocks so far
        for (int i = sw; i < nb; i += 2, ++k) {
            const int stg = i % PR_STAGES;
            pair_s_chain<NA>(acc, st_s + (uint32_t)(stg * PR_STAGE), q_s, mb_full + 8u * 9 * stg,
                             (uint32_t)(i / PR_STAGES) & 1);
            wg_wait<0>();
            fence_regs(acc);
            warp_arrive(mb_empty + 8u * (3 * stg + 2));
            float v[JQ][4];
            const int valid = n - i * PR_BN < PR_BN ? n - i * PR_BN : PR_BN;
            // Online softmax (base 2) of the NA rows over the block's 64
            // tokens; masked tokens (past the split) to -inf.
#pragma unroll
            for (int jj = 0; jj < JQ; ++jj)
#pragma unroll
                for (int h = 0; h < 2; ++h)
#pragma unroll
                    for (int e = 0; e < 2; ++e)
                        v[jj][2 * h + e] = tk0 + 8 * h < valid ? acc[4 * jj + 2 * h + e] * p.scale_log2 : -INFINITY;
            // Column maxima over the 16 tokens of each warp (two per lane,
            // then the lanes of equal t4), across the four warps via Red.
            float cm[2 * JQ];
#pragma unroll
            for (int jj = 0; jj < JQ; ++jj)
#pragma unroll
                for (int e = 0; e < 2; ++e)
                    cm[2 * jj + e] = pair_over_tokens<true>(fmaxf(v[jj][e], v[jj][2 + e]));
            float *red = RedW + (k & 1) * NA * 4;
            pair_cols_to_red<JQ>(red, cm, lane, w);
            mbar_arrive(mb_mxw + 8u * (k & 1));
            // P slot sw is free once the PV of block i - 2 is done.
            if (k >= 1)
                mbar_wait(mb_pe + 8u * sw, (uint32_t)(k - 1) & 1);
            mbar_wait(mb_mxw + 8u * (k & 1), (uint32_t)(k >> 1) & 1);
            // The running max after block i - 1, which the other S warpgroup
            // published (MR), and after this warpgroup's block i - 2 (the
            // reference of l_run). Mx holds three blocks: the slot written
            // here last held block i - 3, whose readers arrived on MR for
            // blocks i - 2 (this warpgroup) and i - 1 (the other) after their
            // reads.
#ifndef MLA_PAIR_DIAG_NO_MR
            if (i >= 1)
                mbar_wait(mb_mr, (uint32_t)(i - 1) & 1);
#endif
            const float *mprev = Mx + ((i + 2) % 3) * NA, *mown = Mx + ((i + 1) % 3) * NA;
            float *mnew = Mx + (i % 3) * NA;
            float al[2 * JQ], mn[2 * JQ];
#pragma unroll
            for (int jj = 0; jj < JQ; ++jj)
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    const int c = 2 * jj + e, col = 8 * jj + 2 * t4 + e;
                    const float4 m4 = *(const float4 *)(red + col * 4);
                    mn[c] = i >= 1 ? mprev[col] : -INFINITY;
                    const float mo = k >= 1 ? mown[col] : -INFINITY;
                    float m_use;
                    al[c] = ws_max_step(fmaxf(fmaxf(m4.x, m4.y), fmaxf(m4.z, m4.w)), mn[c], m_use);
                    const float p0 = ws_exp2(v[jj][e] - m_use), p1 = ws_exp2(v[jj][2 + e] - m_use);
                    l_run[c] = l_run[c] * ws_exp2(mo - m_use) + p0 + p1;
                    v[jj][e] = p0;
                    v[jj][2 + e] = p1;
                }
            if (w == 0 && lane < 4) {
#pragma unroll
                for (int jj = 0; jj < JQ; ++jj)
#pragma unroll
                    for (int e = 0; e < 2; ++e)
                        mnew[8 * jj + 2 * lane + e] = mn[2 * jj + e];
            }
            mbar_arrive(mb_mr); // every thread: its reads of Mx are done (and lanes 0-3 of warp 0 wrote)
            uint32_t pk[JQ][2];
#pragma unroll
            for (int jj = 0; jj < JQ; ++jj)
#pragma unroll
                for (int h = 0; h < 2; ++h)
                    pk[jj][h] = pack_bf2(v[jj][2 * h], v[jj][2 * h + 1]);
            // P^T rows 8 jj .. + 7, tokens 16 w + 8 h .. + 7: tile (jj, h) is
            // 8 x 8 in the accumulator layout; stmatrix.trans stores it as 8
            // P^T rows of 16 bytes (chunk 2 w + h of the 128-byte swizzled
            // row).
            {
                const int q = lane >> 3, ci = lane & 7;
                auto prow = [&](int bi) {
                    const int jj = bi >> 1, h = bi & 1, nrow = 8 * jj + ci;
                    return pl + (uint32_t)(nrow * 128 + (((2 * w + h) ^ (nrow & 7)) << 4));
                };
#pragma unroll
                for (int g = 0; g < JQ / 2; ++g)
                    stsm_x4_t(prow(4 * g + q), pk[2 * g][0], pk[2 * g][1], pk[2 * g + 1][0], pk[2 * g + 1][1]);
                if constexpr (JQ % 2)
                    stsm_x2_t(prow(4 * (JQ / 2) + (q & 1)), pk[JQ - 1][0], pk[JQ - 1][1]);
            }
            if (w == 0 && lane < 4) {
#pragma unroll
                for (int jj = 0; jj < JQ; ++jj)
#pragma unroll
                    for (int e = 0; e < 2; ++e)
                        alx[8 * jj + 2 * t4 + e] = al[2 * jj + e];
            }
            fence_proxy_async(); // the PV's wgmma read P^T
            __syncwarp();
            // Lane 0 arrives for its warp; warp 0's lanes 1-3, which wrote
            // rescale factors, arrive for themselves (racecheck orders a
            // thread's writes by its own arrival only).
            if (lane == 0 || (w == 0 && lane < 4))
                mbar_arrive(mb_pfw);
        }
        // Row sums: over the lanes of equal t4, then the four warps in Red's
        // slot k & 1 (last read for this warpgroup's block k - 2, before
        // every thread's MX arrival for block k - 1, which every thread has
        // waited for).
        float lsum[2 * JQ];
#pragma unroll
        for (int c = 0; c < 2 * JQ; ++c)
            lsum[c] = pair_over_tokens<false>(l_run[c]);
        pair_cols_to_red<JQ>(RedW + (k & 1) * NA * 4, lsum, lane, w);
        nbar_sync(BAR_PAIR_L, 256); // both S warpgroups' sums and the last block's Mx
        if (sw == 0 && ts < NA) {
            // Row NA r + ts: the two warpgroups' sums, each referred from the
            // max after its last block to the final one.
            const int col = ts;
            const float mf = Mx[((nb - 1) % 3) * NA + col];
            const float mu = mf == -INFINITY ? 0.f : mf;
            float l = 0.f;
#pragma unroll
            for (int x = 0; x < 2; ++x) {
                const int kx = (nb - x + 1) / 2; // blocks of warpgroup x
                if (kx >= 1) {
                    const float4 l4 = *(const float4 *)(Red + (x * 2 + (kx & 1)) * NA * 4 + col * 4);
                    const float ml = Mx[((x + 2 * (kx - 1)) % 3) * NA + col];
                    l += ((l4.x + l4.y) + (l4.z + l4.w)) * ws_exp2(ml - mu);
                }
            }
            Fin[col] = split_out_scale(p.v_scale, l);
            bool ok;
            const int rr = row_of(p, NR, 0, NA * r + col, ok);
            if (ok)
                p.part_lse[part_row0 + rr] = split_lse(mf, l);
            mbar_arrive(mb_fin);
        }
        nbar_sync(BAR_END, NT);
        nbar_sync(BAR_END, NT);
    } else {
        // O^T[256 x + 64 m .. + 63][NA] for m < 4: thread rows (dv) 16 w +
        // lane / 4 (+ 8), columns (query rows) 8 j + 2 t4 (+ 1).
        regs_inc<128>();
        const int x = wg - 3, ts = tid & 127, w = ts >> 5, t4 = lane & 3;
        float o[4][NA / 2];
#pragma unroll
        for (int m = 0; m < 4; ++m)
#pragma unroll
            for (int c = 0; c < NA / 2; ++c)
                o[m][c] = 0.f;
        for (int i = 0; i < nb; ++i) {
            const int stg = i % PR_STAGES, sl = i & 1;
            // P^T of block i; its chain, and so every atom's FULL, is done.
            mbar_wait(mb_pf + 8u * sl, (uint32_t)(i >> 1) & 1);
            fence_proxy_async(); // V came by cp.async, P^T by stmatrix (generic proxy)
            const float *al = Alpha + sl * NA;
            bool moved = false;
#pragma unroll
            for (int j = 0; j < NA / 8; ++j) {
                const float2 a = *(const float2 *)(al + 8 * j + 2 * t4);
                moved |= a.x != 1.f || a.y != 1.f;
            }
            if (__any_sync(0xffffffffu, moved)) {
#pragma unroll
                for (int j = 0; j < NA / 8; ++j) {
                    const float2 a = *(const float2 *)(al + 8 * j + 2 * t4);
#pragma unroll
                    for (int m = 0; m < 4; ++m) {
                        o[m][4 * j] *= a.x;
                        o[m][4 * j + 1] *= a.y;
                        o[m][4 * j + 2] *= a.x;
                        o[m][4 * j + 3] *= a.y;
                    }
                }
            }
            const uint32_t vs = st_s + (uint32_t)(stg * PR_STAGE);
            const uint64_t dp = wg_desc_sw128(p_s + (uint32_t)(sl * NA * 128));
            wg_fence();
#pragma unroll
            for (int m = 0; m < 4; ++m) {
                const uint64_t dv = wg_desc_mn_sw128_lbo(vs + (uint32_t)((4 * x + m) * PR_ATOM), PR_ATOM);
#pragma unroll
                for (int kk = 0; kk < 4; ++kk)
                    PairMma<NA>::o(o[m], dv + (uint64_t)kk * (2048 >> 4), dp + 2 * kk);
            }
            wg_commit();
            wg_wait<0>();
#pragma unroll
            for (int m = 0; m < 4; ++m)
                fence_regs(o[m]);
            warp_arrive(mb_empty + 8u * (3 * stg + x));
            if (lane == 0)
                mbar_arrive(mb_pe + 8u * sl);
        }
        nbar_sync(BAR_END, NT); // every wgmma and copy of this CTA is done
        mbar_wait(mb_fin, 0);
#pragma unroll
        for (int j = 0; j < NA / 8; ++j)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                const int col = 8 * j + 2 * t4 + e;
                const float f = Fin[col];
#pragma unroll
                for (int m = 0; m < 4; ++m) {
                    const int c = 64 * (4 * x + m) + 16 * w + (lane >> 2);
                    Os[col * OSP + c] = f2bf(o[m][4 * j + e] * f);
                    Os[col * OSP + c + 8] = f2bf(o[m][4 * j + 2 + e] * f);
                }
            }
        nbar_sync(BAR_END, NT);
    }
    // The staged partial: this CTA's rows (< HL), 512 columns, 16-byte
    // chunks.
    for (int idx = tid; idx < NA * (DV_MAX / 8); idx += NT) {
        const int kr = idx / (DV_MAX / 8), c = (idx % (DV_MAX / 8)) * 8;
        bool ok;
        const int rr = row_of(p, NR, 0, NA * r + kr, ok);
        if (ok)
            *(uint4 *)((bf16_t *)p.part_o + (part_row0 + rr) * p.Dv + c) = *(const uint4 *)(Os + kr * OSP + c);
    }
}

} // namespace mla_dev

#endif // MLA_TARGET_NVIDIA
#endif
