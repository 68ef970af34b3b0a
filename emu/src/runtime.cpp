// Wave64 emulator runtime (emu/README.md).
//
// Execution model: workgroups run one at a time on the calling thread; each
// work-item is a fiber with its own stack (allocated once, guard page below);
// a wave is 64 consecutive work-items (linear id x + y*bx + z*bx*by). A fiber
// runs until it blocks: at a wave-collective step (MFMA, ds_bpermute, ...),
// at a barrier, or at its end. The scheduler runs the lanes of one wave until
// all of them block, executes each pending collective for the lanes that wait
// at that same instruction (the active lanes: the others of the wave took
// another path, as with a partial EXEC mask), then moves on; when every wave
// waits at the barrier (or has ended) the barrier completes. Lanes of a wave
// therefore run one after another between exchanges: code that passes data
// between lanes of a wave through memory without a barrier or an exchange is
// reported (uninitialised or stale LDS), which is intended.
//
// Memory checks: the kernel translation units are compiled with
// -fsanitize=thread, and the hooks that instrumentation calls before every
// load and store (__tsan_read4, ...) are implemented here, not by the TSan
// runtime (which is not linked). This file itself is not instrumented.
#include "mla_emu/runtime.h"

#include <algorithm>
#include <atomic>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <vector>

// The LDS arena every `extern __shared__` array of the kernels names
// (MLA_EMU_LDS_ARRAY). 160 KiB is gfx950's maximum per workgroup.
// Sized above the arch limits so that set_lds_limit_override can run a
// kernel that asks for more than the hardware has (to check its logic).
static constexpr size_t LDS_ARENA = 256 * 1024;
extern "C" {
alignas(4096) unsigned char mla_emu_lds_arena[LDS_ARENA];
}

namespace mla_emu {

static constexpr int MAX_THREADS = 1024;
static constexpr size_t STACK_BYTES = 256 * 1024;
static constexpr size_t GUARD_BYTES = 64 * 1024; // around every global buffer

// ---------------------------------------------------------------------------
// Context switch. x86-64: callee-saved registers, MXCSR and the x87 control
// word on the stack, then the stack pointer swap (ucontext's swapcontext also
// saves the signal mask with a system call per switch, ~100x slower).
// ---------------------------------------------------------------------------
extern "C" void mla_emu_ctx_switch(void **save_sp, void *load_sp);
extern "C" void mla_emu_fiber_entry();
#if defined(__x86_64__)
asm(R"(
    .text
    .globl mla_emu_ctx_switch
    .type mla_emu_ctx_switch, @function
mla_emu_ctx_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $8, %rsp
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    ldmxcsr (%rsp)
    fldcw 4(%rsp)
    addq $8, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size mla_emu_ctx_switch, .-mla_emu_ctx_switch
    .section .note.GNU-stack,"",@progbits
    .text
)");
#else
#error "emu: the fiber switch is written for x86-64 only"
#endif

enum FiberState { F_RUN, F_COLL, F_BAR, F_DONE };

struct Fiber {
    void *sp;
    char *stack_lo, *stack_hi;
    int state;
    unsigned linear, wave, lane;
    Dim3 tid;
    // barrier site
    const char *bfile;
    int bline;
};

// A lane's deposit at a wave-collective step and its result.
enum CollOp { C_NONE, C_MFMA8, C_MFMA16, C_BPERMUTE, C_SWIZZLE, C_READFIRST, C_BALLOT };
struct Slot {
    int op;
    uintptr_t site;
    unsigned char a[16], b[16];
    float c[16], d[16];
    int32_t x, y;
    int64_t r;
};

struct Buffer {
    uintptr_t base;
    size_t size;
    int flags;
    char name[48];
    unsigned char *init; // BUF_TRACK_INIT: one byte per byte, 1 = written
    void *map;           // mapping including guards
    size_t map_size;
};

struct Emu {
    // launch
    Arch arch;
    Dim3 grid, block, bid;
    size_t lds_bytes;
    unsigned nthreads, nwaves;
    void (*entry)(const void *);
    const void *kernarg;
    const char *kname;
    // fibers
    char *stacks;
    Fiber fibers[MAX_THREADS];
    Slot slots[MAX_THREADS];
    Fiber *cur;
    void *sched_sp;
    bool active; // a fiber (kernel code) runs: the hooks check
    bool in_launch;
    // LDS shadow: epoch of the last store (0: never written in this
    // workgroup), storing wave, epoch of the reads and the mask of waves that
    // read in it (the race check at barrier granularity).
    uint32_t epoch;
    uint32_t w_epoch[LDS_ARENA];
    uint8_t w_wave[LDS_ARENA];
    uint32_t r_epoch[LDS_ARENA];
    uint16_t r_mask[LDS_ARENA];
    // buffers, sorted by base
    std::vector<Buffer> bufs;
    int last_buf;
    // result
    int status;
    char msg[1024];
};
static Emu *E;

static Emu &emu()
{
    if (!E) {
        E = new Emu();
        E->last_buf = -1;
        const size_t total = STACK_BYTES * MAX_THREADS;
        void *m = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                       -1, 0);
        if (m == MAP_FAILED) {
            fprintf(stderr, "mla_emu: cannot map %zu bytes of fiber stacks: %s\n", total, strerror(errno));
            abort();
        }
        E->stacks = (char *)m;
        // A guard page at the low end of every stack: an overflow faults
        // there (caught by the SIGSEGV handler) instead of corrupting the
        // neighbouring fiber's stack.
        for (int i = 0; i < MAX_THREADS; ++i)
            mprotect(E->stacks + (size_t)i * STACK_BYTES, 4096, PROT_NONE);
    }
    return *E;
}

