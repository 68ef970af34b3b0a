// Device-only translation unit of the AMD compile check (clang -x hip
// -nogpulib -nogpuinc -DMLA_HIP_MINIMAL): every kernel of the AMD build,
// instantiated from the lists of instances.h; no host code (that check has
// no runtime to launch with).
#include "kernels/generic.h"
#include "kernels/stage1_mma.h"
#include "kernels/stage2_merge.h"
#include "instances.h"

namespace mla_dev {
#define MLA_INSTANTIATE_S1(MT, NW, RG, PT, PADK)                                                   \
    template __global__ void stage1_kernel<MT, NW, RG, PT, PADK>(Stage1Params);
MLA_STAGE1_MMA_AMD(MLA_INSTANTIATE_S1)
#undef MLA_INSTANTIATE_S1
#define MLA_INSTANTIATE_S2(PT) template __global__ void stage2_kernel<PT>(Stage2Params);
MLA_STAGE2(MLA_INSTANTIATE_S2)
#undef MLA_INSTANTIATE_S2
} // namespace mla_dev
