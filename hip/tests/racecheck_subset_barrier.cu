// Reproducer for a compute-sanitizer racecheck report on a correct
// program (compute-sanitizer 2025.3.1, H200, nvcc 13.0), kept as evidence
// for the barrier layout of stage1_ws_kernel (kernels/stage1_ws.h; BAR_* in
// config.h).
// Four producer warps hand a buffer to eight consumer warps through two
// named barriers over all 384 threads (FULL, FREE: PTX barrier.sync orders
// the accesses). Mode 0: racecheck reports 0 hazards. Mode 1 adds one
// barrier among the producer's 128 threads per iteration, which changes no
// ordering between producer and consumers, and racecheck reports RAW
// hazards on the buffer. Not built by CMake; run by hand:
//   nvcc -gencode=arch=compute_90a,code=sm_90a -lineinfo racecheck_subset_barrier.cu -o rs
//   compute-sanitizer --tool racecheck ./rs 0   # 0 hazards
//   compute-sanitizer --tool racecheck ./rs 1   # 5 hazards (measured 2026-11-29)
#include <cstdio>
__device__ __forceinline__ void nb(int id, int n) { __syncwarp(); asm volatile("barrier.sync %0, %1;" :: "r"(id), "r"(n) : "memory"); }
__global__ void k(float *out, int n, int mode)
{
    __shared__ float Al[128];
    const int tid = threadIdx.x;
    float acc = 0.f;
    if (tid < 128) {
        for (int t = 0; t < n; ++t) {
            if (mode) nb(1, 128);
            if (t > 0) nb(3, 384);
            if ((tid & 3) == 0) Al[tid] = t + tid;
            nb(2, 384);
        }
        if (n > 0) nb(3, 384);
    } else {
        for (int t = 0; t < n; ++t) {
            nb(2, 384);
            acc += Al[(tid * 4) & 127];
            nb(3, 384);
        }
        out[tid] = acc;
    }
}
int main(int argc, char **argv)
{
    float *d; cudaMalloc(&d, 384 * 4);
    const int m = argc > 1 ? argv[1][0] - 48 : 0;
    k<<<1, 384>>>(d, 5, m);
    float h[384]; cudaMemcpy(h, d, 384 * 4, cudaMemcpyDeviceToHost);
    printf("nb3: %g rc %d\n", h[200], (int)cudaGetLastError());
    return 0;
}
