/* CPU model of the upstream two-stage MLA verify kernel (SPEC section 4),
 * the seed our GPU tiers are measured against.
 *
 * It follows the GPU algorithm step for step rather than computing the
 * attention directly: the same plan and split partition, fp32 online softmax
 * per BLOCK_N tile, partial outputs rounded to bf16 with fp32 lse, the
 * log-sum-exp merge, the separate draft block and the final merge. That is
 * what lets CI see split remainders and the bf16-partial error without a GPU.
 *
 * Arithmetic choices a GPU kernel would also make, fixed here so results are
 * reproducible bit for bit:
 * - the score is sm_scale*k_scale * (q_nope . k_nope + q_pe . k_pe), the two
 *   fp32 dot products done separately (512 and 64 wide for K3) and added;
 * - P (the exponentiated scores) stays fp32 for the PV product; the SPEC's
 *   P-in-bf16 error term therefore does not apply to this model;
 * - v_scale multiplies the normalized partial (acc / l), once per element,
 *   instead of every value row: the same product, fewer roundings;
 * - each tile's P.V is summed on its own and then added to the rescaled
 *   accumulator, as a tensor-core kernel does.
 *
 * The work is done per (sequence, head block): stage 1 for all splits of the
 * block, then stage 2 for its heads. Stage 2 of a head reads only that
 * head's partials, so the order is equivalent to the two GPU launches, and
 * (sequence, head block) tasks can run on worker threads in any order with
 * bit-identical results.
 *
 * The plan is the seed's (mla_plan_make, floor partition) or our fast
 * tier's balanced partition (mla_model_opts.plan; see "The fast tier's
 * balanced partition" below): only which key ranges become a partial
 * changes, every partial is computed, stored and merged as above. */
#include "mla/model.h"
#include "mla/gpu.h" /* the fast tier's default options (MLA_GPU_FAST_*) */
#include "mla/model_boundary.h"
#include "split_policy.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LOG2E_F 1.4426950408889634f

static float round_bf16(float v)
{
    return mla_bf16_to_f32(mla_f32_to_bf16(v));
}

/* The planted bugs as data: each row names a bug class and sets the knobs of
 * the arithmetic it perturbs; the correct model is the row whose knobs are
 * all at their identity values (MLA_MUT_NONE). The arithmetic below reads
 * the knobs and never compares mutation ids, so adding a bug of an existing
 * class is one row here. */
typedef struct {
    const char *name;
    const char *description;
    const char *perturbs;
    float (*round_partial)(float); /* storage rounding of a stage-1 partial */
    int keep_remainder;            /* the last split absorbs P % active */
    int split_start_shift;         /* keys every split starts late (clipped to P) */
    int drafts_causal;             /* draft i sees drafts 0..i only */
    float merge_max_shift;         /* split weight exp(lse - shift * max) */
    float lse_log_scale;           /* partial lse = (m + ln l) in units of 1 / scale */
    int skip_last_head_block;      /* the grid misses the last head block */
    int guard_empty;               /* empty rows give 0 / -inf, never 0/0 */
    mla_mutation boundary;         /* a boundary bug of mla/model_boundary.h (split
                                      ranges, kv_indices base, draft block), or NONE */
    int masked_drafts_weighted;    /* the drafts a row cannot see enter its value sum at
                                      weight 0, as in a dense P V product: 0 x NaN */
    float lazy_drop;               /* > 0: the running max moves only past lazy_drop above
                                      itself (natural units), and a move rescales l but not
                                      the accumulated values */
} mutation_row;

#define CORRECT round_bf16, 1, 0, 1, 1.0f, 1.0f, 0, 1, MLA_MUT_NONE
#define BOUNDARY(ID, DESC)                                                                         \
    [ID] = {NULL, DESC, "split ranges / kv_indices base / draft block: boundary", round_bf16, 1, 0, 1,  \
            1.0f, 1.0f, 0, 1, ID}
