// The generic tier: every feature of SPEC section 2 on CUDA cores.
#ifndef MLA_KERNELS_GENERIC_H
#define MLA_KERNELS_GENERIC_H

#include "../device/bf16.h"
#include "../device/fp8.h"
#include "../device/sync.h"
#include "../params.h"

#ifndef MLA_HIP_MINIMAL
#include <math.h>
#endif

namespace mla_dev {

// ---------------------------------------------------------------------------
// Generic tier: grid (q token, head), 128 threads. Each warp streams every
// fourth visible key with an online softmax in natural log; the four warp
// states merge at the end with the sink term.
// ---------------------------------------------------------------------------
__global__ void __launch_bounds__(128) generic_kernel(GenericParams p)
{
    extern __shared__ __align__(16) unsigned char smem_raw[];
    float *qf = (float *)smem_raw;   // [D]
    float *acc = qf + p.D;           // [4][Dv]
    float *wm = acc + 4 * p.Dv;      // [4]
    float *wl = wm + 4;              // [4]

    const int tok = blockIdx.x, h = blockIdx.y;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    // Sequence of this row: last b with qo_indptr[b] <= tok (skips empty ones).
    int lo = 0, hi = p.num_seqs - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) >> 1;
        if (p.qo_indptr[mid] <= tok)
            lo = mid;
        else
            hi = mid - 1;
    }
    const int b = lo;
    const int q0 = p.qo_indptr[b];
    const int i = tok - q0;
    const int Lb = p.qo_indptr[b + 1] - q0;
    const int kv0 = p.kv_indptr[b];
    const int P = p.kv_indptr[b + 1] - kv0;
    const int kvh = h / (p.H / p.Hkv);

    const bf16_t *qr = p.q + (long long)tok * p.q_st + (long long)h * p.q_sh;
    for (int d = threadIdx.x; d < p.D; d += 128)
        qf[d] = bf2f(qr[d]);
    float *my = acc + warp * p.Dv;
    for (int c = lane; c < p.Dv; c += 32)
        my[c] = 0.f;
    __syncthreads();

    const long long qpos = (long long)P + i;
    float m = -INFINITY, l = 0.f;
    for (int key = warp; key < P + Lb; key += 4) {
        const bf16_t *kr = nullptr, *vr = nullptr;
        const uint8_t *k8 = nullptr; // fp8 prefix row: keys and values decoded per element
        float ks, vs;
        long long pos;
        if (key < P) {
            pos = key;
            const long long off = p.kv_indices[kv0 + key] * p.kv_ss + (long long)kvh * p.kv_sh;
            if (p.kv_fmt != KV_BF16)
                k8 = (const uint8_t *)p.kv + off;
            else
                kr = p.kv + off;
            vr = kr;
            ks = p.k_scale;
            vs = p.v_scale;
        } else {
            const int j = key - P;
            if (p.is_causal && j > i)
                continue;
            pos = (long long)P + j;
            kr = p.k_ext + (long long)(q0 + j) * p.k_st + (long long)kvh * p.k_sh;
            vr = p.v_ext + (long long)(q0 + j) * p.v_st + (long long)kvh * p.v_sh;
            ks = vs = 1.f;
        }
        if (p.sliding_window > 0 && qpos - pos > p.sliding_window)
            continue;
        float dot = 0.f;
        for (int d = lane; d < p.D; d += 32)
            dot += qf[d] * bf2f(k8 ? fp8_to_bf16(k8[d], p.kv_fmt) : kr[d]);
        dot = warp_sum(dot);
        float sc = dot * p.sm_scale * ks;
        if (p.logit_cap > 0.f)
            sc = p.logit_cap * tanhf(sc / p.logit_cap);
        const float m_new = fmaxf(m, sc);
        const float alpha = m == -INFINITY ? 0.f : __expf(m - m_new);
        const float pw = __expf(sc - m_new);
        l = l * alpha + pw;
        const float pv = pw * vs;
        for (int c = lane; c < p.Dv; c += 32)
            my[c] = my[c] * alpha + pv * bf2f(k8 ? fp8_to_bf16(k8[c], p.kv_fmt) : vr[c]);
        m = m_new;
    }
    if (lane == 0) {
        wm[warp] = m;
        wl[warp] = l;
    }
    __syncthreads();

    float M = fmaxf(fmaxf(wm[0], wm[1]), fmaxf(wm[2], wm[3]));
    const bool any = M != -INFINITY;
    // Every score NaN (a NaN query element) leaves M at -inf but l NaN: the
    // row is NaN, lse included, as the reference's (SPEC non-finite policy).
    const bool nanrow = wl[0] != wl[0] || wl[1] != wl[1] || wl[2] != wl[2] || wl[3] != wl[3];
    float sink = -INFINITY;
    if (p.sinks)
        sink = p.sinks[h];
    if (any)
        M = fmaxf(M, sink);
    float wgt[4];
    float den = 0.f;
#pragma unroll
    for (int w = 0; w < 4; ++w) {
        wgt[w] = wm[w] == -INFINITY ? 0.f : __expf(wm[w] - M);
        den += wl[w] * wgt[w];
    }
    if (any && p.sinks)
        den += __expf(sink - M);
    const float inv = any ? 1.f / den : 0.f;
    bf16_t *orow = p.o + (long long)tok * p.o_st + (long long)h * p.o_sh;
    for (int c = threadIdx.x; c < p.Dv; c += 128) {
        float v = 0.f;
#pragma unroll
        for (int w = 0; w < 4; ++w)
            v += acc[w * p.Dv + c] * wgt[w];
        orow[c] = f2bf(v * inv);
    }
    if (threadIdx.x == 0 && p.lse)
        p.lse[(long long)tok * p.lse_st + h] = nanrow ? NAN : any ? M + __logf(den) : -INFINITY;
}

} // namespace mla_dev

#endif
