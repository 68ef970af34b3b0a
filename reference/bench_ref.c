/* mla-bench-ref: the fp32 reference at the Kimi-K3 TP8 verify shape against
 * a plain cblas_sgemm of the same block shapes, in one run. The reference is
 * a sequence of two GEMMs per key block plus the gather, bf16 conversion and
 * online softmax between them, so the sgemm rate on those shapes (hot
 * operands, nothing else to do) is the ceiling it is measured against. */
#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ref_internal.h"

#define K3_SM_SCALE 0.07216878364870322f /* 192^-0.5 */
#define PAGE 64

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static float rng_uniform(uint64_t *s)
{
    return (float)((double)(rng_next(s) >> 11) * 0x1.0p-53 * 2.0 - 1.0);
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: mla-bench-ref [options]\n"
            "Times the fp32 CPU reference (mla_reference_run) on a Kimi-K3 TP8 verify call\n"
            "(H 12, L 8, head_dim 576, v_head_dim 512, random bf16, slots from shuffled\n"
            "64-token pages) and a plain cblas_sgemm of the same block shapes; prints both\n"
            "rates and their ratio. flop = 2*bs*H*L*(P+L)*(576+512), softmax ignored.\n"
            "  --bs N          sequences (default 8)\n"
            "  --prefix N      prefix tokens per sequence (default 16384)\n"
            "  --heads N       query heads (default 12)\n"
            "  --drafts N      draft rows per sequence (default 8)\n"
            "  --threads N     OpenBLAS threads (default: OpenBLAS's own choice)\n"
            "  --reps N        timed runs, the median is reported (default 5)\n"
            "  --key-block N   keys per GEMM block (default: the reference's, 256)\n"
            "  --seed N        input seed (default 1)\n"
            "  --help          this text\n");
}

static int parse_int(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return 0;
    *out = v;
    return 1;
}

