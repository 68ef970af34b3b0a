/* fp8 KV pools (schema 1.1.0) in the reference, the oracle and the CPU
 * model of the seed kernel:
 *  - hand case per flavour: one prefix key (a normal and a subnormal code),
 *    one draft; k_scale must multiply the prefix score only and v_scale the
 *    prefix value only (SPEC section 2), checked against a closed form;
 *  - every fp8 catalogue case (--large: the large ones): the fp8 fixture
 *    and the same pool widened to bf16 by an independent decoder (ldexp of
 *    the code's fields, not mla_fp8_*) give bit-identical outputs from the
 *    reference, the oracle and the model; the pool's referenced codes
 *    cover normals, subnormals and near-max values, and only unreferenced
 *    slots hold NaN codes. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "mla/model.h"
#include "ref_test_util.h"

static int fails;
#define CHECK(c, ...)                                                                              \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                                            \
            printf(__VA_ARGS__);                                                                   \
            printf("\n");                                                                          \
            ++fails;                                                                               \
        }                                                                                          \
    } while (0)

/* Independent decoder: the fields, ldexp, the flavour's NaN rule. */
static double decode(uint8_t b, mla_kv_dtype t)
{
    const int fnuz = t == MLA_KV_FP8_E4M3FNUZ;
    if (fnuz ? b == 0x80 : (b & 0x7f) == 0x7f)
        return NAN;
    const int e = (b >> 3) & 15, m = b & 7, bias = fnuz ? 8 : 7;
    const double v = e ? ldexp(1.0 + m / 8.0, e - bias) : ldexp(m / 8.0, 1 - bias);
    return (b & 0x80) ? -v : v;
}

static uint16_t bf16_of(double v)
{
    if (isnan(v))
        return 0x7fc0;
    float f = (float)v; /* exact: 3 mantissa bits */
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16); /* exact: the low 16 bits are zero */
}

static void widen(const mla_fixture *fx8, mla_fixture *w)
{
    mla_error err;
    mla_fixture_sizes sz;
    CHECK(mla_fixture_copy_inputs(fx8, w, &err) == MLA_OK, "copy: %s", err.msg);
    CHECK(mla_fixture_sizes_of(fx8, &sz, &err) == MLA_OK, "sizes");
    w->kv_buffer = malloc(sz.kv_buffer * 2 + 2);
    for (size_t e = 0; e < sz.kv_buffer; ++e) {
        double v = decode(fx8->kv_fp8[e], fx8->kv_dtype);
        w->kv_buffer[e] = bf16_of(v);
        if (!isnan(v))
            CHECK((double)mla_bf16_to_f32(w->kv_buffer[e]) == v, "code 0x%02x not exact in bf16",
                  fx8->kv_fp8[e]);
    }
    free(w->kv_fp8);
    w->kv_fp8 = NULL;
    w->kv_dtype = MLA_KV_BF16;
    CHECK(mla_fixture_check(w, &err) == MLA_OK, "widened fixture: %s", err.msg);
}

static int same(const void *a, const void *b, size_t n)
{
    return memcmp(a, b, n) == 0;
}

