// Internal: the per-kernel launchers (launch_*.hip) that the host API
// (api.hip) dispatches to. Each is explicitly instantiated for the
// variants of instances.h only; any other combination fails to link.
// Every launcher returns the first failing runtime call's error, or the
// launch's own error (hipGetLastError after the launch).
#ifndef MLA_GPU_LAUNCH_H
#define MLA_GPU_LAUNCH_H

#include "params.h"

// The one launch syntax of the launchers, kernel last (its template
// arguments hold commas). A build that launches another way (the wave64
// emulator, emu/, which compiles these launchers on the host) defines
// MLA_LAUNCH before including them.
#ifndef MLA_LAUNCH
#define MLA_LAUNCH(grid, block, smem, stream, arg, ...) __VA_ARGS__<<<grid, block, smem, stream>>>(arg)
#endif

namespace mla_dev {

template <int MT, int NW, int RG, typename PT, int PADK>
hipError_t launch_stage1_mma(const Stage1Params &p, dim3 grid, hipStream_t st);

#if defined(MLA_TARGET_NVIDIA)
// F8: an fp8 pool; PVSM: the softmax in the PV warpgroups (ws-pvsm).
template <bool F8, bool PVSM>
hipError_t launch_stage1_ws(const Stage1Params &p, const Stage1Draft &dr, dim3 grid, hipStream_t st);
#endif

// pdl: overlap the prologue with stage 1 (programmatic dependent launch,
// NVIDIA sm_90); ignored elsewhere.
template <typename PT>
hipError_t launch_stage2(const Stage2Params &p, int bs, hipStream_t st, bool pdl);

hipError_t launch_generic(const GenericParams &p, unsigned num_tokens, hipStream_t st);

} // namespace mla_dev

#endif
