/* Split and chunk rules of our GPU tiers: how many prefix splits each tier
 * launches, how large the smallest split is, how many rows one stage-1 CTA
 * takes and how many output columns one stage-2 block writes. Host-only C
 * (the per-head tier's per-sequence range is inline so that the device code
 * and the CPU unit test share one definition); every rule is a function of
 * shapes and host-known totals alone, so a launch never reads device data
 * and stays graph safe. Tested on the CPU by hip/tests/test_split_policy.c.
 *
 * The upstream seed's rules (SPEC section 4) live in core/plan.c; the fast
 * tier reuses its floor partition (mla_plan_active_splits,
 * mla_plan_split_range) with its own split count and smallest split. */
#ifndef MLA_SPLIT_POLICY_H
#define MLA_SPLIT_POLICY_H

#include "mla/plan.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Prefix tokens per stage-1 tile (config.h TN). */
#define MLA_SP_TILE_TOKENS 32
/* Threads per stage-2 block (config.h S2_THREADS). */
#define MLA_SP_S2_THREADS 256
/* Largest per-head split count (SPEC section 4: 4 / 8 / 16). */
#define MLA_SP_PERHEAD_MAX_SPLITS 16

/* Which matrix unit the row blocking is for: NVIDIA's m16 tiles or AMD's
 * 32-row MFMA tiles, whose rows per CTA the arch's LDS bounds (hip/config.h
 * AmdStage1Arch): 32 on gfx942 (64 KiB), 64 on gfx950 (160 KiB). */
typedef enum { MLA_SP_NVIDIA = 0, MLA_SP_AMD = 1, MLA_SP_AMD_GFX950 = 2 } mla_sp_target;
#define MLA_SP_AMD_GFX942 MLA_SP_AMD

/* Rows per fast stage-1 CTA for H * L flattened rows: NVIDIA 16, 32 or
 * 64-row blocks (more rows run as several 64-row blocks), gfx942 32,
 * gfx950 32 or 64. */
int mla_sp_fast_rows(int HL, mla_sp_target target);

/* Row blocks of the fast stage 1 (grid y). */
int mla_sp_fast_row_blocks(int HL, int rows);

/* Splits of an average sequence: enough (sequence x row block x split)
 * work pieces to give each of target_ctas SMs one, never fewer than 1. */
int mla_sp_fast_num_splits(int bs, int row_blocks, int target_ctas);

/* Smallest fast split in tokens (the block_n of mla_plan_active_splits).
 * rule 0 keeps min_split fixed; rule 1 grows it (multiples of a tile, at
 * most 8 tiles) until stage 2 merges at most 8 dependent 16-byte loads per
 * thread. */
int mla_sp_fast_min_split(int min_split, int rule, long long kv_total, int bs, int num_splits,
                          int L, int cw);

/* ---------------------------------------------------------------------------
 * The fast tier's balanced partition (docs/gpu-design.md, "Balanced
 * partition"). The batch's work is a line of cost positions: sequence b
 * occupies [A_b, A_b + P_b + MLA_SP_SEQ_COST), A_b = kv_indptr[b] +
 * b * MLA_SP_SEQ_COST: its tokens, then a fixed cost for its Q load,
 * partial store and draft block (0 today: any fixed cost moves a uniform
 * batch's chunk boundaries off the per-sequence rule's tile-aligned splits,
 * e.g. K3 bs 8 / 1k from 4 tiles a CTA to 5). The line, W positions long, is
 * cut into `chunks` equal pieces, and stage-1 CTA c (of each row block)
 * takes every piece of every sequence that falls in chunk c, one after the
 * other: a long sequence is split over many CTAs, short ones share one. A
 * uniform batch whose chunk count is a multiple of bs gives every sequence
 * the same splits the per-sequence rule gave it. Piece (b, c) writes partial
 * slot c + b, unique because both indices only grow along the line; stage 2
 * merges sequence b's slots first + b .. last + b.
 * ------------------------------------------------------------------------- */
