// Launcher and instantiations of the single-role stage 1
// (kernels/stage1_mma.h).
#include "kernels/stage1_mma.h"
#include "instances.h"
#include "launch.h"

namespace mla_dev {

template <int MT, int NW, int RG, typename PT, int PADK>
hipError_t launch_stage1_mma(const Stage1Params &p, dim3 grid, hipStream_t st)
{
#if defined(MLA_TARGET_NVIDIA)
    constexpr int smem = stage1_smem_plan(16 * MT, PADK ? PADK + 8 : DP).bytes;
#else
    constexpr int smem = amd_stage1_smem_plan(AMD_ARCH, 16 * MT, NW).bytes;
#endif
    // Setting a function attribute is no stream operation: legal under
    // graph capture, and cheap enough to repeat.
    hipError_t e = hipFuncSetAttribute((const void *)stage1_kernel<MT, NW, RG, PT, PADK>,
                                       hipFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (e != hipSuccess)
        return e;
    MLA_LAUNCH(grid, NW * 32, smem, st, p, stage1_kernel<MT, NW, RG, PT, PADK>);
    return hipGetLastError();
}

#define MLA_INSTANTIATE(MT, NW, RG, PT, PADK)                                                      \
    template hipError_t launch_stage1_mma<MT, NW, RG, PT, PADK>(const Stage1Params &, dim3,        \
                                                                hipStream_t);
#if defined(MLA_TARGET_NVIDIA)
MLA_STAGE1_MMA_NVIDIA(MLA_INSTANTIATE)
#else
MLA_STAGE1_MMA_AMD(MLA_INSTANTIATE)
#endif
#undef MLA_INSTANTIATE

} // namespace mla_dev
