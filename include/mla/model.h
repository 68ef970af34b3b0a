/* CPU model of the upstream two-stage GPU kernel (SPEC section 4;
 * seed/model.c): the same plan, the same bf16 partials with fp32 lse, the
 * same merges, so CI exercises split remainders and bf16-partial error
 * without a GPU. It follows the upstream seed's plan or our fast tier's
 * balanced partition (mla_model_opts.plan). Planted-bug variants
 * (mutations) let the tests prove the validator catches each bug class. */
#ifndef MLA_MODEL_H
#define MLA_MODEL_H

#include "mla/fixture.h"
#include "mla/plan.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    MLA_MUT_NONE = 0,
    MLA_MUT_DROP_REMAINDER,     /* last split ignores the remainder */
    MLA_MUT_NO_CAUSAL,          /* drafts see later drafts */
    MLA_MUT_FP16_PARTIALS,      /* partials rounded to fp16, not bf16 */
    MLA_MUT_LSE_NO_MAX_SHIFT,   /* merge exponentiates lse without the max */
    MLA_MUT_LSE_BASE2,          /* lse kept in base 2 but merged as natural */
    MLA_MUT_PARTITION_OFF_BY_ONE, /* split s starts one key late */
    MLA_MUT_SKIP_HEAD_BLOCK,    /* the last head block is never computed */
    MLA_MUT_EMPTY_PREFIX_NAN,   /* empty prefix divides 0/0 as upstream */
    /* Boundary bugs (issue 17; behaviour in mla/model_boundary.h). */
    MLA_MUT_SPLIT_DROP_FIRST,   /* the middle split skips its first token */
    MLA_MUT_SPLIT_DROP_LAST,    /* the middle split stops one token early */
    MLA_MUT_SPLIT_DUP_NEXT,     /* the middle split also reads the next split's first token */
    MLA_MUT_SPLIT_SHIFT,        /* the middle split's window starts and ends one token late */
    MLA_MUT_NEXT_SEQ_FIRST,     /* the last split reads the next sequence's first token */
    MLA_MUT_KV_INDICES_OFF_BY_ONE, /* kv_indices read from kv_indptr[b] + 1 */
    MLA_MUT_DRAFT_OFF_BY_ONE,   /* draft row i also sees draft i + 1 */
    MLA_MUT_MASKED_DRAFT_ZERO_WEIGHT, /* masked drafts' values summed at weight 0 (0 x NaN) */
    MLA_MUT_LAZY_RESCALE_DROPPED, /* a lazy running max whose moves skip the rescale of O */
    MLA_MUT_COUNT
} mla_mutation;

const char *mla_mutation_name(mla_mutation m);
/* One line on the bug, and which knob of the model's arithmetic it turns
 * (seed/model.c keeps the mutations as a table of such knobs). */
const char *mla_mutation_description(mla_mutation m);
const char *mla_mutation_perturbs(mla_mutation m);

/* Whose partition of the prefix the model follows. */
typedef enum {
    /* The upstream seed (SPEC section 4): mla_plan_make's split count for
     * block_h-head programs, the floor partition (last split takes the
     * remainder), block_n-token tiles. The planted bugs are defined on it. */
    MLA_MODEL_PLAN_SEED = 0,
    /* Our fast GPU tier's balanced partition (hip/split_policy.h, "The fast
     * tier's balanced partition"), made as hip/api.hip makes it with the
     * default options for the NVIDIA target: the batch's work cut into equal
     * chunks, sequence b's pieces where its tokens fall in them (a long
     * sequence many, a short one few), 32-token tiles (MLA_SP_TILE_TOKENS). */
    MLA_MODEL_PLAN_FAST,
    MLA_MODEL_PLAN_FAST_GFX942, /* ... for the AMD gfx942 target (32-row blocks) */
    MLA_MODEL_PLAN_FAST_GFX950, /* ... for the AMD gfx950 target (64-row blocks above 32 rows) */
    MLA_MODEL_PLAN_COUNT
} mla_model_plan;

typedef struct {
    mla_block_config blk; /* mla_block_config_default() unless testing; the fast plans
                             take block_h from it (how the work is shared out over
                             threads) but their own tile */
    mla_mutation mutation;
    mla_model_plan plan;  /* MLA_MODEL_PLAN_SEED unless set */
} mla_model_opts;

/* Runs the model. Returns MLA_ERR_DECLINED (reason in err, outputs
 * untouched) when mla_can_handle declines the case.
 * o: [num_q_tokens, num_heads, v_head_dim] bf16; lse: [num_q_tokens, num_heads]. */
mla_status mla_model_run(const mla_fixture *fx, const mla_model_opts *opts, mla_bf16 *o,
                         float *lse, mla_error *err);

/* The same with an explicit number of worker threads over (sequence, head
 * block) tasks; 0 = one per online CPU (what mla_model_run uses). Results
 * are bit-identical for any count. */
mla_status mla_model_run_threads(const mla_fixture *fx, const mla_model_opts *opts,
                                 int num_threads, mla_bf16 *o, float *lse, mla_error *err);

/* Default block config, no mutation, the seed plan (what a NULL opts
 * means). */
mla_model_opts mla_model_opts_default(void);

/* The most splits (seed plan) or pieces (fast plans) any sequence of fx has
 * under opts (NULL: the default); 1 at least, -1 when the case is declined
 * or invalid. */
int mla_model_max_splits(const mla_fixture *fx, const mla_model_opts *opts);

/* f rounded to IEEE binary16 (nearest even, subnormals, overflow to inf)
 * and widened back; the FP16_PARTIALS mutation stores partials with it. */
float mla_f32_round_f16(float f);

#ifdef __cplusplus
}
#endif
#endif
