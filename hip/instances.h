// Every kernel instantiation the GPU library builds, as X-macro lists, so
// that the NVIDIA library (launch_*.hip) and the AMD device-only compile
// check (amd_kernels.hip) instantiate from one place. Adding a variant: add
// its line here, its branch in api.hip's kernel choice, and (for a new
// shared-memory layout) its plan in config.h.
#ifndef MLA_GPU_INSTANCES_H
#define MLA_GPU_INSTANCES_H

// stage1_kernel<MT, NW, RG, PT, PADK> (kernels/stage1_mma.h): 16 MT rows per
// CTA, NW warps, RG PV row groups, partial type PT, PADK > 0 the per-head
// tier's dot padded to PADK columns.
#define MLA_STAGE1_MMA_NVIDIA(X)                                                                   \
    X(1, 4, 1, bf16_t, 0)    /* fast, up to 16 rows */                                             \
    X(2, 4, 1, bf16_t, 0)    /* fast, up to 32 rows */                                             \
    X(4, 8, 2, bf16_t, 0)    /* fast, 64 rows of heads other than 576 wide */                      \
    X(1, 4, 1, float, 1024)  /* per-head: one head's 16 draft rows, 576 padded to 1024 */
// AMD: the rows per CTA that the arch's LDS plan takes (config.h
// AmdStage1Arch): gfx950 up to 64 (more rows run as 64-row blocks), gfx942
// 32 (Q in registers). 32-row blocks have 8 warps = 4 waves, one per SIMD
// (on gfx942, where LDS allows one workgroup per CU, 2 waves would leave
// half the SIMDs idle). The host pass of a ROCm build sees no arch macro and
// takes the gfx950 list, the union of both.
#if defined(__gfx942__) || defined(__gfx941__) || defined(__gfx940__) || defined(__gfx90a__)
#define MLA_STAGE1_MMA_AMD(X)                                                                      \
    X(2, 8, 1, bf16_t, 0)    /* fast, 32-row blocks (MFMA tiles are 32 rows) */                    \
    X(2, 8, 1, float, 0)     /* per-head: one head's 32 draft rows */
#else
#define MLA_STAGE1_MMA_AMD(X)                                                                      \
    X(2, 8, 1, bf16_t, 0)    /* fast, up to 32 rows (MFMA tiles are 32 rows) */                    \
    X(4, 8, 2, bf16_t, 0)    /* fast, 64-row blocks */                                             \
    X(2, 8, 1, float, 0)     /* per-head: one head's 32 draft rows */
#endif

// stage1_ws_kernel<F8, PVSM> (kernels/stage1_ws.h, NVIDIA sm_90a only):
// 64 rows, F8 an fp8 pool, PVSM the softmax in the PV warpgroups (bf16).
#define MLA_STAGE1_WS_NVIDIA(X)                                                                    \
    X(false, false)          /* fast, 64 rows (default for head_dim 576) */                        \
    X(false, true)           /* fast, 64 rows, softmax in the PV warps (ws-pvsm) */                \
    X(true, false)           /* fast, 64 rows, fp8 pool */

// stage2_kernel<PT> (kernels/stage2_merge.h): bf16 (fast) and fp32
// (per-head) partials; both targets.
#define MLA_STAGE2(X)                                                                              \
    X(bf16_t)                                                                                      \
    X(float)

// generic_kernel (kernels/generic.h) is no template: one instance, both
// targets.

#endif
