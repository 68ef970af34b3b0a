// A planted bug in the real AMD kernels (a mutated copy of the hip/ kernel headers
// built for the emulated gfx950, emu/CMakeLists.txt) must be caught: the run
// faults with the expected kind, or its result leaves the accuracy bound.
// Usage: test_emu_mutant missing-barrier|lds-oob|wrong-result
#include "mla_case.h"

#ifndef MLA_EMU_MUT_ARCH
#define MLA_EMU_MUT_ARCH MLA_AMD_EMU_GFX950
#endif
#include "mla_emu/runtime.h"
#include "mla_emu_internal.h"

namespace MLA_EMU_MUT_NS {
void emu_run_tier(mla_emu_tier_run &r);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s missing-barrier|lds-oob|wrong-result\n", argv[0]);
        return 2;
    }
    const char *want = argv[1];
    static const int P[2] = {200, 37};
    Case c;
    make_case(&c, 12, 8, 2, P); // K3: 96 rows as two 64-row blocks, several tiles and splits
    mla_amd_emu_info info;
    mla_error err;
    memset(&err, 0, sizeof err);
    const mla_status st = mla_amd_emu_run_with(MLA_EMU_MUT_NS::emu_run_tier, &c.a, c.slots, MLA_GPU_TIER_FAST,
                                               MLA_EMU_MUT_ARCH, 0, &info, &err);
    double le = 0, w = 0;
    if (st == MLA_OK)
        w = worst(&c, &le);
    printf("mutant %s: status %d, fault %d (%s)%s%s\n", MLA_EMU_MUT_NAME, (int)st, info.fault,
           mla_emu::status_name(info.fault), st == MLA_OK ? "" : ": ", st == MLA_OK ? "" : err.msg);
    if (st == MLA_OK)
        printf("  worst row-relative error %.3g, lse error %.3g\n", w, le);
    int caught = 0;
    // A missing barrier shows as a race when the writing wave ran first, as
    // an uninitialised read when the reading wave did (waves run in order).
    if (!strcmp(want, "missing-barrier"))
        caught = st == MLA_ERR_RUNTIME &&
                 (info.fault == mla_emu::FAULT_LDS_RACE || info.fault == mla_emu::FAULT_LDS_UNINIT);
    else if (!strcmp(want, "lds-oob"))
        caught = st == MLA_ERR_RUNTIME && info.fault == mla_emu::FAULT_LDS_OOB;
    else if (!strcmp(want, "wrong-result"))
        caught = st == MLA_OK && !(w < 0.03 && le < 2e-3);
    CHECK(caught, "mutant %s not caught as %s", MLA_EMU_MUT_NAME, want);
    printf("%s\n", caught ? "caught" : "NOT caught");
    free_case(&c);
    return g_failures ? 1 : 0;
}
