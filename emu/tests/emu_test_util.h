// Small harness of the emulator tests (compiled into kernel TUs: the device
// header is force-included, host code here runs outside any fiber).
#ifndef MLA_EMU_TEST_UTIL_H
#define MLA_EMU_TEST_UTIL_H

#include "mla_emu/runtime.h"

#include <stdio.h>
#include <string.h>

#include "emu_check.h" /* CHECK, g_failures */

#if defined(__gfx950__)
static const mla_emu::Arch ARCH = mla_emu::GFX950;
static const char *ARCH_NAME = "gfx950";
#else
static const mla_emu::Arch ARCH = mla_emu::GFX942;
static const char *ARCH_NAME = "gfx942";
#endif

// Launch `kernel(args)` over grid x block with `lds` bytes; returns the
// status, message in msg.
template <typename A> static void entry_of(const void *p);
template <typename A, void (*K)(const A &)> static void entry_fn(const void *p)
{
    K(*(const A *)p);
}
template <typename A, void (*K)(const A &)>
static int run_kernel(const A &args, mla_emu::Dim3 grid, mla_emu::Dim3 block, size_t lds, const char *name,
                      char *msg = nullptr, size_t len = 0)
{
    char local[1024];
    if (!msg) {
        msg = local;
        len = sizeof local;
    }
    return mla_emu::launch(ARCH, grid, block, lds, entry_fn<A, K>, &args, sizeof args, name, msg, len);
}
static mla_emu::Dim3 d3(unsigned x, unsigned y = 1, unsigned z = 1)
{
    mla_emu::Dim3 d;
    d.x = x;
    d.y = y;
    d.z = z;
    return d;
}
template <typename T> static T *galloc(size_t n, const char *name, int flags = 0)
{
    T *p = (T *)mla_emu::alloc(n * sizeof(T), flags, name);
    if (!p) {
        printf("FAIL: out of memory\n");
        exit(1);
    }
    return p;
}

namespace emu_test {
MLA_EMU_LDS_ARRAY(unsigned char, lds);
}

#endif
