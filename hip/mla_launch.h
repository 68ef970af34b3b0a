/* Internal: what the host API (mla_gpu.hip) hands to the kernel launchers
 * (mla_kernels.hip). Not installed, not part of the public API. */
#ifndef MLA_LAUNCH_H
#define MLA_LAUNCH_H

#include "compat.h"
#include "mla/gpu.h"

struct mla_launch_args {
    const mla_gpu_args *g;
    int num_splits;  /* grid x of stage 1 */
    void *part_o;    /* bf16 (fast) or fp32 (per-head) partial outputs */
    float *part_lse; /* natural-log partial lse */
    void *stream;
};

hipError_t mla_launch_fast(const mla_launch_args &a);
hipError_t mla_launch_perhead(const mla_launch_args &a);
hipError_t mla_launch_generic(const mla_gpu_args &g, void *stream);
/* Rows per stage-1 CTA of the fast tier for H * L flattened rows. */
int mla_fast_rows(int HL);
int mla_generic_smem_bytes(int D, int Dv);
long long mla_stage2_smem_bytes(int L, int NS, int D);

#endif