const char *status_name(int s)
{
    switch (s) {
    case OK: return "ok";
    case FAULT_GLOBAL_OOB: return "global out of bounds";
    case FAULT_GLOBAL_READONLY: return "store to read-only global";
    case FAULT_GLOBAL_UNINIT: return "uninitialised global read";
    case FAULT_LDS_OOB: return "LDS out of bounds";
    case FAULT_LDS_UNINIT: return "uninitialised LDS read";
    case FAULT_LDS_RACE: return "LDS race";
    case FAULT_BARRIER: return "barrier divergence";
    case FAULT_DIVERGENT_MFMA: return "MFMA in a divergent wave";
    case FAULT_PRIVATE: return "access to another work-item's private memory";
    case FAULT_UNSUPPORTED: return "unsupported instruction";
    case FAULT_SIGNAL: return "hardware fault";
    case FAULT_CONFIG: return "bad launch configuration";
    case FAULT_LDS_MISALIGNED: return "misaligned LDS access";
    }
    return "unknown";
}

// ---------------------------------------------------------------------------
// Faults: recorded once, then the faulting fiber is abandoned (its stack is
// reinitialised at the next workgroup) and control returns to the scheduler.
// ---------------------------------------------------------------------------
static void vrecord(int status, const char *fmt, va_list ap)
{
    Emu &e = emu();
    if (e.status != OK)
        return;
    e.status = status;
    char body[700];
    vsnprintf(body, sizeof body, fmt, ap);
    if (e.cur && e.active)
        snprintf(e.msg, sizeof e.msg,
                 "%s: %s; work-item (%u,%u,%u) [wave %u lane %u] of workgroup (%u,%u,%u), kernel %s (%s)",
                 status_name(status), body, e.cur->tid.x, e.cur->tid.y, e.cur->tid.z, e.cur->wave, e.cur->lane,
                 e.bid.x, e.bid.y, e.bid.z, e.kname, e.arch == GFX950 ? "gfx950" : "gfx942");
    else
        snprintf(e.msg, sizeof e.msg, "%s: %s; workgroup (%u,%u,%u), kernel %s (%s)", status_name(status), body,
                 e.bid.x, e.bid.y, e.bid.z, e.kname, e.arch == GFX950 ? "gfx950" : "gfx942");
}

[[noreturn]] static void fiber_fault(int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vrecord(status, fmt, ap);
    va_end(ap);
    Emu &e = emu();
    e.active = false;
    Fiber *f = e.cur;
    mla_emu_ctx_switch(&f->sp, e.sched_sp);
    __builtin_unreachable(); // the scheduler never resumes a faulted fiber
}

static void sched_fault(int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vrecord(status, fmt, ap);
    va_end(ap);
}

// ---------------------------------------------------------------------------
// Buffers
// ---------------------------------------------------------------------------
static int find_buf(uintptr_t a)
{
    Emu &e = emu();
    if (e.last_buf >= 0) {
        const Buffer &b = e.bufs[e.last_buf];
        if (a - b.base < b.size)
            return e.last_buf;
    }
    auto it = std::upper_bound(e.bufs.begin(), e.bufs.end(), a,
                               [](uintptr_t x, const Buffer &b) { return x < b.base; });
    if (it == e.bufs.begin())
        return -1;
    --it;
    if (a - it->base < it->size) {
        e.last_buf = (int)(it - e.bufs.begin());
        return e.last_buf;
    }
    return -1;
}

static void insert_buf(const Buffer &b)
{
    Emu &e = emu();
    auto it = std::upper_bound(e.bufs.begin(), e.bufs.end(), b.base,
                               [](uintptr_t x, const Buffer &y) { return x < y.base; });
    e.bufs.insert(it, b);
    e.last_buf = -1;
}

