// Does compute-sanitizer racecheck model barrier.arrive? The question behind
// double-buffered hand-overs in stage1_ws_kernel (docs/perf-log.md, step 26:
// a second score buffer needs a signalling side that does not wait, while
// every barrier of the kernel is a bar.sync on both sides because racecheck
// reported false hazards for a subset barrier, racecheck_subset_barrier.cu).
// Four producer warps fill one of two buffers and arrive at FULL[b]; eight
// consumer warps sync on FULL[b], read, and arrive at FREE[b]; the producer
// syncs on FREE[b] before refilling buffer b two tiles later. Mode 0 is that
// correct protocol; mode 1 adds a real race (the producer writes buffer b
// again after its FULL arrival), so that a clean mode 0 is not a blind
// tool. Modes 2 and 3: the same with mbarriers (arrive, try_wait.parity)
// instead of named barriers. The program checks its own sums. Not built by
// CMake; run by hand:
//   nvcc -gencode=arch=compute_90a,code=sm_90a -lineinfo racecheck_arrive.cu -o ra
//   for m in 0 1 2 3; do ./ra $m; compute-sanitizer --tool racecheck ./ra $m; done
// Measured 2026-12-01 (H200, compute-sanitizer 2025.3.1): every mode's sums
// right; racecheck reports hazards in mode 0 (the correct named-barrier
// protocol: it does not model barrier.arrive's ordering; the counts differ
// between runs) and in mode 1, none in mode 2, and hazards in mode 3. So a
// hand-over whose signalling side must not wait can use mbarriers and keep
// racecheck clean; arrive-only named barriers cannot.
#include <cstdio>
#include <cstdlib>
#include <cstring>

__device__ __forceinline__ void bar_sync(int id, int n)
{
    asm volatile("barrier.sync %0, %1;" ::"r"(id), "r"(n) : "memory");
}
__device__ __forceinline__ void bar_arrive(int id, int n)
{
    asm volatile("barrier.arrive %0, %1;" ::"r"(id), "r"(n) : "memory");
}

__device__ __forceinline__ unsigned saddr(const void *p)
{
    return (unsigned)__cvta_generic_to_shared(p);
}
__device__ __forceinline__ void mb_arrive(unsigned long long *bar)
{
    asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.shared::cta.b64 st, [%0];\n}" ::"r"(saddr(bar)) : "memory");
}
__device__ __forceinline__ void mb_wait(unsigned long long *bar, int parity)
{
    asm volatile("{\n.reg .pred p;\nWAIT:\nmbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n@!p bra WAIT;\n}" ::"r"(
                     saddr(bar)),
                 "r"(parity)
                 : "memory");
}

__global__ void k(float *out, int n, int mode)
{
    __shared__ float buf[2][128];
    __shared__ unsigned long long full[2], free_[2];
    const int tid = threadIdx.x;
    if (mode >= 2) {
        if (tid == 0)
            for (int b = 0; b < 2; ++b) {
                asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(saddr(&full[b])), "r"(128));
                asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(saddr(&free_[b])), "r"(256));
            }
        __syncthreads();
        if (tid < 128) {
            for (int t = 0; t < n; ++t) {
                const int b = t & 1;
                if (t >= 2)
                    mb_wait(&free_[b], ((t >> 1) - 1) & 1);
                buf[b][tid] = (float)(t + tid);
                mb_arrive(&full[b]);
                if (mode == 3)
                    ((volatile float *)buf[b])[tid] = (float)(t + tid); // the race
            }
        } else {
            float acc = 0.f;
            for (int t = 0; t < n; ++t) {
                const int b = t & 1;
                mb_wait(&full[b], (t >> 1) & 1);
                acc += buf[b][(tid * 4) & 127];
                mb_arrive(&free_[b]);
            }
            out[tid] = acc;
        }
        return;
    }
    if (tid < 128) {
        for (int t = 0; t < n; ++t) {
            const int b = t & 1;
            if (t >= 2)
                bar_sync(4 + b, 384); // FREE[b]: tile t - 2 read
            buf[b][tid] = (float)(t + tid);
            bar_arrive(2 + b, 384); // FULL[b]
            if (mode == 1)
                ((volatile float *)buf[b])[tid] = (float)(t + tid); // the race: a write after the signal
        }
        for (int t = n >= 2 ? n - 2 : 0; t < n; ++t)
            bar_sync(4 + (t & 1), 384); // the last two releases
    } else {
        float acc = 0.f;
        for (int t = 0; t < n; ++t) {
            const int b = t & 1;
            bar_sync(2 + b, 384);
            acc += buf[b][(tid * 4) & 127];
            bar_arrive(4 + b, 384);
        }
        out[tid] = acc;
    }
}

int main(int argc, char **argv)
{
    // One argument, the mode 0-3 (see the top of the file); 0 without one.
    const char *m = argc > 1 ? argv[1] : "0";
    if (argc > 2 || m[0] < '0' || m[0] > '3' || m[1] != '\0') {
        const bool help = !strcmp(m, "--help") || !strcmp(m, "-h");
        fprintf(help ? stdout : stderr,
                "usage: %s [MODE]\n  MODE 0: named barriers, barrier.arrive signalling (correct)\n"
                "  1: the same with a race planted\n  2: mbarriers (correct)\n  3: mbarriers with a race planted\n",
                argv[0]);
        return help ? 0 : 2;
    }
    const int mode = m[0] - '0', n = 6;
    float *d = nullptr, h[384];
    if (cudaMalloc(&d, sizeof h) != cudaSuccess)
        return 2;
    k<<<1, 384>>>(d, n, mode);
    if (cudaGetLastError() != cudaSuccess || cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost) != cudaSuccess) {
        printf("mode %d: CUDA error\n", mode);
        return 2;
    }
    int bad = 0;
    for (int tid = 128; tid < 384; ++tid) {
        float want = 0.f;
        for (int t = 0; t < n; ++t)
            want += (float)(t + ((tid * 4) & 127));
        bad += h[tid] != want;
    }
    printf("mode %d: %d of 256 consumer sums wrong\n", mode, bad);
    return bad != 0;
}
