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

// One row's merge weights, by WIDTH threads (a warp, 32, or one thread, 1;
// lane < WIDTH): the normalized weights of its act split lse values (wsp,
// wst apart, in place) and of its LD draft scores (sc into wd); returns
// the row's lse. fmaxf drops NaN, so a NaN split lse (a NaN key in that
// split) or draft score is flagged apart: every weight and the lse are
// then NaN, as the reference's (SPEC non-finite policy). No visible key at
// all: o = 0, lse = -inf, and no 0/0 anywhere.
template <int WIDTH = 32>
__device__ __forceinline__ float merge_row_weights(float *wsp, int act, const float *sc, float *wd, int LD,
                                                   int lane, int wst = 1)
{
    static_assert(WIDTH == 32 || WIDTH == 1, "a warp or one thread");
    float M = -INFINITY, bad = 0.f;
    for (int s = lane; s < act; s += WIDTH) {
        const float x = wsp[s * wst];
        bad = x != x ? 1.f : bad;
        M = fmaxf(M, x);
    }
    for (int j = lane; j < LD; j += WIDTH) {
        const float x = sc[j];
        bad = x != x ? 1.f : bad;
        M = fmaxf(M, x);
    }
    if constexpr (WIDTH == 32) {
        M = warp_max(M);
        bad = warp_max(bad);
    }
    float sum = 0.f;
    if (M != -INFINITY) {
        for (int s = lane; s < act; s += WIDTH)
            sum += __expf(wsp[s * wst] - M);
        for (int j = lane; j < LD; j += WIDTH)
            sum += __expf(sc[j] - M);
    }
    if constexpr (WIDTH == 32)
        sum = warp_sum(sum);
    if (bad != 0.f)
        sum = NAN;
    const bool any = sum != 0.f;
    const float inv = any ? 1.f / sum : 0.f;
    for (int s = lane; s < act; s += WIDTH)
        wsp[s * wst] = any ? __expf(wsp[s * wst] - M) * inv : 0.f;
    for (int j = lane; j < LD; j += WIDTH)
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

// The in-kernel merge at the end of a split CTA of ws-pvg (stage1_ws.h):
// arrive, and in the row block's last CTA merge the act split partials of
// its ROWS rows (y * ROWS + k, contiguous, the fast tier's row_mode 0) into
// o and lse, by NT threads, with stage 2's weights (merge_row_weights, one
// thread a row here) and sums, no draft block (the CTAs fold it into the
// last split).
//
// Not inlined: inlined, even the arrival alone reshaped ptxas's allocation
// of the kernel's tile loops, and the calls ran 4-8% slower at K3 with one
// split (nothing to merge; docs/perf-log.md step 41). The arguments are
// scalars: a struct reference put the kernel parameters on the stack.
//
// Written for latency (the kernel's tail): a first form with a dependent
// round trip per row and per output chunk cost 16-22 us a call. Here every
// split lse lands at once (cp.async into W, ROWS x act floats of shared
// memory, split-major), then each thread sums MI chunks of o at a time with
// the loads of four splits issued before their sums. The CTA's own split
// (s_own) comes from its staged partial in shared memory (Os, pitch WS_OSP),
// not from L2: a sequence with one split reads nothing back.
template <int ROWS, int NT>
__device__ __noinline__ void merge_tail(const bf16_t *part_o, const float *part_lse, const int32_t *qo_indptr,
                                        int H, int HL, int num_splits, int *counter, bf16_t *o, long long o_st,
                                        long long o_sh, float *lse_out, long long lse_st, int b, int y,
                                        int s_own, int act, const bf16_t *Os, float *W, int *flag, int bar)
{
    if (!merge_arrive<NT>(counter, act, flag, bar))
        return;
    constexpr int CPR = DV_MAX / 8;                // 16-byte chunks a row (Dv == DV_MAX here)
    constexpr int MI = 4;                          // chunks a thread in flight
    constexpr int NI = (ROWS * CPR + NT - 1) / NT; // chunks a thread
    const int tid = threadIdx.x;
    const int q0 = qo_indptr[b];
    const long long part_row0 = (long long)b * num_splits * HL;
    // cp.async of 16 bytes: 4 rows of a split (HL % 4 == 0, Stage1Merge).
    for (int idx = tid; idx < ROWS / 4 * act; idx += NT) {
        const int s = idx / (ROWS / 4), k = 4 * (idx - s * (ROWS / 4));
        const int r = y * ROWS + k;
        cp_async16(W + s * ROWS + k, part_lse + part_row0 + (long long)s * HL + (r < HL ? r : 0), r < HL ? 16 : 0);
    }
    cp_async_commit();
    cp_async_wait_all();
    nbar_sync(bar, NT);
    if (tid < ROWS) { // one thread a row (the splits are few): no shuffles
        const int r = y * ROWS + tid;
        const float lse = merge_row_weights<1>(W + tid, act, nullptr, nullptr, 0, 0, ROWS);
        if (r < HL && lse_out)
            lse_out[(long long)(q0 + r / H) * lse_st + r % H] = lse;
    }
    nbar_sync(bar, NT);
    const long long sstride = (long long)HL * DV_MAX / 8; // uint4 between splits
#pragma unroll 1
    for (int j0 = 0; j0 < NI; j0 += MI) {
        int kk[MI], cc[MI];
        bool ok[MI];
        float acc[MI][8];
#pragma unroll
        for (int g = 0; g < MI; ++g) {
            const int idx = tid + (j0 + g) * NT;
            kk[g] = idx / CPR;
            cc[g] = (idx - kk[g] * CPR) * 8;
            ok[g] = idx < ROWS * CPR && y * ROWS + kk[g] < HL;
#pragma unroll
            for (int e = 0; e < 8; ++e)
                acc[g][e] = 0.f;
        }
        // Unrolled so that the next splits' loads issue before these sums.
#pragma unroll 4
        for (int s = 0; s < act; ++s) {
            uint4 v[MI];
#pragma unroll
            for (int g = 0; g < MI; ++g)
                if (ok[g])
                    v[g] = s == s_own ? *(const uint4 *)(Os + kk[g] * WS_OSP + cc[g])
                                      : __ldcg((const uint4 *)(part_o + (part_row0 + y * ROWS + kk[g]) * DV_MAX +
                                                               cc[g]) +
                                               s * sstride);
#pragma unroll
            for (int g = 0; g < MI; ++g)
                if (ok[g]) {
                    float f[8];
                    unpack8(v[g], f);
                    const float w = W[s * ROWS + kk[g]];
#pragma unroll
                    for (int e = 0; e < 8; ++e)
                        acc[g][e] += w * f[e];
                }
        }
#pragma unroll
        for (int g = 0; g < MI; ++g)
            if (ok[g]) {
                const int r = y * ROWS + kk[g];
                *(uint4 *)(o + (long long)(q0 + r / H) * o_st + (long long)(r % H) * o_sh + cc[g]) =
                    make_uint4(pack_bf2(acc[g][0], acc[g][1]), pack_bf2(acc[g][2], acc[g][3]),
                               pack_bf2(acc[g][4], acc[g][5]), pack_bf2(acc[g][6], acc[g][7]));
            }
    }
}
#endif

} // namespace mla_dev

#endif