void *alloc(size_t bytes, int flags, const char *name)
{
    Emu &e = emu();
    const size_t page = 4096;
    const size_t body = (bytes + page - 1) / page * page;
    const size_t total = body + 2 * GUARD_BYTES;
    void *m = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return nullptr;
    // The buffer ends exactly at the upper guard, so an access one element
    // past the end leaves the buffer (the usual off-by-one).
    Buffer b{};
    b.base = (uintptr_t)m + GUARD_BYTES + (body - bytes);
    b.size = bytes;
    b.flags = flags;
    snprintf(b.name, sizeof b.name, "%s", name ? name : "?");
    b.map = m;
    b.map_size = total;
    if (flags & BUF_TRACK_INIT) {
        b.init = (unsigned char *)calloc(bytes ? bytes : 1, 1);
        if (!b.init) {
            munmap(m, total);
            return nullptr;
        }
    }
    insert_buf(b);
    (void)e;
    return (void *)b.base;
}

void release(void *p)
{
    Emu &e = emu();
    for (size_t i = 0; i < e.bufs.size(); ++i)
        if (e.bufs[i].base == (uintptr_t)p) {
            free(e.bufs[i].init);
            munmap(e.bufs[i].map, e.bufs[i].map_size);
            e.bufs.erase(e.bufs.begin() + (long)i);
            e.last_buf = -1;
            return;
        }
}

void set_flags(void *p, int flags)
{
    const int i = find_buf((uintptr_t)p);
    if (i < 0)
        return;
    Buffer &b = emu().bufs[i];
    if ((flags & BUF_TRACK_INIT) && !b.init)
        b.init = (unsigned char *)calloc(b.size ? b.size : 1, 1);
    b.flags = flags;
}

void mark_uninit(void *p, size_t n)
{
    const int i = find_buf((uintptr_t)p);
    if (i < 0)
        return;
    Buffer &b = emu().bufs[i];
    if (b.init) {
        const size_t off = (uintptr_t)p - b.base;
        memset(b.init + off, 0, std::min(n, b.size - off));
    }
}

static size_t g_lds_override;
size_t lds_limit(Arch a)
{
    if (g_lds_override)
        return g_lds_override;
    return a == GFX950 ? 160 * 1024 : 64 * 1024;
}
size_t lds_arch_limit(Arch a)
{
    return a == GFX950 ? 160 * 1024 : 64 * 1024;
}
void set_lds_limit_override(size_t bytes)
{
    g_lds_override = bytes > LDS_ARENA ? LDS_ARENA : bytes;
}

// Nearest buffer to an address outside all of them, for the message.
static void describe_miss(uintptr_t a, size_t n, char *out, size_t len)
{
    Emu &e = emu();
    const Buffer *best = nullptr;
    uintptr_t dist = ~(uintptr_t)0;
    for (const Buffer &b : e.bufs) {
        uintptr_t d = a < b.base ? b.base - a : a - (b.base + b.size) + 1;
        if (a >= b.base && a < b.base + b.size)
            d = 0; // straddles the end
        if (d < dist) {
            dist = d;
            best = &b;
        }
    }
    if (!best)
        snprintf(out, len, "address 0x%lx (%zu bytes) is in no registered buffer", (unsigned long)a, n);
    else if (a >= best->base)
        snprintf(out, len, "address 0x%lx (%zu bytes) is %lu bytes past the end of buffer '%s' (%zu bytes)",
                 (unsigned long)a, n, (unsigned long)(a + n - (best->base + best->size)), best->name, best->size);
    else
        snprintf(out, len, "address 0x%lx (%zu bytes) is %lu bytes before buffer '%s' (%zu bytes)",
                 (unsigned long)a, n, (unsigned long)(best->base - a), best->name, best->size);
}

