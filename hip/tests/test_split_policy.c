/* CPU unit test of the GPU tiers' split and chunk rules (split_policy.c):
 * the values the H200 tuning settled on, and invariants over a sweep. */
#include "split_policy.h"
#include "test_util.h" /* core/tests: CHECK, failures */

#include <stdlib.h>
#include <string.h>

static void test_rows(void)
{
    /* K3 TP8 (12 heads x 8 drafts = 96 rows): two 64-row CTAs; AMD in
     * 32-row MFMA tiles (gfx942) or up to 64 (gfx950). */
    CHECK(mla_sp_fast_rows(96, MLA_SP_NVIDIA) == 64, "96 rows");
    CHECK(mla_sp_fast_rows(12, MLA_SP_NVIDIA) == 16, "K3 L1");
    CHECK(mla_sp_fast_rows(24, MLA_SP_NVIDIA) == 32, "K3 L2");
    CHECK(mla_sp_fast_rows(64, MLA_SP_NVIDIA) == 64, "DSv3 L4");
    CHECK(mla_sp_fast_rows(12, MLA_SP_AMD_GFX942) == 32, "gfx942 small");
    CHECK(mla_sp_fast_rows(96, MLA_SP_AMD_GFX942) == 32, "gfx942 96: 32-row blocks");
    CHECK(mla_sp_fast_rows(12, MLA_SP_AMD_GFX950) == 32, "gfx950 small");
    CHECK(mla_sp_fast_rows(64, MLA_SP_AMD_GFX950) == 64, "gfx950 64");
    CHECK(mla_sp_fast_rows(96, MLA_SP_AMD_GFX950) == 64, "gfx950 96: 64-row blocks");
    CHECK(mla_sp_fast_row_blocks(96, 64) == 2, "row blocks 96/64");
    CHECK(mla_sp_fast_row_blocks(128, 64) == 2, "row blocks 128/64");
    CHECK(mla_sp_fast_row_blocks(12, 16) == 1, "row blocks 12/16");
    for (int HL = 1; HL <= 512; ++HL)
        for (int t = 0; t < 3; ++t) {
            const int rows = mla_sp_fast_rows(HL, (mla_sp_target)t);
            const int cap = t == MLA_SP_AMD_GFX942 ? 32 : 64; /* the most rows a CTA takes */
            CHECK(rows % 16 == 0 && rows >= 16 && rows <= cap, "HL %d: rows %d", HL, rows);
            CHECK(rows >= (HL < cap ? HL : cap), "HL %d: rows %d", HL, rows);
            CHECK((long long)mla_sp_fast_row_blocks(HL, rows) * rows >= HL, "HL %d covered", HL);
        }
}

static void test_fast_splits(void)
{
    CHECK(mla_sp_fast_num_splits(1, 2, 132) == 66, "bs 1, 2 row blocks: %d",
          mla_sp_fast_num_splits(1, 2, 132));
    CHECK(mla_sp_fast_num_splits(32, 2, 132) == 2, "bs 32");
    CHECK(mla_sp_fast_num_splits(64, 2, 132) == 1, "bs 64: at least one");
    CHECK(mla_sp_fast_num_splits(0, 2, 132) == 132, "bs 0 guarded");
    for (int bs = 1; bs <= 64; ++bs)
        for (int nrb = 1; nrb <= 8; ++nrb) {
            const int ns = mla_sp_fast_num_splits(bs, nrb, 132);
            CHECK(ns >= 1, "at least one split");
            CHECK(ns == 1 || (long long)bs * nrb * ns <= 132, "bs %d nrb %d: %d CTAs > 132", bs,
                  nrb, bs * nrb * ns);
        }
}

