// Stage 2 of the fast and per-head tiers: the log-sum-exp merge of a
// sequence's active prefix splits and its causal L x L draft block (fp32),
// into o and lse; and draft_kernel, the draft block as a partial of its own
// (fast tier).
#ifndef MLA_KERNELS_STAGE2_MERGE_H
#define MLA_KERNELS_STAGE2_MERGE_H

#include "../device/bf16.h"
#include "../device/cp_async.h"
#include "../device/sync.h"
#include "stage1_common.h"

#ifndef MLA_HIP_MINIMAL
#include <math.h>
#endif

namespace mla_dev {

template <typename PT> __device__ __forceinline__ void load8(const void *base, long long idx, float *o)
{
    if (sizeof(PT) == 2) {
        const uint4 v = *(const uint4 *)((const bf16_t *)base + idx);
        const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            o[2 * k] = bf2_lo(w[k]);
            o[2 * k + 1] = bf2_hi(w[k]);
        }
    } else {
        // idx is a multiple of 8 on a 256-byte aligned buffer.
        const float4 *f = (const float4 *)((const float *)base + idx);
        const float4 a = f[0], c = f[1];
        o[0] = a.x, o[1] = a.y, o[2] = a.z, o[3] = a.w;
        o[4] = c.x, o[5] = c.y, o[6] = c.z, o[7] = c.w;
    }
}

// q rows of head h and the k_extend rows of the drafts at q0, and columns
// [col0, col0 + cols) of their v_extend rows, into shared memory (16-byte
// chunks: q, k_extend and v_extend rows are 16-byte aligned, a decline
// condition of the split tiers).
__device__ __forceinline__ void s2_stage_drafts(const Stage2Params &p, int q0, int h, bf16_t *qs,
                                                bf16_t *ks, bf16_t *vs, int col0, int cols)
{
    const int L = p.L, D = p.D, CG = cols / 8;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int cpr = D / 8; // chunks per row
    for (int i = warp; i < L; i += S2_THREADS / 32) {
        const uint4 *qg = (const uint4 *)(p.q + (long long)(q0 + i) * p.q_st + (long long)h * p.q_sh);
        const uint4 *kg = (const uint4 *)(p.k_ext + (long long)(q0 + i) * p.k_st);
        for (int c = lane; c < cpr; c += 32) {
            ((uint4 *)(qs + i * D))[c] = qg[c];
            ((uint4 *)(ks + i * D))[c] = kg[c];
        }
    }
    for (int idx = tid; idx < L * CG; idx += S2_THREADS) {
        const int j = idx / CG, c = idx - j * CG;
        ((uint4 *)vs)[idx] = *(const uint4 *)(p.v_ext + (long long)(q0 + j) * p.v_st + col0 + 8 * c);
    }
}

// Causal draft scores sc[i][j] = sm_scale q_i . k_j in fp32, -inf above the
// diagonal (later drafts are invisible). The L (L + 1) / 2 visible pairs
// (p = i (i + 1) / 2 + j, j <= i) are spread evenly over the warps: one
// warp per column j left warp 0 with L pairs and the last with one, and
// this phase was half of stage 2's instructions (ncu, K3 bs 8 / 16k,
// docs/perf-log.md step 28). 16-byte shared loads, two accumulators.
__device__ __forceinline__ void s2_draft_scores(float *sc, const bf16_t *qs, const bf16_t *ks, int L,
                                                int D, float sm_scale)
{
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    for (int idx = tid; idx < L * L; idx += S2_THREADS) {
        const int i = idx / L, j = idx - i * L;
        if (j > i)
            sc[idx] = -INFINITY;
    }
    for (int pp = warp; pp < L * (L + 1) / 2; pp += S2_THREADS / 32) {
        int i = 0;
        while ((i + 1) * (i + 2) / 2 <= pp)
            ++i;
        const int j = pp - i * (i + 1) / 2;
        const uint4 *qr = (const uint4 *)(qs + i * D), *kr = (const uint4 *)(ks + j * D);
        float a0 = 0.f, a1 = 0.f;
#pragma unroll 1
        for (int c = lane; c < D / 8; c += 32) {
            const uint4 qv = qr[c], kv = kr[c];
            auto dot2 = [&](uint32_t qa, uint32_t ka) {
                a0 += bf2_lo(qa) * bf2_lo(ka);
                a1 += bf2_hi(qa) * bf2_hi(ka);
            };
            dot2(qv.x, kv.x);
            dot2(qv.y, kv.y);
            dot2(qv.z, kv.z);
            dot2(qv.w, kv.w);
        }
        const float acc = warp_sum(a0 + a1);
        if (lane == 0)
            sc[i * L + j] = acc * sm_scale;
    }
}

