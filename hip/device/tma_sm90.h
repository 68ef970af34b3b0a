// Tensor-memory-accelerator copies (cp.async.bulk.tensor, sm_90) and the
// shared-memory mbarriers that count their bytes. NVIDIA only: the
// warp-specialized stage 1 copies runs of contiguous pool slots with them
// (stage1_ws.h); the descriptor is encoded on the host (launch_stage1_ws.hip).
#ifndef MLA_DEVICE_TMA_SM90_H
#define MLA_DEVICE_TMA_SM90_H

#include "../config.h"

#if defined(MLA_TARGET_NVIDIA)

namespace mla_dev {

// The pool's tensor map (an opaque 128-byte CUtensorMap, 64-byte aligned as
// the driver requires) and whether the host could make one. Passed by value
// as a __grid_constant__ kernel parameter: TMA reads the descriptor from
// the parameter space, and a CUDA graph captures it with the launch.
struct alignas(64) WsTma {
    unsigned long long map[16];
    int on;
};

__device__ __forceinline__ void mbar_init(uint32_t bar, int count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
// The inits visible to the async proxy (TMA completes on the barriers).
__device__ __forceinline__ void mbar_fence_init()
{
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// One arrival, and `bytes` more expected from copies in this phase.
__device__ __forceinline__ void mbar_arrive_tx(uint32_t bar, uint32_t bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
// Until the phase of parity `par` has completed.
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t par)
{
    asm volatile("{\n"
                 ".reg .pred done;\n"
                 "WAIT_%=:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
                 "@!done bra WAIT_%=;\n"
                 "}\n" ::"r"(bar),
                 "r"(par)
                 : "memory");
}
// Box (c0 = column, c1 = row) of the 2-D tensor map into shared memory at
// dst, completing its bytes on mbarrier bar.
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const void *map, int c0, int c1, uint32_t bar)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3}], [%4];\n" ::"r"(dst),
                 "l"(map), "r"(c0), "r"(c1), "r"(bar)
                 : "memory");
}

} // namespace mla_dev

#endif // MLA_TARGET_NVIDIA
#endif