static void test_min_split(void)
{
    /* K3 bs 1 / 4k: 64 splits of 64 tokens would make stage 2 merge 64
     * splits; the adaptive rule grows the smallest split. */
    const int cw = mla_sp_stage2_cols(512, 1, 12, 132);
    const int ns = mla_sp_fast_num_splits(1, 2, 132);
    const int ms = mla_sp_fast_min_split(64, 1, 4096, 1, ns, 8, cw);
    CHECK(ms > 64 && ms % MLA_SP_TILE_TOKENS == 0 && ms <= 8 * MLA_SP_TILE_TOKENS,
          "K3 bs 1 / 4k: min split %d", ms);
    CHECK(mla_sp_fast_min_split(64, 0, 4096, 1, ns, 8, cw) == 64, "fixed rule");
    CHECK(mla_sp_fast_min_split(64, 1, 0, 1, ns, 8, cw) == 64, "empty prefix");
    CHECK(mla_sp_fast_min_split(32, 1, 1024, 32, 2, 8, 512) == 32, "large batch keeps the minimum");
    for (int bs = 1; bs <= 64; bs *= 2)
        for (long long P = 0; P <= 131072; P = P ? P * 2 : 16)
            for (int L = 1; L <= 8; L *= 2) {
                const int c = mla_sp_stage2_cols(512, bs, 12, 132);
                const int n = mla_sp_fast_num_splits(bs, 2, 132);
                const int m = mla_sp_fast_min_split(64, 1, P * bs, bs, n, L, c);
                CHECK(m >= 64 && m <= 8 * MLA_SP_TILE_TOKENS, "bs %d P %lld L %d: %d", bs, P, L, m);
            }
}

static void test_perhead(void)
{
    CHECK(mla_sp_perhead_num_splits(1, 4095) == 4, "below 4096");
    CHECK(mla_sp_perhead_num_splits(1, 4096) == 8, "4096");
    CHECK(mla_sp_perhead_num_splits(2, 16383) == 8, "avg 8191");
    CHECK(mla_sp_perhead_num_splits(2, 16384) == 16, "avg 8192");
    CHECK(mla_sp_perhead_num_splits(0, 100) == 4, "bs 0 guarded");
    for (int P = 0; P <= 5000; P += 7)
        for (int ns = 4; ns <= 16; ns *= 2) {
            int covered = 0, prev_end = 0;
            for (int s = 0; s < ns; ++s) {
                int b, e;
                mla_sp_perhead_split_range(P, ns, s, &b, &e);
                CHECK(b == prev_end && e >= b && e <= P, "P %d ns %d s %d: [%d, %d)", P, ns, s, b, e);
                CHECK(b % 32 == 0 || b == P, "P %d: begin %d not on 32", P, b);
                covered += e - b;
                prev_end = e;
            }
            CHECK(covered == P, "P %d ns %d: covered %d", P, ns, covered);
        }
}

static void test_stage2_cols(void)
{
    CHECK(mla_sp_stage2_cols(512, 1, 12, 132) == 64, "bs 1: %d", mla_sp_stage2_cols(512, 1, 12, 132));
    CHECK(mla_sp_stage2_cols(512, 64, 16, 132) == 512, "bs 64: one block per head");
    CHECK(mla_sp_stage2_cols(512, 0, 12, 132) == 64, "bs 0 guarded");
    for (int Dv = 64; Dv <= 512; Dv += 64)
        for (int bs = 1; bs <= 64; ++bs) {
            const int cw = mla_sp_stage2_cols(Dv, bs, 12, 132);
            CHECK(cw % 64 == 0 && Dv % cw == 0, "Dv %d bs %d: cw %d", Dv, bs, cw);
        }
}

/* The balanced partition of one batch (prefixes P[0..bs-1]) under plan pl:
 * every sequence's pieces tile [0, P) in order, every slot is used at most
 * once and lies below pl->slots, each chunk holds at most its share of the
 * work (rounded up), and (uniform) the pieces are the per-sequence rule's
 * floor partition. Returns the largest piece count of a sequence. */
