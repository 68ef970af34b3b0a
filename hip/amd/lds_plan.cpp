// The AMD stage-1 LDS plan (hip/config.h AmdStage1Arch and
// amd_stage1_smem_plan) of the arch this is compiled for, one line per
// stage-1 instance of hip/instances.h. Host-compiled by compile_check.sh
// with -D__gfx942__ or -D__gfx950__ (the device pass cannot print); the
// static_asserts of config.h already hold the plan to the arch's LDS.
// Only the plan is needed: hip_minimal.h's device helpers (amdgcn
// builtins) stay out of this host compile.
#define MLA_HIP_MINIMAL_H
#define __host__
#define __device__
#define __forceinline__ inline
static inline float __shfl_xor(float v, int, int) // compat.h's shuffle; never called
{
    return v;
}
#include "config.h"
#include "instances.h"

#include <stdio.h>

namespace mla_dev {

static int report(int mt, int nw, const char *pt)
{
    const AmdStage1Arch a = AMD_ARCH;
    const int rows = 16 * mt;
    const Stage1Smem m = amd_stage1_smem_plan(a, rows, nw);
    const int wg = m.bytes > 0 ? a.lds_limit / m.bytes : 0;
    printf("  stage1_kernel<%d, %d, %s>: %2d rows, %d waves, Q %-12s pitch %d, %d K/V stage(s) of %d tokens: "
           "%7d B of %d (Q %d, K/V %d, S %d, P %d, rows %d); %d workgroup(s), %d waves per CU by LDS\n",
           mt, nw, pt, rows, nw / 2, a.q_regs ? "in registers" : "in LDS", a.qpitch, a.stages, TN, m.bytes, a.lds_limit,
           m.kv - m.q, m.s - m.kv, m.p - m.s, m.al - m.p, m.bytes - m.al, wg, wg * nw / 2);
    return m.bytes <= a.lds_limit ? 0 : 1;
}

} // namespace mla_dev

int main()
{
    using namespace mla_dev;
    int bad = 0;
#define MLA_REPORT(MT, NW, RG, PT, PADK) bad |= report(MT, NW, #PT);
    MLA_STAGE1_MMA_AMD(MLA_REPORT)
#undef MLA_REPORT
    return bad;
}
