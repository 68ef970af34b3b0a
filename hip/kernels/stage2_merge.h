// Stage 2 of the fast and per-head tiers: the log-sum-exp merge of a
// sequence's active prefix splits, the causal L x L draft block in fp32,
// and the final merge into o and lse.
#ifndef MLA_KERNELS_STAGE2_MERGE_H
#define MLA_KERNELS_STAGE2_MERGE_H

#include "../device/bf16.h"
#include "../device/sync.h"
#include "stage1_common.h"

#ifndef MLA_HIP_MINIMAL
#include <math.h>
#endif

namespace mla_dev {

// ---------------------------------------------------------------------------
// Stage 2: merge of the prefix pieces, causal L x L draft block in fp32,
// final merge. Grid (H, Dv / cw, bs), 256 threads. Everything a block needs
// from global memory except the partial outputs is staged in shared memory
// in one parallel burst first: a chain of dependent global loads per warp
// costs microseconds, which is the whole budget of a small call.
// ---------------------------------------------------------------------------
// Columns per block (cw): a multiple of 64 dividing Dv (split_policy.c);
// the shared-memory plan is stage2_smem (config.h).

// Eight bf16 values (one 16-byte chunk) as fp32.
__device__ __forceinline__ void unpack8(const uint4 v, float *o)
{
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        o[2 * k] = bf2_lo(w[k]);
        o[2 * k + 1] = bf2_hi(w[k]);
    }
}
template <typename PT> __device__ __forceinline__ void load8(const void *base, long long idx, float *o)
{
    if (sizeof(PT) == 2) {
        unpack8(*(const uint4 *)((const bf16_t *)base + idx), o);
    } else {
        const float *f = (const float *)base + idx;
#pragma unroll
        for (int k = 0; k < 8; ++k)
            o[k] = f[k];
    }
}

