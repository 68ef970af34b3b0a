/* Plan and decline conditions of the two-stage kernel (SPEC sections 3, 4).
 * Usage: test_plan [seed]  (a fresh seed is drawn and printed otherwise). */
#include "mla/plan.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "test_util.h"

static int32_t uniform(int32_t lo, int32_t hi) /* inclusive */
{
    return lo + (int32_t)(next_u64() % (uint64_t)((int64_t)hi - lo + 1));
}

static mla_shape k3_shape(void)
{
    mla_shape s;

    memset(&s, 0, sizeof s);
    s.num_seqs = 4;
    s.num_heads = 12;
    s.num_kv_heads = 1;
    s.q_len = 8;
    s.num_q_tokens = 32;
    s.head_dim = 576;
    s.kv_dim = 576;
    s.v_head_dim = 512;
    s.v_extend_dim = 512;
    s.is_causal = 1;
    s.logit_cap = 0.0f;
    s.sliding_window = -1;
    s.has_sinks = 0;
    s.topk = 1;
    return s;
}

/* A prefix length drawn to hit the edges: 0, around multiples of block_n,
 * remainders, and long prefixes up to the int32 range. */
static int32_t draw_prefix(int32_t block_n)
{
    switch (uniform(0, 5)) {
    case 0:
        return uniform(0, 3);
    case 1: {
        const int32_t v = block_n * uniform(0, 40) + uniform(-1, 1);
        return v < 0 ? 0 : v;
    }
    case 2:
        return uniform(0, 5000);
    case 3:
        return uniform(0, 200000);
    case 4:
        return uniform(0, 2147483647);
    default:
        return block_n * uniform(1, 33) - 1;
    }
}

static void check_partition(int32_t prefix, int32_t num_splits, int32_t block_n)
{
    const int32_t active = mla_plan_active_splits(prefix, num_splits, block_n);
    int64_t want_active = prefix / block_n;
    int32_t s, b, e, prev_end = 0;

    if (want_active > num_splits)
        want_active = num_splits;
    if (want_active < 1)
        want_active = 1;
    CHECK(active == want_active, "P %d splits %d bn %d: active %d, want %" PRId64, prefix,
          num_splits, block_n, active, want_active);
    CHECK(active >= 1 && active <= num_splits, "active %d outside [1, %d]", active, num_splits);

    if (prefix == 0) {
        CHECK(active == 1, "empty prefix: %d splits, want exactly one", active);
        mla_plan_split_range(prefix, active, 0, &b, &e);
        CHECK(b == 0 && e == 0, "empty prefix split is [%d, %d), want [0, 0)", b, e);
        return;
    }
    for (s = 0; s < active; s++) {
        mla_plan_split_range(prefix, active, s, &b, &e);
        CHECK(b == prev_end, "P %d split %d/%d begins at %d, previous ended at %d", prefix, s,
              active, b, prev_end);
        CHECK(e > b, "P %d split %d/%d is empty [%d, %d)", prefix, s, active, b, e);
        if (s < active - 1)
            CHECK(e - b == prefix / active, "P %d split %d/%d has %d keys, want floor %d",
                  prefix, s, active, e - b, prefix / active);
        else
            CHECK(e - b == prefix / active + prefix % active,
                  "P %d last split has %d keys, want %d + remainder %d", prefix, e - b,
                  prefix / active, prefix % active);
        /* Splits are worth their launch: each holds at least one tile. */
        if (prefix >= block_n)
            CHECK(e - b >= block_n, "P %d split %d has %d keys < block_n %d", prefix, s, e - b,
                  block_n);
        prev_end = e;
    }
    CHECK(prev_end == prefix, "P %d: splits end at %d", prefix, prev_end);
}

