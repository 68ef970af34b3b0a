// Thread-block clusters (sm_90): the rank of a CTA in its cluster, the
// shared-memory address of the same variable in the other CTA (DSMEM),
// stores and mbarrier arrivals there, and the cluster-wide barrier. The
// pair stage 1 (kernels/stage1_pair.h) splits one split's work over two
// CTAs that exchange partial scores and probabilities this way.
#ifndef MLA_DEVICE_CLUSTER_SM90_H
#define MLA_DEVICE_CLUSTER_SM90_H

#include "../config.h"

#if defined(MLA_TARGET_NVIDIA)

namespace mla_dev {

#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)
#define MLA_HAVE_CLUSTER 1
#endif

__device__ __forceinline__ uint32_t cluster_rank()
{
    uint32_t r = 0;
#if defined(MLA_HAVE_CLUSTER)
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
#endif
    return r;
}
// The shared::cluster address of local shared address `s` in CTA `rank`.
__device__ __forceinline__ uint32_t cluster_map(uint32_t s, uint32_t rank)
{
    uint32_t r = s;
#if defined(MLA_HAVE_CLUSTER)
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(s), "r"(rank));
#endif
    return r;
}
// Why data crosses CTAs only through st.async: a release.cluster arrival
// compiles to MEMBAR.ALL.GPU and an acquire.cluster wait to an L1
// invalidation (CCTL.IVALL); in the pair kernel's first form those took
// 40% of the stall samples (docs/perf-log.md step 37). st.async writes the
// other CTA's shared memory and counts its bytes on that CTA's mbarrier
// (complete_tx), whose local waiters then see the data at CTA scope.
// A store into the other CTA's shared memory (a shared::cluster address)
// whose 16 bytes complete_tx on that CTA's mbarrier `bar` (also a
// shared::cluster address). st.async is a generic-proxy write: a wgmma
// reader needs fence.proxy.async after its wait.
__device__ __forceinline__ void st_async_v4(uint32_t a, uint4 v, uint32_t bar)
{
#if defined(MLA_HAVE_CLUSTER)
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], {%1, %2, %3, %4}, [%5];\n" ::"r"(a),
                 "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w), "r"(bar)
                 : "memory");
#endif
}
__device__ __forceinline__ void st_async_f(uint32_t a, float x, uint32_t bar)
{
#if defined(MLA_HAVE_CLUSTER)
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];\n" ::"r"(a),
                 "r"(__float_as_uint(x)), "r"(bar)
                 : "memory");
#endif
}
// An arrival that also expects `bytes` of st.async (or bulk-copy) data on a
// local mbarrier: the phase completes when every arrival is in and the
// bytes have landed, in either order.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes)
{
#if defined(MLA_HAVE_CLUSTER)
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
#endif
}
// A bare signal on the other CTA's mbarrier (a shared::cluster address),
// default semantics: it carries no data, only "done reading" (the reads it
// follows, wgmma operand reads, retired at the warpgroup's wait).
__device__ __forceinline__ void mbar_arrive_remote(uint32_t a)
{
#if defined(MLA_HAVE_CLUSTER)
    asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(a) : "memory");
#endif
}
// mbarrier.init visible to the other CTA's arrivals.
__device__ __forceinline__ void fence_mbar_init_cluster()
{
#if defined(MLA_HAVE_CLUSTER)
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}
// Every thread of both CTAs (the non-.aligned forms: callers may diverge).
__device__ __forceinline__ void cluster_sync_all()
{
#if defined(MLA_HAVE_CLUSTER)
    asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
#endif
}
// stmatrix x4, transposed: four 8 x 8 bf16 tiles, each lane's register i
// holding (row lane / 4, columns 2 (lane % 4), + 1) of tile i, stored so
// that the row address lane 8 i + c gives takes column c of tile i.
__device__ __forceinline__ void stsm_x4_t(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3)
{
#if defined(MLA_HAVE_CLUSTER)
    asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr),
                 "r"(r0), "r"(r1), "r"(r2), "r"(r3)
                 : "memory");
#endif
}

// The same for two tiles (registers 0 and 1; lanes 0-15 give the rows).
__device__ __forceinline__ void stsm_x2_t(uint32_t addr, uint32_t r0, uint32_t r1)
{
#if defined(MLA_HAVE_CLUSTER)
    asm volatile("stmatrix.sync.aligned.m8n8.x2.trans.shared.b16 [%0], {%1, %2};\n" ::"r"(addr), "r"(r0), "r"(r1)
                 : "memory");
#endif
}

} // namespace mla_dev

#endif // MLA_TARGET_NVIDIA
#endif
