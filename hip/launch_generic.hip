// Launcher of the generic tier's kernel (kernels/generic.h).
#include "kernels/generic.h"
#include "launch.h"

namespace mla_dev {

hipError_t launch_generic(const GenericParams &p, unsigned num_tokens, hipStream_t st)
{
    const int smem = generic_smem(p.D, p.Dv);
    hipError_t e = hipFuncSetAttribute((const void *)generic_kernel,
                                       hipFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (e != hipSuccess)
        return e;
    dim3 grid(num_tokens, p.H, 1);
    MLA_LAUNCH(grid, 128, smem, st, p, generic_kernel);
    return hipGetLastError();
}

} // namespace mla_dev
