/* Runtime of the wave64 emulator (emu/README.md). Host side: guarded
 * allocations with bounds, launches of host-compiled kernels as one fiber
 * per work-item, workgroups one at a time, and a status with a message for
 * every fault (never a crash of the host process). Device side (called by
 * the kernels through mla_emu/device.h): ids, barriers and wave-collective
 * steps. One launch at a time per process (the C API serializes). */
#ifndef MLA_EMU_RUNTIME_H
#define MLA_EMU_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

namespace mla_emu {

enum Arch { GFX942 = 942, GFX950 = 950 };

enum Status {
    OK = 0,
    FAULT_GLOBAL_OOB = 1,      // outside every registered buffer (or in a guard zone)
    FAULT_GLOBAL_READONLY = 2, // store into an input buffer or the kernel arguments
    FAULT_GLOBAL_UNINIT = 3,   // load of a tracked buffer's bytes never written
    FAULT_LDS_OOB = 4,         // past the launch's dynamic LDS size
    FAULT_LDS_UNINIT = 5,      // load of LDS bytes not written in this workgroup
    FAULT_LDS_RACE = 6,        // another wave wrote (or read) the bytes since the last barrier
    FAULT_BARRIER = 7,         // barrier divergence (different barriers, or some work-items exited)
    FAULT_DIVERGENT_MFMA = 8,  // MFMA issued with fewer than 64 active lanes
    FAULT_PRIVATE = 9,         // another work-item's private memory
    FAULT_UNSUPPORTED = 10,    // an instruction or mode the emulated arch or this emulator lacks
    FAULT_SIGNAL = 11,         // a hardware fault that escaped the checks (stack overflow, wild pointer)
    FAULT_CONFIG = 12,         // bad launch configuration (block > 1024, LDS over the arch limit)
    FAULT_LDS_MISALIGNED = 13, // LDS access below the alignment its type promises
};
const char *status_name(int s);

struct Dim3 {
    unsigned x = 1, y = 1, z = 1;
};

// Buffers the kernels may touch. Guard zones around each (never
// registered) turn near misses into faults instead of hits on a neighbour.
enum BufferFlags {
    BUF_READONLY = 1,   // stores fault
    BUF_TRACK_INIT = 2, // loads of bytes never stored (since alloc or mark_uninit) fault
};
void *alloc(size_t bytes, int flags, const char *name);
void release(void *p);
// Replace the flags of the buffer starting at p (e.g. read-only after upload).
void set_flags(void *p, int flags);
// Every byte of [p, p+n) counts as unwritten again (BUF_TRACK_INIT buffers).
void mark_uninit(void *p, size_t n);

// LDS bytes per workgroup the arch offers (gfx942 64 KiB, gfx950 160 KiB),
// and the limit launches check (the arch's unless overridden).
size_t lds_arch_limit(Arch a);
size_t lds_limit(Arch a);
// Emulation only: accept launches up to `bytes` of LDS (0: the arch limit;
// at most 256 KiB), to check the logic of a kernel that asks for more LDS
// than the hardware has. A real launch of it fails.
void set_lds_limit_override(size_t bytes);

// Runs entry(args) for every work-item of grid x block. args (args_size
// bytes) is copied into a read-only kernel-argument buffer first. Returns
// OK or a fault status; msg gets the fault (workgroup, work-item, wave,
// lane, address, kernel) or "".
int launch(Arch arch, Dim3 grid, Dim3 block, size_t lds_bytes, void (*entry)(const void *),
           const void *args, size_t args_size, const char *kernel_name, char *msg, size_t msg_len);

// ---- device side (mla_emu/device.h) ----
Dim3 thread_idx();
Dim3 block_idx();
Dim3 block_dim();
Dim3 grid_dim();
unsigned thread_linear();
void barrier(const char *file, int line);
unsigned mbcnt_lo(unsigned mask, unsigned acc);
unsigned mbcnt_hi(unsigned mask, unsigned acc);

enum MfmaKind { MFMA_F32_32X32X8_BF16_1K = 1, MFMA_F32_32X32X16_BF16 = 2 };
// a, b: this lane's operand bytes (8 or 16), c: 16 accumulators in, d: out.
void mfma_step(int kind, const void *a, const void *b, const float *c, float *d);
int ds_bpermute(int addr, int data);
int ds_swizzle_step(int data, int pattern);
int readfirstlane(int v);
uint64_t ballot(int pred);

} // namespace mla_emu

#endif
