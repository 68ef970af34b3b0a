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
// tool. The program checks its own sums. Not built by CMake; run by hand:
//   nvcc -gencode=arch=compute_90a,code=sm_90a -lineinfo racecheck_arrive.cu -o ra
//   ./ra 0 && compute-sanitizer --tool racecheck ./ra 0 && compute-sanitizer --tool racecheck ./ra 1
#include <cstdio>
#include <cstdlib>

__device__ __forceinline__ void bar_sync(int id, int n)
{
    asm volatile("barrier.sync %0, %1;" ::"r"(id), "r"(n) : "memory");
}
__device__ __forceinline__ void bar_arrive(int id, int n)
{
    asm volatile("barrier.arrive %0, %1;" ::"r"(id), "r"(n) : "memory");
}

__global__ void k(float *out, int n, int mode)
{
    __shared__ float buf[2][128];
    const int tid = threadIdx.x;
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
    const int mode = argc > 1 ? atoi(argv[1]) : 0, n = 6;
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