static void catalogue_case(const char *name)
{
    mla_fixture fx, w;
    mla_error err = {{0}};
    if (mla_catalogue_generate(name, mla_catalogue_default_seed(name), &fx, &err) != MLA_OK) {
        CHECK(0, "%s: %s", name, err.msg);
        return;
    }
    CHECK(fx.kv_dtype != MLA_KV_BF16 && fx.kv_fp8 && !fx.kv_buffer, "%s: not an fp8 pool", name);
    CHECK(fx.cfg.k_scale != 1.f && fx.cfg.v_scale != 1.f, "%s: scales are 1", name);
    /* coverage of the codes the kernel reads; NaN only where it must not read
     * (and, in k3-fp8-nan, the one planted where it must) */
    const size_t row = (size_t)fx.cfg.num_kv_heads * (size_t)fx.cfg.head_dim;
    const double maxv = fx.kv_dtype == MLA_KV_FP8_E4M3FN ? 448 : 240;
    size_t normal = 0, sub = 0, nearmax = 0, nan_ref = 0, nan_unref = 0, empty = 0;
    uint8_t *used = calloc((size_t)fx.pool_slots + 1, 1);
    for (int64_t i = 0; i < fx.num_kv_indices; ++i)
        used[fx.kv_indices[i]] = 1;
    for (int64_t s = 0; s < fx.pool_slots; ++s)
        for (size_t e = 0; e < row; ++e) {
            const uint8_t b = fx.kv_fp8[(size_t)s * row + e];
            const double v = decode(b, fx.kv_dtype);
            if (!used[s]) {
                nan_unref += isnan(v);
                continue;
            }
            nan_ref += isnan(v);
            sub += ((b >> 3) & 15) == 0 && (b & 7) != 0;
            normal += ((b >> 3) & 15) != 0 && !isnan(v);
            nearmax += fabs(v) >= 0.875 * maxv;
        }
    for (int b = 0; b < fx.cfg.num_seqs; ++b)
        empty += mla_fixture_prefix(&fx, b) == 0;
    free(used);
    CHECK(normal > 0 && sub > 0 && nearmax > 0, "%s: codes: %zu normal, %zu subnormal, %zu near-max",
          name, normal, sub, nearmax);
    /* k3-fp8-nan plants exactly one NaN code in a referenced slot */
    const size_t want_ref = strcmp(name, "k3-fp8-nan") == 0 ? 1 : 0;
    CHECK(nan_ref == want_ref && nan_unref > 0,
          "%s: NaN codes: %zu referenced (want %zu), %zu unreferenced", name, nan_ref, want_ref,
          nan_unref);
    printf("%-24s %-16s codes: %zu normal, %zu subnormal, %zu near-max; %zu NaN (unreferenced); "
           "%zu empty prefix(es)\n",
           name, mla_kv_dtype_name(fx.kv_dtype), normal, sub, nearmax, nan_unref, empty);

    widen(&fx, &w);
    mla_fixture_sizes sz;
    mla_fixture_sizes_of(&fx, &sz, &err);
    float *o8 = malloc(sz.o * 4 + 4), *ow = malloc(sz.o * 4 + 4);
    float *l8 = malloc(sz.lse * 4 + 4), *lw = malloc(sz.lse * 4 + 4);
    CHECK(mla_reference_run(&fx, o8, l8, &err) == MLA_OK, "%s: reference: %s", name, err.msg);
    CHECK(mla_reference_run(&w, ow, lw, &err) == MLA_OK, "%s: reference (bf16): %s", name, err.msg);
    CHECK(same(o8, ow, sz.o * 4) && same(l8, lw, sz.lse * 4),
          "%s: reference on the fp8 pool differs from the widened bf16 pool", name);
    if (!mla_catalogue_find(name)->large) { /* the oracle is slow on long prefixes */
        double *d8 = malloc(sz.o * 8 + 8), *dw = malloc(sz.o * 8 + 8);
        double *e8 = malloc(sz.lse * 8 + 8), *ew = malloc(sz.lse * 8 + 8);
        CHECK(mla_oracle_run(&fx, d8, e8, &err) == MLA_OK, "%s: oracle: %s", name, err.msg);
        CHECK(mla_oracle_run(&w, dw, ew, &err) == MLA_OK, "%s: oracle (bf16): %s", name, err.msg);
        CHECK(same(d8, dw, sz.o * 8) && same(e8, ew, sz.lse * 8),
              "%s: oracle on the fp8 pool differs from the widened bf16 pool", name);
        free(d8), free(dw), free(e8), free(ew);
    }
    mla_bf16 *m8 = malloc(sz.o * 2 + 2), *mw = malloc(sz.o * 2 + 2);
    mla_model_opts mo = mla_model_opts_default();
    CHECK(mla_model_run(&fx, &mo, m8, l8, &err) == MLA_OK, "%s: model: %s", name, err.msg);
    CHECK(mla_model_run(&w, &mo, mw, lw, &err) == MLA_OK, "%s: model (bf16): %s", name, err.msg);
    CHECK(same(m8, mw, sz.o * 2) && same(l8, lw, sz.lse * 4),
          "%s: model on the fp8 pool differs from the widened bf16 pool", name);
    free(o8), free(ow), free(l8), free(lw), free(m8), free(mw);
    mla_fixture_free(&w);
    mla_fixture_free(&fx);
}

/* One sequence, one head, D 2, Dv 1: prefix key codes (one, tiny) in slot
 * 1 (slots 0 and 2 hold NaN codes), one draft. */