int main(int argc, char **argv)
{
    long bs = 8, P = 16384, H = 12, L = 8, threads = 0, reps = 5, key_block = 0, seed = 1;
    for (int i = 1; i < argc; i += 2) {
        const char *a = argv[i];
        long *dst = NULL, lo = 1, hi = 1L << 30;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--bs"))
            dst = &bs, hi = 4096;
        else if (!strcmp(a, "--prefix"))
            dst = &P, lo = 0, hi = 1L << 24;
        else if (!strcmp(a, "--heads"))
            dst = &H, hi = 1024;
        else if (!strcmp(a, "--drafts"))
            dst = &L, hi = 1024;
        else if (!strcmp(a, "--threads"))
            dst = &threads, hi = 1024;
        else if (!strcmp(a, "--reps"))
            dst = &reps, hi = 1000;
        else if (!strcmp(a, "--key-block"))
            dst = &key_block, hi = 1L << 16;
        else if (!strcmp(a, "--seed"))
            dst = &seed, lo = 0, hi = 1L << 30;
        if (!dst) {
            fprintf(stderr, "mla-bench-ref: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        }
        if (i + 1 >= argc || !parse_int(argv[i + 1], lo, hi, dst)) {
            fprintf(stderr, "mla-bench-ref: %s needs an integer in [%ld, %ld]\n", a, lo, hi);
            return 2;
        }
    }
    /* indptr entries are int32 (SPEC section 6) */
    if (bs * P > INT32_MAX || bs * L > INT32_MAX) {
        fprintf(stderr, "mla-bench-ref: bs x prefix and bs x drafts must fit in int32\n");
        return 2;
    }
    if (threads > 0)
        openblas_set_num_threads((int)threads);
    const int D = 576, DV = 512;

    /* The fixture, built directly. */
    mla_fixture fx;
    memset(&fx, 0, sizeof fx);
    mla_config *c = &fx.cfg;
    c->num_seqs = (int32_t)bs;
    c->num_heads = (int32_t)H;
    c->num_kv_heads = 1;
    c->q_len = (int32_t)L;
    c->head_dim = D;
    c->v_head_dim = DV;
    c->sm_scale = K3_SM_SCALE;
    c->k_scale = 1.0f;
    c->v_scale = 1.0f;
    c->is_causal = 1;
    c->logit_cap = 0.0f;
    c->sliding_window = -1;
    c->topk = 1;
    const int64_t pages_per_seq = (P + PAGE - 1) / PAGE, pages = bs * pages_per_seq;
    fx.num_q_tokens = bs * L;
    fx.num_kv_indices = bs * P;
    fx.pool_slots = pages * PAGE;
    fx.q = malloc((size_t)fx.num_q_tokens * H * D * sizeof(mla_bf16));
    fx.k_extend = malloc((size_t)fx.num_q_tokens * D * sizeof(mla_bf16));
    fx.v_extend = malloc((size_t)fx.num_q_tokens * DV * sizeof(mla_bf16));
    fx.kv_buffer = malloc((size_t)fx.pool_slots * D * sizeof(mla_bf16));
    fx.qo_indptr = malloc((size_t)(bs + 1) * sizeof(int32_t));
    fx.kv_indptr = malloc((size_t)(bs + 1) * sizeof(int32_t));
    fx.kv_indices = malloc((size_t)fx.num_kv_indices * sizeof(int64_t) + 1);
    int64_t *perm = malloc((size_t)pages * sizeof(int64_t) + 1);
    float *o = malloc((size_t)fx.num_q_tokens * H * DV * sizeof(float));
    float *lse = malloc((size_t)fx.num_q_tokens * H * sizeof(float));
    if (!fx.q || !fx.k_extend || !fx.v_extend || !fx.kv_buffer || !fx.qo_indptr ||
        !fx.kv_indptr || !fx.kv_indices || !perm || !o || !lse) {
        fprintf(stderr, "mla-bench-ref: out of memory\n");
        return 1;
    }
    uint64_t rs = (uint64_t)seed;
    for (size_t i = 0; i < (size_t)fx.num_q_tokens * H * D; i++)
        fx.q[i] = mla_f32_to_bf16(rng_uniform(&rs));
    for (size_t i = 0; i < (size_t)fx.num_q_tokens * D; i++)
        fx.k_extend[i] = mla_f32_to_bf16(rng_uniform(&rs));
    for (size_t i = 0; i < (size_t)fx.num_q_tokens * DV; i++)
        fx.v_extend[i] = mla_f32_to_bf16(rng_uniform(&rs));
    for (size_t i = 0; i < (size_t)fx.pool_slots * D; i++)
        fx.kv_buffer[i] = mla_f32_to_bf16(rng_uniform(&rs));
    for (int64_t p = 0; p < pages; p++)
        perm[p] = p;
    for (int64_t p = pages - 1; p > 0; p--) {
        int64_t k = (int64_t)(rng_next(&rs) % (uint64_t)(p + 1)), t = perm[p];
        perm[p] = perm[k];
        perm[k] = t;
    }
    for (int64_t b = 0; b <= bs; b++) {
        fx.qo_indptr[b] = (int32_t)(b * L);
        fx.kv_indptr[b] = (int32_t)(b * P);
    }
    for (int64_t b = 0; b < bs; b++)
        for (int64_t t = 0; t < P; t++)
            fx.kv_indices[b * P + t] = perm[b * pages_per_seq + t / PAGE] * PAGE + t % PAGE;

    mla_ref_opts opts = mla_ref_opts_default();
    if (key_block > 0)
        opts.key_block = (int32_t)key_block;
    const double flop = 2.0 * bs * H * L * (double)(P + L) * (D + DV);

    /* The ceiling: the reference's two GEMM shapes per key block, on fp32
     * operands already in cache, for the same total flops. */
    const int M = (int)(H * L), NB = opts.key_block;
    float *A = malloc((size_t)M * D * sizeof(float)), *B = malloc((size_t)NB * D * sizeof(float));
    float *S = malloc((size_t)M * NB * sizeof(float)), *C = malloc((size_t)M * DV * sizeof(float));
    double *t_ref = malloc((size_t)reps * sizeof(double));
    double *t_gemm = malloc((size_t)reps * sizeof(double));
    if (!A || !B || !S || !C || !t_ref || !t_gemm) {
        fprintf(stderr, "mla-bench-ref: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < (size_t)M * D; i++)
        A[i] = rng_uniform(&rs);
    for (size_t i = 0; i < (size_t)NB * D; i++)
        B[i] = rng_uniform(&rs);
    for (size_t i = 0; i < (size_t)M * NB; i++)
        S[i] = rng_uniform(&rs) * 0.01f;
    memset(C, 0, (size_t)M * DV * sizeof(float));
    const double pair_flop = 2.0 * M * NB * (double)(D + DV);
    const long pairs = (long)ceil(flop / pair_flop);

    /* Reference and GEMM runs alternate (one untimed round first), so a
     * load that comes and goes on a shared machine hits both alike; the
     * median and the best of each are reported. */
    mla_error err = {{0}};
    for (long r = -1; r < reps; r++) {
        double t0 = now_s();
        if (mla_reference_run_opts(&fx, &opts, o, lse, &err) != MLA_OK) {
            fprintf(stderr, "mla-bench-ref: reference failed: %s\n", err.msg);
            return 1;
        }
        double t1 = now_s();
        for (long k = 0; k < pairs; k++) {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, NB, D, 1.0f, A, D, B, D, 0.0f,
                        S, NB);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, DV, NB, 1.0f, S, NB, B, D,
                        1.0f, C, DV);
        }
        double t2 = now_s();
        if (r >= 0) {
            t_ref[r] = t1 - t0;
            t_gemm[r] = (t2 - t1) * flop / ((double)pairs * pair_flop);
        }
    }
    double checksum = 0;
    for (size_t i = 0; i < (size_t)fx.num_q_tokens * H * DV; i++)
        checksum += o[i];
    qsort(t_ref, (size_t)reps, sizeof(double), cmp_double);
    qsort(t_gemm, (size_t)reps, sizeof(double), cmp_double);
    const double ref_med = t_ref[reps / 2], gemm_med = t_gemm[reps / 2];
    const double ref_best = t_ref[0], gemm_best = t_gemm[0];

    printf("mla-bench-ref: bs %ld, prefix %ld, H %ld, L %ld, D %d/%d, key block %d, "
           "OpenBLAS %s, %d threads, %ld runs each\n",
           bs, P, H, L, D, DV, NB, openblas_get_corename(), openblas_get_num_threads(), reps);
    printf("| what | median ms | median GFLOP/s | best ms | best GFLOP/s |\n"
           "|---|---|---|---|---|\n");
    printf("| mla_reference_run | %.1f | %.1f | %.1f | %.1f |\n", ref_med * 1e3,
           flop / ref_med * 1e-9, ref_best * 1e3, flop / ref_best * 1e-9);
    printf("| cblas_sgemm %dx%dx%d + %dx%dx%d, same flops | %.1f | %.1f | %.1f | %.1f |\n", M,
           NB, D, M, DV, NB, gemm_med * 1e3, flop / gemm_med * 1e-9, gemm_best * 1e3,
           flop / gemm_best * 1e-9);
    printf("reference / sgemm rate: median %.3f, best %.3f (flop %.4g, checksum %.6g)\n",
           gemm_med / ref_med, gemm_best / ref_best, flop, checksum);

    free(fx.q);
    free(fx.k_extend);
    free(fx.v_extend);
    free(fx.kv_buffer);
    free(fx.qo_indptr);
    free(fx.kv_indptr);
    free(fx.kv_indices);
    free(perm);
    free(o);
    free(lse);
    free(t_ref);
    free(t_gemm);
    free(A);
    free(B);
    free(S);
    free(C);
    return 0;
}
