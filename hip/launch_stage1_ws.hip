// Launcher and instantiations of the warp-specialized stage 1
// (kernels/stage1_ws.h; NVIDIA sm_90a only).
#include "kernels/stage1_ws.h"
#include "instances.h"
#include "launch.h"

#if defined(MLA_TARGET_NVIDIA)
namespace mla_dev {

template <bool F8, bool PVSM>
hipError_t launch_stage1_ws(const Stage1Params &p, const Stage1Draft &dr, dim3 grid, hipStream_t st)
{
    constexpr int smem = stage1_ws_smem_plan(WS_ROWS, F8).bytes;
    hipError_t e = hipFuncSetAttribute((const void *)stage1_ws_kernel<F8, PVSM>,
                                       hipFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (e != hipSuccess)
        return e;
    // Two arguments, so not MLA_LAUNCH: this kernel is NVIDIA-only, never
    // built by the emulator that redefines it.
    stage1_ws_kernel<F8, PVSM><<<grid, WS_THREADS, smem, st>>>(p, dr);
    return hipGetLastError();
}

#define MLA_INSTANTIATE(F8, PVSM)                                                                  \
    template hipError_t launch_stage1_ws<F8, PVSM>(const Stage1Params &, const Stage1Draft &, dim3, hipStream_t);
MLA_STAGE1_WS_NVIDIA(MLA_INSTANTIATE)
#undef MLA_INSTANTIATE

} // namespace mla_dev
#endif