static void random_plans(int n)
{
    static const int32_t block_ns[] = {1, 16, 32, 64, 128, 256};
    int k, j;

    for (k = 0; k < n; k++) {
        mla_shape s = k3_shape();
        mla_block_config blk = mla_block_config_default();
        mla_plan plan;
        mla_error err;
        mla_status st;
        int64_t nhb, want;

        s.num_seqs = uniform(0, 3) == 0 ? uniform(1, 100000) : uniform(1, 128);
        s.num_heads = uniform(1, 256);
        s.q_len = uniform(1, 16);
        s.num_q_tokens = (int64_t)s.num_seqs * s.q_len;
        blk.block_h = uniform(1, 16);
        blk.block_n = block_ns[uniform(0, 5)];

        st = mla_plan_make(&s, &blk, &plan, &err);
        CHECK(st == MLA_OK, "plan_make failed: %s", err.msg);
        if (st != MLA_OK)
            continue;
        nhb = (s.num_heads + blk.block_h - 1) / blk.block_h;
        want = 512 / ((int64_t)s.num_seqs * nhb);
        want = want > 32 ? 32 : want;
        want = want < 1 ? 1 : want;
        CHECK(plan.n_head_blocks == nhb, "H %d block_h %d: %d head blocks, want %" PRId64,
              s.num_heads, blk.block_h, plan.n_head_blocks, nhb);
        CHECK((int64_t)plan.num_splits == want, "bs %d nhb %" PRId64 ": %d splits, want %" PRId64,
              s.num_seqs, nhb, plan.num_splits, want);
        CHECK(plan.num_splits >= 1 && plan.num_splits <= 32, "num_splits %d", plan.num_splits);
        CHECK((int64_t)plan.n_head_blocks * blk.block_h >= s.num_heads &&
                  (int64_t)(plan.n_head_blocks - 1) * blk.block_h < s.num_heads,
              "head blocks do not tile H exactly once");
        CHECK(plan.num_seqs == s.num_seqs && plan.num_heads == s.num_heads &&
                  plan.q_len == s.q_len && plan.blk.block_n == blk.block_n,
              "plan does not echo its shape");
        for (j = 0; j < 8; j++)
            check_partition(draw_prefix(blk.block_n), plan.num_splits, blk.block_n);
    }
    /* Every split count against the prefixes that sit on tile edges. */
    for (k = 1; k <= 32; k++) {
        static const int32_t edges[] = {0, 1, 2, 3, 63, 64, 65, 113, 127, 128, 129, 4095, 4096,
                                        131072, 131073};
        for (j = 0; j < (int)(sizeof edges / sizeof edges[0]); j++)
            check_partition(edges[j], k, 64);
    }
}

