/* The one backend table. Like BLIS's kernel registry, every implementation
 * the suite can judge is a row here, so the validator always knows which one
 * it is running and on which execution path (and so which tolerance). */
#include "mla/validate.h"
#include "mla/model.h"
#include "mla/reference.h"
#ifdef MLA_HAVE_GPU
#include "gpu_backend.h"
#endif

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int always(const mla_backend *b, char *why, size_t n)
{
    (void)b, (void)why, (void)n;
    return 1;
}

static mla_status run_reference(const mla_backend *b, const mla_fixture *fx, mla_outputs *out,
                                mla_error *err)
{
    (void)b;
    mla_status st = mla_reference_run(fx, out->o32, out->lse, err);
    out->wrote_lse = st == MLA_OK;
    return st;
}

static mla_status run_oracle(const mla_backend *b, const mla_fixture *fx, mla_outputs *out,
                             mla_error *err)
{
    (void)b;
    mla_fixture_sizes sz;
    mla_status st = mla_fixture_sizes_of(fx, &sz, err);
    if (st != MLA_OK)
        return st;
    double *o = malloc((sz.o ? sz.o : 1) * sizeof *o), *l = malloc((sz.lse ? sz.lse : 1) * sizeof *l);
    if (!o || !l) {
        free(o);
        free(l);
        mla_error_set(err, "oracle: out of memory");
        return MLA_ERR_NOMEM;
    }
    st = mla_oracle_run(fx, o, l, err);
    if (st == MLA_OK) {
        for (size_t i = 0; i < sz.o; ++i)
            out->o32[i] = (float)o[i];
        for (size_t i = 0; i < sz.lse; ++i)
            out->lse[i] = (float)l[i];
        out->wrote_lse = 1;
    }
    free(o);
    free(l);
    return st;
}

static mla_status run_model(const mla_backend *b, const mla_fixture *fx, mla_outputs *out,
                            mla_error *err)
{
    mla_model_opts opts = mla_model_opts_default();
    opts.mutation = (mla_mutation)b->arg;
    mla_status st = mla_model_run(fx, &opts, out->o16, out->lse, err);
    out->wrote_lse = st == MLA_OK;
    return st;
}

static int has_expected(const mla_backend *b, char *why, size_t n)
{
    (void)b, (void)why, (void)n;
    return 1; /* per file: run_captured answers N/A through MLA_ERR_DECLINED */
}

static mla_status run_captured(const mla_backend *b, const mla_fixture *fx, mla_outputs *out,
                               mla_error *err)
{
    (void)b;
    if (!fx->expected_o) {
        mla_error_set(err, "file has no /expected/o");
        return MLA_ERR_DECLINED;
    }
    mla_fixture_sizes sz;
    mla_status st = mla_fixture_sizes_of(fx, &sz, err);
    if (st != MLA_OK)
        return st;
    memcpy(out->o16, fx->expected_o, sz.o * sizeof *out->o16);
    if (fx->expected_lse) {
        memcpy(out->lse, fx->expected_lse, sz.lse * sizeof *out->lse);
        out->wrote_lse = 1;
    }
    return MLA_OK;
}

#ifdef MLA_HAVE_GPU
static int gpu_available(const mla_backend *b, char *why, size_t n)
{
    (void)b;
    return mla_gpu_available(why, n);
}

static mla_status run_gpu(const mla_backend *b, const mla_fixture *fx, mla_outputs *out,
                          mla_error *err)
{
    mla_status st = mla_gpu_backend_run(fx, b->arg, out->o16, out->lse, err);
    out->wrote_lse = st == MLA_OK;
    return st;
}
#else
static int gpu_available(const mla_backend *b, char *why, size_t n)
{
    (void)b;
    snprintf(why, n, "built without GPU support (configure with the 'cuda' preset)");
    return 0;
}

static mla_status run_gpu(const mla_backend *b, const mla_fixture *fx, mla_outputs *out,
                          mla_error *err)
{
    (void)b, (void)fx, (void)out;
    mla_error_set(err, "built without GPU support");
    return MLA_ERR_RUNTIME;
}
#endif

