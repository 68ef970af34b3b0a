// Tensor-memory-accelerator copies (sm_90): one thread moves a whole 2-D box
// of the KV pool into shared memory, 128-byte swizzled as the wgmma
// operands want it, and the bytes complete on an mbarrier. Why: the
// ping-pong stage 1 (kernels/stage1_pp.h) gathered every 64-token block by
// 64 threads x 72 copies of 16 bytes, and its compute warps waited for a
// half to land in 21% of their samples (docs/perf-log.md step 40); where a
// block's 64 slots run contiguously (64-token pages) nine box copies do the
// same (issue 13, lever "pages versus tokens").
#ifndef MLA_DEVICE_TMA_SM90_H
#define MLA_DEVICE_TMA_SM90_H

#include "../config.h"

#if defined(MLA_TARGET_NVIDIA)

namespace mla_dev {

// The pool as a 2-D tensor (columns x slots, bf16) for box copies of 64
// columns x 64 slots (one 8 KB swizzled atom), built on the host per call
// (launch_stage1_pp.hip): `map` holds the driver's opaque CUtensorMap
// bytes; on == 0 when the pool cannot be described (alignment, stride, no
// driver entry point) and every block takes the cp.async gather. A kernel
// argument of its own (__grid_constant__: the copy reads it in place), so
// that Stage1Params keeps its 128 bytes.
struct alignas(64) PoolTmaMap {
    unsigned char map[128];
    int on;
};
constexpr int TMA_BOX_ROWS = 64; // slots per box copy
constexpr int TMA_BOX_COLS = 64; // bf16 columns per box copy: one 128-byte swizzle atom

// Box (col, row) of the tensor `map` (a generic address of a
// __grid_constant__ parameter) into shared address dst (1024-byte aligned
// for the 128-byte swizzle), completing its bytes on mbarrier bar, whose
// expected bytes the caller raised first (mbar_arrive_expect_tx).
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const void *map, int col, int row, uint32_t bar)
{
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)
#ifndef MLA_TMA_NO_EVICT_FIRST
    // The pool's lines marked first to leave L2 (FlashMLA's hint for its K
    // tiles): read once by a CTA (twice with the second row block, at about
    // the same time), so they should not push out what is read again.
    // ws-pp, same-run A/B (docs/perf-log.md step 42): K3 bs 8 / 16k and
    // bs 32 / 4k -3%, bs 32 / 16k -0.6 to -0.8%, DSV3 bs 32 / 16k -0.6 to
    // -2.7%, bs 64 / 16k within -0.3 .. +0.7%. MLA_TMA_NO_EVICT_FIRST:
    // the default policy, for the A/B.
    uint64_t pol;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(pol));
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
                 " [%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(dst),
                 "l"(map), "r"(col), "r"(row), "r"(bar), "l"(pol)
                 : "memory");
#else
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3}], [%4];\n" ::"r"(dst),
                 "l"(map), "r"(col), "r"(row), "r"(bar)
                 : "memory");
#endif
#else
    (void)dst, (void)map, (void)col, (void)row, (void)bar;
#endif
}
// The descriptor into the cache before the first copy needs it.
__device__ __forceinline__ void tma_prefetch_map(const void *map)
{
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)
    asm volatile("prefetch.tensormap [%0];\n" ::"l"(map) : "memory");
#else
    (void)map;
#endif
}
// mbarrier.init visible to the async proxy (the copies' complete_tx).
__device__ __forceinline__ void fence_mbar_init()
{
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

} // namespace mla_dev

#endif // MLA_TARGET_NVIDIA
#endif