#define MLA_SP_SEQ_COST 0
/* Most chunks a call uses: bounds stage 2's per-row split weights (4 bytes
 * each) and the workspace. */
#define MLA_SP_MAX_CHUNKS 1024

typedef struct {
    int rows;          /* query rows per stage-1 CTA */
    int row_blocks;    /* stage-1 grid y */
    int splits;        /* splits of an average sequence (mla_sp_fast_num_splits) */
    int min_split;     /* smallest share of a CTA in tokens (mla_sp_fast_min_split) */
    int chunks;        /* stage-1 CTAs per row block (grid x): equal shares of the work */
    long long work;    /* W: kv_total + bs * MLA_SP_SEQ_COST, at least 1 */
    int slots;         /* partial slots per row: chunks + bs - 1 */
    int cw;            /* stage-2 output columns per block */
} mla_sp_fast_plan;

/* The fast tier's plan for a batch of bs sequences, H heads, L drafts, Dv
 * value columns and kv_total prefix tokens in all, with the options'
 * smallest split and split rule (0 fixed, 1 adaptive). Shapes and host-known
 * totals only: no device data. */
void mla_sp_fast_plan_make(int bs, int H, int L, int Dv, long long kv_total, int min_split, int rule,
                           mla_sp_target target, int target_ctas, mla_sp_fast_plan *pl);

/* The most partial slots any batch of this shape can need (chunks <= bs x
 * splits, capped): what the workspace is sized by, a function of the shape
 * alone. */
int mla_sp_fast_max_slots(int bs, int H, int L, mla_sp_target target, int target_ctas);

/* Largest number of pieces one sequence can have: stage 2's split weights
 * per row. */
int mla_sp_fast_max_pieces(int bs, int H, int L, mla_sp_target target, int target_ctas);

/* floor(n / d) for 0 <= n < 2^53 and 0 < d < 2^53. On the GPUs 64-bit
 * integer division is a called subroutine (NVIDIA) or a long expansion
 * (AMD: 117-134 SGPR spills in the gfx950 stage 1), and a call in the
 * warp-specialized stage 1 makes ptxas serialize its wgmma for want of
 * registers (C7512, 1.8x slower): there the quotient comes from a float
 * reciprocal, refined once in double and corrected by its remainder (no
 * call, exact). On the host the plain division. */
static inline MLA_HD long long mla_sp_div(long long n, long long d)
{
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
#if defined(__CUDA_ARCH__)
    const double r = (double)__frcp_rn((float)d);
#else
    const double r = (double)(1.0f / (float)d);
#endif
    long long q = (long long)((double)n * r);
    long long rem = n - q * d;
    q += (long long)((double)rem * r);
    rem = n - q * d;
    while (rem < 0) {
        --q;
        rem += d;
    }
    while (rem >= d) {
        ++q;
        rem -= d;
    }
    return q;
#else
    return n / d;
#endif
}

/* Cost position where sequence b starts, from its first kv index. */
static inline MLA_HD long long mla_sp_seq_start(int32_t kv_first, int b)
{
    return (long long)kv_first + (long long)b * MLA_SP_SEQ_COST;
}
/* First cost position of chunk c. */
static inline MLA_HD long long mla_sp_chunk_begin(int c, int chunks, long long work)
{
    return mla_sp_div((long long)c * work, chunks);
}
/* The chunk holding cost position g: the largest c with chunk_begin(c) <= g,
 * clamped to [0, chunks - 1] so that inconsistent totals still address a
 * slot in range. */
static inline MLA_HD int mla_sp_chunk_of(long long g, int chunks, long long work)
{
    if (g <= 0 || work <= 0)
        return 0;
    const long long c = mla_sp_div((g + 1) * chunks - 1, work);
    return c < chunks ? (int)c : chunks - 1;
}
/* The chunks [*first, *last] holding pieces of a sequence of P prefix
 * tokens starting at cost position A. An empty prefix still has one
 * (empty) piece, so that its drafts and its -inf partial have an owner. */