// ---------------------------------------------------------------------------
// The access check (every instrumented load and store of kernel code)
// ---------------------------------------------------------------------------
static void lds_access(size_t off, size_t n, bool w, bool aligned)
{
    Emu &e = emu();
    if (off + n > e.lds_bytes)
        fiber_fault(FAULT_LDS_OOB, "%s of %zu bytes at LDS offset %zu, the launch has %zu bytes of LDS",
                    w ? "store" : "load", n, off, e.lds_bytes);
    // The instrumentation calls the aligned hook when the access's type
    // promises min(size, 8)-byte alignment: an LDS address that breaks the
    // promise is undefined behaviour, and the ds_read/ds_write the device
    // compiler emits for it assumes the alignment.
    const size_t al = n < 8 ? n : 8;
    if (aligned && (off % al) != 0)
        fiber_fault(FAULT_LDS_MISALIGNED, "%s of %zu bytes at LDS offset %zu: the type promises %zu-byte alignment",
                    w ? "store" : "load", n, off, al);
    const unsigned wave = e.cur->wave;
    const uint16_t me = (uint16_t)(1u << wave);
    for (size_t i = off; i < off + n; ++i) {
        if (!w) {
            if (e.w_epoch[i] == 0)
                fiber_fault(FAULT_LDS_UNINIT, "load of %zu bytes at LDS offset %zu: byte %zu never written in this workgroup",
                            n, off, i);
            if (e.w_epoch[i] == e.epoch && e.w_wave[i] != wave)
                fiber_fault(FAULT_LDS_RACE,
                            "load of %zu bytes at LDS offset %zu: byte %zu written by wave %u since the last barrier",
                            n, off, i, (unsigned)e.w_wave[i]);
            if (e.r_epoch[i] != e.epoch) {
                e.r_epoch[i] = e.epoch;
                e.r_mask[i] = 0;
            }
            e.r_mask[i] |= me;
        } else {
            if (e.w_epoch[i] == e.epoch && e.w_wave[i] != wave)
                fiber_fault(FAULT_LDS_RACE,
                            "store of %zu bytes at LDS offset %zu: byte %zu also written by wave %u since the last barrier",
                            n, off, i, (unsigned)e.w_wave[i]);
            if (e.r_epoch[i] == e.epoch && (e.r_mask[i] & ~me))
                fiber_fault(FAULT_LDS_RACE,
                            "store of %zu bytes at LDS offset %zu: byte %zu read by another wave (mask 0x%x) since the last barrier",
                            n, off, i, (unsigned)(e.r_mask[i] & ~me));
            e.w_epoch[i] = e.epoch;
            e.w_wave[i] = (uint8_t)wave;
        }
    }
}

static inline void check(const void *p, size_t n, bool w, bool aligned = false)
{
    if (!E || !E->active)
        return; // host code of an instrumented TU (launchers, tests)
    Emu &e = *E;
    const uintptr_t a = (uintptr_t)p;
    const uintptr_t lds = (uintptr_t)mla_emu_lds_arena;
    if (a - lds < LDS_ARENA) {
        lds_access(a - lds, n, w, aligned);
        return;
    }
    const Fiber *f = e.cur;
    if (a >= (uintptr_t)f->stack_lo && a + n <= (uintptr_t)f->stack_hi)
        return; // private memory
    if (a >= (uintptr_t)e.stacks && a < (uintptr_t)e.stacks + STACK_BYTES * MAX_THREADS) {
        const unsigned owner = (unsigned)((a - (uintptr_t)e.stacks) / STACK_BYTES);
        fiber_fault(FAULT_PRIVATE, "%s of %zu bytes at 0x%lx: private memory of work-item %u", w ? "store" : "load",
                    n, (unsigned long)a, owner);
    }
    const int bi = find_buf(a);
    if (bi < 0 || a + n > e.bufs[bi].base + e.bufs[bi].size) {
        char d[300];
        describe_miss(a, n, d, sizeof d);
        fiber_fault(FAULT_GLOBAL_OOB, "%s: %s", w ? "store" : "load", d);
    }
    Buffer &b = e.bufs[bi];
    if (w && (b.flags & BUF_READONLY))
        fiber_fault(FAULT_GLOBAL_READONLY, "store of %zu bytes at offset %lu of read-only buffer '%s'", n,
                    (unsigned long)(a - b.base), b.name);
    if (b.init) {
        const size_t off = a - b.base;
        if (w)
            memset(b.init + off, 1, n);
        else
            for (size_t i = 0; i < n; ++i)
                if (!b.init[off + i])
                    fiber_fault(FAULT_GLOBAL_UNINIT, "load of %zu bytes at offset %zu of buffer '%s': byte %zu never written",
                                n, off, b.name, off + i);
    }
}

} // namespace mla_emu

// The instrumentation's entry points (names fixed by LLVM's
// ThreadSanitizer pass). Sizes above 16 are not instrumented by the pass, so
// the kernel TUs are built without AVX (no 32-byte vector accesses).
extern "C" {
using mla_emu::check;
void __tsan_init() {}
void __tsan_func_entry(void *) {}
void __tsan_func_exit() {}
#define MLA_EMU_HOOKS(N)                                                                           \
    void __tsan_read##N(void *p) { check(p, N, false, true); }                                    \
    void __tsan_write##N(void *p) { check(p, N, true, true); }                                    \
    void __tsan_unaligned_read##N(void *p) { check(p, N, false); }                                \
    void __tsan_unaligned_write##N(void *p) { check(p, N, true); }                                \
    void __tsan_volatile_read##N(void *p) { check(p, N, false); }                                 \
    void __tsan_volatile_write##N(void *p) { check(p, N, true); }                                 \
    void __tsan_unaligned_volatile_read##N(void *p) { check(p, N, false); }                       \
    void __tsan_unaligned_volatile_write##N(void *p) { check(p, N, true); }
MLA_EMU_HOOKS(1)
MLA_EMU_HOOKS(2)
MLA_EMU_HOOKS(4)
MLA_EMU_HOOKS(8)
MLA_EMU_HOOKS(16)
#undef MLA_EMU_HOOKS
void __tsan_read_range(void *p, unsigned long n) { check(p, n, false); }
void __tsan_write_range(void *p, unsigned long n) { check(p, n, true); }
void *__tsan_memcpy(void *d, const void *s, unsigned long n)
{
    if (n) {
        check(s, n, false);
        check(d, n, true);
    }
    return memcpy(d, s, n);
}
void *__tsan_memmove(void *d, const void *s, unsigned long n)
{
    if (n) {
        check(s, n, false);
        check(d, n, true);
    }
    return memmove(d, s, n);
}
void *__tsan_memset(void *d, int c, unsigned long n)
{
    if (n)
        check(d, n, true);
    return memset(d, c, n);
}
}

