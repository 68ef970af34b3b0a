/* Boundary needles (issue 17): fixtures in which chosen KV tokens carry most
 * of one (draft row, head) pair's attention weight, so that a single dropped,
 * duplicated or misplaced token moves that pair's output by a large fraction
 * of its norm at any prefix length. With diffuse random attention one token
 * carries ~1/P of the weight and a lost token hides below one bf16 ulp at
 * 16k; a needle makes each boundary token matter.
 *
 * Also here: the split boundaries of every plan the suite validates (the
 * seed plan and our GPU tiers' rules), the needle map of a fixture (a pure
 * function of its shape, so a file read back from disk has the same map),
 * and the boundary-bug family expressed as mutated inputs, which the fp64
 * oracle turns into "captured" outputs a validator must reject. */
#ifndef MLA_NEEDLE_H
#define MLA_NEEDLE_H

#include "mla/fixture.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- split plans ---- */

typedef enum {
    MLA_SPLITS_SEED = 0,    /* SPEC 4: mla_plan_make (core/plan.c) + floor partition (core/) */
    MLA_SPLITS_GPU_FAST,    /* our NVIDIA fast tier: the balanced partition (hip/split_policy.h)
                               with 64-row blocks, 132 CTAs, fast_min_split */
    MLA_SPLITS_GPU_PERHEAD, /* per-head tier: 4/8/16 splits, ceil(P/n) rounded up to 32 (all
                               targets: its split rule does not depend on the arch) */
    MLA_SPLITS_GPU_FAST_GFX942, /* our AMD fast tier on gfx942: 32-row blocks, as fast otherwise */
    MLA_SPLITS_GPU_FAST_GFX950, /* ... on gfx950: 32-row blocks up to 32 rows, else 64 */
    MLA_SPLITS_COUNT
} mla_split_plan;

const char *mla_split_plan_name(mla_split_plan p);

/* The non-empty splits of sequence b of `fx` under plan p: [begin[k],
 * end[k]) for k < return value (at most cap are written; the return value
 * is the full count). 0 when the plan declines the case or P_b = 0. The
 * fast plans are the balanced partition of the whole batch: sequence b's
 * pieces depend on kv_indptr[b], b and the batch's total, not on P_b
 * alone. */
int32_t mla_needle_split_ranges(mla_split_plan p, const mla_fixture *fx, int32_t b,
                                int32_t *begin, int32_t *end, int32_t cap);

/* 1 when sequences b and c of `fx` have the same prefix and the same splits
 * under every plan: any needle of one covers the other's boundary at that
 * position (the needle map shares such sequences' boundaries round robin). */
int mla_needle_same_splits(const mla_fixture *fx, int32_t b, int32_t c);

/* ---- the needle map ---- */

typedef enum {
    MLA_NEEDLE_PREFIX = 0, /* pair aligned with prefix token `pos` of its sequence */
    MLA_NEEDLE_DRAFT,      /* aligned with draft key `pos` of its sequence (visible) */
    MLA_NEEDLE_TRAP_DRAFT, /* aligned with draft key `pos` > row: must stay invisible */
    MLA_NEEDLE_TRAP_NEXT   /* aligned with prefix token `pos` of sequence seq+1: invisible */
} mla_needle_kind;

/* Why a prefix position was chosen (bit set). */
enum {
    MLA_WHY_FIRST = 1u << 0,        /* first prefix token */
    MLA_WHY_LAST = 1u << 1,         /* last prefix token */
    MLA_WHY_SEED = 1u << 2,         /* first/last token of a seed-plan split */
    MLA_WHY_FAST = 1u << 3,         /* ... of a GPU fast-tier split */
    MLA_WHY_PERHEAD = 1u << 4,      /* ... of a GPU per-head-tier split */
    MLA_WHY_GRID = 1u << 5,         /* a multiple of 16/32/64 or one off it */
    MLA_WHY_FAST_GFX942 = 1u << 6,  /* ... of an AMD gfx942 fast-tier split */
    MLA_WHY_FAST_GFX950 = 1u << 7   /* ... of an AMD gfx950 fast-tier split */
};

typedef struct {
    int32_t seq, row, head; /* the pair: row is the draft row within the sequence */
    int32_t kind;           /* mla_needle_kind */
    int32_t pos;
    uint32_t why;
} mla_needle;

/* The needle map of a fixture's shape (cfg, qo_indptr, kv_indptr): every
 * required position (first/last prefix token, first/last token of every
 * split of every plan) is covered by some sequence with the same splits
 * (mla_needle_same_splits);
 * first/last prefix token and the first/last draft in every sequence; grid
 * positions fill the remaining pairs. *out is malloc'ed. MLA_ERR_INVALID
 * (message names the sequence) when the pairs cannot hold the required set. */