#define MODEL_MUT(NAME, MUT)                                                                       \
    {"model:" NAME, "CPU model with a planted bug (mutation test)", MLA_PATH_BF16_PARTIALS,         \
     MLA_EXPECT_SPEC_DECLINES, 1, 0, always, run_model, MUT}

static const mla_backend BACKENDS[] = {
    {"reference", "fp32 reference on OpenBLAS (reference/)", MLA_PATH_REFERENCE,
     MLA_EXPECT_ACCEPT_ALL, 0, 1, always, run_reference, 0},
    {"oracle", "fp64 plain-loop oracle (reference/oracle.c)", MLA_PATH_REFERENCE,
     MLA_EXPECT_ACCEPT_ALL, 0, 0, always, run_oracle, 0},
    {"model", "CPU model of the two-stage GPU kernel: bf16 partials (seed/model.c)",
     MLA_PATH_BF16_PARTIALS, MLA_EXPECT_SPEC_DECLINES, 1, 1, always, run_model, MLA_MUT_NONE},
    {"captured", "the file's /expected/o (a trace or a kernel under suspicion)",
     MLA_PATH_BF16_P_PARTIALS, MLA_EXPECT_HAS_EXPECTED, 1, 1, has_expected, run_captured, 0},
#ifdef MLA_HAVE_GPU
    {"gpu", "GPU fast path: two-stage MLA kernel, tensor cores, bf16 partials",
     MLA_PATH_BF16_P_PARTIALS, MLA_EXPECT_SPEC_DECLINES, 1, 1, gpu_available, run_gpu,
     MLA_GPU_TIER_FAST},
    {"gpu-baseline", "GPU per-head split-KV baseline, fp32 partials", MLA_PATH_BF16_P,
     MLA_EXPECT_SPEC_DECLINES, 1, 1, gpu_available, run_gpu, MLA_GPU_TIER_PERHEAD},
    {"gpu-fallback", "GPU generic fallback: every SPEC section 2 feature, fp32 math",
     MLA_PATH_FP32, MLA_EXPECT_ACCEPT_ALL, 1, 1, gpu_available, run_gpu, MLA_GPU_TIER_GENERIC},
#else
    {"gpu", "GPU fast path (not built)", MLA_PATH_BF16_P_PARTIALS, MLA_EXPECT_SPEC_DECLINES, 1, 1,
     gpu_available, run_gpu, 1},
    {"gpu-baseline", "GPU per-head baseline (not built)", MLA_PATH_BF16_P,
     MLA_EXPECT_SPEC_DECLINES, 1, 1, gpu_available, run_gpu, 2},
    {"gpu-fallback", "GPU generic fallback (not built)", MLA_PATH_FP32, MLA_EXPECT_ACCEPT_ALL, 1,
     1, gpu_available, run_gpu, 3},
#endif
    MODEL_MUT("drop-remainder", MLA_MUT_DROP_REMAINDER),
    MODEL_MUT("no-causal", MLA_MUT_NO_CAUSAL),
    MODEL_MUT("fp16-partials", MLA_MUT_FP16_PARTIALS),
    MODEL_MUT("lse-no-max-shift", MLA_MUT_LSE_NO_MAX_SHIFT),
    MODEL_MUT("lse-base2", MLA_MUT_LSE_BASE2),
    MODEL_MUT("partition-off-by-one", MLA_MUT_PARTITION_OFF_BY_ONE),
    MODEL_MUT("skip-head-block", MLA_MUT_SKIP_HEAD_BLOCK),
    MODEL_MUT("empty-prefix-nan", MLA_MUT_EMPTY_PREFIX_NAN),
};

size_t mla_backend_count(void)
{
    return sizeof BACKENDS / sizeof BACKENDS[0];
}

const mla_backend *mla_backend_get(size_t i)
{
    return i < mla_backend_count() ? &BACKENDS[i] : NULL;
}

const mla_backend *mla_backend_find(const char *name)
{
    for (size_t i = 0; i < mla_backend_count(); ++i)
        if (strcmp(BACKENDS[i].name, name) == 0)
            return &BACKENDS[i];
    return NULL;
}
