/* libmla_verify: the C library of the mla_verify Python package, loaded
 * in-process with ctypes (python/mla_verify/_native.py). A thin layer over
 * the public headers: the judge (include/mla/validate.h), the fp32
 * reference (reference.h), the guarded fixture reader and the catalogue
 * (fixture.h). Nothing here judges: every tolerance stays in
 * validate/judge.c, so a verdict here and mla-validate's on the same output
 * and path are the same verdict.
 *
 * Why ctypes over a flat struct and not a CPython extension: no Python
 * headers at build time (run.sh installs none), and one build serves every
 * Python >= 3.10. The struct below is this file's own, so the C structs of
 * the fixture and the judge can change without the Python side noticing. */
#include "mla/fixture.h"
#include "mla/guard.h"
#include "mla/reference.h"
#include "mla/validate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MLA_PY_API __attribute__((visibility("default")))

/* Bumped whenever a struct below or a signature changes; the Python side
 * refuses a library of another version. */
#define MLA_PY_ABI 2

/* One case as flat pointers into arrays the caller owns (Python: numpy).
 * Tensors are C-order; bf16 as raw bits; kv holds bf16 bits (kv_dtype
 * MLA_KV_BF16) or fp8 codes. kv_indices lists pool slots (page size 1:
 * the Python side expands a page table). cfg is the fixture's own config
 * struct (include/mla/fixture.h), mirrored field by field in _native.py;
 * mla_py_sizeof lets the Python side refuse a library whose layout
 * differs. */
typedef struct {
    mla_config cfg;
    int32_t kv_dtype;
    int32_t has_seed;
    int64_t seed;
    int64_t num_q_tokens, pool_slots, num_kv_indices;
    void *q, *k_extend, *v_extend, *kv;
    int32_t *qo_indptr, *kv_indptr;
    int64_t *kv_indices;
    float *sinks;            /* [num_heads] or NULL */
    uint16_t *expected_o;    /* [num_q_tokens, num_heads, v_head_dim] or NULL */
    float *expected_lse;     /* [num_q_tokens, num_heads] or NULL */
    const char *case_name, *source, *model, *description, *expected_producer;
} mla_py_case;

/* A verdict and the figures a report needs (the judge's mla_metrics, the
 * fields a user reads). */
typedef struct {
    int32_t verdict; /* mla_verdict */
    int32_t path;    /* mla_path judged on */
    char reason[512];
    char path_name[64];
    char bias_group[64];
    double cos_diff, worst_row_cos, worst_row_rel, max_abs, worst_ratio, nmse, within_1ulp;
    double lse_max_abs, lse_ratio, bias_ratio, bias_slope, bias_threshold;
    double cos_limit, row_cos_limit, rel_tol;
    int64_t first_bad, n_over, n_rows_over, n_elems, n_compared, n_nan, n_unwritten,
        n_ref_nonfinite, n_bias_groups, n_bias_over;
    double seconds;
} mla_py_result;

MLA_PY_API int mla_py_abi(void) { return MLA_PY_ABI; }

/* sizeof of mla_py_case (0), mla_config (1), mla_py_result (2). */
MLA_PY_API size_t mla_py_sizeof(int what)
{
    return what == 0 ? sizeof(mla_py_case) : what == 1 ? sizeof(mla_config)
                                                       : sizeof(mla_py_result);
}

/* The paths a caller may declare, by the names of the Python API. "auto"
 * is the path the captured backend is judged on (validate/backends.c,
 * "captured"): P in bf16 and bf16 partials, the loosest one, which is what a
 * capture without a declared path gets from mla-validate. */
static const struct {
    const char *name;
    mla_path path;
} py_paths[] = {
    {"fp32", MLA_PATH_FP32},
    {"bf16-partials", MLA_PATH_BF16_PARTIALS},
    {"p-bf16", MLA_PATH_BF16_P},
    {"auto", MLA_PATH_BF16_P_PARTIALS},
};
#define N_PY_PATHS (sizeof py_paths / sizeof py_paths[0])

MLA_PY_API int mla_py_path_count(void) { return (int)N_PY_PATHS; }

/* Name i of the Python API and the judge's description of its path. */
MLA_PY_API const char *mla_py_path_name(int i)
{
    return i >= 0 && (size_t)i < N_PY_PATHS ? py_paths[i].name : NULL;
}

MLA_PY_API const char *mla_py_path_description(int i)
{
    return i >= 0 && (size_t)i < N_PY_PATHS ? mla_path_name(py_paths[i].path) : NULL;
}

static void set_msg(char *msg, size_t n, const char *s)
{
    if (msg && n)
        snprintf(msg, n, "%s", s);
}

/* A borrowed view: the fixture points into the caller's arrays and is
 * never freed with mla_fixture_free. */