static void decline_conditions(void)
{
    struct {
        const char *what;
        mla_shape s;
    } cases[16];
    const char *reasons[16];
    int n = 0, i, j;
    mla_shape base = k3_shape(), s;
    mla_block_config blk = mla_block_config_default();
    mla_plan plan;
    mla_error err;

    CHECK(blk.block_h == 4 && blk.block_n == 64 && blk.num_warps == 8 && blk.num_stages == 1,
          "default block config is %d/%d/%d/%d", blk.block_h, blk.block_n, blk.num_warps,
          blk.num_stages);
    CHECK(mla_can_handle(&base) == NULL, "K3 base shape declined: %s", mla_can_handle(&base));
    /* The "off" spellings of the optional features are accepted. */
    s = base;
    s.sliding_window = 0;
    CHECK(mla_can_handle(&s) == NULL, "sliding_window 0 (off) declined");
    s = base;
    s.q_len = 1;
    s.num_q_tokens = 4;
    CHECK(mla_can_handle(&s) == NULL, "L = 1 declined");
    s = base;
    s.num_heads = 128;
    CHECK(mla_can_handle(&s) == NULL, "DeepSeek-V3 128 heads declined");
    CHECK(mla_plan_make(&base, &blk, &plan, &err) == MLA_OK, "plan for K3: %s", err.msg);
    /* K3 TP8 at bs 4: 3 head blocks, 512 / 12 = 42 -> 32 splits. */
    CHECK(plan.n_head_blocks == 3 && plan.num_splits == 32, "K3 plan %d blocks %d splits",
          plan.n_head_blocks, plan.num_splits);

#define ADD(desc, field_edit)                                                                  \
    do {                                                                                       \
        cases[n].what = desc;                                                                  \
        cases[n].s = base;                                                                     \
        {                                                                                      \
            mla_shape *c = &cases[n].s;                                                        \
            field_edit;                                                                        \
        }                                                                                      \
        n++;                                                                                   \
    } while (0)
    ADD("sinks", c->has_sinks = 1);
    ADD("sliding window", c->sliding_window = 128);
    ADD("logit cap", c->logit_cap = 30.0f);
    ADD("not causal", c->is_causal = 0);
    ADD("two kv heads", c->num_kv_heads = 2);
    ADD("heads not a multiple of kv heads", c->num_kv_heads = 5);
    ADD("head_dim != pool width", c->kv_dim = 512);
    ADD("v dims disagree", c->v_extend_dim = 256);
    ADD("head_dim < v_head_dim", (c->head_dim = 256, c->kv_dim = 256));
    ADD("bs < 1", (c->num_seqs = 0, c->num_q_tokens = 0));
    ADD("q_len < 1", c->q_len = 0);
    ADD("ragged", c->num_q_tokens = 31);
    ADD("topk != 1", c->topk = 2);
#undef ADD

    for (i = 0; i < n; i++) {
        reasons[i] = mla_can_handle(&cases[i].s);
        CHECK(reasons[i] != NULL, "%s accepted, must decline", cases[i].what);
        if (!reasons[i])
            continue;
        printf("  decline %-34s -> %s\n", cases[i].what, reasons[i]);
        for (j = 0; j < i; j++)
            CHECK(!reasons[j] || strcmp(reasons[i], reasons[j]) != 0,
                  "%s and %s share the reason \"%s\"", cases[i].what, cases[j].what, reasons[i]);
        memset(&err, 0, sizeof err);
        CHECK(mla_plan_make(&cases[i].s, &blk, &plan, &err) == MLA_ERR_DECLINED &&
                  strstr(err.msg, reasons[i]) != NULL,
              "plan_make on %s: not declined with the reason (msg \"%s\")", cases[i].what,
              err.msg);
    }

    /* Values no SPEC condition names but that would divide by zero. */
    s = base;
    s.logit_cap = nanf("");
    CHECK(mla_can_handle(&s) != NULL, "NaN logit_cap accepted");
    s = base;
    s.num_heads = 0;
    CHECK(mla_can_handle(&s) != NULL, "zero heads accepted");
    s = base;
    s.num_kv_heads = 0;
    CHECK(mla_can_handle(&s) != NULL, "zero kv heads accepted");
    CHECK(mla_can_handle(NULL) != NULL, "NULL shape accepted");

    blk.block_n = 0;
    CHECK(mla_plan_make(&base, &blk, &plan, &err) == MLA_ERR_INVALID, "block_n 0 accepted");
    blk = mla_block_config_default();
    blk.block_h = -1;
    CHECK(mla_plan_make(&base, &blk, &plan, &err) == MLA_ERR_INVALID, "block_h -1 accepted");
}

int main(int argc, char **argv)
{
    uint64_t seed = argc > 1 ? strtoull(argv[1], NULL, 0)
                             : ((uint64_t)time(NULL) * 0x9e3779b97f4a7c15ull) ^ (uint64_t)clock();
    const int n = 5000;

    rng_state = seed;
    printf("test_plan seed %" PRIu64 " (rerun: test_plan %" PRIu64 ")\n", seed, seed);
    decline_conditions();
    random_plans(n);
    printf("%d random plans x 8 prefixes checked, %d failures\n", n, failures);
    return failures ? 1 : 0;
}
