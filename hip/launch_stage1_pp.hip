// Launcher of the ping-pong stage 1 (kernels/stage1_pp.h; NVIDIA sm_90a
// only, fast_kernel ws-pp), and the pool's tensor map for its box copies.
#include "kernels/stage1_pp.h"
#include "launch.h"

#if defined(MLA_TARGET_NVIDIA)
#include <cuda.h>
#include <cudaTypedefs.h>
#include <stdint.h>
#include <string.h>

namespace mla_dev {

static_assert(sizeof(CUtensorMap) == sizeof(PoolTmaMap::map), "PoolTmaMap holds one CUtensorMap");

// The driver's encoder through the runtime (no libcuda link), looked up
// once; null where the driver lacks it.
static PFN_cuTensorMapEncodeTiled_v12000 tma_encoder()
{
    static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
        void *f = nullptr;
        cudaDriverEntryPointQueryResult q;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q) !=
                cudaSuccess ||
            q != cudaDriverEntryPointSuccess) {
            (void)cudaGetLastError(); // not the launch's error: the gather does without
            f = nullptr;
        }
        return (PFN_cuTensorMapEncodeTiled_v12000)f;
    }();
    return fn;
}

// The bf16 pool as columns x slots for 64 x 64 box copies, 128-byte
// swizzled like the gather's atoms. The slot extent is not an argument of
// the call; every row a copy names is a slot that kv_indices lists (the
// gather reads the same rows), so the map claims INT32_MAX slots, the
// largest row a copy's coordinate can hold (pp_block_run checks it). on 0:
// the gather takes every block.
static PoolTmaMap pool_tma_map(const Stage1Params &p)
{
    PoolTmaMap m;
    memset(&m, 0, sizeof m);
    const uint64_t pitch = (uint64_t)p.kv_ss * 2;
    if (p.kv_fmt != KV_BF16 || p.D != D_MAX || ((uintptr_t)p.kv & 15) != 0 || (pitch & 15) != 0 ||
        pitch < (uint64_t)p.D * 2 || pitch >= (1ull << 40))
        return m;
    const PFN_cuTensorMapEncodeTiled_v12000 enc = tma_encoder();
    if (!enc)
        return m;
    CUtensorMap t;
    cuuint64_t dims[2] = {(cuuint64_t)p.D, (cuuint64_t)INT32_MAX};
    cuuint64_t strides[1] = {pitch};
    cuuint32_t box[2] = {TMA_BOX_COLS, TMA_BOX_ROWS};
    cuuint32_t estride[2] = {1, 1};
    if (enc(&t, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, (void *)p.kv, dims, strides, box, estride,
            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS)
        return m;
    memcpy(m.map, &t, sizeof t);
    m.on = 1;
    return m;
}

hipError_t launch_stage1_pp(const Stage1Params &p, dim3 grid, hipStream_t st)
{
    constexpr int smem = stage1_pp_smem_plan().bytes;
    hipError_t e = hipFuncSetAttribute((const void *)stage1_pp_kernel,
                                       hipFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (e != hipSuccess)
        return e;
    PoolTmaMap tm = pool_tma_map(p);
#ifdef MLA_PP_NO_TMA
    tm.on = 0; // A/B switch: the per-line gather for every block
#endif
    stage1_pp_kernel<<<grid, 384, smem, st>>>(p, tm);
    return hipGetLastError();
}

} // namespace mla_dev
#endif