static const mutation_row k_mutations[MLA_MUT_COUNT] = {
    [MLA_MUT_NONE] = {"none", "the kernel as designed", "nothing", CORRECT},
    [MLA_MUT_DROP_REMAINDER] = {"drop_remainder", "last split ignores the remainder",
                                "split partition: keep_remainder", round_bf16, 0, 0, 1, 1.0f,
                                1.0f, 0, 1, MLA_MUT_NONE},
    [MLA_MUT_NO_CAUSAL] = {"no_causal", "drafts see later drafts", "draft mask: drafts_causal",
                           round_bf16, 1, 0, 0, 1.0f, 1.0f, 0, 1, MLA_MUT_NONE},
    [MLA_MUT_FP16_PARTIALS] = {"fp16_partials", "partials rounded to fp16, not bf16",
                               "partial storage: round_partial", mla_f32_round_f16, 1, 0, 1,
                               1.0f, 1.0f, 0, 1, MLA_MUT_NONE},
    [MLA_MUT_LSE_NO_MAX_SHIFT] = {"lse_no_max_shift", "merge exponentiates lse without the max",
                                  "split merge: merge_max_shift", round_bf16, 1, 0, 1, 0.0f, 1.0f,
                                  0, 1, MLA_MUT_NONE},
    [MLA_MUT_LSE_BASE2] = {"lse_base2", "lse kept in base 2 but merged as natural",
                           "partial lse: lse_log_scale", round_bf16, 1, 0, 1, 1.0f, LOG2E_F, 0, 1, MLA_MUT_NONE},
    [MLA_MUT_PARTITION_OFF_BY_ONE] = {"partition_off_by_one", "split s starts one key late",
                                      "split partition: split_start_shift", round_bf16, 1, 1, 1,
                                      1.0f, 1.0f, 0, 1, MLA_MUT_NONE},
    [MLA_MUT_SKIP_HEAD_BLOCK] = {"skip_head_block", "the last head block is never computed",
                                 "grid: skip_last_head_block", round_bf16, 1, 0, 1, 1.0f, 1.0f, 1,
                                 1, MLA_MUT_NONE},
    [MLA_MUT_EMPTY_PREFIX_NAN] = {"empty_prefix_nan", "empty prefix divides 0/0 as upstream",
                                  "empty rows: guard_empty", round_bf16, 1, 0, 1, 1.0f, 1.0f, 0, 0, MLA_MUT_NONE},
    BOUNDARY(MLA_MUT_SPLIT_DROP_FIRST, "split s loses its first token"),
    BOUNDARY(MLA_MUT_SPLIT_DROP_LAST, "split s loses its last token"),
    BOUNDARY(MLA_MUT_SPLIT_DUP_NEXT, "split s also reads the next split's first token"),
    BOUNDARY(MLA_MUT_SPLIT_SHIFT, "split s starts and ends one token late"),
    BOUNDARY(MLA_MUT_NEXT_SEQ_FIRST, "the last split reads the next sequence's first token"),
    BOUNDARY(MLA_MUT_KV_INDICES_OFF_BY_ONE, "kv_indices read one entry late"),
    BOUNDARY(MLA_MUT_DRAFT_OFF_BY_ONE, "the draft block sees one draft too many"),
    /* Invisible with finite values (their weight is exactly 0): only a
     * non-finite draft value shows it (the shipped k3-nan-draft). A
     * stage-1 draft tile on tensor cores had this bug
     * (docs/perf/2026-12-02-draft-fold.md, "The draft tile in stage 1's last
     * split"). */
    [MLA_MUT_MASKED_DRAFT_ZERO_WEIGHT] = {"masked_draft_zero_weight",
                                          "masked drafts' values summed at weight 0 (0 x NaN)",
                                          "draft values: masked_drafts_weighted", CORRECT, 1},
    /* Invisible while the max moves by less than 2^8 after a split's first
     * tile: random scores never do. In the model it is caught where a
     * split's later tile holds a far larger score (the boundary needles,
     * the fp8 cases' near-max codes, k3-ramp). A lazy reference max
     * (FlashAttention-4's form) tried in the ping-pong stage 1 had this bug
     * planted, and no catalogue case caught it there (the ws-pp rows of
     * docs/perf-log.md, tag kernels-before-house2): that kernel's splits held too few 64-token blocks. */
    [MLA_MUT_LAZY_RESCALE_DROPPED] = {"lazy_rescale_dropped",
                                      "lazy running max (moves past 2^8 only), O not rescaled on a move",
                                      "online softmax: lazy_drop", CORRECT, 0, 5.545177444479562f},
};
#undef CORRECT
#undef BOUNDARY

static const mutation_row *mutation_of(mla_mutation m)
{
    return ((int)m >= 0 && m < MLA_MUT_COUNT) ? &k_mutations[m] : NULL;
}

const char *mla_mutation_name(mla_mutation m)
{
    const mutation_row *r = mutation_of(m);
    if (r && !r->name) /* boundary rows take the boundary header's names */
        return mla_boundary_mutation_name(m);
    return r ? r->name : "unknown";
}

const char *mla_mutation_description(mla_mutation m)
{
    const mutation_row *r = mutation_of(m);
    return r ? r->description : "unknown mutation";
}

const char *mla_mutation_perturbs(mla_mutation m)
{
    const mutation_row *r = mutation_of(m);
    return r ? r->perturbs : "unknown mutation";
}

mla_model_opts mla_model_opts_default(void)
{
    mla_model_opts o;

    o.blk = mla_block_config_default();
    o.mutation = MLA_MUT_NONE;
    o.plan = MLA_MODEL_PLAN_SEED;
    return o;
}

float mla_f32_round_f16(float f)
{
    float a = fabsf(f);
    float r;
    int e;

    if (!(a < INFINITY)) /* inf and NaN pass through */
        return f;
    if (a == 0.0f)
        return f;
    frexpf(a, &e); /* a = m * 2^e, m in [0.5, 1): binade exponent e - 1 */
    e -= 1;
    if (e > 15)
        return copysignf(INFINITY, f);
    /* fp16 keeps 10 fraction bits down to 2^-14, then a fixed 2^-24 step
     * (subnormals). Scaling by the step is exact (power of two, result
     * normal), and rintf rounds to nearest even in the default mode. */
    if (e < -14)
        e = -14;
    r = ldexpf(rintf(ldexpf(a, 10 - e)), e - 10);
    /* A value rounding past the largest finite half (65504) overflows. */
    if (r > 65504.0f)
        r = INFINITY;
    return copysignf(r, f);
}

/* Fixed blocked order: eight independent fp32 accumulators (which the
 * compiler can keep in vector lanes) folded by a fixed tree, then the tail. */
