/* Between the C API (mla_amd_emu.cpp, not instrumented) and the per-arch
 * kernel TUs (mla_kernels_emu.cpp compiled twice, namespaces mla_emu_gfx942
 * and mla_emu_gfx950). The mla_gpu_args pointers are emulator allocations. */
#ifndef MLA_EMU_INTERNAL_H
#define MLA_EMU_INTERNAL_H

#include "mla/gpu.h"

#include <stddef.h>

struct mla_emu_tier_run {
    const mla_gpu_args *g;
    int tier;        /* MLA_GPU_TIER_FAST, _PERHEAD or _GENERIC */
    int status;      /* mla_emu::Status of the first fault, 0 */
    char msg[1024];  /* the fault, or why nothing ran */
    char what[256];  /* what ran: kernels, grids, LDS bytes */
    int declined;    /* nothing ran: mla_gpu_run declined the arguments (msg says why) */
    int invalid;     /* nothing ran: mla_gpu_run rejected the arguments (msg names the field) */
};

#define MLA_EMU_DECLARE_ARCH(ns)                                                                   \
    namespace ns {                                                                                 \
    void emu_run_tier(mla_emu_tier_run &r);                                                        \
    int emu_fast_rows(int HL);                                                                     \
    long long emu_stage2_smem(int L, int NS, int D);                                               \
    const char *emu_declines(const mla_gpu_args *a, int tier);                                     \
    }
MLA_EMU_DECLARE_ARCH(mla_emu_gfx942)
MLA_EMU_DECLARE_ARCH(mla_emu_gfx950)
#undef MLA_EMU_DECLARE_ARCH

#include "mla_amd_emu.h"
/* mla_amd_emu_run with another build of the kernels (the mutation tests'
 * planted-bug builds); `arch` selects the decline rules and the LDS limit
 * the build was compiled for. */
mla_status mla_amd_emu_run_with(void (*run)(mla_emu_tier_run &), const mla_gpu_args *a, int64_t kv_pool_slots,
                                mla_gpu_tier tier, mla_amd_emu_arch arch, unsigned flags, mla_amd_emu_info *info,
                                mla_error *err);

#endif