// One warp's softmax of n log-weights x[0..n) into weights x * inv (in
// place) and their log-sum-exp, for a row's splits and drafts together
// (stage 2; draft_kernel's online softmax keeps the same rule).
// fmaxf drops NaN, so a NaN entry (a NaN key in a split, a NaN draft
// score) is flagged apart: the weights and the lse are then NaN, as the
// reference's (SPEC non-finite policy). No finite entry at all: weights 0,
// lse -inf, and no 0/0 anywhere. x2 / n2: a second array of the same row
// (stage 2's draft scores), or n2 = 0.
__device__ __forceinline__ float s2_row_softmax(float *x, int n, float *x2, int n2)
{
    const int lane = threadIdx.x & 31;
    float M = -INFINITY, bad = 0.f;
    for (int s = lane; s < n; s += 32) {
        bad = x[s] != x[s] ? 1.f : bad;
        M = fmaxf(M, x[s]);
    }
    for (int s = lane; s < n2; s += 32) {
        bad = x2[s] != x2[s] ? 1.f : bad;
        M = fmaxf(M, x2[s]);
    }
    M = warp_max(M);
    bad = warp_max(bad);
    float sum = 0.f;
    if (M != -INFINITY) {
        for (int s = lane; s < n; s += 32)
            sum += __expf(x[s] - M);
        for (int s = lane; s < n2; s += 32)
            sum += __expf(x2[s] - M);
    }
    sum = warp_sum(sum);
    if (bad != 0.f)
        sum = NAN;
    const bool any = sum != 0.f;
    const float inv = any ? 1.f / sum : 0.f;
    for (int s = lane; s < n; s += 32)
        x[s] = any ? __expf(x[s] - M) * inv : 0.f;
    for (int s = lane; s < n2; s += 32)
        x2[s] = any ? __expf(x2[s] - M) * inv : 0.f;
    return any ? M + __logf(sum) : -INFINITY;
}

// ---------------------------------------------------------------------------
// The draft block as one more partial (fast tier): for each row (sequence,
// draft i, head) the causal scores sm_scale q_i . k_j (j <= i) in fp32, their
// softmax alone and the fp32 output O_d = sum_j w_j v_j with its lse, into
// p.draft_o / p.draft_lse; stage 2 merges it as a split. It runs beside
// stage 1 (launched after it with PDL, on the SMs stage 1 leaves free):
// inside stage 2 it ran only once stage 1 had left the SMs, ~5 us of every
// mid-size call (docs/perf-log.md step 29).
// One block per (sequence, head) pair at a time, one warp per draft row: the
// pair's q, k_extend and v_extend rows go to shared memory in one burst of
// copies (one round trip: a warp per row that loaded each draft j in turn
// waited a round trip per j, 2-5 us a row under stage 1's traffic; one warp
// computing a pair's rows one after another took ~18 us a pair), then each
// warp computes its row: the dot products of up to DRAFT_J drafts at once
// (their warp sums interleaved) and an online softmax over those groups.
// Lane l holds output chunks l and l + 32 (16 bytes of v each: Dv <= 512).
constexpr int DRAFT_J = 8;