static int check_partition(const mla_sp_fast_plan *pl, const int *P, int bs, int uniform)
{
    static unsigned char used[MLA_SP_MAX_CHUNKS + 4096];
    memset(used, 0, sizeof used);
    long long *chunk_tokens = calloc((size_t)pl->chunks, sizeof *chunk_tokens);
    long long kv = 0;
    int most = 0;
    for (int b = 0; b < bs; ++b) {
        const long long A = mla_sp_seq_start((int32_t)kv, b);
        int first, last;
        mla_sp_seq_chunks(A, P[b], pl->chunks, pl->work, &first, &last);
        CHECK(first >= 0 && first <= last && last < pl->chunks, "b %d: chunks [%d, %d] of %d", b, first,
              last, pl->chunks);
        int prev = 0;
        for (int c = first; c <= last; ++c) {
            int beg, end;
            mla_sp_piece_range(A, P[b], c, first, last, pl->chunks, pl->work, &beg, &end);
            CHECK(beg == prev && end >= beg && end <= P[b], "b %d c %d: [%d, %d) after %d", b, c, beg, end, prev);
            CHECK(end > beg || P[b] == 0, "b %d c %d: empty piece of a non-empty prefix", b, c);
            /* The stage-1 CTA's form (comparisons against the chunk's
             * range) gives the same piece. */
            long long lo, hi;
            int b1 = 0, e1 = 0, f1 = 0, l1 = 0;
            mla_sp_chunk_range(c, pl->chunks, pl->work, &lo, &hi);
            CHECK(mla_sp_piece_in(A, P[b], lo, hi, &b1, &e1, &f1, &l1) && b1 == beg && e1 == end &&
                      f1 == (c == first) && l1 == (c == last),
                  "b %d c %d: mla_sp_piece_in [%d, %d) %d %d vs [%d, %d)", b, c, b1, e1, f1, l1, beg, end);
            prev = end;
            const int slot = c + b;
            CHECK(slot < pl->slots && !used[slot], "b %d c %d: slot %d (of %d) reused or out of range", b, c,
                  slot, pl->slots);
            used[slot] = 1;
            chunk_tokens[c] += end - beg;
            if (uniform) {
                int32_t b0, e0;
                mla_plan_split_range(P[b], last - first + 1, c - first, &b0, &e0);
                CHECK(abs(b0 - beg) <= 1 && abs(e0 - end) <= 1 + (P[b] % (last - first + 1)),
                      "uniform b %d piece %d: [%d, %d) vs the floor partition's [%d, %d)", b, c - first, beg, end,
                      b0, e0);
            }
        }
        CHECK(prev == P[b], "b %d: pieces end at %d of %d", b, prev, P[b]);
        for (int c = first - 1; c <= last + 1; c += last - first + 2) {
            long long lo, hi;
            int b1 = 0, e1 = 0, f1 = 0, l1 = 0;
            if (c < 0 || c >= pl->chunks)
                continue;
            mla_sp_chunk_range(c, pl->chunks, pl->work, &lo, &hi);
            CHECK(!mla_sp_piece_in(A, P[b], lo, hi, &b1, &e1, &f1, &l1), "b %d: a piece in chunk %d outside [%d, %d]",
                  b, c, first, last);
        }
        if (last - first + 1 > most)
            most = last - first + 1;
        kv += P[b];
    }
    const long long share = (pl->work + pl->chunks - 1) / pl->chunks;
    for (int c = 0; c < pl->chunks; ++c)
        CHECK(chunk_tokens[c] <= share, "chunk %d: %lld tokens over its share %lld", c, chunk_tokens[c], share);
    free(chunk_tokens);
    return most;
}

