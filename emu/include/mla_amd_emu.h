/* Run the AMD GPU tiers under the wave64 emulator (emu/README.md): the
 * AMD kernels (the hip/kernels headers) built for an emulated gfx942 or gfx950,
 * every global and LDS access checked. For the validator's backends
 * amd-gfx942-emu and amd-gfx950-emu. Not thread-safe: one call at a time
 * per process (the emulator runs workgroups on the calling thread). */
#ifndef MLA_AMD_EMU_H
#define MLA_AMD_EMU_H

#include "mla/fixture.h"
#include "mla/gpu.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { MLA_AMD_EMU_GFX942 = 942, MLA_AMD_EMU_GFX950 = 950 } mla_amd_emu_arch;

/* Flags. A launch over the arch's LDS (64 KiB gfx942, 160 KiB gfx950)
 * always fails as on the hardware: the kernels' plans (hip/config.h) fit,
 * and no flag lifts the limit (the C++ runtime's set_lds_limit_override is
 * for the emulator's own tests). */
/* Test only (a planted fault for the validator's fault path): the KV pool
 * is declared to end one slot before the highest slot the indices name, so
 * the gather of that slot is an out-of-bounds global load. Backend entry
 * point only. */
#define MLA_AMD_EMU_SHORT_POOL 2u

typedef struct {
    mla_gpu_tier ran; /* the tier that ran (AUTO resolves as mla_gpu_run does) */
    int fault;        /* 0, or the emulator's fault code (mla_emu::Status) */
    char launches[256]; /* kernels, grids, block sizes, LDS bytes of the run */
} mla_amd_emu_info;

/* `a` is mla_gpu_run's argument block with HOST pointers (inputs read,
 * o / lse written); kv_pool_slots is the first dimension of kv_buffer (the
 * emulator checks every access against each tensor's extent, so it needs
 * them all). Inputs are copied into read-only emulator buffers, outputs into
 * NaN-poisoned ones, partials into buffers whose unwritten bytes fault when
 * read. Returns:
 *   MLA_OK            ran; o (and lse if not NULL) written
 *   MLA_ERR_DECLINED  the tier declines these arguments (reason in err),
 *                     nothing written
 *   MLA_ERR_INVALID   bad arguments
 *   MLA_ERR_RUNTIME   the emulated kernel faulted (out-of-bounds global or
 *                     LDS access, LDS race or uninitialised read, barrier
 *                     divergence, ...) or the launch would fail on the
 *                     hardware (LDS over the limit): err names the fault
 *                     with workgroup, work-item and address; nothing written */
mla_status mla_amd_emu_run(const mla_gpu_args *a, int64_t kv_pool_slots, mla_gpu_tier tier,
                           mla_amd_emu_arch arch, unsigned flags, mla_amd_emu_info *info, mla_error *err);

/* The validator's contract, as mla_gpu_backend_run (hip/gpu_backend.c):
 * builds the argument block from the fixture (SGLang's dense layout), runs
 * `tier` (an mla_gpu_tier) of the emulated `arch` and writes o (bf16
 * [tokens, H, Dv]) and lse (fp32 [tokens, H], may be NULL) only on MLA_OK.
 * MLA_ERR_DECLINED: reason in err, nothing written. MLA_ERR_RUNTIME: the
 * fault (or the hardware launch failure) in err. */
mla_status mla_amd_emu_backend_run(const mla_fixture *fx, int tier, mla_amd_emu_arch arch, unsigned flags,
                                   mla_bf16 *o_host, float *lse_host, mla_error *err);

#ifdef __cplusplus
}
#endif
#endif
