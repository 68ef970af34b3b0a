/* Validator glue of the GPU tiers (private to validate/ and the GPU tests):
 * one fixture in, one tier run, o and lse back on the host. */
#ifndef MLA_VALIDATE_GPU_BACKEND_H
#define MLA_VALIDATE_GPU_BACKEND_H

#include "mla/fixture.h"
#include "mla/gpu.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Uploads the fixture, runs `tier` (an mla_gpu_tier) into NaN-poisoned
 * outputs framed by sentinel guards, synchronizes and copies o (and lse when
 * lse_host is not NULL) back. A decline returns MLA_ERR_DECLINED with the
 * reason after checking the output is still all poison; a touched guard or
 * a declining tier that wrote output returns MLA_ERR_RUNTIME. */
mla_status mla_gpu_backend_run(const mla_fixture *fx, int tier, mla_bf16 *o_host,
                               float *lse_host, mla_error *err);

/* The same with the variants of `opt` (NULL = defaults); *info (may be
 * NULL) receives what ran, the split count among it. */
mla_status mla_gpu_backend_run_opts(const mla_fixture *fx, int tier, const mla_gpu_options *opt,
                                    mla_bf16 *o_host, float *lse_host, mla_gpu_run_info *info,
                                    mla_error *err);

#ifdef __cplusplus
}
#endif
#endif