static void test_balanced(void)
{
    mla_sp_fast_plan pl;
    /* K3 TP8 (H 12, L 8: two 64-row blocks) bs 32 at 3040: two splits each,
     * the per-sequence rule's. */
    int P[256];
    for (int b = 0; b < 32; ++b)
        P[b] = 3040;
    mla_sp_fast_plan_make(32, 12, 8, 512, 32LL * 3040, 64, 1, MLA_SP_NVIDIA, 132, &pl);
    CHECK(pl.chunks == 64 && pl.row_blocks == 2, "uniform bs 32: %d chunks", pl.chunks);
    CHECK(check_partition(&pl, P, 32, 1) == 2, "uniform bs 32: two pieces a sequence");
    /* One long and 31 short (issue 43's first ragged list): the long one is
     * split over most chunks, no chunk above its share. */
    P[0] = 65536;
    for (int b = 1; b < 32; ++b)
        P[b] = 1024;
    mla_sp_fast_plan_make(32, 12, 8, 512, 65536 + 31 * 1024LL, 64, 1, MLA_SP_NVIDIA, 132, &pl);
    const int most = check_partition(&pl, P, 32, 0);
    CHECK(most >= 40, "65536 + 1024 x 31: the long sequence in %d pieces", most);
    CHECK(most <= mla_sp_fast_max_pieces(32, 12, 8, MLA_SP_NVIDIA, 132), "max pieces bound");
    CHECK(pl.slots <= mla_sp_fast_max_slots(32, 12, 8, MLA_SP_NVIDIA, 132), "max slots bound");
    /* bs 64 with one 131072 (k = 1: chunks = bs) */
    P[0] = 131072;
    for (int b = 1; b < 64; ++b)
        P[b] = 4096;
    mla_sp_fast_plan_make(64, 12, 8, 512, 131072 + 63 * 4096LL, 64, 1, MLA_SP_NVIDIA, 132, &pl);
    CHECK(pl.chunks == 64, "bs 64: %d chunks", pl.chunks);
    CHECK(check_partition(&pl, P, 64, 0) >= 20, "131072 + 4096 x 63: long one split");
    /* Seeded random batches, empty prefixes included, every target. */
    unsigned r = 12345u;
    for (int it = 0; it < 3000; ++it) {
        r = r * 1103515245u + 12345u;
        const int bs = 1 + (int)((r >> 8) % 200);
        long long tot = 0;
        for (int b = 0; b < bs; ++b) {
            r = r * 1103515245u + 12345u;
            const int kind = (r >> 4) & 7;
            P[b] = kind == 0 ? 0 : kind == 1 ? (int)((r >> 10) % 70000) : (int)((r >> 10) % 3000);
            tot += P[b];
        }
        const int H = 1 + (int)(r % 16), L = 1 + (int)((r >> 20) % 8);
        const mla_sp_target t = (mla_sp_target)(it % 3);
        mla_sp_fast_plan_make(bs, H, L, 512, tot, 64, (int)(r & 1), t, 132, &pl);
        const int m = check_partition(&pl, P, bs, 0);
        CHECK(m <= mla_sp_fast_max_pieces(bs, H, L, t, 132), "it %d: %d pieces over the bound", it, m);
        CHECK(pl.slots <= mla_sp_fast_max_slots(bs, H, L, t, 132), "it %d: slots over the bound", it);
    }
    /* Inconsistent totals (kv_total below the real one) still address slots
     * in range and tile every prefix. */
    for (int b = 0; b < 8; ++b)
        P[b] = 1000;
    mla_sp_fast_plan_make(8, 12, 8, 512, 100, 64, 1, MLA_SP_NVIDIA, 132, &pl);
    int first, last, beg, end;
    mla_sp_seq_chunks(mla_sp_seq_start(7000, 7), 1000, pl.chunks, pl.work, &first, &last);
    CHECK(first == pl.chunks - 1 && last == pl.chunks - 1, "past the total: the last chunk");
    mla_sp_piece_range(mla_sp_seq_start(7000, 7), 1000, last, first, last, pl.chunks, pl.work, &beg, &end);
    CHECK(beg == 0 && end == 1000, "past the total: one whole piece");
}

static void test_partials(void)
{
    size_t lo = 0;
    const size_t b = mla_sp_partial_bytes(2, 4, 12, 8, 512, 2, &lo);
    CHECK(lo == 2u * 4 * 12 * 8 * 512 * 2, "lse offset %zu", lo);
    CHECK(b == lo + 2u * 4 * 12 * 8 * 4, "bytes %zu", b);
    CHECK(mla_sp_partial_bytes(1 << 30, 1 << 30, 65535, 1 << 20, 512, 4, NULL) == 0, "overflow");
    CHECK(mla_sp_partial_bytes(-1, 4, 12, 8, 512, 2, NULL) == 0, "negative");
}

int main(void)
{
    test_rows();
    test_fast_splits();
    test_min_split();
    test_perhead();
    test_stage2_cols();
    test_partials();
    test_balanced();
    if (failures) {
        fprintf(stderr, "test_split_policy: %d failure(s)\n", failures);
        return 1;
    }
    printf("test_split_policy: ok\n");
    return 0;
}