template <typename PT> __global__ void __launch_bounds__(S2_THREADS) stage2_kernel(Stage2Params p)
{
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const int L = p.L, NS = p.max_pieces, D = p.D;
    const int cw = p.cw, CG = cw / 8;
    const int SG = s2_groups(L, cw), items = s2_items(L, cw);
    float *sc = (float *)smem_raw; // [L][L] draft scores
    float *wd = sc + L * L;        // [L][L] normalized draft weights
    float *wsp = wd + L * L;       // [L][NS] split lse, then normalized split weights
    float *red = wsp + L * NS;     // [SG][items][8] partial sums when SG > 1
    // 16-byte aligned start of the bf16 part (uint4 reads of vs).
    bf16_t *qs = (bf16_t *)(smem_raw + s2_bf16_offset(L, NS, cw)); // [L][D]
    bf16_t *ks = qs + L * D;       // [L][D]
    bf16_t *vs = ks + L * D;       // [L][cw]

    const int h = blockIdx.x, chunk = blockIdx.y, b = blockIdx.z;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int q0 = p.qo_indptr[b];
    // The sequence's pieces: slots first + b .. last + b of the balanced
    // partition (split_policy.h), or its per-head splits b NS .. + NS - 1.
    int act, slot0;
    if (p.mode == S1_FAST) {
        const int kv0 = p.kv_indptr[b];
        int first, last;
        mla_sp_seq_chunks(mla_sp_seq_start(kv0, b), p.kv_indptr[b + 1] - kv0, p.num_splits, p.work, &first,
                          &last);
        // Stage 1 wrote this sequence's o and lse itself (Stage1Draft direct).
        if (p.s1_direct && first == last)
            return;
        act = last - first + 1;
        slot0 = first + b;
    } else {
        act = p.num_splits;
        slot0 = b * p.num_splits;
    }
    const long long part_row0 = (long long)slot0 * p.HL;
    // Draft keys merged here: none when stage 1 folded the draft block into
    // the last split (Stage1Draft), which leaves this kernel the merge alone.
    const int LD = p.s1_draft ? 0 : L;

    // Phase 0: stage q rows of this head, k_extend rows, this block's v_extend
    // columns and the split lse values.
    // q rows are 16-byte aligned (a fast/per-head condition), k_extend and
    // v_extend rows too (idem); 8-element chunks, no division in the loop.
    if (LD > 0) {
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
            ((uint4 *)vs)[idx] =
                *(const uint4 *)(p.v_ext + (long long)(q0 + j) * p.v_st + chunk * cw + 8 * c);
        }
    }
    __syncthreads();

    // Phase 1: causal draft scores in fp32. The L (L + 1) / 2 visible pairs
    // (p = i (i + 1) / 2 + j, j <= i) are spread evenly over the warps: one
    // warp per column j left warp 0 with L pairs and the last with one, and
    // this phase was half of the kernel's instructions (ncu, K3 bs 8 / 16k,
    // docs/perf/2026-12-02-stage2-merge.md, "Fixed costs of a short-split call, and balanced draft scores"). 16-byte shared loads, two accumulators.
    for (int idx = tid; idx < LD * L; idx += S2_THREADS) {
        const int i = idx / L, j = idx - i * L;
        if (j > i)
            sc[idx] = -INFINITY; // causal: later drafts are invisible
    }
    for (int pp = warp; pp < LD * (LD + 1) / 2; pp += S2_THREADS / 32) {
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
            sc[i * L + j] = acc * p.sm_scale;
    }
    __syncthreads();

    // Everything above read inputs only; the partials come from stage 1.
    pdl_wait();
    // With split groups (one item a thread), the thread's first S2_PF bf16
    // partial chunks are loaded now: they do not depend on the weights, so
    // their latency overlaps the lse loads and phase 2, one global round
    // trip less between stage 1's end and o (bs 1 calls, where stage 2's
    // tail is a quarter of the call: docs/perf/2026-12-02-stage2-merge.md, "Partials loaded before the weights").
    const int sg = tid / items, item = tid - sg * items;
    uint4 pf[S2_PF];
    if constexpr (sizeof(PT) == 2) {
        if (SG > 1 && sg < SG) {
            const int i = item / CG, cg = item - i * CG;
            const long long base = (part_row0 + i * p.H + h) * p.Dv + chunk * cw + cg * 8;
#pragma unroll
            for (int k = 0; k < S2_PF; ++k) {
                const int s = sg + k * SG;
                if (s < act)
                    pf[k] = *(const uint4 *)((const bf16_t *)p.part_o + base + (long long)s * p.HL * p.Dv);
            }
        }
    }
    for (int idx = tid; idx < L * act; idx += S2_THREADS) {
        const int i = idx / act, s = idx - i * act;
        wsp[i * NS + s] = p.part_lse[part_row0 + (long long)s * p.HL + i * p.H + h];
    }
    __syncthreads();

    // Phase 2: one warp per row: max, denominator, normalized weights.
    for (int i = warp; i < L; i += S2_THREADS / 32) {
        // fmaxf drops NaN, so a NaN split lse (a NaN key in that split) or
        // draft score is flagged apart: the row is then NaN, lse included,
        // as the reference's (SPEC non-finite policy).
        float M = -INFINITY, bad = 0.f;
        for (int s = lane; s < act; s += 32) {
            const float x = wsp[i * NS + s];
            bad = x != x ? 1.f : bad;
            M = fmaxf(M, x);
        }
        for (int j = lane; j < LD; j += 32) {
            const float x = sc[i * L + j];
            bad = x != x ? 1.f : bad;
            M = fmaxf(M, x);
        }
        M = warp_max(M);
        bad = warp_max(bad);
        float sum = 0.f;
        if (M != -INFINITY) {
            for (int s = lane; s < act; s += 32)
                sum += __expf(wsp[i * NS + s] - M);
            for (int j = lane; j < LD; j += 32)
                sum += __expf(sc[i * L + j] - M);
        }
        sum = warp_sum(sum);
        if (bad != 0.f)
            sum = NAN;
        // No visible key at all: o = 0, lse = -inf, and no 0/0 anywhere.
        // NaN: every weight and the lse NaN.
        const bool any = sum != 0.f;
        const float inv = any ? 1.f / sum : 0.f;
        for (int s = lane; s < act; s += 32)
            wsp[i * NS + s] = any ? __expf(wsp[i * NS + s] - M) * inv : 0.f;
        for (int j = lane; j < LD; j += 32)
            wd[i * L + j] = any ? __expf(sc[i * L + j] - M) * inv : 0.f;
        if (chunk == 0 && lane == 0 && p.lse)
            p.lse[(long long)(q0 + i) * p.lse_st + h] = any ? M + __logf(sum) : -INFINITY;
    }
    __syncthreads();

    // Phase 3: weighted sum of the partials, 8 columns (16 bytes) per thread,
    // the splits shared among SG thread groups, then the draft values.
    auto finish = [&](int item, float *acc) {
        const int i = item / CG, cg = item - i * CG;
        for (int j = 0; j <= (LD > 0 ? i : -1); ++j) {
            const float w = wd[i * L + j];
            const uint4 v = *(const uint4 *)(vs + j * cw + cg * 8);
            const uint32_t vw[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                acc[2 * k] += w * bf2_lo(vw[k]);
                acc[2 * k + 1] += w * bf2_hi(vw[k]);
            }
        }
        *(uint4 *)(p.o + (long long)(q0 + i) * p.o_st + (long long)h * p.o_sh + chunk * cw + cg * 8) =
            make_uint4(pack_bf2(acc[0], acc[1]), pack_bf2(acc[2], acc[3]), pack_bf2(acc[4], acc[5]),
                       pack_bf2(acc[6], acc[7]));
    };
    // Splits s0 + held step, .. < act of one item, in that order (the first
    // held ones are already in acc).
    auto gather = [&](int item, int s0, int step, float *acc, int held) {
        const int i = item / CG, cg = item - i * CG;
        const long long base = (part_row0 + i * p.H + h) * p.Dv + chunk * cw + cg * 8;
#pragma unroll 4
        for (int s = s0 + held * step; s < act; s += step) {
            float o[8];
            load8<PT>(p.part_o, base + (long long)s * p.HL * p.Dv, o);
            const float w = wsp[i * NS + s];
#pragma unroll
            for (int k = 0; k < 8; ++k)
                acc[k] += w * o[k];
        }
    };
    if (SG == 1) {
        for (int item = tid; item < items; item += S2_THREADS) {
            float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            gather(item, 0, 1, acc, 0);
            finish(item, acc);
        }
    } else {
        float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        if (sg < SG) {
            int held = 0;
            if constexpr (sizeof(PT) == 2) {
                // The prefetched splits first, in the same order and
                // arithmetic as gather's.
                const int i = item / CG;
#pragma unroll
                for (int k = 0; k < S2_PF; ++k) {
                    const int s = sg + k * SG;
                    if (s < act) {
                        float o[8];
                        unpack8(pf[k], o);
                        const float w = wsp[i * NS + s];
#pragma unroll
                        for (int e = 0; e < 8; ++e)
                            acc[e] += w * o[e];
                    }
                }
                held = S2_PF;
            }
            gather(item, sg, SG, acc, held);
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
