// Launcher of the ping-pong stage 1 (kernels/stage1_pp.h; NVIDIA sm_90a
// only, fast_kernel ws-pp).
#include "kernels/stage1_pp.h"
#include "launch.h"

#if defined(MLA_TARGET_NVIDIA)
namespace mla_dev {

hipError_t launch_stage1_pp(const Stage1Params &p, dim3 grid, hipStream_t st)
{
    constexpr int smem = stage1_pp_smem_plan().bytes;
    hipError_t e = hipFuncSetAttribute((const void *)stage1_pp_kernel,
                                       hipFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (e != hipSuccess)
        return e;
    MLA_LAUNCH(grid, 384, smem, st, p, stage1_pp_kernel);
    return hipGetLastError();
}

} // namespace mla_dev
#endif
