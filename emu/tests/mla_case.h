/* Shared by the MLA emulator tests: synthetic inputs of SPEC section 2 with
 * shuffled slots and NaN in the unreferenced ones, an fp64 reference, and
 * the row-relative error measure. */
#ifndef MLA_EMU_TEST_MLA_CASE_H
#define MLA_EMU_TEST_MLA_CASE_H

#include "mla_amd_emu.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu_check.h" /* CHECK, g_failures */

enum { D = 576, DV = 512 };

static mla_bf16 to_bf(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (mla_bf16)(u >> 16);
}
static float bf(mla_bf16 b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static unsigned rng = 12345u;
static float urand(void)
{
    rng = rng * 1664525u + 1013904223u;
    return (float)((rng >> 8) & 0xffff) / 32768.f - 1.f;
}

typedef struct {
    int H, L, bs;
    const int *P;
    mla_gpu_args a;
    int64_t slots;
    mla_bf16 *q, *ke, *ve, *kv, *o;
    int32_t *qo, *kvp;
    int64_t *idx;
    float *lse;
    double *ref_o, *ref_lse;
} Case;

static void make_case(Case *c, int H, int L, int bs, const int *P)
{
    memset(c, 0, sizeof *c);
    c->H = H;
    c->L = L;
    c->bs = bs;
    c->P = P;
    const int T = bs * L;
    int64_t total = 0;
    for (int b = 0; b < bs; ++b)
        total += P[b];
    c->slots = total + 7; /* unreferenced slots hold NaN: never read */
    c->q = (mla_bf16 *)malloc(sizeof(mla_bf16) * T * H * D);
    c->ke = (mla_bf16 *)malloc(sizeof(mla_bf16) * T * D);
    c->ve = (mla_bf16 *)malloc(sizeof(mla_bf16) * T * DV);
    c->kv = (mla_bf16 *)malloc(sizeof(mla_bf16) * c->slots * D);
    c->o = (mla_bf16 *)malloc(sizeof(mla_bf16) * T * H * DV);
    c->lse = (float *)malloc(sizeof(float) * T * H);
    c->qo = (int32_t *)malloc(sizeof(int32_t) * (bs + 1));
    c->kvp = (int32_t *)malloc(sizeof(int32_t) * (bs + 1));
    c->idx = (int64_t *)malloc(sizeof(int64_t) * (total ? total : 1));
    c->ref_o = (double *)malloc(sizeof(double) * T * H * DV);
    c->ref_lse = (double *)malloc(sizeof(double) * T * H);
    for (long i = 0; i < (long)T * H * D; ++i)
        c->q[i] = to_bf(urand());
    for (long i = 0; i < (long)T * D; ++i)
        c->ke[i] = to_bf(urand());
    for (long i = 0; i < (long)T * DV; ++i)
        c->ve[i] = to_bf(urand());
    for (long i = 0; i < (long)c->slots * D; ++i)
        c->kv[i] = 0x7fc0; /* NaN */
    /* Shuffled slots: a permutation of 0..total+6 with stride 5 (coprime to
     * most sizes; checked below). */
    int64_t s = 3;
    for (int64_t t = 0; t < total; ++t) {
        s = (s + 5) % c->slots;
        c->idx[t] = s;
    }
    for (int64_t t = 0; t < total; ++t)
        for (int d = 0; d < D; ++d)
            c->kv[c->idx[t] * D + d] = to_bf(urand());
    c->qo[0] = c->kvp[0] = 0;
    for (int b = 0; b < bs; ++b) {
        c->qo[b + 1] = c->qo[b] + L;
        c->kvp[b + 1] = c->kvp[b] + P[b];
    }
    mla_gpu_args *a = &c->a;
    a->shape.num_seqs = bs;
    a->shape.num_heads = H;
    a->shape.num_kv_heads = 1;
    a->shape.q_len = L;
    a->shape.num_q_tokens = T;
    a->shape.head_dim = D;
    a->shape.kv_dim = D;
    a->shape.v_head_dim = DV;
    a->shape.v_extend_dim = DV;
    a->shape.is_causal = 1;
    a->shape.sliding_window = -1;
    a->shape.topk = 1;
    a->num_kv_indices = total;
    a->sm_scale = 0.0721688f;
    a->k_scale = 1.f;
    a->v_scale = 1.f;
    a->q = c->q;
    a->q_stride_tok = (int64_t)H * D;
    a->q_stride_head = D;
    a->k_extend = c->ke;
    a->k_stride_tok = D;
    a->k_stride_head = D;
    a->v_extend = c->ve;
    a->v_stride_tok = DV;
    a->v_stride_head = DV;
    a->kv_buffer = c->kv;
    a->kv_stride_slot = D;
    a->kv_stride_head = D;
    a->qo_indptr = c->qo;
    a->kv_indptr = c->kvp;
    a->kv_indices = c->idx;
    a->o = c->o;
    a->o_stride_tok = (int64_t)H * DV;
    a->o_stride_head = DV;
    a->lse = c->lse;
    a->lse_stride_tok = H;

    /* fp64 reference (SPEC section 2, causal, no optional features) */
    int maxk = 0;
    for (int b = 0; b < bs; ++b)
        if (P[b] + L > maxk)
            maxk = P[b] + L;
    double *sc = (double *)malloc(sizeof(double) * maxk);
    for (int b = 0; b < bs; ++b)
        for (int i = 0; i < L; ++i)
            for (int h = 0; h < H; ++h) {
                const int row = c->qo[b] + i;
                const mla_bf16 *qr = c->q + ((long)row * H + h) * D;
                const int nk = P[b] + i + 1;
                double m = -INFINITY;
                for (int k = 0; k < nk; ++k) {
                    const mla_bf16 *kr = k < P[b] ? c->kv + c->idx[c->kvp[b] + k] * D : c->ke + (long)(c->qo[b] + k - P[b]) * D;
                    double dot = 0;
                    for (int d = 0; d < D; ++d)
                        dot += (double)bf(qr[d]) * bf(kr[d]);
                    sc[k] = dot * a->sm_scale;
                    if (sc[k] > m)
                        m = sc[k];
                }
                double sum = 0;
                for (int k = 0; k < nk; ++k)
                    sum += exp(sc[k] - m);
                double *orow = c->ref_o + ((long)row * H + h) * DV;
                for (int d = 0; d < DV; ++d)
                    orow[d] = 0;
                for (int k = 0; k < nk; ++k) {
                    const double w = exp(sc[k] - m) / sum;
                    const mla_bf16 *vr = k < P[b] ? c->kv + c->idx[c->kvp[b] + k] * D : c->ve + (long)(c->qo[b] + k - P[b]) * DV;
                    for (int d = 0; d < DV; ++d)
                        orow[d] += w * bf(vr[d]);
                }
                c->ref_lse[(long)row * H + h] = m + log(sum);
            }
    free(sc);
}

static void free_case(Case *c)
{
    free(c->q);
    free(c->ke);
    free(c->ve);
    free(c->kv);
    free(c->o);
    free(c->lse);
    free(c->qo);
    free(c->kvp);
    free(c->idx);
    free(c->ref_o);
    free(c->ref_lse);
}

/* Worst error per row relative to the row's largest |o|: bf16 partials, P
 * in bf16 and a bf16 output give a few 2^-8 at most (SPEC section 7). */
static double worst(const Case *c, double *lse_err)
{
    const long rows = (long)c->bs * c->L * c->H;
    double w = 0, le = 0;
    for (long r = 0; r < rows; ++r) {
        double mx = 1e-6;
        for (int d = 0; d < DV; ++d)
            if (fabs(c->ref_o[r * DV + d]) > mx)
                mx = fabs(c->ref_o[r * DV + d]);
        for (int d = 0; d < DV; ++d) {
            const double e = fabs(bf(c->o[r * DV + d]) - c->ref_o[r * DV + d]) / mx;
            if (!(e <= w))
                w = isnan(e) ? INFINITY : e;
        }
        const double l = fabs(c->lse[r] - c->ref_lse[r]);
        if (!(l <= le))
            le = isnan(l) ? INFINITY : l;
    }
    *lse_err = le;
    return w;
}

#endif
