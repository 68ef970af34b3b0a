// What both stage-1 kernels share: the per-sequence split range and the
// mapping of a CTA's local rows to flattened query rows (r = draft_row * H
// + head), and the Q load.
#ifndef MLA_KERNELS_STAGE1_COMMON_H
#define MLA_KERNELS_STAGE1_COMMON_H

#include "../device/cp_async.h"
#include "../device/smem_layout.h"
#include "../params.h"

namespace mla_dev {

// Split rules of a sequence (the counts are shape-only, split_policy.c; the
// per-sequence ranges read kv_indptr on the device). Mode 0 is the plan's
// floor partition (plan.h), mode 1 the per-head baseline's (split_policy.h).
__device__ __forceinline__ int active_splits(int mode, int P, int ns, int min_split)
{
    return mode == 0 ? mla_plan_active_splits(P, ns, min_split) : ns;
}
__device__ __forceinline__ void split_range(int mode, int P, int ns, int min_split, int s, int &beg,
                                            int &end)
{
    if (mode == 0) {
        const int act = mla_plan_active_splits(P, ns, min_split);
        int32_t b0, e0;
        mla_plan_split_range(P, act, s, &b0, &e0);
        beg = b0;
        end = e0;
    } else {
        mla_sp_perhead_split_range(P, ns, s, &beg, &end);
    }
}

// Flattened row r (= draft_row * H + head) of local row k in row block y.
__device__ __forceinline__ int row_of(const Stage1Params &p, int rows, int y, int k, bool &valid)
{
    if (p.row_mode == 0) {
        const int r = y * rows + k;
        valid = r < p.HL;
        return r;
    }
    const int h = y % p.H, c = y / p.H;
    const int i = c * rows + k;
    valid = i < p.L;
    return i * p.H + h;
}

// The Q rows of row block y (flattened r = draft_row * H + head) into shared
// memory through cp.async, zero-filled past the last valid row, in the
// swizzled (SW) or pitched layout of the stage-1 kernel, by NT threads of
// which this one is number `first`.
template <int ROWS, int NT, bool SW, int PITCH>
__device__ __forceinline__ void load_q(const Stage1Params &p, int y, int q0, int chunks, bf16_t *Qs,
                                       int first = threadIdx.x)
{
    for (int idx = first; idx < ROWS * chunks; idx += NT) {
        const int k = idx / chunks, c = idx - k * chunks;
        bool ok;
        const int r = row_of(p, ROWS, y, k, ok);
        const bf16_t *src = p.q;
        if (ok)
            src = p.q + (long long)(q0 + r / p.H) * p.q_st + (long long)(r % p.H) * p.q_sh + c * 8;
        cp_async16(Qs + toff<SW, PITCH>(k, c * 8, ROWS), src, ok ? 16 : 0);
    }
}

// The split of sequence b that CTA s takes ([beg, end) of its prefix, kv0
// the sequence's first index in kv_indices); false for an inactive split,
// whose whole CTA returns (stage 2 reads active splits only).
__device__ __forceinline__ bool cta_split(const Stage1Params &p, int s, int b, int &kv0, int &beg, int &end)
{
    kv0 = p.kv_indptr[b];
    const int P = p.kv_indptr[b + 1] - kv0;
    if (s >= active_splits(p.split_mode, P, p.num_splits, p.min_split))
        return false;
    split_range(p.split_mode, P, p.num_splits, p.min_split, s, beg, end);
    return true;
}

// One lane's slots of block j's tokens t0 + step i (i < N; bn tokens a
// block), -1 past the split (n tokens) or for a block past the last (nb):
// the gathers look a block up ahead of its copies, so that the lookups'
// latency stays off the path from a stage's release to its copies.
template <int N>
__device__ __forceinline__ void block_slots(const Stage1Params &p, int first, int j, int bn, int nb, int n,
                                            int t0, int step, int64_t (&sl)[N])
{
#pragma unroll
    for (int i = 0; i < N; ++i) {
        const int gt = j * bn + t0 + step * i;
        sl[i] = j < nb && gt < n ? p.kv_indices[first + gt] : (int64_t)-1;
    }
}

// A finished split's row: the factor v_scale / l of its partial output and
// its natural-log lse. l == 0 (every key masked) gives 0 and -inf; a NaN l
// (a NaN score) NaN for both, never -inf, so the NaN reaches the output.
__device__ __forceinline__ float split_out_scale(float v_scale, float l)
{
    return l != 0.f ? v_scale / l : 0.f;
}
__device__ __forceinline__ float split_lse(float m, float l)
{
    return l != 0.f ? (m + __log2f(l)) * LN2 : -INFINITY;
}

// The staged bf16 partial (ROWS rows of pitch OSP in shared memory) out to
// part_o in 16-byte chunks, a whole row per Dv / 8 lanes, by NT threads.
template <int ROWS, int NT>
__device__ __forceinline__ void store_partial(const Stage1Params &p, int y, long long part_row0, const bf16_t *Os,
                                              int osp)
{
    const int cpr = p.Dv >> 3;
    for (int idx = threadIdx.x; idx < ROWS * cpr; idx += NT) {
        const int k = idx / cpr, c = (idx - k * cpr) * 8;
        bool ok;
        const int r = row_of(p, ROWS, y, k, ok);
        if (ok)
            *(uint4 *)((bf16_t *)p.part_o + (part_row0 + r) * p.Dv + c) = *(const uint4 *)(Os + k * osp + c);
    }
}

} // namespace mla_dev

#endif
