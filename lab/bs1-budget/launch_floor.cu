// Launch floor of a bs 1 call on this GPU (issue 13's <= 10 us bar): CUDA-
// graph replays of calls that do (almost) nothing, timed as mla-bench times
// a call (graph of NCALL calls, median of the replays / NCALL). What a call
// of stage 1 + stage 2 costs before any attention work, and what a cold
// dependent load chain adds. A measurement tool, not product code.
//   nvcc -O2 -arch=sm_90a -o launch_floor lab/bs1-budget/launch_floor.cu && ./launch_floor
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <cuda_runtime.h>

#define CK(x)                                                                                  \
    do {                                                                                       \
        cudaError_t e_ = (x);                                                                  \
        if (e_ != cudaSuccess) {                                                               \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

static const int NCALL = 256;

__global__ void k_empty(float *out)
{
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    if (threadIdx.x == 0 && blockIdx.x == 0 && out)
        out[0] = 1.f;
}
__global__ void k_wait(float *out)
{
    asm volatile("griddepcontrol.wait;" ::: "memory");
    if (threadIdx.x == 0 && blockIdx.x == 0 && out)
        out[1] = 2.f;
}
// Each CTA: a slot lookup (one dependent global read), then 72 KB (64
// tokens x 1152 B) from the slot's region into shared memory, then a 64 KB
// partial store: the memory round trips of one bs 1 stage-1 CTA.
__global__ void k_chain(const int *slots, const int4 *pool, int4 *part, size_t pool_n)
{
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    extern __shared__ int4 sm[];
    const int s = slots[blockIdx.x];
    const int4 *src = pool + ((size_t)s * 4608) % (pool_n - 4608);
    // All 12 loads a thread in flight at once (one DRAM round trip), as a
    // cp.async gather has them.
    int4 v[12];
#pragma unroll
    for (int k = 0; k < 12; ++k)
        v[k] = src[threadIdx.x + 384 * k];
#pragma unroll
    for (int k = 0; k < 12; ++k)
        sm[threadIdx.x + 384 * k] = v[k];
    __syncthreads();
    int4 *dst = part + (size_t)blockIdx.x * 4096;
    for (int i = threadIdx.x; i < 4096; i += blockDim.x)
        dst[i] = sm[i];
}

template <typename F>
static double time_graph(cudaStream_t st, F call)
{
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
    for (int i = 0; i < NCALL; ++i)
        call(i);
    CK(cudaStreamEndCapture(st, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    for (int i = 0; i < 3; ++i)
        CK(cudaGraphLaunch(ge, st));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    std::vector<double> t;
    for (int r = 0; r < 21; ++r) {
        CK(cudaEventRecord(e0, st));
        CK(cudaGraphLaunch(ge, st));
        CK(cudaEventRecord(e1, st));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        t.push_back(ms * 1e3 / NCALL);
    }
    CK(cudaGetLastError());
    CK(cudaGraphExecDestroy(ge));
    CK(cudaGraphDestroy(g));
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

// One launch of kernel k(args...), with programmatic dependent launch when
// pdl (the second kernel of a call may then start before the first ends).
template <typename... P, typename... A>
static void launch(cudaStream_t st, void (*k)(P...), int grid, int block, int smem, bool pdl, A... args)
{
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = st;
    cudaLaunchAttribute a[1];
    a[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    a[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = a;
    cfg.numAttrs = pdl ? 1 : 0;
    CK(cudaLaunchKernelEx(&cfg, k, args...));
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--help") && strcmp(argv[1], "-h")) {
        fprintf(stderr, "launch_floor: unknown argument '%s' (see --help)\n", argv[1]);
        return 2;
    }
    if (argc > 1) {
        printf("usage: launch_floor\nPer-call us of CUDA-graph replays (%d calls a graph, median of 21):\n"
               "empty kernels, their shared-memory size, two kernels with and without PDL,\n"
               "and a cold slot -> 72 KB -> 64 KB-store chain per CTA.\n",
               NCALL);
        return 0;
    }
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    float *out;
    CK(cudaMalloc(&out, 64));
    const int big = 200 * 1024;
    CK(cudaFuncSetAttribute(k_empty, cudaFuncAttributeMaxDynamicSharedMemorySize, big));
    CK(cudaFuncSetAttribute(k_wait, cudaFuncAttributeMaxDynamicSharedMemorySize, big));
    CK(cudaFuncSetAttribute(k_chain, cudaFuncAttributeMaxDynamicSharedMemorySize, big));
    printf("one empty kernel 132 x 384, no smem:        %6.2f us\n",
           time_graph(st, [&](int) { launch(st, k_empty, 132, 384, 0, false, out); }));
    printf("one empty kernel 132 x 384, 200 KB smem:    %6.2f us\n",
           time_graph(st, [&](int) { launch(st, k_empty, 132, 384, big, false, out); }));
    printf("one empty kernel 8 x 384, 200 KB smem:      %6.2f us\n",
           time_graph(st, [&](int) { launch(st, k_empty, 8, 384, big, false, out); }));
    printf("empty 132x384 200KB + empty 192x256:        %6.2f us\n", time_graph(st, [&](int) {
               launch(st, k_empty, 132, 384, big, false, out);
               launch(st, k_wait, 192, 256, 0, false, out);
           }));
    printf("  the same, the second PDL:                 %6.2f us\n", time_graph(st, [&](int) {
               launch(st, k_empty, 132, 384, big, false, out);
               launch(st, k_wait, 192, 256, 0, true, out);
           }));
    printf("  the same, both PDL:                       %6.2f us\n", time_graph(st, [&](int) {
               launch(st, k_empty, 132, 384, big, true, out);
               launch(st, k_wait, 192, 256, 0, true, out);
           }));
    // Cold chain: pools rotated over 1 GB so nothing stays in L2.
    const size_t pool_b = (size_t)1 << 30;
    int4 *pool, *part;
    int *slots;
    CK(cudaMalloc(&pool, pool_b));
    CK(cudaMemset(pool, 1, pool_b));
    CK(cudaMalloc(&part, (size_t)132 * 4096 * 16));
    std::vector<int> hs(132 * NCALL);
    for (size_t i = 0; i < hs.size(); ++i)
        hs[i] = (int)((i * 2654435761u) % 200000);
    CK(cudaMalloc(&slots, hs.size() * sizeof(int)));
    CK(cudaMemcpy(slots, hs.data(), hs.size() * sizeof(int), cudaMemcpyHostToDevice));
    const size_t pool_n = pool_b / 16;
    for (int grid : {8, 32, 132}) {
        auto chain = [&](int i) {
            launch(st, k_chain, grid, 384, big, false, (const int *)slots + 132 * i, (const int4 *)pool, part, pool_n);
        };
        printf("chain kernel %3d x 384 (slot, 72 KB, 64 KB): %6.2f us\n", grid, time_graph(st, chain));
        printf("  + empty 192 x 256, PDL:                   %6.2f us\n", time_graph(st, [&](int i) {
                   chain(i);
                   launch(st, k_wait, 192, 256, 0, true, out);
               }));
    }
    CK(cudaDeviceSynchronize());
    return 0;
}
