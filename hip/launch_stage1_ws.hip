// Launcher and instantiations of the warp-specialized stage 1
// (kernels/stage1_ws.h; NVIDIA sm_90a only).
#include "kernels/stage1_ws.h"
#include "instances.h"
#include "launch.h"

#if defined(MLA_TARGET_NVIDIA)
#include <cuda.h> // CUtensorMap and its enums (types only: no libcuda link)
#include <string.h>

namespace mla_dev {

// cuTensorMapEncodeTiled, looked up once through the runtime (the library
// does not link the driver API). Null when the driver has none: the kernels
// then gather every tile with cp.async.
typedef CUresult (*EncodeTiledFn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *,
                                  const cuuint64_t *, const cuuint32_t *, const cuuint32_t *, CUtensorMapInterleave,
                                  CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
static EncodeTiledFn encode_tiled()
{
    static const EncodeTiledFn fn = [] {
        void *f = nullptr;
        cudaDriverEntryPointQueryResult q;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q) !=
                cudaSuccess ||
            q != cudaDriverEntryPointSuccess)
            f = nullptr;
        (void)cudaGetLastError(); // a failed lookup leaves no sticky error behind
        return (EncodeTiledFn)f;
    }();
    return fn;
}

// The bf16 pool as a 2-D tensor [WS_TMA_ROWS slots][D columns], row pitch
// kv_ss elements; boxes of 8 rows x 64 columns (128 bytes: one swizzle atom
// wide) in the 128-byte swizzle of the kernel's K/V stages. The launch
// conditions (api.hip: 16-byte aligned pool, slot stride a multiple of 8
// elements, head_dim 576) are TMA's, so a failed encode is a bug: reported.
static hipError_t make_pool_map(const Stage1Params &p, WsTma &tm)
{
    memset(&tm, 0, sizeof tm);
    const EncodeTiledFn enc = encode_tiled();
    if (!enc)
        return hipSuccess;
    static_assert(sizeof(CUtensorMap) == sizeof tm.map, "opaque tensor map size");
    const cuuint64_t dims[2] = {(cuuint64_t)p.D, (cuuint64_t)WS_TMA_ROWS};
    const cuuint64_t pitch[1] = {(cuuint64_t)p.kv_ss * 2};
    const cuuint32_t box[2] = {64, 8}, unit[2] = {1, 1};
    CUtensorMap m;
    if (enc(&m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, (void *)p.kv, dims, pitch, box, unit,
            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS)
        return hipErrorInvalidValue;
    memcpy(tm.map, &m, sizeof m);
    tm.on = 1;
    return hipSuccess;
}

template <int MT, int NPW, bool F8, bool PVG>
hipError_t launch_stage1_ws(const Stage1Params &p, dim3 grid, hipStream_t st)
{
    constexpr int smem = stage1_ws_smem_plan(16 * MT, F8).bytes;
    hipError_t e = hipFuncSetAttribute((const void *)stage1_ws_kernel<MT, NPW, F8, PVG>,
                                       hipFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (e != hipSuccess)
        return e;
    WsTma tm;
    memset(&tm, 0, sizeof tm);
    if (!F8 && !PVG && (e = make_pool_map(p, tm)) != hipSuccess)
        return e;
    stage1_ws_kernel<MT, NPW, F8, PVG><<<grid, (NPW + 4) * 32, smem, st>>>(p, tm);
    return hipGetLastError();
}

#define MLA_INSTANTIATE(MT, NPW, F8, PVG)                                                               \
    template hipError_t launch_stage1_ws<MT, NPW, F8, PVG>(const Stage1Params &, dim3, hipStream_t);
MLA_STAGE1_WS_NVIDIA(MLA_INSTANTIATE)
#undef MLA_INSTANTIATE

} // namespace mla_dev
#endif