static float dot_f32(const float *a, const float *b, int n)
{
    float acc[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    float tail = 0.0f;
    int k = 0, u;

    for (; k + 8 <= n; k += 8)
        for (u = 0; u < 8; u++)
            acc[u] += a[k + u] * b[k + u];
    for (; k < n; k++)
        tail += a[k] * b[k];
    return (((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]))) +
           tail;
}

typedef struct {
    const mla_fixture *fx;
    const mutation_row *mut;
    mla_plan plan; /* fast plans: blk.block_n is their tile, num_splits the most pieces */
    mla_model_plan plan_kind;
    mla_sp_fast_plan fast; /* the fast plans' partition */
    int dim;    /* q / key width (576) */
    int dv;     /* value width (512); also the "nope" part of the score */
    int dpe;    /* dim - dv (64) */
    int heads;  /* H */
    int len;    /* L drafts per sequence */
    float qk_scale;
    float sm_scale;
    float v_scale;

    /* Work buffers sized for one (sequence, head block). */
    float *q;        /* [block_h * L][dim] */
    float *kt;       /* [block_n][dim] one key tile */
    float *p;        /* [block_n] scores, then probabilities, of one row */
    float *acc;      /* [block_h * L][dv] */
    float *pv;       /* [dv] */
    float *m;        /* [block_h * L] running max */
    float *l;        /* [block_h * L] running denominator */
    float *part_o;   /* [block_h][L][num_splits][dv] partials as stored */
    float *part_lse; /* [block_h][L][num_splits] */
    float *dk;       /* [L][dim] draft keys of the sequence */
    float *dvv;      /* [L][dv] draft values of the sequence */
    float *sd;       /* [L] draft scores */
    float *o_p;      /* [dv] merged prefix part */
    float *o_d;      /* [dv] draft part */
} model_ctx;

static float score_of(const model_ctx *c, const float *q, const float *k)
{
    float nope = dot_f32(q, k, c->dv);
    float pe = dot_f32(q + c->dv, k + c->dv, c->dpe);
    return nope + pe;
}

static float store_partial(const model_ctx *c, float v)
{
    return c->mut->round_partial(v);
}

static void split_shift(const model_ctx *c, int32_t prefix, int32_t *begin, int32_t *end);

/* The split partition as the kernel computes it, including the planted
 * partition bugs. */
static void split_range(const model_ctx *c, int32_t prefix, int32_t active, int32_t s,
                        int32_t *begin, int32_t *end)
{
    int32_t len = prefix / active;

    mla_plan_split_range(prefix, active, s, begin, end);
    if (!c->mut->keep_remainder && s == active - 1)
        *end = active * len;
    split_shift(c, prefix, begin, end);
}

/* A shifted (e.g. 1-based) start: every split begins late and the last one
 * still ends at the prefix end (clipped), so the first keys are lost. A
 * shift of 0 is the plan's partition unchanged. */
static void split_shift(const model_ctx *c, int32_t prefix, int32_t *begin, int32_t *end)
{
    const int64_t b1 = (int64_t)*begin + c->mut->split_start_shift;
    const int64_t e1 = (int64_t)*end + c->mut->split_start_shift;
    *begin = (int32_t)(b1 > prefix ? prefix : b1);
    *end = (int32_t)(e1 > prefix ? prefix : e1);
}

/* ---- The fast tier's balanced partition (mla_model_opts.plan) ----
 * hip/split_policy.h's functions, called as hip/api.hip's fast_plan calls
 * them with the default options (mla_gpu_options_default: fast_min_split
 * MLA_GPU_FAST_MIN_SPLIT, the adaptive rule, MLA_GPU_FAST_TARGET_CTAS), so
 * the model cuts the prefix where the kernel does: sequence b's pieces are
 * the chunks its cost positions fall in, piece s of them chunk first + s. */
static mla_sp_target fast_target(mla_model_plan p)
{
    return p == MLA_MODEL_PLAN_FAST_GFX942   ? MLA_SP_AMD_GFX942
           : p == MLA_MODEL_PLAN_FAST_GFX950 ? MLA_SP_AMD_GFX950
                                             : MLA_SP_NVIDIA;
}

static void fast_plan_of(const mla_fixture *fx, mla_model_plan p, mla_sp_fast_plan *pl)
{
    mla_sp_fast_plan_make(fx->cfg.num_seqs, fx->cfg.num_heads, fx->cfg.q_len, fx->cfg.v_head_dim,
                          fx->num_kv_indices, MLA_GPU_FAST_MIN_SPLIT, 1, fast_target(p),
                          MLA_GPU_FAST_TARGET_CTAS, pl);
}

/* Splits (seed) or pieces (fast) of sequence b; *first: the chunk of its
 * first piece (fast plans only). */
static int32_t seq_splits(const model_ctx *c, int32_t b, int32_t prefix, int *first)
{
    int last;
    *first = 0;
    if (c->plan_kind == MLA_MODEL_PLAN_SEED)
        return mla_plan_active_splits(prefix, c->plan.num_splits, c->plan.blk.block_n);
    mla_sp_seq_chunks(mla_sp_seq_start(c->fx->kv_indptr[b], b), prefix, c->fast.chunks,
                      c->fast.work, first, &last);
    return last - *first + 1;
}

/* Split or piece s of sequence b's `active`, with the planted partition
 * bugs (the floor remainder exists in the seed plan only). */