namespace mla_emu {

// ---------------------------------------------------------------------------
// Device-side ids
// ---------------------------------------------------------------------------
Dim3 thread_idx()
{
    return E->cur->tid;
}
Dim3 block_idx()
{
    return E->bid;
}
Dim3 block_dim()
{
    return E->block;
}
Dim3 grid_dim()
{
    return E->grid;
}
unsigned thread_linear()
{
    return E->cur->linear;
}
unsigned mbcnt_lo(unsigned mask, unsigned acc)
{
    const unsigned lane = E->cur->lane;
    const unsigned below = lane >= 32 ? 0xffffffffu : (lane ? (1u << lane) - 1u : 0u);
    return acc + (unsigned)__builtin_popcount(mask & below);
}
unsigned mbcnt_hi(unsigned mask, unsigned acc)
{
    const unsigned lane = E->cur->lane;
    const unsigned below = lane < 32 ? 0u : (lane == 32 ? 0u : (1u << (lane - 32)) - 1u);
    return acc + (unsigned)__builtin_popcount(mask & below);
}

// ---------------------------------------------------------------------------
// Blocking: barrier and collectives switch to the scheduler.
// ---------------------------------------------------------------------------
static void block_here(int state)
{
    Emu &e = *E;
    Fiber *f = e.cur;
    f->state = state;
    e.active = false;
    mla_emu_ctx_switch(&f->sp, e.sched_sp);
    // resumed by the scheduler (which set e.cur / e.active)
}

void barrier(const char *file, int line)
{
    Fiber *f = E->cur;
    f->bfile = file;
    f->bline = line;
    block_here(F_BAR);
}

static Slot &deposit(int op, uintptr_t site)
{
    Slot &s = E->slots[E->cur->linear];
    s.op = op;
    s.site = site;
    return s;
}

__attribute__((noinline)) void mfma_step(int kind, const void *a, const void *b, const float *c, float *d)
{
    if (kind == MFMA_F32_32X32X16_BF16 && E->arch != GFX950)
        fiber_fault(FAULT_UNSUPPORTED, "v_mfma_f32_32x32x16_bf16 is a gfx950 instruction");
    const size_t ab = kind == MFMA_F32_32X32X8_BF16_1K ? 8 : 16;
    Slot &s = deposit(kind == MFMA_F32_32X32X8_BF16_1K ? C_MFMA8 : C_MFMA16,
                      (uintptr_t)__builtin_return_address(0));
    memcpy(s.a, a, ab);
    memcpy(s.b, b, ab);
    memcpy(s.c, c, 64);
    block_here(F_COLL);
    memcpy(d, E->slots[E->cur->linear].d, 64);
}

__attribute__((noinline)) int ds_bpermute(int addr, int data)
{
    Slot &s = deposit(C_BPERMUTE, (uintptr_t)__builtin_return_address(0));
    s.x = addr;
    s.y = data;
    block_here(F_COLL);
    return (int)E->slots[E->cur->linear].r;
}

__attribute__((noinline)) int ds_swizzle_step(int data, int pattern)
{
    Slot &s = deposit(C_SWIZZLE, (uintptr_t)__builtin_return_address(0));
    s.x = pattern;
    s.y = data;
    block_here(F_COLL);
    return (int)E->slots[E->cur->linear].r;
}

__attribute__((noinline)) int readfirstlane(int v)
{
    Slot &s = deposit(C_READFIRST, (uintptr_t)__builtin_return_address(0));
    s.y = v;
    block_here(F_COLL);
    return (int)E->slots[E->cur->linear].r;
}

__attribute__((noinline)) uint64_t ballot(int pred)
{
    Slot &s = deposit(C_BALLOT, (uintptr_t)__builtin_return_address(0));
    s.y = pred != 0;
    block_here(F_COLL);
    return (uint64_t)E->slots[E->cur->linear].r;
}

static inline float bf16_to_f32(uint16_t u)
{
    uint32_t x = (uint32_t)u << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
}

// One 32x32 bf16 MFMA block, KL = 4 (32x32x8bf16_1k) or 8 (32x32x16_bf16)
// k values per lane. Layout (AMD CDNA3 / CDNA4 ISA, MFMA operand layouts):
// lane l holds A row l%32 and B column l%32 at k = KL*(l/32) + j (element j
// of its operand, j < KL); accumulator v of lane l is D[8*(v/4) + 4*(l/32) +
// v%4][l%32]. Products of bf16 are exact in fp32; the sum runs in k order,
// from C, in fp32.
static void exec_mfma(Slot *const *lane_slot, int KL)
{
    const int K = 2 * KL;
    float A[32][16], B[16][32];
    for (int l = 0; l < 64; ++l)
        for (int j = 0; j < KL; ++j) {
            uint16_t ua, ub;
            memcpy(&ua, lane_slot[l]->a + 2 * j, 2);
            memcpy(&ub, lane_slot[l]->b + 2 * j, 2);
            A[l % 32][KL * (l / 32) + j] = bf16_to_f32(ua);
            B[KL * (l / 32) + j][l % 32] = bf16_to_f32(ub);
        }
    for (int l = 0; l < 64; ++l)
        for (int v = 0; v < 16; ++v) {
            const int row = 8 * (v / 4) + 4 * (l / 32) + v % 4, col = l % 32;
            float acc = lane_slot[l]->c[v];
            for (int k = 0; k < K; ++k)
                acc += A[row][k] * B[k][col];
            lane_slot[l]->d[v] = acc;
        }
}

// Executes the collective the lanes in `group` (a mask of this wave's lanes,
// all waiting at the same instruction) wait at.
static void exec_group(unsigned wave, uint64_t group)
{
    Emu &e = *E;
    Slot *ls[64];
    for (int l = 0; l < 64; ++l) {
        const unsigned t = wave * 64 + (unsigned)l;
        ls[l] = t < e.nthreads ? &e.slots[t] : nullptr;
    }
    int first = __builtin_ctzll(group);
    const int op = ls[first]->op;
    switch (op) {
    case C_MFMA8:
    case C_MFMA16:
        if (group != ~0ull) {
            e.cur = &e.fibers[wave * 64 + first];
            sched_fault(FAULT_DIVERGENT_MFMA,
                        "wave %u issues an MFMA with %d of 64 lanes active (lane mask 0x%016llx): the "
                        "instruction reads every lane's operands",
                        wave, __builtin_popcountll(group), (unsigned long long)group);
            return;
        }
        exec_mfma(ls, op == C_MFMA8 ? 4 : 8);
        break;
    case C_BPERMUTE: {
        // Lane i reads lane (addr_i / 4) % 64; a lane not active in this
        // instruction supplies 0 (the ISA's rule for ds_bpermute_b32).
        int32_t v[64];
        for (int l = 0; l < 64; ++l)
            v[l] = (group >> l & 1) ? ls[l]->y : 0;
        for (int l = 0; l < 64; ++l)
            if (group >> l & 1) {
                const int src = (int)(((uint32_t)ls[l]->x >> 2) & 63);
                ls[l]->r = v[src];
            }
        break;
    }
    case C_SWIZZLE: {
        int32_t v[64];
        for (int l = 0; l < 64; ++l)
            v[l] = (group >> l & 1) ? ls[l]->y : 0;
        for (int l = 0; l < 64; ++l)
            if (group >> l & 1) {
                const int pat = ls[l]->x;
                int src;
                if (pat & 0x8000) {
                    // Quad-permute mode: lane 4q+i reads lane 4q + pat[2i+1:2i].
                    src = (l & ~3) | ((pat >> (2 * (l & 3))) & 3);
                } else {
                    // Bit-mask mode within groups of 32 lanes:
                    // ((lane & and_mask) | or_mask) ^ xor_mask.
                    const int and_m = pat & 31, or_m = (pat >> 5) & 31, xor_m = (pat >> 10) & 31;
                    src = (l & 32) | ((((l & 31) & and_m) | or_m) ^ xor_m);
                }
                ls[l]->r = v[src];
            }
        break;
    }
    case C_READFIRST:
        for (int l = 0; l < 64; ++l)
            if (group >> l & 1)
                ls[l]->r = ls[first]->y;
        break;
    case C_BALLOT: {
        uint64_t m = 0;
        for (int l = 0; l < 64; ++l)
            if ((group >> l & 1) && ls[l]->y)
                m |= 1ull << l;
        for (int l = 0; l < 64; ++l)
            if (group >> l & 1)
                ls[l]->r = (int64_t)m;
        break;
    }
    default:
        sched_fault(FAULT_UNSUPPORTED, "internal: collective op %d", op);
    }
}

// ---------------------------------------------------------------------------
// Scheduler
// ---------------------------------------------------------------------------
extern "C" void mla_emu_fiber_entry()
{
    Emu &e = *E;
    e.entry(e.kernarg);
    e.cur->state = F_DONE;
    e.active = false;
    mla_emu_ctx_switch(&e.cur->sp, e.sched_sp);
    __builtin_trap(); // a finished fiber is never resumed
}

static void init_fiber(Fiber &f, unsigned t)
{
    Emu &e = *E;
    f.linear = t;
    f.wave = t / 64;
    f.lane = t % 64;
    f.tid.x = t % e.block.x;
    f.tid.y = (t / e.block.x) % e.block.y;
    f.tid.z = t / (e.block.x * e.block.y);
    f.stack_lo = e.stacks + (size_t)t * STACK_BYTES + 4096;
    f.stack_hi = e.stacks + (size_t)(t + 1) * STACK_BYTES;
    f.state = F_RUN;
    f.bfile = nullptr;
    f.bline = 0;
    // Initial frame consumed by mla_emu_ctx_switch: MXCSR / x87 control
    // word, six callee-saved registers, then the entry as return address,
    // leaving the stack 16-byte aligned + 8 at the entry as the ABI wants.
    uint64_t *sp = (uint64_t *)f.stack_hi;
    *--sp = 0;                              // alignment / fake return of the entry
    *--sp = (uint64_t)&mla_emu_fiber_entry; // ret target
    for (int i = 0; i < 6; ++i)
        *--sp = 0;
    uint32_t csr[2];
    asm volatile("stmxcsr %0" : "=m"(csr[0]));
    asm volatile("fnstcw %0" : "=m"(*(uint16_t *)&csr[1]));
    --sp;
    memcpy(sp, csr, 8);
    f.sp = sp;
}

static void run(Fiber &f)
{
    Emu &e = *E;
    e.cur = &f;
    e.active = true;
    mla_emu_ctx_switch(&e.sched_sp, f.sp);
    e.active = false;
}

// The SIGSEGV/SIGBUS safety net: an access the instrumentation did not see
// (a fiber stack overflow into its guard page, an uninstrumented vector
// access) becomes a fault status instead of killing the process.
static char altstack[64 * 1024];
static void on_signal(int sig, siginfo_t *si, void *)
{
    Emu &e = *E;
    if (!e.in_launch || !e.active || !e.cur) {
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    const uintptr_t a = (uintptr_t)si->si_addr;
    e.active = true; // for the work-item in the message
    const bool guard = a >= (uintptr_t)e.cur->stack_lo - 4096 && a < (uintptr_t)e.cur->stack_lo;
    sched_fault(FAULT_SIGNAL, "%s at 0x%lx%s", sig == SIGSEGV ? "SIGSEGV" : "SIGBUS", (unsigned long)a,
                guard ? " (fiber stack overflow)" : "");
    e.active = false;
    mla_emu_ctx_switch(&e.cur->sp, e.sched_sp);
}

static void run_workgroup()
{
    Emu &e = *E;
    for (unsigned t = 0; t < e.nthreads; ++t)
        init_fiber(e.fibers[t], t);
    memset(e.w_epoch, 0, e.lds_bytes * sizeof(uint32_t));
    memset(e.r_epoch, 0, e.lds_bytes * sizeof(uint32_t));
    memset(mla_emu_lds_arena, 0xA5, e.lds_bytes); // never read: the shadow faults first
    e.epoch = 1;
    for (;;) {
        for (unsigned w = 0; w < e.nwaves; ++w) {
            const unsigned t0 = w * 64, t1 = std::min(e.nthreads, t0 + 64);
            for (;;) {
                for (unsigned t = t0; t < t1; ++t) {
                    while (e.fibers[t].state == F_RUN) {
                        run(e.fibers[t]);
                        if (e.status != OK)
                            return;
                    }
                }
                // One pending instruction at a time, the lowest code address
                // first ("min-PC" reconvergence): lanes that skipped a
                // divergent block wait further down the code than those still
                // in it, so they are held until the others catch up and the
                // instruction after the join runs once with all of them, as on
                // the hardware (EXEC restored at the join). A loop's lanes sit
                // below its exit, so the loop runs out first.
                int first = -1;
                for (unsigned t = t0; t < t1; ++t)
                    if (e.fibers[t].state == F_COLL && (first < 0 || e.slots[t].site < e.slots[first].site))
                        first = (int)t;
                if (first < 0)
                    break;
                const Slot &k = e.slots[first];
                uint64_t group = 0;
                for (unsigned t = t0; t < t1; ++t)
                    if (e.fibers[t].state == F_COLL && e.slots[t].op == k.op && e.slots[t].site == k.site)
                        group |= 1ull << (t - t0);
                exec_group(w, group);
                if (e.status != OK)
                    return;
                for (unsigned t = t0; t < t1; ++t)
                    if (group >> (t - t0) & 1)
                        e.fibers[t].state = F_RUN;
            }
        }
        // Every work-item waits at a barrier or has ended.
        int at_bar = -1, done = -1;
        for (unsigned t = 0; t < e.nthreads; ++t) {
            if (e.fibers[t].state == F_BAR && at_bar < 0)
                at_bar = (int)t;
            if (e.fibers[t].state == F_DONE && done < 0)
                done = (int)t;
        }
        if (at_bar < 0)
            return; // all ended
        const Fiber &b = e.fibers[at_bar];
        if (done >= 0) {
            e.cur = nullptr;
            sched_fault(FAULT_BARRIER,
                        "work-item %u waits at the barrier at %s:%d but work-item %u has exited (every "
                        "work-item of the workgroup must reach each barrier)",
                        b.linear, b.bfile, b.bline, (unsigned)done);
            return;
        }
        for (unsigned t = 0; t < e.nthreads; ++t) {
            const Fiber &f = e.fibers[t];
            if (f.bline != b.bline || strcmp(f.bfile, b.bfile) != 0) {
                e.cur = nullptr;
                sched_fault(FAULT_BARRIER, "work-item %u waits at the barrier at %s:%d, work-item %u at %s:%d",
                            b.linear, b.bfile, b.bline, f.linear, f.bfile, f.bline);
                return;
            }
        }
        ++e.epoch;
        for (unsigned t = 0; t < e.nthreads; ++t)
            e.fibers[t].state = F_RUN;
    }
}

int launch(Arch arch, Dim3 grid, Dim3 block, size_t lds_bytes, void (*entry)(const void *), const void *args,
           size_t args_size, const char *kernel_name, char *msg, size_t msg_len)
{
    Emu &e = emu();
    e.status = OK;
    e.msg[0] = 0;
    e.arch = arch;
    e.grid = grid;
    e.block = block;
    e.bid = Dim3{0, 0, 0};
    e.kname = kernel_name ? kernel_name : "?";
    e.cur = nullptr;
    const unsigned long long nt = (unsigned long long)block.x * block.y * block.z;
    if (nt == 0 || nt > MAX_THREADS || grid.x == 0 || grid.y == 0 || grid.z == 0)
        sched_fault(FAULT_CONFIG, "block %ux%ux%u / grid %ux%ux%u: 1 to %d work-items per workgroup, non-empty grid",
                    block.x, block.y, block.z, grid.x, grid.y, grid.z, MAX_THREADS);
    else if (lds_bytes > lds_limit(arch))
        sched_fault(FAULT_CONFIG, "%zu bytes of LDS per workgroup exceed the %zu of %s%s: the launch fails on hardware",
                    lds_bytes, lds_limit(arch), arch == GFX950 ? "gfx950" : "gfx942",
                    g_lds_override ? " (limit overridden)" : "");
    if (e.status != OK) {
        if (msg && msg_len)
            snprintf(msg, msg_len, "%s", e.msg);
        return e.status;
    }
    e.nthreads = (unsigned)nt;
    e.nwaves = (e.nthreads + 63) / 64;
    e.lds_bytes = lds_bytes;
    e.entry = entry;
    // Kernel arguments: a read-only buffer, as the kernarg segment.
    void *ka = alloc(args_size ? args_size : 1, BUF_READONLY, "kernel arguments");
    if (!ka) {
        snprintf(msg, msg_len, "out of memory for the kernel arguments");
        return FAULT_CONFIG;
    }
    memcpy(ka, args, args_size);
    e.kernarg = ka;

    struct sigaction sa = {}, old_segv, old_bus;
    stack_t ss = {}, old_ss;
    ss.ss_sp = altstack;
    ss.ss_size = sizeof altstack;
    sigaltstack(&ss, &old_ss);
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &old_segv);
    sigaction(SIGBUS, &sa, &old_bus);
    e.in_launch = true;

    for (unsigned z = 0; z < grid.z && e.status == OK; ++z)
        for (unsigned y = 0; y < grid.y && e.status == OK; ++y)
            for (unsigned x = 0; x < grid.x && e.status == OK; ++x) {
                e.bid = Dim3{x, y, z};
                run_workgroup();
            }

    e.in_launch = false;
    sigaction(SIGSEGV, &old_segv, nullptr);
    sigaction(SIGBUS, &old_bus, nullptr);
    sigaltstack(&old_ss, nullptr);
    e.cur = nullptr;
    e.active = false;
    release(ka);
    if (msg && msg_len)
        snprintf(msg, msg_len, "%s", e.msg);
    return e.status;
}

} // namespace mla_emu