static void view_of(const mla_py_case *c, mla_fixture *fx)
{
    memset(fx, 0, sizeof *fx);
    fx->case_name = (char *)(c->case_name ? c->case_name : "python");
    fx->source = (char *)(c->source ? c->source : "synthetic");
    fx->has_seed = c->has_seed;
    fx->seed = c->seed;
    fx->cfg = c->cfg;
    fx->num_q_tokens = c->num_q_tokens;
    fx->pool_slots = c->pool_slots;
    fx->num_kv_indices = c->num_kv_indices;
    fx->q = c->q;
    fx->k_extend = c->k_extend;
    fx->v_extend = c->v_extend;
    fx->kv_dtype = (mla_kv_dtype)c->kv_dtype;
    if (fx->kv_dtype == MLA_KV_BF16)
        fx->kv_buffer = c->kv;
    else
        fx->kv_fp8 = c->kv;
    fx->qo_indptr = c->qo_indptr;
    fx->kv_indptr = c->kv_indptr;
    fx->kv_indices = c->kv_indices;
    fx->sinks = c->sinks;
}

/* The owned fixture's arrays as a flat case (the caller copies them out
 * before mla_py_fixture_free). */
static void case_of(const mla_fixture *fx, mla_py_case *c)
{
    memset(c, 0, sizeof *c);
    c->cfg = fx->cfg;
    c->kv_dtype = (int32_t)fx->kv_dtype;
    c->has_seed = fx->has_seed;
    c->seed = fx->seed;
    c->num_q_tokens = fx->num_q_tokens;
    c->pool_slots = fx->pool_slots;
    c->num_kv_indices = fx->num_kv_indices;
    c->q = fx->q;
    c->k_extend = fx->k_extend;
    c->v_extend = fx->v_extend;
    c->kv = fx->kv_dtype == MLA_KV_BF16 ? (void *)fx->kv_buffer : (void *)fx->kv_fp8;
    c->qo_indptr = fx->qo_indptr;
    c->kv_indptr = fx->kv_indptr;
    c->kv_indices = fx->kv_indices;
    c->sinks = fx->sinks;
    c->expected_o = fx->expected_o;
    c->expected_lse = fx->expected_lse;
    c->case_name = fx->case_name;
    c->source = fx->source;
    c->model = fx->model;
    c->description = fx->description;
    c->expected_producer = fx->expected_producer;
}

/* Every rule of SPEC section 6 that holds in memory (mla_fixture_check):
 * MLA_OK, or a status with the message naming the field. */
MLA_PY_API int mla_py_check(const mla_py_case *c, char *msg, size_t n)
{
    mla_fixture fx;
    mla_error err = {{0}};
    view_of(c, &fx);
    const mla_status st = mla_fixture_check(&fx, &err);
    if (st != MLA_OK)
        set_msg(msg, n, err.msg);
    return (int)st;
}

/* The fp32 reference: o [num_q_tokens, num_heads, v_head_dim], lse
 * [num_q_tokens, num_heads]. */