// At most MLA_SP_DRAFT_REGS registers a thread (the launch bound): the host
// plan counts the blocks that fit an SM beside each other by them.
__global__ void __launch_bounds__(32 * DRAFT_MAX_WARPS, 65536 / (32 * DRAFT_MAX_WARPS * MLA_SP_DRAFT_REGS))
draft_kernel(Stage2Params p)
{
    extern __shared__ __align__(16) unsigned char smem_raw[];
    // Stage 2 may launch now; its wait covers this kernel's end, which
    // waits for stage 1 (below).
    pdl_launch_dependents();
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nwarps = blockDim.x >> 5;
    const int L = p.L, D = p.D, QC = p.D / 8, VC = p.Dv / 8;
    bf16_t *qs = (bf16_t *)smem_raw; // [L][D]
    bf16_t *ks = qs + L * D;         // [L][D]
    bf16_t *vs = ks + L * D;         // [L][Dv]
    for (int pr = blockIdx.x; pr < p.bs * p.H; pr += gridDim.x) {
        const int b = pr / p.H, h = pr - b * p.H;
        const int q0 = p.qo_indptr[b];
        __syncthreads(); // the previous pair's rows are read
        for (int e = tid; e < L * QC; e += blockDim.x) {
            const int i = e / QC, c = e - i * QC;
            cp_async16(qs + i * D + 8 * c, p.q + (long long)(q0 + i) * p.q_st + (long long)h * p.q_sh + 8 * c, 16);
            cp_async16(ks + i * D + 8 * c, p.k_ext + (long long)(q0 + i) * p.k_st + 8 * c, 16);
        }
        for (int e = tid; e < L * VC; e += blockDim.x) {
            const int j = e / VC, c = e - j * VC;
            cp_async16(vs + j * p.Dv + 8 * c, p.v_ext + (long long)(q0 + j) * p.v_st + 8 * c, 16);
        }
        cp_async_commit();
        cp_async_wait_all();
        __syncthreads();
        for (int i = warp; i < L; i += nwarps) {
            const uint4 *qr = (const uint4 *)(qs + i * D);
            float m = -INFINITY, l = 0.f, o[16];
#pragma unroll
            for (int k = 0; k < 16; ++k)
                o[k] = 0.f;
            bool bad = false;
            for (int j0 = 0; j0 <= i; j0 += DRAFT_J) {
                float sj[DRAFT_J];
#pragma unroll
                for (int jj = 0; jj < DRAFT_J; ++jj)
                    sj[jj] = 0.f;
                for (int c = lane; c < QC; c += 32) {
                    const uint4 qv = qr[c];
                    const uint32_t qw[4] = {qv.x, qv.y, qv.z, qv.w};
#pragma unroll
                    for (int jj = 0; jj < DRAFT_J; ++jj)
                        if (j0 + jj <= i) {
                            const uint4 kv = ((const uint4 *)(ks + (j0 + jj) * D))[c];
                            const uint32_t kw[4] = {kv.x, kv.y, kv.z, kv.w};
#pragma unroll
                            for (int k = 0; k < 4; ++k)
                                sj[jj] += bf2_lo(qw[k]) * bf2_lo(kw[k]) + bf2_hi(qw[k]) * bf2_hi(kw[k]);
                        }
                }
                for (int off = 16; off > 0; off >>= 1)
#pragma unroll
                    for (int jj = 0; jj < DRAFT_J; ++jj)
                        sj[jj] += mla_shfl_xor(sj[jj], off, 32);
                // The rule of s2_row_softmax: a NaN score makes the row NaN
                // (fmaxf would drop it); no finite score gives 0, lse -inf.
                float mg = m;
#pragma unroll
                for (int jj = 0; jj < DRAFT_J; ++jj)
                    if (j0 + jj <= i) {
                        sj[jj] *= p.sm_scale;
                        bad = bad || sj[jj] != sj[jj];
                        mg = fmaxf(mg, sj[jj]);
                    }
                if (mg == -INFINITY)
                    continue; // nothing visible yet: l and o stay 0
                const float corr = __expf(m - mg); // 0 from m = -inf
                l *= corr;
#pragma unroll
                for (int k = 0; k < 16; ++k)
                    o[k] *= corr;
                m = mg;
#pragma unroll
                for (int jj = 0; jj < DRAFT_J; ++jj)
                    if (j0 + jj <= i) {
                        const float e = __expf(sj[jj] - m);
                        l += e;
#pragma unroll
                        for (int c = 0; c < 2; ++c)
                            if (lane + 32 * c < VC) {
                                const uint4 v = ((const uint4 *)(vs + (j0 + jj) * p.Dv))[lane + 32 * c];
                                const uint32_t vw[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
                                for (int k = 0; k < 4; ++k) {
                                    o[8 * c + 2 * k] += e * bf2_lo(vw[k]);
                                    o[8 * c + 2 * k + 1] += e * bf2_hi(vw[k]);
                                }
                            }
                    }
            }
            if (bad)
                l = NAN;
            const bool any = l != 0.f;
            const float inv = any ? 1.f / l : 0.f;
            const long long row = (long long)b * p.HL + i * p.H + h;
            float *dst = p.draft_o + row * p.Dv;
#pragma unroll
            for (int c = 0; c < 2; ++c)
                if (lane + 32 * c < VC) {
                    float4 *d4 = (float4 *)(dst + 8 * (lane + 32 * c));
                    d4[0] = float4{o[8 * c] * inv, o[8 * c + 1] * inv, o[8 * c + 2] * inv, o[8 * c + 3] * inv};
                    d4[1] = float4{o[8 * c + 4] * inv, o[8 * c + 5] * inv, o[8 * c + 6] * inv, o[8 * c + 7] * inv};
                }
            if (lane == 0)
                p.draft_lse[row] = any ? m + __logf(l) : -INFINITY;
        }
    }
    // Stage 2 waits for this grid only: ending after stage 1 makes that
    // wait cover stage 1's partials too.
    pdl_wait();
}

// ---------------------------------------------------------------------------
// Stage 2: the log-sum-exp merge of a sequence's active prefix splits and
// its draft block, the final o and lse. Grid (H, Dv / cw, bs), 256 threads.
// SEP (the fast tier): the draft block comes as draft_kernel's partial,
// so nothing is left to do before the PDL wait for the partials. !SEP (the
// per-head baseline, upstream's two plain launches): the block stages its
// drafts' q, k_extend and v_extend columns and computes the causal scores
// itself first, all in one parallel burst: a chain of dependent global
// loads per warp costs microseconds, the whole budget of a small call.
// ---------------------------------------------------------------------------
// Columns per block (cw): a multiple of 64 dividing Dv (split_policy.c);
// the shared-memory plans are stage2_smem and stage2_sep_smem (config.h).
template <typename PT, bool SEP> __global__ void __launch_bounds__(S2_THREADS) stage2_kernel(Stage2Params p)
{
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const int L = p.L, NS = p.num_splits, D = p.D;
    const int cw = p.cw, CG = cw / 8;
    const int SG = s2_groups(L, cw), items = s2_items(L, cw);
    // Split lse then weights: [L][NSP], the draft block's at column NS (SEP).
    const int NSP = SEP ? NS + 1 : NS;
    float *sc = (float *)smem_raw;        // !SEP: [L][L] draft scores, then weights
    float *wsp = SEP ? sc : sc + L * L;   // [L][NSP]
    float *red = wsp + L * NSP;           // [SG][items][8] partial sums when SG > 1
    // !SEP: 16-byte aligned start of the bf16 part (uint4 reads of vs).
    bf16_t *qs = (bf16_t *)(smem_raw + s2_bf16_offset(L, NS, cw)); // [L][D]
    bf16_t *ks = qs + L * D;       // [L][D]
    bf16_t *vs = ks + L * D;       // [L][cw]

    const int h = blockIdx.x, chunk = blockIdx.y, b = blockIdx.z;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int q0 = p.qo_indptr[b];
    const int P = p.kv_indptr[b + 1] - p.kv_indptr[b];
    const int act = active_splits(p.split_mode, P, NS, p.min_split);
    const long long part_row0 = (long long)b * NS * p.HL;

    if constexpr (!SEP) {
        s2_stage_drafts(p, q0, h, qs, ks, vs, chunk * cw, cw);
        __syncthreads();
        s2_draft_scores(sc, qs, ks, L, D, p.sm_scale);
    }
    // Everything above read inputs only; the partials come from stage 1
    // (and draft_kernel).
    pdl_wait();
    for (int idx = tid; idx < L * act; idx += S2_THREADS) {
        const int i = idx / act, s = idx - i * act;
        wsp[i * NSP + s] = p.part_lse[part_row0 + (long long)s * p.HL + i * p.H + h];
    }
    if constexpr (SEP)
        for (int i = tid; i < L; i += S2_THREADS)
            wsp[i * NSP + act] = p.draft_lse[(long long)b * p.HL + i * p.H + h];
    __syncthreads();

    // Phase 2: one warp per row: normalized weights and the row's lse.
    for (int i = warp; i < L; i += S2_THREADS / 32) {
        const float lse = SEP ? s2_row_softmax(wsp + i * NSP, act + 1, nullptr, 0)
                              : s2_row_softmax(wsp + i * NSP, act, sc + i * L, L);
        if (chunk == 0 && lane == 0 && p.lse)
            p.lse[(long long)(q0 + i) * p.lse_st + h] = lse;
    }
    __syncthreads();

    // Phase 3: weighted sum of the partials, 8 columns (16 bytes) per thread,
    // the splits shared among SG thread groups, then the draft values.
    auto finish = [&](int item, float *acc) {
        const int i = item / CG, cg = item - i * CG;
        if constexpr (SEP) {
            float o[8];
            load8<float>(p.draft_o, ((long long)b * p.HL + i * p.H + h) * p.Dv + chunk * cw + cg * 8, o);
            const float w = wsp[i * NSP + act];
#pragma unroll
            for (int k = 0; k < 8; ++k)
                acc[k] += w * o[k];
        } else {
            for (int j = 0; j <= i; ++j) {
                const float w = sc[i * L + j];
                const uint4 v = *(const uint4 *)(vs + j * cw + cg * 8);
                const uint32_t vw[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
                for (int k = 0; k < 4; ++k) {
                    acc[2 * k] += w * bf2_lo(vw[k]);
                    acc[2 * k + 1] += w * bf2_hi(vw[k]);
                }
            }
        }
        *(uint4 *)(p.o + (long long)(q0 + i) * p.o_st + (long long)h * p.o_sh + chunk * cw + cg * 8) =
            make_uint4(pack_bf2(acc[0], acc[1]), pack_bf2(acc[2], acc[3]), pack_bf2(acc[4], acc[5]),
                       pack_bf2(acc[6], acc[7]));
    };
    auto gather = [&](int item, int s0, int step, float *acc) {
        const int i = item / CG, cg = item - i * CG;
        const long long base = (part_row0 + i * p.H + h) * p.Dv + chunk * cw + cg * 8;
#pragma unroll 4
        for (int s = s0; s < act; s += step) {
            float o[8];
            load8<PT>(p.part_o, base + (long long)s * p.HL * p.Dv, o);
            const float w = wsp[i * NSP + s];
#pragma unroll
            for (int k = 0; k < 8; ++k)
                acc[k] += w * o[k];
        }
    };
    if (SG == 1) {
        for (int item = tid; item < items; item += S2_THREADS) {
            float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            gather(item, 0, 1, acc);
            finish(item, acc);
        }
    } else {
        const int sg = tid / items, item = tid - sg * items;
        float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        if (sg < SG) {
            gather(item, sg, SG, acc);
#pragma unroll
            for (int k = 0; k < 8; ++k)
                red[tid * 8 + k] = acc[k];
        }
        __syncthreads();
        if (sg == 0) {
            for (int g = 1; g < SG; ++g)
#pragma unroll
                for (int k = 0; k < 8; ++k)
                    acc[k] += red[(g * items + item) * 8 + k];
            finish(item, acc);
        }
    }
}

} // namespace mla_dev

#endif
