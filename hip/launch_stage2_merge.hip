// Launchers and instantiations of stage 2 and of the draft block's kernel
// (kernels/stage2_merge.h).
#include "kernels/stage2_merge.h"
#include "instances.h"
#include "launch.h"

namespace mla_dev {

static hipError_t s2_attributes(const void *kernel, int smem)
{
    hipError_t e = hipFuncSetAttribute(kernel, hipFuncAttributeMaxDynamicSharedMemorySize, smem);
#if defined(MLA_TARGET_NVIDIA)
    // Same L1/shared split as stage 1 (which needs the maximum): an SM then
    // need not drain and reconfigure between the kernels.
    if (e == hipSuccess)
        e = cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, 100);
#endif
    return e;
}

#if defined(MLA_TARGET_NVIDIA)
// Programmatic dependent launch: the kernel may start once every block of
// the kernel before it has called griddepcontrol.launch_dependents.
static hipError_t launch_pdl(void (*kernel)(Stage2Params), dim3 grid, int threads, int smem,
                             hipStream_t st, const Stage2Params &p)
{
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = dim3(threads, 1, 1);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = st;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    const hipError_t e = cudaLaunchKernelEx(&cfg, kernel, p);
    return e != hipSuccess ? e : hipGetLastError();
}
#endif

template <typename PT, bool SEP>
hipError_t launch_stage2(const Stage2Params &p, int bs, hipStream_t st, bool pdl)
{
    const int smem = (int)stage2_smem(p.L, p.num_splits, p.D, p.cw, SEP);
    const dim3 grid(p.H, p.Dv / p.cw, bs);
    const hipError_t e = s2_attributes((const void *)stage2_kernel<PT, SEP>, smem);
    if (e != hipSuccess)
        return e;
#if defined(MLA_TARGET_NVIDIA)
    if (pdl)
        return launch_pdl(stage2_kernel<PT, SEP>, grid, S2_THREADS, smem, st, p);
#else
    (void)pdl;
#endif
    MLA_LAUNCH(grid, S2_THREADS, smem, st, p, stage2_kernel<PT, SEP>);
    return hipGetLastError();
}

hipError_t launch_draft(const Stage2Params &p, int blocks, hipStream_t st, bool pdl)
{
    const int smem = (int)draft_smem(p.L, p.D, p.Dv);
    const dim3 grid(blocks, 1, 1);
    const hipError_t e = s2_attributes((const void *)draft_kernel, smem);
    if (e != hipSuccess)
        return e;
#if defined(MLA_TARGET_NVIDIA)
    if (pdl)
        return launch_pdl(draft_kernel, grid, draft_threads(p.L), smem, st, p);
#else
    (void)pdl;
#endif
    MLA_LAUNCH(grid, draft_threads(p.L), smem, st, p, draft_kernel);
    return hipGetLastError();
}

#define MLA_INSTANTIATE(PT, SEP)                                                                   \
    template hipError_t launch_stage2<PT, SEP>(const Stage2Params &, int, hipStream_t, bool);
MLA_STAGE2(MLA_INSTANTIATE)
#undef MLA_INSTANTIATE

} // namespace mla_dev
