// What both stage-1 kernels share: the per-sequence split range and the
// mapping of a CTA's local rows to flattened query rows (r = draft_row * H
// + head), and the Q load.
#ifndef MLA_KERNELS_STAGE1_COMMON_H
#define MLA_KERNELS_STAGE1_COMMON_H

#include "../device/cp_async.h"
#include "../device/smem_layout.h"
#include "../params.h"
#include "../split_policy.h"

namespace mla_dev {

// One piece of a stage-1 CTA's work: prefix tokens [beg, end) of sequence
// b (kv0: its first index in kv_indices). last: the sequence's last piece
// (the one that takes the draft block when stage 1 does, Stage1Draft);
// only: its only piece (whose partial is the sequence's whole prefix).
struct Piece {
    int b, kv0, beg, end, q0; // q0: the sequence's first query row
    bool last, only;
    // Partial slot (rows slot * H * L + r): c + b for chunk c of the fast
    // tier, b * splits + s for split s of the per-head tier. From the grid
    // index, which costs no register to keep across a piece.
    __device__ __forceinline__ int slot(const Stage1Params &p) const
    {
#if !defined(MLA_TARGET_NVIDIA)
        if (p.mode == S1_FAST) // grid x is the slot itself (PieceWalk::slot_piece)
            return (int)blockIdx.x;
#endif
        return p.mode == S1_FAST ? (int)blockIdx.x + b : b * p.num_splits + (int)blockIdx.x;
    }
};

// The pieces of one stage-1 CTA, in order (grid x = chunk or split, z =
// sequence for the per-head tier). Fast tier: the balanced partition of
// split_policy.h, every sequence with a piece in chunk blockIdx.x; the
// per-head tier: the one split blockIdx.x of sequence blockIdx.z
// (mla_sp_perhead_split_range), empty or not. One register of state: the
// next sequence, past the batch once done.
struct PieceWalk {
    int b;

    // The fast tier's sequence b: its cost start and chunk span.
    __device__ __forceinline__ static void seq_chunks(const Stage1Params &p, int b, int &kv0, int &P, long long &A,
                                                      int &first, int &last)
    {
        kv0 = p.kv_indptr[b];
        P = p.kv_indptr[b + 1] - kv0;
        A = mla_sp_seq_start(kv0, b);
        mla_sp_seq_chunks(A, P, p.num_splits, p.work, &first, &last);
    }
    __device__ __forceinline__ static int seq_last_chunk(const Stage1Params &p, int b)
    {
        int kv0, P, first, last;
        long long A;
        seq_chunks(p, b, kv0, P, A, first, last);
        return last;
    }

    // The first sequence with a piece in chunk c: the smallest b whose last
    // chunk is c or later (last chunks never decrease along the batch). The
    // uniform batch's answer, c bs / chunks, is tried first (one round trip
    // of kv_indptr loads), then a binary search.
    __device__ __forceinline__ static int first_seq(const Stage1Params &p, int c)
    {
        const int bs = p.num_seqs;
        int g = (int)mla_sp_div((long long)c * bs, p.num_splits);
        g = g < bs ? g : bs - 1;
        if (seq_last_chunk(p, g) >= c && (g == 0 || seq_last_chunk(p, g - 1) < c))
            return g;
        int lo = 0, hi = bs; // answer in [lo, hi]; bs: none
        while (lo < hi) {
            const int mid = (lo + hi) >> 1;
            if (seq_last_chunk(p, mid) >= c)
                hi = mid;
            else
                lo = mid + 1;
        }
        return lo;
    }

    // One piece per CTA (the single-role kernel on AMD, where the loop over
    // a chunk's pieces kept enough scalar values live to spill SGPRs on
    // gfx950): grid x runs over the partial slots, and CTA k takes the piece
    // whose slot c + b is k, if any: b the last sequence with first(b) + b
    // <= k (first(b) + b grows with b), c = k - b, empty when c lies past
    // the sequence's last chunk (the slot between two sequences that meet
    // on a chunk boundary).
    __device__ __forceinline__ static bool slot_piece(const Stage1Params &p, Piece &pc)
    {
        const int k = (int)blockIdx.x, bs = p.num_seqs;
        int l = 0, h = bs - 1; // the answer in [l, h]: first(0) + 0 = 0 <= k
        while (l < h) {
            const int mid = (l + h + 1) >> 1;
            if (mla_sp_chunk_of(mla_sp_seq_start(p.kv_indptr[mid], mid), p.num_splits, p.work) + mid <= k)
                l = mid;
            else
                h = mid - 1;
        }
        const int b = l, kv0 = p.kv_indptr[b], kv1 = p.kv_indptr[b + 1];
        const long long A = mla_sp_seq_start(kv0, b);
        int first, last;
        mla_sp_seq_chunks(A, kv1 - kv0, p.num_splits, p.work, &first, &last);
        const int c = k - b;
        if (c < first || c > last)
            return false;
        mla_sp_piece_range(A, kv1 - kv0, c, first, last, p.num_splits, p.work, &pc.beg, &pc.end);
        pc.b = b;
        pc.kv0 = kv0;
        pc.q0 = p.qo_indptr[b];
        pc.last = c == last;
        pc.only = first == last;
        return true;
    }

    __device__ __forceinline__ explicit PieceWalk(const Stage1Params &p)
    {
        b = p.mode == S1_FAST ? first_seq(p, (int)blockIdx.x) : (int)blockIdx.z;
    }

    __device__ __forceinline__ bool next(const Stage1Params &p, Piece &pc)
    {
        if (b >= p.num_seqs)
            return false;
        const int c = (int)blockIdx.x;
        pc.b = b;
        // Beside the kv_indptr loads, not after them: one round trip.
        pc.q0 = p.qo_indptr[b];
        if (p.mode != S1_FAST) {
            b = p.num_seqs;
            pc.kv0 = p.kv_indptr[pc.b];
            mla_sp_perhead_split_range(p.kv_indptr[pc.b + 1] - pc.kv0, p.num_splits, c, &pc.beg, &pc.end);
            pc.last = c == p.num_splits - 1;
            pc.only = p.num_splits == 1;
            return true;
        }
        int P, first, last;
        long long A;
        seq_chunks(p, pc.b, pc.kv0, P, A, first, last);
        if (first > c) { // past this chunk (or an inconsistent kv_indptr)
            b = p.num_seqs;
            return false;
        }
        mla_sp_piece_range(A, P, c, first, last, p.num_splits, p.work, &pc.beg, &pc.end);
        pc.last = c == last;
        pc.only = first == last;
        // A sequence that goes on in the next chunk is this chunk's last.
        b = c < last ? p.num_seqs : b + 1;
        return true;
    }
};

// Flattened row r (= draft_row * H + head) of local row k in row block y.
__device__ __forceinline__ int row_of(const Stage1Params &p, int rows, int y, int k, bool &valid)
{
    if (p.mode == S1_FAST) {
        const int r = y * rows + k;
        valid = r < p.H * p.L;
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
__device__ __forceinline__ void store_partial(const Stage1Params &p, void *part_o, int y, long long part_row0,
                                              const bf16_t *Os, int osp)
{
    const int cpr = p.Dv >> 3;
    for (int idx = threadIdx.x; idx < ROWS * cpr; idx += NT) {
        const int k = idx / cpr, c = (idx - k * cpr) * 8;
        bool ok;
        const int r = row_of(p, ROWS, y, k, ok);
        if (ok)
            *(uint4 *)((bf16_t *)part_o + (part_row0 + r) * p.Dv + c) = *(const uint4 *)(Os + k * osp + c);
    }
}

} // namespace mla_dev

#endif