mla_status mla_needle_map_make(const mla_fixture *fx, mla_needle **out, size_t *n, mla_error *err);

/* Smallest batch (>= 2, so the next-sequence trap exists) of `bs_max` whose
 * sequences of prefix P (H heads, L drafts; sequence b starting at kv index
 * b * P) can cover all required positions. 0 if none. */
int32_t mla_needle_batch_for(int32_t H, int32_t L, int32_t P, int32_t bs_max);

/* The needle weight each needle pair is built for (softmax share of its
 * token among the keys the row sees). 0.8: "most" of the weight, and still
 * far from 1 so that a duplicated needle (weight 0.8 -> 0.89) moves the
 * output by ~9% of its norm, not only its lse. */
#define MLA_NEEDLE_WEIGHT 0.8

/* ---- catalogue hooks (fixtures/catalogue.c calls these) ---- */

size_t mla_needle_case_count(void);
const mla_case_info *mla_needle_case_get(size_t i);
const mla_case_info *mla_needle_case_find(const char *name);
/* Build needle case `name` from `seed` (same name + seed -> same bytes). */
mla_status mla_needle_generate(const char *name, uint64_t seed, mla_fixture *fx, mla_error *err);

/* An ad-hoc case of the same construction: bs sequences of prefix P (bs 0:
 * the smallest batch that covers every boundary), with needles or, with
 * needles = 0, fully diffuse (the random baseline of the detection-power
 * measurement). */
mla_status mla_needle_make(int32_t H, int32_t L, int32_t bs, int32_t P, int needles,
                           uint64_t seed, mla_fixture *fx, mla_error *err);

/* ---- boundary bugs as mutated inputs ---- */

typedef enum {
    MLA_BMUT_NONE = 0,
    MLA_BMUT_DROP_FIRST,     /* split s skips its first token */
    MLA_BMUT_DROP_LAST,      /* split s stops one token early */
    MLA_BMUT_DROP_REMAINDER, /* the last split ignores the floor-partition remainder (seed
                                plan only: the others have no floor remainder) */
    MLA_BMUT_DUP,            /* split s reads one past its end: next split's first token twice */
    MLA_BMUT_SHIFT,          /* split s's window starts (and ends) one token late */
    MLA_BMUT_NEXT_SEQ,       /* the last split of seq b < bs-1 also reads seq b+1's first token */
    MLA_BMUT_KV_OFF_BY_ONE,  /* seq b reads kv_indices[kv_indptr[b]+1 ..]: loses its first token
                                and reads the next sequence's first (the last seq only loses) */
    MLA_BMUT_DRAFT_MASK,     /* draft row i also sees draft i+1 (causal mask off by one) */
    MLA_BMUT_DRAFT_BASE,     /* draft keys/values read from row qo_indptr[b]+j+1 (seq b < bs-1) */
    MLA_BMUT_COUNT
} mla_bmut_kind;

typedef struct {
    mla_bmut_kind kind;
    mla_split_plan plan; /* for the split kinds */
    int32_t split;       /* split index; -1 = every split; -2 = the middle split of each seq */
} mla_bmut;

const char *mla_bmut_kind_name(mla_bmut_kind k);
/* Parse "KIND[:PLAN[:SPLIT]]", e.g. "drop-first:seed:mid", "dup:fast:3",
 * "shift:fast-gfx942:mid", "next-seq" (PLAN: a mla_split_plan_name). SPLIT: an index, "all" or "mid" (default "mid"). */
mla_status mla_bmut_parse(const char *s, mla_bmut *m, mla_error *err);
void mla_bmut_format(const mla_bmut *m, char *buf, size_t n);

/* The mutated computation expressed as ordinary inputs: a fixture with one
 * sequence per draft row of `fx` (same q rows, same order, q_len 1) whose
 * visible keys are exactly what the buggy kernel would read for that row
 * (pool slots may repeat; draft keys are appended to the pool as extra
 * slots). Any correct implementation run on it, e.g. the fp64 oracle,
 * yields the buggy kernel's output in fx's layout. Needs k_scale = v_scale
 * = 1 and v_extend = k_extend[:, :v_head_dim] (true of needle fixtures) so
 * that a draft key can live in the pool. *changed is set to 1 when the
 * mutation changes at least one row's key list. */
mla_status mla_bmut_apply(const mla_fixture *fx, const mla_bmut *m, mla_fixture *out,
                          int *changed, mla_error *err);

#ifdef __cplusplus
}
#endif
#endif