MLA_PY_API int mla_py_reference(const mla_py_case *c, float *o, float *lse, char *msg, size_t n)
{
    mla_fixture fx;
    mla_error err = {{0}};
    view_of(c, &fx);
    mla_status st = mla_fixture_check(&fx, &err);
    if (st == MLA_OK)
        st = mla_reference_run(&fx, o, lse, &err);
    if (st != MLA_OK)
        set_msg(msg, n, err.msg);
    return (int)st;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Judge output o (o_esize 2: bf16 bits; 4: fp32) and lse (NULL: none) on
 * the path named `path`, as validate/suite.c judges a captured output: the
 * fp32 reference with its statistics, elements still holding the poison
 * pattern counted unwritten, then mla_judge. The fp64 oracle is not run:
 * off the reference's own path it only feeds the noise figures of the
 * bias report, never the verdict. Returns MLA_OK with the verdict in *r, or
 * an error status (bad path or case, out of memory) with the message. */
MLA_PY_API int mla_py_judge(const mla_py_case *c, const char *path, const void *o, int o_esize,
                            const float *lse, mla_py_result *r, char *msg, size_t n)
{
    memset(r, 0, sizeof *r);
    size_t pi = 0;
    while (pi < N_PY_PATHS && (!path || strcmp(path, py_paths[pi].name)))
        ++pi;
    if (pi == N_PY_PATHS) {
        set_msg(msg, n, "path: not one of fp32, bf16-partials, p-bf16, auto");
        return MLA_ERR_INVALID;
    }
    if (o_esize != 2 && o_esize != 4) {
        set_msg(msg, n, "o: element size must be 2 (bf16) or 4 (fp32)");
        return MLA_ERR_INVALID;
    }
    const mla_path jp = py_paths[pi].path;
    mla_fixture fx;
    mla_error err = {{0}};
    view_of(c, &fx);
    mla_fixture_sizes sz;
    mla_status st = mla_fixture_check(&fx, &err);
    if (st == MLA_OK)
        st = mla_fixture_sizes_of(&fx, &sz, &err);
    if (st != MLA_OK) {
        set_msg(msg, n, err.msg);
        return (int)st;
    }
    float *ref_o = malloc((sz.o + 1) * sizeof *ref_o);
    float *ref_lse = malloc((sz.lse + 1) * sizeof *ref_lse);
    double *pstats = malloc((sz.lse + 1) * MLA_REF_PSTATS * sizeof *pstats);
    float *o32 = malloc((sz.o + 1) * sizeof *o32);
    unsigned char *unwritten = malloc(sz.o + 1);
    if (!ref_o || !ref_lse || !pstats || !o32 || !unwritten) {
        set_msg(msg, n, "out of memory");
        st = MLA_ERR_NOMEM;
        goto done;
    }
    const double t0 = now_s();
    st = mla_reference_run_pstats(&fx, ref_o, ref_lse, pstats, &err);
    if (st != MLA_OK) {
        set_msg(msg, n, err.msg);
        goto done;
    }
    mla_guard_unwritten(o, sz.o, (size_t)o_esize, unwritten);
    for (size_t e = 0; e < sz.o; ++e)
        o32[e] = o_esize == 2 ? mla_bf16_to_f32(((const mla_bf16 *)o)[e]) : ((const float *)o)[e];
    const mla_judge_input jin = {&fx, ref_o, ref_lse, NULL, NULL, pstats};
    mla_metrics m;
    memset(&m, 0, sizeof m);
    r->verdict = (int32_t)mla_judge(&jin, jp, o32, unwritten, lse, &m, r->reason, sizeof r->reason);
    r->seconds = now_s() - t0;
    r->path = (int32_t)jp;
    snprintf(r->path_name, sizeof r->path_name, "%s", mla_path_name(jp));
    snprintf(r->bias_group, sizeof r->bias_group, "%s", m.bias_group);
    r->cos_diff = m.cos_diff;
    r->worst_row_cos = m.worst_row_cos;
    r->worst_row_rel = m.worst_row_rel;
    r->max_abs = m.max_abs;
    r->worst_ratio = m.worst_ratio;
    r->nmse = m.nmse;
    r->within_1ulp = m.within_1ulp;
    r->lse_max_abs = m.lse_max_abs;
    r->lse_ratio = m.lse_ratio;
    r->bias_ratio = m.bias_ratio;
    r->bias_slope = m.bias_slope;
    r->bias_threshold = m.bias_threshold;
    r->cos_limit = m.cos_limit;
    r->row_cos_limit = m.row_cos_limit;
    r->rel_tol = m.rel_tol;
    r->first_bad = m.first_bad;
    r->n_over = m.n_over;
    r->n_rows_over = m.n_rows_over;
    r->n_elems = m.n_elems;
    r->n_compared = m.n_compared;
    r->n_nan = m.n_nan;
    r->n_unwritten = m.n_unwritten;
    r->n_ref_nonfinite = m.n_ref_nonfinite;
    r->n_bias_groups = m.n_bias_groups;
    r->n_bias_over = m.n_bias_over;
done:
    free(ref_o);
    free(ref_lse);
    free(pstats);
    free(o32);
    free(unwritten);
    return (int)st;
}

/* ---- Owned fixtures: the catalogue and files ---- */

MLA_PY_API size_t mla_py_catalogue_count(void) { return mla_catalogue_count(); }

MLA_PY_API int mla_py_catalogue_info(size_t i, const char **name, const char **family,
                                     const char **description, int *large)
{
    const mla_case_info *ci = mla_catalogue_get(i);
    if (!ci)
        return MLA_ERR_INVALID;
    *name = ci->name;
    *family = ci->family;
    *description = ci->description;
    *large = ci->large;
    return MLA_OK;
}

MLA_PY_API uint64_t mla_py_catalogue_default_seed(const char *name)
{
    return mla_catalogue_default_seed(name);
}

/* An owned fixture handle, or NULL with the message; *c points into it
 * until mla_py_fixture_free. */
static void *owned(mla_status st, mla_fixture *fx, const mla_error *err, mla_py_case *c,
                   char *msg, size_t n)
{
    if (st != MLA_OK) {
        set_msg(msg, n, err->msg);
        free(fx);
        return NULL;
    }
    case_of(fx, c);
    return fx;
}

static mla_fixture *new_fixture(char *msg, size_t n)
{
    mla_fixture *fx = calloc(1, sizeof *fx);
    if (!fx)
        set_msg(msg, n, "out of memory");
    return fx;
}

MLA_PY_API void *mla_py_catalogue_generate(const char *name, uint64_t seed, mla_py_case *c,
                                           char *msg, size_t n)
{
    mla_fixture *fx = new_fixture(msg, n);
    mla_error err = {{0}};
    return fx ? owned(mla_catalogue_generate(name, seed, fx, &err), fx, &err, c, msg, n) : NULL;
}

/* Through the guarded reader (a child process reads the file, this process
 * never calls libhdf5 on it): the one reader every tool uses for files it
 * did not write. max_memory 0: the reader's default. */
MLA_PY_API void *mla_py_fixture_read(const char *path, uint64_t max_memory, mla_py_case *c,
                                     char *msg, size_t n)
{
    mla_fixture *fx = new_fixture(msg, n);
    mla_error err = {{0}};
    const mla_read_options opt = {max_memory};
    return fx ? owned(mla_fixture_read_guarded_opts(path, &opt, fx, &err), fx, &err, c, msg, n)
              : NULL;
}

MLA_PY_API void mla_py_fixture_free(void *h)
{
    if (!h)
        return;
    mla_fixture_free(h);
    free(h);
}
