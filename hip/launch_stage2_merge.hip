// Launcher and instantiations of stage 2 (kernels/stage2_merge.h).
#include "kernels/stage2_merge.h"
#include "instances.h"
#include "launch.h"

namespace mla_dev {

template <typename PT>
hipError_t launch_stage2(const Stage2Params &p, int bs, hipStream_t st, bool pdl)
{
    const int smem = (int)stage2_smem(p.L, p.max_pieces, p.D, p.cw);
    hipError_t e = hipFuncSetAttribute((const void *)stage2_kernel<PT>,
                                       hipFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (e != hipSuccess)
        return e;
#if defined(MLA_TARGET_NVIDIA)
    // Same L1/shared split as stage 1 (which needs the maximum): an SM then
    // need not drain and reconfigure between the two kernels.
    e = cudaFuncSetAttribute((const void *)stage2_kernel<PT>,
                             cudaFuncAttributePreferredSharedMemoryCarveout, 100);
    if (e != hipSuccess)
        return e;
#endif
    dim3 grid(p.H, p.Dv / p.cw, bs);
#if defined(MLA_TARGET_NVIDIA)
    if (pdl) {
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = grid;
        cfg.blockDim = dim3(S2_THREADS, 1, 1);
        cfg.dynamicSmemBytes = smem;
        cfg.stream = st;
        cudaLaunchAttribute attr[1];
        attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr[0].val.programmaticStreamSerializationAllowed = 1;
        cfg.attrs = attr;
        cfg.numAttrs = 1;
        e = cudaLaunchKernelEx(&cfg, stage2_kernel<PT>, p);
        if (e != hipSuccess)
            return e;
        return hipGetLastError();
    }
#else
    (void)pdl;
#endif
    MLA_LAUNCH(grid, S2_THREADS, smem, st, p, stage2_kernel<PT>);
    return hipGetLastError();
}

#define MLA_INSTANTIATE(PT)                                                                        \
    template hipError_t launch_stage2<PT>(const Stage2Params &, int, hipStream_t, bool);
MLA_STAGE2(MLA_INSTANTIATE)
#undef MLA_INSTANTIATE

} // namespace mla_dev
