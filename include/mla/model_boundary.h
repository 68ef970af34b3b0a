/* Boundary-bug mutations of the CPU model (issue 17), kept out of
 * seed/model.c so the model needs only three one-line hooks (split range,
 * KV index base, visible drafts). Each bug moves one token or one index:
 * with diffuse inputs such a bug hides below a bf16 ulp at long prefixes;
 * the needle fixtures (fixtures/needle.c) make each of them visible.
 *
 * The single-split bugs hit the middle split (active / 2) only, so the
 * bug is exactly one token wrong per sequence: the hardest case to catch. */
#ifndef MLA_MODEL_BOUNDARY_H
#define MLA_MODEL_BOUNDARY_H

#include "mla/model.h"

/* Name of a boundary mutation, NULL for the others. */
static inline const char *mla_boundary_mutation_name(mla_mutation m)
{
    switch ((int)m) {
    case MLA_MUT_SPLIT_DROP_FIRST: return "split_drop_first";
    case MLA_MUT_SPLIT_DROP_LAST: return "split_drop_last";
    case MLA_MUT_SPLIT_DUP_NEXT: return "split_dup_next";
    case MLA_MUT_SPLIT_SHIFT: return "split_shift";
    case MLA_MUT_NEXT_SEQ_FIRST: return "next_seq_first";
    case MLA_MUT_KV_INDICES_OFF_BY_ONE: return "kv_indices_off_by_one";
    case MLA_MUT_DRAFT_OFF_BY_ONE: return "draft_off_by_one";
    default: return NULL;
    }
}

/* Split s of `active` as the buggy kernel reads it. has_next: the flat
 * kv_indices entry one past this sequence exists (reading it is the bug,
 * never an out-of-bounds read here). */
static inline void mla_boundary_range(mla_mutation m, int32_t prefix, int32_t active, int32_t s,
                                      int has_next, int32_t *begin, int32_t *end)
{
    const int mid = s == active / 2, last = s == active - 1;
    const int can_extend = *end < prefix || has_next;
    switch ((int)m) {
    case MLA_MUT_SPLIT_DROP_FIRST: /* loop starts at begin + 1 */
        if (mid && *begin < *end)
            ++*begin;
        break;
    case MLA_MUT_SPLIT_DROP_LAST: /* end - 1 used as an exclusive bound */
        if (mid && *begin < *end)
            --*end;
        break;
    case MLA_MUT_SPLIT_DUP_NEXT: /* inclusive end: next split's first token twice */
        if (mid && can_extend)
            ++*end;
        break;
    case MLA_MUT_SPLIT_SHIFT: /* window one token late */
        if (mid && *begin < *end) {
            ++*begin;
            if (can_extend)
                ++*end;
        }
        break;
    case MLA_MUT_NEXT_SEQ_FIRST: /* last split reads one past the sequence */
        if (last && has_next)
            ++*end;
        break;
    case MLA_MUT_KV_INDICES_OFF_BY_ONE: /* with the base shifted by one, the last
                                           sequence must stop one early to stay in bounds */
        if (last && !has_next && *begin < *end)
            --*end;
        break;
    default:
        break;
    }
}

/* Offset added to kv_indptr[b] when reading kv_indices. */
static inline int32_t mla_boundary_kv_shift(mla_mutation m)
{
    return m == MLA_MUT_KV_INDICES_OFF_BY_ONE ? 1 : 0;
}

/* Drafts row i sees, given the correct count `visible` of L. */
static inline int mla_boundary_draft_visible(mla_mutation m, int visible, int L)
{
    if (m == MLA_MUT_DRAFT_OFF_BY_ONE && visible < L)
        return visible + 1;
    return visible;
}

#endif
