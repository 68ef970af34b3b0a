/* Split and chunk rules of our GPU tiers: how many prefix splits each tier
 * launches, how large the smallest split is, how many rows one stage-1 CTA
 * takes and how many output columns one stage-2 block writes. Host-only C
 * (the per-head tier's per-sequence range is inline so that the device code
 * and the CPU unit test share one definition); every rule is a function of
 * shapes and host-known totals alone, so a launch never reads device data
 * and stays graph safe. Tested on the CPU by hip/tests/test_split_policy.c.
 *
 * The upstream seed's rules (SPEC section 4) live in seed/plan.c; the fast
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

/* Rows per fast stage-1 CTA for H * L flattened rows. rows96 != 0 lets one
 * NVIDIA CTA take up to 96 rows (the 96-row kernels) instead of 64-row
 * blocks; AMD ignores it. */
int mla_sp_fast_rows(int HL, int rows96, mla_sp_target target);

/* Row blocks of the fast stage 1 (grid y). */
int mla_sp_fast_row_blocks(int HL, int rows);

/* The fast tier's split count (grid x): enough (sequence x row block x
 * split) CTAs to give each of target_ctas SMs one, never fewer than 1. */
int mla_sp_fast_num_splits(int bs, int row_blocks, int target_ctas);

/* Smallest fast split in tokens (the block_n of mla_plan_active_splits).
 * rule 0 keeps min_split fixed; rule 1 grows it (multiples of a tile, at
 * most 8 tiles) until stage 2 merges at most 8 dependent 16-byte loads per
 * thread. */
int mla_sp_fast_min_split(int min_split, int rule, long long kv_total, int bs, int num_splits,
                          int L, int cw);

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
