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
__device__ __forceinline__ void st_cluster_f2(uint32_t a, float x, float y)
{
#if defined(MLA_HAVE_CLUSTER)
    asm volatile("st.shared::cluster.v2.f32 [%0], {%1, %2};\n" ::"r"(a), "f"(x), "f"(y) : "memory");
#endif
}
__device__ __forceinline__ void st_cluster_f(uint32_t a, float x)
{
#if defined(MLA_HAVE_CLUSTER)
    asm volatile("st.shared::cluster.f32 [%0], %1;\n" ::"r"(a), "f"(x) : "memory");
#endif
}
__device__ __forceinline__ void st_cluster_v4(uint32_t a, uint4 v)
{
#if defined(MLA_HAVE_CLUSTER)
    asm volatile("st.shared::cluster.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(a), "r"(v.x), "r"(v.y),
                 "r"(v.z), "r"(v.w)
                 : "memory");
#endif
}
// Arrival on an mbarrier of the other CTA (a shared::cluster address),
// releasing this thread's earlier writes at cluster scope.
__device__ __forceinline__ void mbar_arrive_remote(uint32_t a)
{
#if defined(MLA_HAVE_CLUSTER)
    asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(a) : "memory");
#endif
}
// Wait on a local mbarrier whose arrivals may come from the other CTA:
// acquire at cluster scope.
__device__ __forceinline__ void mbar_wait_cluster(uint32_t bar, uint32_t parity)
{
#if defined(MLA_HAVE_CLUSTER)
    asm volatile("{\n.reg .pred p;\nWAIT:\n"
                 "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%0], %1;\n"
                 "@!p bra WAIT;\n}\n" ::"r"(bar),
                 "r"(parity)
                 : "memory");
#endif
}
// Generic-proxy writes (this thread's, any state space) before async-proxy
// reads (the other CTA's wgmma).
__device__ __forceinline__ void fence_proxy_async_all()
{
#if defined(MLA_HAVE_CLUSTER)
    asm volatile("fence.proxy.async;\n" ::: "memory");
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

} // namespace mla_dev

#endif // MLA_TARGET_NVIDIA
#endif
