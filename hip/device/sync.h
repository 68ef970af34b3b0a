// Warp reductions, programmatic dependent launch and named barriers.
#ifndef MLA_DEVICE_SYNC_H
#define MLA_DEVICE_SYNC_H

#include "../config.h"

namespace mla_dev {

__device__ __forceinline__ float warp_sum(float v)
{
    for (int off = 16; off > 0; off >>= 1)
        v += mla_shfl_xor(v, off, 32);
    return v;
}
__device__ __forceinline__ float warp_max(float v)
{
    for (int off = 16; off > 0; off >>= 1)
        v = fmaxf(v, mla_shfl_xor(v, off, 32));
    return v;
}

// Programmatic dependent launch (sm_90): stage 1 lets stage 2 start early;
// stage 2 stages its inputs and computes the draft scores, then waits for
// stage 1's partials. Without a PDL launch the wait returns at once, and on
// other targets both are no-ops.
__device__ __forceinline__ void pdl_launch_dependents()
{
#if defined(MLA_TARGET_NVIDIA) && defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_wait()
{
#if defined(MLA_TARGET_NVIDIA) && defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

#if defined(MLA_TARGET_NVIDIA)
// Named barrier over n threads that reach it at different instructions
// (producer and PV code): barrier.sync without .aligned. The .aligned forms
// (bar.sync, __syncthreads) require every participating thread of the CTA
// at the same instruction; compute-sanitizer synccheck reports "divergent
// threads in block" for them here, and racecheck hazards across them. The
// __syncwarp reconverges the warp after lane-divergent code for the
// .aligned wgmma instructions that follow.
__device__ __forceinline__ void nbar_sync(int id, int n)
{
    __syncwarp();
    asm volatile("barrier.sync %0, %1;\n" ::"r"(id), "r"(n) : "memory");
}
// mbarriers (shared-memory addresses): hand-overs whose signalling side
// must not wait. compute-sanitizer racecheck models them; it reports false
// hazards for the barrier.arrive form of named barriers (the reproducer is
// at the tag kernels-before-house2, docs/perf/2026-12-01-ws-pvg.md, "Tried
// and not kept"). Phase k of a barrier completes after `count` arrivals; a waiter
// names it by parity, so a barrier must never run two phases ahead of its
// waiters.
__device__ __forceinline__ void mbar_init(uint32_t bar, int count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar)
{
    asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.shared::cta.b64 st, [%0];\n}\n" ::"r"(bar) : "memory");
}
// The __syncwarp reconverges the warp for .aligned instructions after it.
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity)
{
    asm volatile("{\n.reg .pred p;\nWAIT:\nmbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n@!p bra WAIT;\n}\n" ::"r"(
                     bar),
                 "r"(parity)
                 : "memory");
    __syncwarp();
}
#endif

} // namespace mla_dev

#endif
