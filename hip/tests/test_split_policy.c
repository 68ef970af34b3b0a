/* CPU unit test of the GPU tiers' split and chunk rules (split_policy.c):
 * the values the H200 tuning settled on, and invariants over a sweep. */
#include "split_policy.h"
#include "test_util.h" /* seed/tests: CHECK, failures */

static void test_rows(void)
{
    /* K3 TP8 (12 heads x 8 drafts = 96 rows): two 64-row CTAs by default,
     * one 96-row CTA on request; AMD always in 32-row MFMA tiles. */
    CHECK(mla_sp_fast_rows(96, 0, MLA_SP_NVIDIA) == 64, "96 rows default");
    CHECK(mla_sp_fast_rows(96, 1, MLA_SP_NVIDIA) == 96, "96 rows, rows96");
    CHECK(mla_sp_fast_rows(128, 1, MLA_SP_NVIDIA) == 96, "capped at 96");
    CHECK(mla_sp_fast_rows(12, 0, MLA_SP_NVIDIA) == 16, "K3 L1");
    CHECK(mla_sp_fast_rows(24, 0, MLA_SP_NVIDIA) == 32, "K3 L2");
    CHECK(mla_sp_fast_rows(64, 0, MLA_SP_NVIDIA) == 64, "DSv3 L4");
    CHECK(mla_sp_fast_rows(12, 0, MLA_SP_AMD_GFX942) == 32, "gfx942 small");
    CHECK(mla_sp_fast_rows(96, 0, MLA_SP_AMD_GFX942) == 32, "gfx942 96: 32-row blocks");
    CHECK(mla_sp_fast_rows(12, 0, MLA_SP_AMD_GFX950) == 32, "gfx950 small");
    CHECK(mla_sp_fast_rows(64, 0, MLA_SP_AMD_GFX950) == 64, "gfx950 64");
    CHECK(mla_sp_fast_rows(96, 1, MLA_SP_AMD_GFX950) == 64, "gfx950 96: 64-row blocks");
    CHECK(mla_sp_fast_row_blocks(96, 64) == 2, "row blocks 96/64");
    CHECK(mla_sp_fast_row_blocks(128, 64) == 2, "row blocks 128/64");
    CHECK(mla_sp_fast_row_blocks(12, 16) == 1, "row blocks 12/16");
    for (int HL = 1; HL <= 512; ++HL)
        for (int r96 = 0; r96 < 2; ++r96)
            for (int t = 0; t < 3; ++t) {
                const int rows = mla_sp_fast_rows(HL, r96, (mla_sp_target)t);
                /* the most rows a CTA of the target takes */
                const int cap = t == MLA_SP_AMD_GFX942 ? 32 : t == MLA_SP_AMD_GFX950 ? 64 : r96 ? 96 : 64;
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
    if (failures) {
        fprintf(stderr, "test_split_policy: %d failure(s)\n", failures);
        return 1;
    }
    printf("test_split_policy: ok\n");
    return 0;
}