static inline MLA_HD void mla_sp_seq_chunks(long long A, int P, int chunks, long long work, int *first,
                                            int *last)
{
    *first = mla_sp_chunk_of(A, chunks, work);
    *last = mla_sp_chunk_of(A + (P > 0 ? P : 1) - 1, chunks, work);
}
/* Prefix tokens [*beg, *end) of that sequence's piece in chunk c (first <=
 * c <= last): the pieces tile [0, P) in order, whatever the totals. */
static inline MLA_HD void mla_sp_piece_range(long long A, int P, int c, int first, int last, int chunks,
                                             long long work, int *beg, int *end)
{
    long long b0 = c == first ? 0 : mla_sp_chunk_begin(c, chunks, work) - A;
    long long e0 = c == last ? P : mla_sp_chunk_begin(c + 1, chunks, work) - A;
    b0 = b0 < 0 ? 0 : b0 > P ? P : b0;
    e0 = e0 < b0 ? b0 : e0 > P ? P : e0;
    *beg = (int)b0;
    *end = (int)e0;
}

/* Chunk c's cost range [*lo, *hi): the last chunk's runs to the end of the
 * line and beyond (positions past an inconsistent total belong to it, as
 * mla_sp_chunk_of clamps them). */
static inline MLA_HD void mla_sp_chunk_range(int c, int chunks, long long work, long long *lo, long long *hi)
{
    *lo = mla_sp_chunk_begin(c, chunks, work);
    *hi = c == chunks - 1 ? 0x7fffffffffffffffLL : mla_sp_chunk_begin(c + 1, chunks, work);
}
/* The piece of a sequence (cost start A, P prefix tokens) in the chunk
 * [lo, hi): 0 when it has none there, else 1 with its tokens [*beg, *end)
 * and whether the chunk holds the sequence's first and last piece.
 * Comparisons only, no division: what a stage-1 CTA runs per sequence; the
 * same pieces as mla_sp_seq_chunks / mla_sp_piece_range (tested). */
static inline MLA_HD int mla_sp_piece_in(long long A, int P, long long lo, long long hi, int *beg, int *end,
                                         int *first, int *last)
{
    const long long tail = A + (P > 0 ? P : 1) - 1; /* cost position of its last token */
    if (A >= hi || tail < lo)
        return 0;
    *first = A >= lo;
    *last = tail < hi;
    const long long b0 = *first ? 0 : lo - A;
    const long long e0 = *last ? P : hi - A;
    *beg = (int)b0;
    *end = (int)(e0 < b0 ? b0 : e0);
    return 1;
}

/* The per-head tier's split count: 4 / 8 / 16 for an average prefix below
 * 4096, below 8192, else. */
int mla_sp_perhead_num_splits(int bs, long long kv_total);

/* Output columns per stage-2 block: Dv split into about two blocks per SM
 * of target_ctas, a multiple of 64 dividing Dv. */
int mla_sp_stage2_cols(int Dv, int bs, int H, int target_ctas);

/* Bytes of partial outputs (esize bytes each) and lse for ns splits, each
 * part 256-byte aligned; 0 on overflow. *lse_offset (may be NULL) receives
 * the offset of the lse part. */
size_t mla_sp_partial_bytes(int bs, int ns, int H, int L, int Dv, size_t esize,
                            size_t *lse_offset);

/* Per-head split s of a prefix of P tokens in ns splits: upstream's ceil(P /
 * ns) rounded up to 32; the tail splits may be empty. */
static inline MLA_HD void mla_sp_perhead_split_range(int P, int ns, int s, int *beg, int *end)
{
    int len = (P + ns - 1) / ns;
    len = (len + 31) & ~31;
    long long b0 = (long long)s * len;
    *beg = b0 < P ? (int)b0 : P;
    *end = *beg + len < P ? *beg + len : P;
}

#ifdef __cplusplus
}
#endif
#endif
