// The log-sum-exp merge of a sequence's prefix splits, shared by its two
// homes: stage 2 (stage2_merge.h), and the in-kernel merge at the end of
// ws-pvg's stage 1, where the last split CTA of each row block to finish
// merges the row block's partials itself (no second kernel, whose blocks
// find no SM until stage 1's CTAs leave: docs/perf-log.md step 41).
#ifndef MLA_KERNELS_SPLIT_MERGE_H
#define MLA_KERNELS_SPLIT_MERGE_H

#include "../device/bf16.h"
#include "../device/sync.h"
#include "stage1_common.h"

#ifndef MLA_HIP_MINIMAL
#include <math.h>
#endif

namespace mla_dev {

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

// One warp, one row: the normalized weights of its act split lse values
// (wsp, in place) and of its LD draft scores (sc into wd); returns the
// row's lse. fmaxf drops NaN, so a NaN split lse (a NaN key in that split)
// or draft score is flagged apart: every weight and the lse are then NaN,
// as the reference's (SPEC non-finite policy). No visible key at all: o =
// 0, lse = -inf, and no 0/0 anywhere.
__device__ __forceinline__ float merge_row_weights(float *wsp, int act, const float *sc, float *wd, int LD,
                                                   int lane)
{
    float M = -INFINITY, bad = 0.f;
    for (int s = lane; s < act; s += 32) {
        const float x = wsp[s];
        bad = x != x ? 1.f : bad;
        M = fmaxf(M, x);
    }
    for (int j = lane; j < LD; j += 32) {
        const float x = sc[j];
        bad = x != x ? 1.f : bad;
        M = fmaxf(M, x);
    }
    M = warp_max(M);
    bad = warp_max(bad);
    float sum = 0.f;
    if (M != -INFINITY) {
        for (int s = lane; s < act; s += 32)
            sum += __expf(wsp[s] - M);
        for (int j = lane; j < LD; j += 32)
            sum += __expf(sc[j] - M);
    }
    sum = warp_sum(sum);
    if (bad != 0.f)
        sum = NAN;
    const bool any = sum != 0.f;
    const float inv = any ? 1.f / sum : 0.f;
    for (int s = lane; s < act; s += 32)
        wsp[s] = any ? __expf(wsp[s] - M) * inv : 0.f;
    for (int j = lane; j < LD; j += 32)
        wd[j] = any ? __expf(sc[j] - M) * inv : 0.f;
    return any ? M + __logf(sum) : -INFINITY;
}

#if defined(MLA_TARGET_NVIDIA)
// Where the in-kernel merge writes (Stage1Merge) and its arrival counters:
// one int per (sequence, row block), zero between calls
// (mla_gpu_workspace_init zeroes them once; the last arrival of each call
// puts its counter back to zero).
//
// A split CTA's arrival, after all NT threads stored their partial (part_o
// and part_lse): true in every thread of the last CTA of the row block to
// arrive. The fences make each thread's partial stores visible at device
// scope before thread 0's atomic (release), and the other CTAs' stores
// visible to this CTA's loads after it (acquire; the loads also bypass L1,
// merge_unit). flag: one int of shared memory; bar a named barrier of NT
// threads.
template <int NT>
__device__ __forceinline__ bool merge_arrive(int *counter, int act, int *flag, int bar)
{
    __threadfence();
    nbar_sync(bar, NT);
    if (threadIdx.x == 0) {
        const int last = atomicAdd(counter, 1) == act - 1;
        if (last)
            atomicExch(counter, 0); // every split arrived: ready for the next call
        *flag = last;
    }
    nbar_sync(bar, NT);
    const bool last = *flag != 0;
    if (last)
        __threadfence();
    return last;
}

// The last CTA's merge of row block y of sequence b: the act split partials
// of its ROWS rows into o and lse, by NT threads, in the arithmetic of
// stage 2 without a draft block (the CTAs fold it into the last split):
// weights per row (one warp a row, W: ROWS x act floats of shared memory),
// then each 16-byte chunk of o as the weighted sum over the splits in
// order.
template <int ROWS, int NT>
__device__ __forceinline__ void merge_unit(const Stage1Params &p, const Stage1Merge &m, int b, int y, int act,
                                           float *W, int bar)
{
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int q0 = p.qo_indptr[b];
    const long long part_row0 = (long long)b * p.num_splits * p.HL;
    const long long sstride = (long long)p.HL * p.Dv;
    for (int k = warp; k < ROWS; k += NT / 32) {
        bool ok;
        const int r = row_of(p, ROWS, y, k, ok);
        if (!ok)
            continue;
        float *w = W + k * act;
        for (int s = lane; s < act; s += 32)
            w[s] = __ldcg(p.part_lse + part_row0 + (long long)s * p.HL + r);
        __syncwarp();
        const float lse = merge_row_weights(w, act, nullptr, nullptr, 0, lane);
        if (lane == 0 && m.lse)
            m.lse[(long long)(q0 + r / p.H) * m.lse_st + r % p.H] = lse;
    }
    nbar_sync(bar, NT);
    const int cpr = p.Dv >> 3;
    for (int idx = tid; idx < ROWS * cpr; idx += NT) {
        const int k = idx / cpr, c = (idx - k * cpr) * 8;
        bool ok;
        const int r = row_of(p, ROWS, y, k, ok);
        if (!ok)
            continue;
        const uint4 *src = (const uint4 *)((const bf16_t *)p.part_o + (part_row0 + r) * p.Dv + c);
        const float *w = W + k * act;
        float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
#pragma unroll 4
        for (int s = 0; s < act; ++s) {
            float o[8];
            unpack8(__ldcg(src + s * (sstride >> 3)), o);
#pragma unroll
            for (int e = 0; e < 8; ++e)
                acc[e] += w[s] * o[e];
        }
        *(uint4 *)(m.o + (long long)(q0 + r / p.H) * m.o_st + (long long)(r % p.H) * m.o_sh + c) =
            make_uint4(pack_bf2(acc[0], acc[1]), pack_bf2(acc[2], acc[3]), pack_bf2(acc[4], acc[5]),
                       pack_bf2(acc[6], acc[7]));
    }
}
#endif

} // namespace mla_dev

#endif
