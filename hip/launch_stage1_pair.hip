// Launcher of the pair stage 1 (kernels/stage1_pair.h; NVIDIA sm_90a only,
// fast_kernel pair): a cluster of two CTAs per split, NR = 96 or 64 rows.
#include "kernels/stage1_pair.h"
#include "launch.h"

#if defined(MLA_TARGET_NVIDIA)
namespace mla_dev {

template <int NR> hipError_t launch_stage1_pair(const Stage1Params &p, dim3 grid, hipStream_t st)
{
    constexpr int smem = stage1_pair_smem_plan(NR).bytes;
    hipError_t e = hipFuncSetAttribute((const void *)stage1_pair_kernel<NR>,
                                       hipFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (e != hipSuccess)
        return e;
    MLA_LAUNCH(grid, 640, smem, st, p, stage1_pair_kernel<NR>);
    return hipGetLastError();
}
template hipError_t launch_stage1_pair<96>(const Stage1Params &, dim3, hipStream_t);
template hipError_t launch_stage1_pair<64>(const Stage1Params &, dim3, hipStream_t);

} // namespace mla_dev
#endif