static void seq_split_range(const model_ctx *c, int32_t b, int32_t prefix, int32_t active,
                            int first, int32_t s, int32_t *begin, int32_t *end)
{
    int b0, e0;
    if (c->plan_kind == MLA_MODEL_PLAN_SEED) {
        split_range(c, prefix, active, s, begin, end);
        return;
    }
    mla_sp_piece_range(mla_sp_seq_start(c->fx->kv_indptr[b], b), prefix, first + s, first,
                       first + active - 1, c->fast.chunks, c->fast.work, &b0, &e0);
    *begin = b0;
    *end = e0;
    split_shift(c, prefix, begin, end);
}

/* The most splits or pieces of any sequence: the partial slots a row needs. */
static int32_t max_seq_splits(const model_ctx *c)
{
    int32_t best = 1;
    int first;
    for (int32_t b = 0; b < c->fx->cfg.num_seqs; b++) {
        const int32_t a =
            seq_splits(c, b, c->fx->kv_indptr[b + 1] - c->fx->kv_indptr[b], &first);
        best = a > best ? a : best;
    }
    return best;
}

/* The fast plans' fields of a context whose plan, fx and plan_kind are set. */
static void fast_setup(model_ctx *c)
{
    if (c->plan_kind == MLA_MODEL_PLAN_SEED)
        return;
    fast_plan_of(c->fx, c->plan_kind, &c->fast);
    c->plan.blk.block_n = MLA_SP_TILE_TOKENS;
    c->plan.num_splits = max_seq_splits(c);
}
/* ---- end of the fast tier's partition ---- */

/* Stage 1 for one (sequence, head block, split): fp32 online softmax of
 * nrows = nh * L rows over keys [begin, end) of the sequence's prefix. */
static void stage1_split(model_ctx *c, int b, int nh, int32_t split, int32_t begin,
                         int32_t end)
{
    const mla_fixture *fx = c->fx;
    const int64_t kv_base = fx->kv_indptr[b] + mla_boundary_kv_shift(c->mut->boundary);
    const int nrows = nh * c->len;
    const int block_n = c->plan.blk.block_n;
    int r, j, d;
    int64_t t0; /* t0 + block_n may pass INT32_MAX on the last tile */

    for (r = 0; r < nrows; r++) {
        c->m[r] = -INFINITY;
        c->l[r] = 0.0f;
        memset(c->acc + (size_t)r * c->dv, 0, sizeof(float) * (size_t)c->dv);
    }

    for (t0 = begin; t0 < end; t0 += block_n) {
        int n = (end - t0 < block_n) ? (int)(end - t0) : block_n;

        /* One tile load serves every row of the head block. */
        for (j = 0; j < n; j++) {
            const size_t e0 = (size_t)fx->kv_indices[kv_base + t0 + j] * (size_t)c->dim;
            float *dst = c->kt + (size_t)j * c->dim;
            if (fx->kv_dtype == MLA_KV_BF16)
                for (d = 0; d < c->dim; d++)
                    dst[d] = mla_bf16_to_f32(fx->kv_buffer[e0 + (size_t)d]);
            else /* fp8 pool (schema 1.1.0): decoded exactly in the tile load */
                for (d = 0; d < c->dim; d++)
                    dst[d] = mla_fp8_to_f32(fx->kv_dtype, fx->kv_fp8[e0 + (size_t)d]);
        }
        for (r = 0; r < nrows; r++) {
            const float *q = c->q + (size_t)r * c->dim;
            float *acc = c->acc + (size_t)r * c->dv;
            float mt = -INFINITY, m_new, alpha, rowsum = 0.0f;
            int nan = 0;

            for (j = 0; j < n; j++) {
                c->p[j] = score_of(c, q, c->kt + (size_t)j * c->dim) * c->qk_scale;
                nan |= c->p[j] != c->p[j];
                mt = fmaxf(mt, c->p[j]);
            }
            if (nan) {
                /* fmaxf drops a NaN score: the row is NaN from here on (l and
                 * acc stay NaN through later tiles), its partial and lse NaN,
                 * as the reference's (SPEC non-finite policy). */
                c->l[r] = NAN;
                for (d = 0; d < c->dv; d++)
                    acc[d] = NAN;
                continue;
            }
            m_new = fmaxf(c->m[r], mt);
            if (c->mut->lazy_drop > 0.0f && c->m[r] != -INFINITY && !(mt > c->m[r] + c->mut->lazy_drop))
                m_new = c->m[r]; /* lazy: the reference stays (p up to e^lazy_drop) */
            if (m_new == -INFINITY)
                continue; /* nothing visible yet: keep the empty state */
            alpha = expf(c->m[r] - m_new); /* 0 on the first tile */
            for (j = 0; j < n; j++) {
                c->p[j] = expf(c->p[j] - m_new);
                rowsum += c->p[j];
            }
            c->l[r] = c->l[r] * alpha + rowsum;
            memset(c->pv, 0, sizeof(float) * (size_t)c->dv);
            for (j = 0; j < n; j++) {
                const float pj = c->p[j];
                const float *v = c->kt + (size_t)j * c->dim;
                for (d = 0; d < c->dv; d++)
                    c->pv[d] += pj * v[d];
            }
            const float acc_scale = c->mut->lazy_drop > 0.0f ? 1.0f : alpha;
            for (d = 0; d < c->dv; d++)
                acc[d] = acc[d] * acc_scale + c->pv[d];
            c->m[r] = m_new;
        }
    }

    for (r = 0; r < nrows; r++) {
        const int hl = r / c->len, i = r % c->len;
        const size_t slot = ((size_t)hl * c->len + i) * (size_t)c->plan.num_splits + split;
        float *o = c->part_o + slot * (size_t)c->dv;
        const float *acc = c->acc + (size_t)r * c->dv;
        const float l = c->l[r];

        if (l == 0.0f && c->mut->guard_empty) {
            /* Empty split: a well-defined -inf partial, never 0/0. */
            for (d = 0; d < c->dv; d++)
                o[d] = 0.0f;
            c->part_lse[slot] = -INFINITY;
            continue;
        }
        /* Planted EMPTY_PREFIX_NAN: acc / l is 0/0 here, as upstream. */
        for (d = 0; d < c->dv; d++)
            o[d] = store_partial(c, (acc[d] / l) * c->v_scale);
        c->part_lse[slot] = c->m[r] * c->mut->lse_log_scale + logf(l) * c->mut->lse_log_scale;
    }
}

