/* Split and chunk rules of our GPU tiers (split_policy.h). */
#include "split_policy.h"

int mla_sp_fast_rows(int HL, mla_sp_target target)
{
    const int r = HL < 96 ? HL : 96;
    if (target == MLA_SP_AMD_GFX942)
        return 32; /* MFMA tiles are 32 rows; 64 KiB of LDS takes one */
    if (target == MLA_SP_AMD_GFX950)
        return r <= 32 ? 32 : 64; /* 160 KiB takes 64 rows: 96 run as two blocks */
    /* More than 64 rows go in 64-row blocks: a 96-row CTA reads the KV once,
     * but its producer warpgroup runs two 64-row S chains per tile and bounds
     * the loop; two 64-row CTAs, one chain each, run in parallel and the
     * second read of a tile mostly hits L2 (docs/perf/2026-11-29-ws-kernel.md,
     * "64-row blocks for the 96-row shapes": 2-40% faster on every K3 TP8 shape measured). */
    return r <= 16 ? 16 : r <= 32 ? 32 : 64;
}

int mla_sp_fast_row_blocks(int HL, int rows)
{
    return rows > 0 ? (HL + rows - 1) / rows : 0;
}

int mla_sp_fast_num_splits(int bs, int row_blocks, int target_ctas)
{
    const long long per = (long long)bs * row_blocks;
    const long long s = target_ctas / (per > 0 ? per : 1);
    return s < 1 ? 1 : (int)s;
}

/* Stage 2 merges each row's active splits with act * L * (cw / 8) /
 * S2_THREADS dependent 16-byte loads per thread, one L2 round trip per
 * batch; at bs 1 the default 64-token splits give K3 64 splits, 16 loads a
 * thread, and the merge costs more than the parallelism saves
 * (docs/perf/2026-11-29-split-policy.md, "Longer splits when the merge would be long": K3
 * bs 1 / 4k 27.0 us, with 128-token splits 20.4 us). Beyond that a longer stage 1 starts to cost more, hence
 * the cap of 8 tiles. */
int mla_sp_fast_min_split(int min_split, int rule, long long kv_total, int bs, int num_splits,
                          int L, int cw)
{
    const int ms = min_split;
    if (rule == 0 || bs <= 0 || kv_total <= 0)
        return ms;
    const long long avg = kv_total / bs;
    long long act = avg / ms < num_splits ? avg / ms : num_splits;
    if (act < 1)
        act = 1;
    const long long max_act = 8LL * MLA_SP_S2_THREADS * 8 / ((long long)L * cw);
    if (act <= max_act || max_act < 1)
        return ms;
    long long want = (avg + max_act - 1) / max_act;
    want = (want + MLA_SP_TILE_TOKENS - 1) / MLA_SP_TILE_TOKENS * MLA_SP_TILE_TOKENS;
    if (want > 8 * MLA_SP_TILE_TOKENS)
        want = 8 * MLA_SP_TILE_TOKENS;
    return want > ms ? (int)want : ms;
}

int mla_sp_perhead_num_splits(int bs, long long kv_total)
{
    const long long b = bs > 0 ? bs : 1;
    const long long avg = kv_total / b;
    return avg < 4096 ? 4 : avg < 8192 ? 8 : MLA_SP_PERHEAD_MAX_SPLITS;
}

/* Small grids split the columns over more blocks for parallelism; large
 * grids use one block per (sequence, head) so that the draft scores are
 * computed once, not per chunk. */
int mla_sp_stage2_cols(int Dv, int bs, int H, int target_ctas)
{
    const int units = Dv / 64;
    const long long per = (long long)bs * H > 0 ? (long long)bs * H : 1;
    int nch = (int)((2LL * target_ctas + per - 1) / per);
    if (nch > units)
        nch = units;
    if (nch < 1)
        nch = 1;
    while (units % nch)
        ++nch;
    return Dv / nch;
}

static size_t align256(size_t x)
{
    return (x + 255) & ~(size_t)255;
}

size_t mla_sp_partial_bytes(int bs, int ns, int H, int L, int Dv, size_t esize, size_t *lse_offset)
{
    if (bs < 0 || ns < 0 || H < 0 || L < 0 || Dv < 0)
        return 0;
    const unsigned long long rows =
        (unsigned long long)bs * (unsigned long long)ns * (unsigned long long)H * (unsigned long long)L;
    unsigned long long o;
    if (__builtin_mul_overflow(rows, (unsigned long long)Dv * esize, &o))
        return 0;
    if (lse_offset)
        *lse_offset = align256((size_t)o);
    return align256((size_t)o) + align256((size_t)(rows * 4));
}

void mla_sp_fast_plan_make(int bs, int H, int L, int Dv, long long kv_total, int min_split, int rule,
                           mla_sp_target target, int target_ctas, mla_sp_fast_plan *pl)
{
    const int HL = H * L;
    const int b = bs > 0 ? bs : 1;
    pl->rows = mla_sp_fast_rows(HL, target);
    pl->row_blocks = mla_sp_fast_row_blocks(HL, pl->rows);
    pl->splits = mla_sp_fast_num_splits(b, pl->row_blocks, target_ctas);
    pl->cw = mla_sp_stage2_cols(Dv, b, H, target_ctas);
    pl->min_split = mla_sp_fast_min_split(min_split, rule, kv_total, b, pl->splits, L, pl->cw);
    /* An average sequence gets as many splits as its length allows at the
     * smallest split (the per-sequence rule's active splits), so a uniform
     * batch keeps its old partition: chunks a multiple of bs put every
     * chunk boundary on a sequence boundary or an even split of one. */
    const long long avg = kv_total > 0 ? kv_total / b : 0;
    long long k = avg / (pl->min_split > 0 ? pl->min_split : 1);
    if (k > pl->splits)
        k = pl->splits;
    if (k < 1)
        k = 1;
    long long c = k * b;
    if (c > MLA_SP_MAX_CHUNKS)
        c = MLA_SP_MAX_CHUNKS;
    pl->chunks = (int)c;
    pl->work = (kv_total > 0 ? kv_total : 0) + (long long)b * MLA_SP_SEQ_COST;
    if (pl->work < 1)
        pl->work = 1; /* every prefix empty: one position, chunk 0 owns all */
    pl->slots = pl->chunks + b - 1;
}

static int fast_max_chunks(int bs, int H, int L, mla_sp_target target, int target_ctas)
{
    const int b = bs > 0 ? bs : 1;
    const int rb = mla_sp_fast_row_blocks(H * L, mla_sp_fast_rows(H * L, target));
    const long long c = (long long)mla_sp_fast_num_splits(b, rb, target_ctas) * b;
    return c > MLA_SP_MAX_CHUNKS ? MLA_SP_MAX_CHUNKS : (int)c;
}

int mla_sp_fast_max_slots(int bs, int H, int L, mla_sp_target target, int target_ctas)
{
    return fast_max_chunks(bs, H, L, target, target_ctas) + (bs > 0 ? bs : 1) - 1;
}

int mla_sp_fast_max_pieces(int bs, int H, int L, mla_sp_target target, int target_ctas)
{
    return fast_max_chunks(bs, H, L, target, target_ctas);
}
