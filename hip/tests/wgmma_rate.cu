// How fast is the stage-1 producer's S chain on the tensor pipe? Times one
// warpgroup issuing chains of 36 k16 steps (the 576 columns of Q K^T) of
// wgmma m64nNk16 for N = 32 (the shipped 32-token tile) and N = 64 (a
// 64-token tile), A (Q) from shared memory (SS) or, for the first QR steps,
// from registers (RS, as the shipped producer with QR = 32), each chain followed by its
// wait, alone on the SM or beside two warpgroups that keep issuing the PV
// product (m64n256k16 pairs). Prints cycles per chain and the share of the
// SM's tensor peak (4096 bf16 flop per cycle) it reaches, and the cycles the
// warpgroup spends issuing a chain (up to its commit) before it waits. A measurement
// tool, not a check (docs/perf/2026-12-01-ws-pvg.md, "What the tensor pipe gives"): operand values do not
// matter, so shared memory holds a fixed small pattern.
// Built by the cuda preset as build-cuda/hip/wgmma_rate; run it on the
// device (one H200 call of a few seconds).
#include "device/wgmma_sm90.h"
#include <cstdio>
#include <cstdlib>
#include <cstring>

using namespace mla_dev;

#define CHECK(x)                                                                                    \
    do {                                                                                            \
        cudaError_t e_ = (x);                                                                       \
        if (e_ != cudaSuccess) {                                                                    \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));    \
            exit(1);                                                                                \
        }                                                                                           \
    } while (0)

// m64n64k16, A and B K-major 128-byte swizzled in shared memory, or A from
// registers (the m64n32 wrappers of wgmma_sm90.h with 32 accumulators).
template <int SCALE_D>
__device__ __forceinline__ void wg64_ss(float (&d)[32], uint64_t da, uint64_t db)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
                 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,"
                 "%24,%25,%26,%27,%28,%29,%30,%31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
                   "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
                   "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]),
                   "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]),
                   "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "l"(da), "l"(db), "n"(SCALE_D));
}
template <int SCALE_D>
__device__ __forceinline__ void wg64_rs(float (&d)[32], const uint32_t (&a)[4], uint64_t db)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
                 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,"
                 "%24,%25,%26,%27,%28,%29,%30,%31}, {%32,%33,%34,%35}, %36, p, 1, 1, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
                   "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
                   "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]),
                   "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]),
                   "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "n"(SCALE_D));
}

template <int N, int QR>
__device__ __forceinline__ void chain(float (&acc)[N / 2], const uint32_t (&qf)[QR > 0 ? QR : 1][4], uint64_t da, uint64_t db)
{
    wg_fence();
#pragma unroll
    for (int k = 0; k < 36; ++k) {
        if (k > 0) {
            const uint64_t ia = (k & 3) ? 2 : (64 * 128 >> 4) - 6, ib = (k & 3) ? 2 : (N * 128 >> 4) - 6;
            asm volatile("add.s64 %0, %0, %2;\nadd.s64 %1, %1, %3;\n" : "+l"(da), "+l"(db) : "l"(ia), "l"(ib));
        }
        if constexpr (N == 32) {
            if (k < QR)
                k ? wgmma_m64n32k16_rs<1>(acc, qf[k < QR ? k : 0], db) : wgmma_m64n32k16_rs<0>(acc, qf[0], db);
            else
                k ? wgmma_m64n32k16<1>(acc, da, db) : wgmma_m64n32k16<0>(acc, da, db);
        } else {
            if (k < QR)
                k ? wg64_rs<1>(acc, qf[k < QR ? k : 0], db) : wg64_rs<0>(acc, qf[0], db);
            else
                k ? wg64_ss<1>(acc, da, db) : wg64_ss<0>(acc, da, db);
        }
    }
    wg_commit();
}