/* Stage 2, prefix half: merge the active splits' partials of one row. */
static void merge_splits(model_ctx *c, int hl, int i, int32_t active, float *lse_p)
{
    const size_t base = ((size_t)hl * c->len + i) * (size_t)c->plan.num_splits;
    const float *lse = c->part_lse + base;
    const float *po = c->part_o + base * (size_t)c->dv;
    float m = -INFINITY, sum = 0.0f;
    int32_t s;
    int d, nan = 0;

    for (s = 0; s < active; s++) {
        nan |= lse[s] != lse[s];
        m = fmaxf(m, lse[s]);
    }
    for (d = 0; d < c->dv; d++)
        c->o_p[d] = nan ? NAN : 0.0f;
    if (nan) { /* a NaN split (fmaxf would drop it): the row is NaN */
        *lse_p = NAN;
        return;
    }
    if (m == -INFINITY && c->mut->guard_empty) {
        *lse_p = -INFINITY; /* empty prefix: contributes nothing */
        return;
    }
    for (s = 0; s < active; s++) {
        /* Planted LSE_NO_MAX_SHIFT: the exponent lost its "- m" while the
         * final lse below still adds m back, which is how the bug looks when
         * one line of the online merge is edited. It shifts lse_p by m at
         * any magnitude and overflows to inf/inf once lse exceeds ~88. */
        const float w = c->mut->merge_max_shift != 0.0f ? expf(lse[s] - c->mut->merge_max_shift * m)
                                                        : expf(lse[s]);
        sum += w;
        for (d = 0; d < c->dv; d++)
            c->o_p[d] += w * po[(size_t)s * c->dv + d];
    }
    for (d = 0; d < c->dv; d++)
        c->o_p[d] /= sum;
    *lse_p = m + logf(sum);
}

/* Stage 2, draft half: the L x L block of row i in fp32, one tile. Returns
 * the number of draft keys the row sees. */
static int draft_part(model_ctx *c, const float *q, int i, float *lse_d)
{
    /* The correct count, then what a boundary bug of the draft block reads. */
    const int visible =
        mla_boundary_draft_visible(c->mut->boundary, c->mut->drafts_causal ? i + 1 : c->len, c->len);
    float m = -INFINITY, l = 0.0f;
    int j, d, nan = 0;

    for (d = 0; d < c->dv; d++)
        c->o_d[d] = 0.0f;
    for (j = 0; j < visible; j++) {
        c->sd[j] = score_of(c, q, c->dk + (size_t)j * c->dim) * c->sm_scale;
        nan |= c->sd[j] != c->sd[j];
        m = fmaxf(m, c->sd[j]);
    }
    if (nan) { /* a NaN draft score: the row is NaN */
        for (d = 0; d < c->dv; d++)
            c->o_d[d] = NAN;
        *lse_d = NAN;
        return visible;
    }
    if (m == -INFINITY) {
        *lse_d = -INFINITY;
        return visible;
    }
    for (j = 0; j < (c->mut->masked_drafts_weighted ? c->len : visible); j++) {
        const float pj = j < visible ? expf(c->sd[j] - m) : 0.0f;
        const float *v = c->dvv + (size_t)j * c->dv;
        l += pj;
        for (d = 0; d < c->dv; d++)
            c->o_d[d] += pj * v[d];
    }
    for (d = 0; d < c->dv; d++)
        c->o_d[d] /= l;
    *lse_d = m + logf(l);
    return visible;
}