static void hand_case(mla_kv_dtype t)
{
    const int fnuz = t == MLA_KV_FP8_E4M3FNUZ;
    const uint8_t one = fnuz ? 0x40 : 0x38, tiny = 0x01, nan = fnuz ? 0x80 : 0x7f;
    const double ks = 2.0, vs = 3.0, sm = 0.5;
    uint8_t pool[6] = {nan, nan, one, tiny, nan, nan};
    mla_bf16 q[2] = {mla_f32_to_bf16(1.0f), mla_f32_to_bf16(0.5f)};
    mla_bf16 ke[2] = {mla_f32_to_bf16(0.5f), mla_f32_to_bf16(1.0f)};
    mla_bf16 ve[1] = {mla_f32_to_bf16(0.25f)};
    int32_t qo[2] = {0, 1}, kvp[2] = {0, 1};
    int64_t idx[1] = {1};
    mla_fixture fx;
    memset(&fx, 0, sizeof fx);
    fx.case_name = "fp8-hand";
    fx.source = "synthetic";
    fx.cfg = (mla_config){.num_seqs = 1, .num_heads = 1, .num_kv_heads = 1, .q_len = 1,
                          .head_dim = 2, .v_head_dim = 1, .sm_scale = (float)sm,
                          .k_scale = (float)ks, .v_scale = (float)vs, .is_causal = 1,
                          .sliding_window = -1, .topk = 1};
    fx.num_q_tokens = 1;
    fx.pool_slots = 3;
    fx.num_kv_indices = 1;
    fx.q = q, fx.k_extend = ke, fx.v_extend = ve, fx.kv_fp8 = pool, fx.kv_dtype = t;
    fx.qo_indptr = qo, fx.kv_indptr = kvp, fx.kv_indices = idx;
    mla_error err = {{0}};
    CHECK(mla_fixture_check(&fx, &err) == MLA_OK, "hand: %s", err.msg);
    const double tinyv = fnuz ? ldexp(1, -10) : ldexp(1, -9);
    const double sp = sm * ks * (1.0 * 1.0 + 0.5 * tinyv), vp = vs * 1.0; /* prefix */
    const double sd = sm * (1.0 * 0.5 + 0.5 * 1.0), vd = 0.25;           /* draft: no scales */
    const double mx = sp > sd ? sp : sd;
    const double l = exp(sp - mx) + exp(sd - mx);
    const double want_o = (exp(sp - mx) * vp + exp(sd - mx) * vd) / l, want_lse = mx + log(l);
    float o, lse;
    double od, lsed;
    CHECK(mla_reference_run(&fx, &o, &lse, &err) == MLA_OK, "hand reference: %s", err.msg);
    CHECK(fabs(o - want_o) <= 4e-7 * fabs(want_o) && fabs(lse - want_lse) <= 4e-7 * fabs(want_lse),
          "hand %s reference: o %.9g lse %.9g, want %.9g %.9g", mla_kv_dtype_name(t), o, lse,
          want_o, want_lse);
    CHECK(mla_oracle_run(&fx, &od, &lsed, &err) == MLA_OK, "hand oracle: %s", err.msg);
    CHECK(fabs(od - want_o) <= 1e-14 && fabs(lsed - want_lse) <= 1e-14,
          "hand %s oracle: o %.17g lse %.17g, want %.17g %.17g", mla_kv_dtype_name(t), od, lsed,
          want_o, want_lse);
    printf("hand %-16s o %.9g lse %.9g (closed form %.9g %.9g)\n", mla_kv_dtype_name(t), o, lse,
           want_o, want_lse);
}

int main(int argc, char **argv)
{
    static const char *const known[] = {"--large", NULL};
    rt_cli(argc, argv,
           "fp8 pools: closed-form scales, and reference/oracle/model on every fp8 catalogue\n"
           "case equal to the same pool widened to bf16 (--large: the large fp8 cases).",
           known);
    const int want_large = argc > 1 && strcmp(argv[1], "--large") == 0;
    if (!want_large) {
        hand_case(MLA_KV_FP8_E4M3FN);
        hand_case(MLA_KV_FP8_E4M3FNUZ);
    }
    int ran = 0;
    for (size_t i = 0; i < mla_catalogue_count(); ++i) {
        const mla_case_info *ci = mla_catalogue_get(i);
        if (strcmp(ci->family, "fp8") != 0 || ci->large != want_large)
            continue;
        catalogue_case(ci->name);
        ++ran;
    }
    CHECK(ran >= 2, "only %d fp8 catalogue cases", ran);
    if (fails) {
        printf("%d failures\n", fails);
        return 1;
    }
    printf("fp8: %d catalogue cases equal to their widened bf16 pools\n", ran);
    return 0;
}