// Shared memory: A (64 x 576, 72 KB) then B (64 x 576, 72 KB), swizzled
// atoms (the pattern is irrelevant to the timing), then a stop flag.
template <int N, int QR, bool PV>
__global__ void __launch_bounds__(384, 1) rate(long long *cycles, float *sink, int reps)
{
    extern __shared__ __align__(1024) unsigned char sm[];
    const int tid = threadIdx.x;
    for (int i = tid; i < 2 * 64 * 576 / 2; i += blockDim.x)
        ((uint32_t *)sm)[i] = 0x3c003c00u ^ (uint32_t)(i & 0x00ff00ffu);
    volatile int *stop = (volatile int *)(sm + 2 * 64 * 576 * 2);
    if (tid == 0)
        *stop = 0;
    fence_proxy_async();
    __syncthreads();
    const int wg = tid >> 7;
    const uint32_t sa = (uint32_t)__cvta_generic_to_shared(sm), sb = sa + 64 * 576 * 2;
    if (wg == 0) {
        regs_inc<184>();
        uint32_t qf[QR > 0 ? QR : 1][4];
#pragma unroll
        for (int k = 0; k < (QR > 0 ? QR : 1); ++k)
#pragma unroll
            for (int j = 0; j < 4; ++j)
                qf[k][j] = ((const uint32_t *)sm)[(k * 128 + (tid & 127) * 4 + j) & 4095];
        float acc[N / 2];
        chain<N, QR>(acc, qf, wg_desc_sw128(sa), wg_desc_sw128(sb)); // warm-up
        wg_wait<0>();
        long long issue = 0;
        const long long t0 = clock64();
        for (int r = 0; r < reps; ++r) {
            const long long a = clock64();
            chain<N, QR>(acc, qf, wg_desc_sw128(sa), wg_desc_sw128(sb));
            issue += clock64() - a;
            wg_wait<0>();
        }
        const long long t1 = clock64();
        float s = 0.f;
#pragma unroll
        for (int i = 0; i < N / 2; ++i)
            s += acc[i];
        sink[blockIdx.x * 128 + tid] = s;
        if (tid == 0) {
            cycles[blockIdx.x] = (t1 - t0) / reps;
            cycles[256 + blockIdx.x] = issue / reps;
            *stop = 1;
        }
    } else {
        // Released in every variant: setmaxnreg.inc waits until the pool
        // has the registers.
        regs_dec<160>();
        if constexpr (PV) {
            float acc[128];
#pragma unroll
            for (int i = 0; i < 128; ++i)
                acc[i] = 0.f;
            // P (A, K-major) from the first atom of A, V (B, MN-major) from B.
            const uint64_t dp = wg_desc_sw128(sa), dv = wg_desc_mn_sw128(sb + (wg - 1) * 4 * 4096);
            while (!*stop) {
                wg_fence();
                wgmma_m64n256k16_tb(acc, dp, dv);
                wgmma_m64n256k16_tb(acc, dp + 2, dv + (2048 >> 4));
                wg_commit();
                wg_wait<0>();
        }
        float s = 0.f;
#pragma unroll
        for (int i = 0; i < 128; ++i)
            s += acc[i];
        if (s == 12345.f)
            sink[0] = s;
        }
    }
}

template <int N, int QR, bool PV>
static void run(const char *name, int sms, long long *d_cyc, float *d_sink)
{
    const int smem = 2 * 64 * 576 * 2 + 16;
    CHECK(cudaFuncSetAttribute(rate<N, QR, PV>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    const int reps = 200;
    rate<N, QR, PV><<<sms, 384, smem>>>(d_cyc, d_sink, reps);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    long long h[512];
    CHECK(cudaMemcpy(h, d_cyc, 512 * sizeof(long long), cudaMemcpyDeviceToHost));
    double iss = 0;
    for (int i = 0; i < sms; ++i)
        iss += (double)h[256 + i] / sms;
    long long lo = h[0], hi = h[0], sum = 0;
    for (int i = 0; i < sms; ++i) {
        lo = h[i] < lo ? h[i] : lo;
        hi = h[i] > hi ? h[i] : hi;
        sum += h[i];
    }
    const double mean = (double)sum / sms, ideal = 36.0 * 2 * 64 * N * 16 / 4096;
    printf("%-28s cycles/chain mean %7.1f (min %lld, max %lld)  ideal %6.0f  %5.1f%% of peak  "
           "%6.1f cycles per 32 tokens, issuing %6.1f\n",
           name, mean, lo, hi, ideal, 100.0 * ideal / mean, mean * 32 / N, iss);
}

int main(int argc, char **argv)
{
    if (argc > 1) {
        // --help, or anything else: it takes no arguments.
        printf("usage: wgmma_rate\n  times the S chain shapes on every SM (see the header comment)\n");
        return strcmp(argv[1], "--help") && strcmp(argv[1], "-h") ? 2 : 0;
    }
    setvbuf(stdout, nullptr, _IOLBF, 0);
    int sms = 0;
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    if (sms > 256)
        sms = 256;
    long long *d_cyc;
    float *d_sink;
    CHECK(cudaMalloc(&d_cyc, 512 * sizeof(long long)));
    CHECK(cudaMemset(d_cyc, 0, 512 * sizeof(long long)));
    CHECK(cudaMalloc(&d_sink, 256 * 128 * sizeof(float)));
    run<32, 0, false>("n32 SS alone", sms, d_cyc, d_sink);
    run<32, 32, false>("n32 RS(32) alone", sms, d_cyc, d_sink);
    run<64, 0, false>("n64 SS alone", sms, d_cyc, d_sink);
    run<64, 24, false>("n64 RS(24) alone", sms, d_cyc, d_sink);
    run<32, 0, true>("n32 SS beside PV", sms, d_cyc, d_sink);
    // The register-A chains beside PV are left out: the first of them (n32,
    // 32 register steps) stopped with "an illegal instruction was
    // encountered" on the H200 (2026-12-01), not diagnosed.
    run<64, 0, true>("n64 SS beside PV", sms, d_cyc, d_sink);
    CHECK(cudaFree(d_cyc));
    CHECK(cudaFree(d_sink));
    return 0;
}