/* Stage 2 for one head of the block: every draft row. */
static void stage2_head(model_ctx *c, int b, int hl, int h, int32_t active, mla_bf16 *o_out,
                        float *lse_out)
{
    const mla_fixture *fx = c->fx;
    int i, d;

    for (i = 0; i < c->len; i++) {
        const int64_t row = (int64_t)fx->qo_indptr[b] + i;
        const float *q = c->q + ((size_t)hl * c->len + i) * (size_t)c->dim;
        mla_bf16 *o = o_out + ((size_t)row * c->heads + h) * (size_t)c->dv;
        float lse_p, lse_d, big, wp, wd, den;

        merge_splits(c, hl, i, active, &lse_p);
        const int seen = draft_part(c, q, i, &lse_d);

        big = fmaxf(lse_p, lse_d);
        if (big == -INFINITY && seen > 0) {
            /* Keys seen, every score -inf (a q element +-inf): softmax is
             * 0/0 there, NaN in the reference (exp(-inf - -inf)), so NaN
             * here too, o and lse (docs/accuracy.md, non-finite policy). */
            for (d = 0; d < c->dv; d++)
                o[d] = mla_f32_to_bf16(NAN);
            lse_out[(size_t)row * c->heads + h] = NAN;
            continue;
        }
        if (big == -INFINITY && c->mut->guard_empty) {
            /* No visible key at all: 0 with lse -inf, no division. */
            for (d = 0; d < c->dv; d++)
                o[d] = mla_f32_to_bf16(0.0f);
            lse_out[(size_t)row * c->heads + h] = -INFINITY;
            continue;
        }
        wp = expf(lse_p - big); /* exactly 0 for an empty prefix */
        wd = expf(lse_d - big);
        den = wp + wd;
        for (d = 0; d < c->dv; d++)
            o[d] = mla_f32_to_bf16((wp * c->o_p[d] + wd * c->o_d[d]) / den);
        lse_out[(size_t)row * c->heads + h] = big + logf(den);
    }
}

/* Everything that must hold before any index is followed, so the model
 * never reads out of bounds even on a fixture nobody checked. */
static mla_status check_inputs(const mla_fixture *fx, const mla_bf16 *o, const float *lse,
                               mla_error *err)
{
    const int32_t bs = fx->cfg.num_seqs, len = fx->cfg.q_len;
    int64_t k;
    int32_t b;

    if (!o || !lse) {
        mla_error_set(err, "model: null output buffer");
        return MLA_ERR_INVALID;
    }
    if (!fx->q || !fx->k_extend || !fx->v_extend || !fx->qo_indptr || !fx->kv_indptr) {
        mla_error_set(err, "model: fixture is missing a required tensor");
        return MLA_ERR_INVALID;
    }
    for (b = 0; b <= bs; b++) {
        if ((int64_t)fx->qo_indptr[b] != (int64_t)b * len) {
            mla_error_set(err, "model: qo_indptr[%d] = %d, expected %lld (q_len %d)", (int)b,
                          (int)fx->qo_indptr[b], (long long)((int64_t)b * len), (int)len);
            return MLA_ERR_INVALID;
        }
    }
    if (fx->kv_indptr[0] != 0) {
        mla_error_set(err, "model: kv_indptr[0] = %d, expected 0", (int)fx->kv_indptr[0]);
        return MLA_ERR_INVALID;
    }
    for (b = 0; b < bs; b++) {
        if (fx->kv_indptr[b + 1] < fx->kv_indptr[b]) {
            mla_error_set(err, "model: kv_indptr decreases at %d", (int)b + 1);
            return MLA_ERR_INVALID;
        }
    }
    if ((int64_t)fx->kv_indptr[bs] != fx->num_kv_indices) {
        mla_error_set(err, "model: kv_indptr[%d] = %d but num_kv_indices = %lld", (int)bs,
                      (int)fx->kv_indptr[bs], (long long)fx->num_kv_indices);
        return MLA_ERR_INVALID;
    }
    if (fx->num_kv_indices > 0 &&
        (!fx->kv_indices || (fx->kv_dtype == MLA_KV_BF16 ? !fx->kv_buffer : !fx->kv_fp8))) {
        mla_error_set(err, "model: kv_indices or kv_buffer missing");
        return MLA_ERR_INVALID;
    }
    for (k = 0; k < fx->num_kv_indices; k++) {
        if (fx->kv_indices[k] < 0 || fx->kv_indices[k] >= fx->pool_slots) {
            mla_error_set(err, "model: kv_indices[%lld] = %lld outside [0, %lld)",
                          (long long)k, (long long)fx->kv_indices[k],
                          (long long)fx->pool_slots);
            return MLA_ERR_INVALID;
        }
    }
    return MLA_OK;
}

static float *alloc_floats(size_t a, size_t b, size_t c, int *ok)
{
    size_t n;
    float *p;

    if (!*ok)
        return NULL;
    if (!mla_mul3_size(a, b, c, &n) || !mla_mul_size(n, sizeof(float), &n)) {
        *ok = 0;
        return NULL;
    }
    p = malloc(n ? n : 1);
    if (!p)
        *ok = 0;
    return p;
}

static void free_ctx(model_ctx *c)
{
    free(c->q);
    free(c->kt);
    free(c->p);
    free(c->acc);
    free(c->pv);
    free(c->m);
    free(c->l);
    free(c->part_o);
    free(c->part_lse);
    free(c->dk);
    free(c->dvv);
    free(c->sd);
    free(c->o_p);
    free(c->o_d);
}

/* Work buffers of one worker; 0 when an allocation or a size failed. */
static int alloc_ctx(model_ctx *c)
{
    const size_t bh = (size_t)c->plan.blk.block_h, len = (size_t)c->len;
    const size_t dim = (size_t)c->dim, dv = (size_t)c->dv, bn = (size_t)c->plan.blk.block_n;
    size_t slots = 0;
    int ok = 1;

    c->q = alloc_floats(bh, len, dim, &ok);
    c->kt = alloc_floats(bn, dim, 1, &ok);
    c->p = alloc_floats(bn, 1, 1, &ok);
    c->acc = alloc_floats(bh, len, dv, &ok);
    c->pv = alloc_floats(dv, 1, 1, &ok);
    c->m = alloc_floats(bh, len, 1, &ok);
    c->l = alloc_floats(bh, len, 1, &ok);
    if (ok && !mla_mul3_size(bh, len, (size_t)c->plan.num_splits, &slots))
        ok = 0;
    c->part_o = alloc_floats(slots, dv, 1, &ok);
    c->part_lse = alloc_floats(slots, 1, 1, &ok);
    c->dk = alloc_floats(len, dim, 1, &ok);
    c->dvv = alloc_floats(len, dv, 1, &ok);
    c->sd = alloc_floats(len, 1, 1, &ok);
    c->o_p = alloc_floats(dv, 1, 1, &ok);
    c->o_d = alloc_floats(dv, 1, 1, &ok);
    return ok;
}

/* Both stages for one (sequence, head block): what one column of the
 * stage-1 grid and the matching stage-2 programs compute. */
static void run_task(model_ctx *c, int32_t b, int32_t hb, mla_bf16 *o, float *lse)
{
    const mla_fixture *fx = c->fx;
    const int32_t prefix = fx->kv_indptr[b + 1] - fx->kv_indptr[b];
    int first;
    const int32_t active = seq_splits(c, b, prefix, &first);
    const int64_t row0 = fx->qo_indptr[b];
    const size_t len = (size_t)c->len, dim = (size_t)c->dim, dv = (size_t)c->dv;
    const int h0 = hb * c->plan.blk.block_h;
    const int nh = (c->heads - h0 < c->plan.blk.block_h) ? c->heads - h0 : c->plan.blk.block_h;
    size_t j, d;
    int hl, i;
    int32_t s;

    for (j = 0; j < len; j++) {
        const mla_bf16 *ks = fx->k_extend + (size_t)(row0 + (int64_t)j) * dim;
        const mla_bf16 *vs = fx->v_extend + (size_t)(row0 + (int64_t)j) * dv;
        for (d = 0; d < dim; d++)
            c->dk[j * dim + d] = mla_bf16_to_f32(ks[d]);
        for (d = 0; d < dv; d++)
            c->dvv[j * dv + d] = mla_bf16_to_f32(vs[d]);
    }
    for (hl = 0; hl < nh; hl++)
        for (i = 0; i < c->len; i++) {
            const mla_bf16 *qs =
                fx->q + ((size_t)(row0 + i) * (size_t)c->heads + (size_t)(h0 + hl)) * dim;
            float *qd = c->q + ((size_t)hl * len + (size_t)i) * dim;
            for (d = 0; d < dim; d++)
                qd[d] = mla_bf16_to_f32(qs[d]);
        }

    for (s = 0; s < active; s++) {
        int32_t begin, end;
        seq_split_range(c, b, prefix, active, first, s, &begin, &end);
        mla_boundary_range(c->mut->boundary, prefix, active, s,
                           fx->kv_indptr[b] + (int64_t)prefix < fx->num_kv_indices, &begin, &end);
        stage1_split(c, b, nh, s, begin, end);
    }
    for (hl = 0; hl < nh; hl++)
        stage2_head(c, b, hl, h0 + hl, active, o, lse);
}

/* Tasks are independent and each writes its own rows and heads, so any
 * number of workers gives bit-identical results. */
typedef struct {
    model_ctx ctx;
    struct pool *pool;
    int started;
} worker;

typedef struct pool {
    pthread_mutex_t lock;
    int64_t next, count;
    int32_t n_head_blocks;
    mla_bf16 *o;
    float *lse;
} pool;

static void *worker_main(void *arg)
{
    worker *w = arg;
    pool *p = w->pool;

    for (;;) {
        int64_t t;
        int32_t b, hb;

        pthread_mutex_lock(&p->lock);
        t = p->next++;
        pthread_mutex_unlock(&p->lock);
        if (t >= p->count)
            break;
        b = (int32_t)(t / p->n_head_blocks);
        hb = (int32_t)(t % p->n_head_blocks);
        /* Planted SKIP_HEAD_BLOCK: the grid misses the last head block,
         * so its rows keep whatever the buffer held. */
        if (w->ctx.mut->skip_last_head_block && hb == p->n_head_blocks - 1)
            continue;
        run_task(&w->ctx, b, hb, p->o, p->lse);
    }
    return NULL;
}

static int default_threads(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : (n > 256 ? 256 : (int)n);
}

mla_status mla_model_run(const mla_fixture *fx, const mla_model_opts *opts, mla_bf16 *o,
                         float *lse, mla_error *err)
{
    return mla_model_run_threads(fx, opts, 0, o, lse, err);
}

mla_status mla_model_run_threads(const mla_fixture *fx, const mla_model_opts *opts,
                                 int num_threads, mla_bf16 *o, float *lse, mla_error *err)
{
    mla_model_opts def;
    mla_shape shape;
    model_ctx proto;
    mla_status st;
    const char *why;
    worker *workers;
    pthread_t *tids;
    pool p;
    int nthreads, k;

    if (!fx) {
        mla_error_set(err, "model: null fixture");
        return MLA_ERR_INVALID;
    }
    if (!opts) {
        def = mla_model_opts_default();
        opts = &def;
    }
    /* Invalid before any decline (fixtures/README.md): -1 is off, W >= 1 a
     * window; 0 is rejected everywhere, not read as off. */
    if (fx->cfg.sliding_window == 0 || fx->cfg.sliding_window < -1) {
        mla_error_set(err, "model: sliding_window %d must be -1 (off) or >= 1",
                      (int)fx->cfg.sliding_window);
        return MLA_ERR_INVALID;
    }
    if (!mutation_of(opts->mutation)) {
        mla_error_set(err, "model: unknown mutation %d", (int)opts->mutation);
        return MLA_ERR_INVALID;
    }
    if ((int)opts->plan < 0 || opts->plan >= MLA_MODEL_PLAN_COUNT) {
        mla_error_set(err, "model: unknown plan %d", (int)opts->plan);
        return MLA_ERR_INVALID;
    }
    mla_shape_from_fixture(fx, &shape);
    why = mla_can_handle(&shape);
    if (why) {
        mla_error_set(err, "fast path declines the case: %s", why);
        return MLA_ERR_DECLINED;
    }

    memset(&proto, 0, sizeof proto);
    st = mla_plan_make(&shape, &opts->blk, &proto.plan, err);
    if (st != MLA_OK)
        return st;
    st = check_inputs(fx, o, lse, err);
    if (st != MLA_OK)
        return st;

    proto.fx = fx;
    proto.plan_kind = opts->plan;
    fast_setup(&proto); /* after check_inputs: it follows kv_indptr */
    proto.mut = mutation_of(opts->mutation);
    proto.dim = fx->cfg.head_dim;
    proto.dv = fx->cfg.v_head_dim;
    proto.dpe = proto.dim - proto.dv;
    proto.heads = fx->cfg.num_heads;
    proto.len = fx->cfg.q_len;
    /* One fp32 product, as a kernel folds both scales into one multiplier. */
    proto.qk_scale = fx->cfg.sm_scale * fx->cfg.k_scale;
    proto.sm_scale = fx->cfg.sm_scale;
    proto.v_scale = fx->cfg.v_scale;

    p.next = 0;
    p.count = (int64_t)proto.plan.num_seqs * proto.plan.n_head_blocks;
    p.n_head_blocks = proto.plan.n_head_blocks;
    p.o = o;
    p.lse = lse;
    nthreads = num_threads > 0 ? (num_threads > 256 ? 256 : num_threads) : default_threads();
    if ((int64_t)nthreads > p.count)
        nthreads = (int)p.count;

    /* Every buffer is allocated before the first output is written, so a
     * failure leaves the caller's buffers untouched. */
    workers = calloc((size_t)nthreads, sizeof *workers);
    tids = calloc((size_t)nthreads, sizeof *tids);
    for (k = 0; workers && tids && k < nthreads; k++) {
        workers[k].ctx = proto;
        workers[k].pool = &p;
        if (!alloc_ctx(&workers[k].ctx)) {
            free_ctx(&workers[k].ctx);
            break;
        }
    }
    if (!workers || !tids || k < nthreads) {
        while (workers && k-- > 0)
            free_ctx(&workers[k].ctx);
        free(workers);
        free(tids);
        mla_error_set(err,
                      "model: out of memory for work buffers (%d workers, block_h %d, L %d, "
                      "splits %d)",
                      nthreads, (int)proto.plan.blk.block_h, (int)proto.len,
                      (int)proto.plan.num_splits);
        return MLA_ERR_NOMEM;
    }
    if (pthread_mutex_init(&p.lock, NULL) != 0) {
        for (k = 0; k < nthreads; k++)
            free_ctx(&workers[k].ctx);
        free(workers);
        free(tids);
        mla_error_set(err, "model: pthread_mutex_init failed");
        return MLA_ERR_RUNTIME;
    }

    /* The calling thread is worker 0; a thread that cannot be started
     * just leaves its share to the others. */
    for (k = 1; k < nthreads; k++)
        workers[k].started = pthread_create(&tids[k], NULL, worker_main, &workers[k]) == 0;
    worker_main(&workers[0]);
    for (k = 1; k < nthreads; k++)
        if (workers[k].started)
            pthread_join(tids[k], NULL);

    pthread_mutex_destroy(&p.lock);
    for (k = 0; k < nthreads; k++)
        free_ctx(&workers[k].ctx);
    free(workers);
    free(tids);
    return MLA_OK;
}

int mla_model_max_splits(const mla_fixture *fx, const mla_model_opts *opts)
{
    mla_model_opts def = mla_model_opts_default();
    mla_shape shape;
    model_ctx c;
    mla_error err;

    if (!opts)
        opts = &def;
    if (!fx || !fx->kv_indptr || (int)opts->plan < 0 || opts->plan >= MLA_MODEL_PLAN_COUNT)
        return -1;
    mla_shape_from_fixture(fx, &shape);
    memset(&c, 0, sizeof c);
    if (mla_plan_make(&shape, &opts->blk, &c.plan, &err) != MLA_OK)
        return -1;
    for (int32_t b = 0; b < fx->cfg.num_seqs; b++)
        if (fx->kv_indptr[b + 1] < fx->kv_indptr[b])
            return -1;
    c.fx = fx;
    c.plan_kind = opts->plan;
    fast_setup(&c);
    return max_seq_splits(&c);
}
