// The AMD build of the GPU library, compiled by the host compiler for an
// emulated gfx942 or gfx950 (once per arch with -D__gfx9XX__,
// -Dmla_dev=mla_emu_gfx9XX, the C API renamed mla_emu_gfx9XX_gpu_*, and
// mla_emu/device.h force-included): the kernels of hip/kernels/*.h AND the
// real host side, hip/api.hip (options, declines, splits, parameter fills,
// the tier chain) and the launchers hip/launch_{stage1_mma,stage2_merge,
// generic}.hip with their AMD instance lists. The only emulator-specific
// parts are below: the few HIP runtime calls the launchers make, and
// MLA_LAUNCH (hip/launch.h), which runs a launch on the emulator instead of
// <<<>>>. Stage-1 LDS is what the launcher asks: the arch's plan in
// hip/config.h.
#include "mla_emu/device.h"

#include "mla_emu_internal.h"

#include <stdio.h>
#include <string.h>

namespace mla_dev {
MLA_EMU_LDS_ARRAY(unsigned char, smem_raw);
}

// ---- The HIP runtime calls of hip/api.hip and hip/launch_*.hip ----------
// (internal linkage: each arch's copy stays in its object.)
typedef int hipError_t;
typedef void *hipStream_t;
enum { hipSuccess = 0, hipErrorLaunchFailure = 719, hipErrorNoDevice = 100 };
enum { hipFuncAttributeMaxDynamicSharedMemorySize = 8 };
struct dim3 {
    unsigned x, y, z;
    constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

namespace {

mla_emu_tier_run *g_run;  // the run in progress (launches record into it)
hipError_t g_last_error;  // sticky, as the HIP runtime's
char g_last_msg[1024];

mla_emu::Arch emu_arch()
{
#if defined(__gfx950__)
    return mla_emu::GFX950;
#else
    return mla_emu::GFX942;
#endif
}

template <typename P> struct Call {
    void (*fn)(P);
    P arg;
};
template <typename P> void call_entry(const void *a)
{
    const Call<P> *c = (const Call<P> *)a;
    c->fn(c->arg);
}

// "stage1_kernel<MT, NW, ...>" with the values of the launcher's
// "[MT = 2, NW = 8, ...]": "stage1_kernel<2, 8, ...>".
void kernel_name(char *out, size_t n, const char *kernel, const char *launcher)
{
    const char *lt = strchr(kernel, '<'), *b = strchr(launcher, '[');
    if (!lt || !b) {
        snprintf(out, n, "%s", kernel);
        return;
    }
    size_t k = (size_t)snprintf(out, n, "%.*s<", (int)(lt - kernel), kernel);
    for (const char *q = b + 1; *q && *q != ']' && k + 2 < n;) {
        const char *eq = strstr(q, " = ");
        if (!eq)
            break;
        q = eq + 3;
        const size_t len = strcspn(q, ",]");
        k += (size_t)snprintf(out + k, n - k, "%s%.*s", out[k - 1] == '<' ? "" : ", ", (int)len, q);
        q += len;
        if (*q == ',')
            ++q;
    }
    if (k + 1 < n)
        snprintf(out + k, n - k, ">");
}

template <typename P>
hipError_t emu_hip_launch(dim3 grid, dim3 block, int smem, const P &arg, void (*fn)(P), const char *kernel,
                          const char *launcher)
{
    if (!g_run)
        return g_last_error = hipErrorLaunchFailure;
    char name[256];
    kernel_name(name, sizeof name, kernel, launcher);
    mla_emu_tier_run &r = *g_run;
    const size_t n = strlen(r.what);
    snprintf(r.what + n, sizeof r.what - n, "%s%s grid %ux%ux%u x %u, LDS %d", n ? "; " : "", name, grid.x, grid.y,
             grid.z, block.x, smem);
    Call<P> c{fn, arg};
    mla_emu::Dim3 g, b;
    g.x = grid.x, g.y = grid.y, g.z = grid.z;
    b.x = block.x, b.y = block.y, b.z = block.z;
    const int st = mla_emu::launch(emu_arch(), g, b, (size_t)smem, call_entry<P>, &c, sizeof c, name, r.msg,
                                   sizeof r.msg);
    if (st != 0 && r.status == 0) {
        r.status = st;
        snprintf(g_last_msg, sizeof g_last_msg, "%s", r.msg);
        g_last_error = hipErrorLaunchFailure;
    }
    return hipSuccess; // a launch's error is read with hipGetLastError
}

} // namespace

static inline hipError_t hipFuncSetAttribute(const void *, int, int)
{
    return hipSuccess;
}
static inline hipError_t hipGetLastError()
{
    const hipError_t e = g_last_error;
    g_last_error = hipSuccess;
    return e;
}
static inline const char *hipGetErrorString(hipError_t e)
{
    return e == hipSuccess ? "no error" : e == hipErrorLaunchFailure ? g_last_msg : "no device (wave64 emulator)";
}
static inline hipError_t hipGetDeviceCount(int *n)
{
    *n = 0;
    return hipErrorNoDevice;
}

#define MLA_LAUNCH(grid, block, smem, stream, arg, ...)                                            \
    ((void)(stream), emu_hip_launch(grid, block, smem, arg, &__VA_ARGS__, #__VA_ARGS__, __PRETTY_FUNCTION__))

// ---- The library itself, unchanged ---------------------------------------
#include "api.hip"
#include "launch_generic.hip"
#include "launch_stage1_mma.hip"
#include "launch_stage2_merge.hip"

namespace mla_dev {

int emu_fast_rows(int HL)
{
    return mla_sp_fast_rows(HL, kTarget);
}

long long emu_stage2_smem(int L, int NS, int D)
{
    return stage2_smem(L, NS, D, 512);
}

const char *emu_declines(const mla_gpu_args *a, int tier)
{
    return mla_gpu_declines(a, (mla_gpu_tier)tier, nullptr);
}

// One tier through mla_gpu_run of this arch's build (api.hip): the
// workspace (the partials) is an emulator buffer whose bytes fault when read
// before stage 1 wrote them.
void emu_run_tier(mla_emu_tier_run &r)
{
    r.status = 0;
    r.declined = 0;
    r.invalid = 0;
    r.msg[0] = 0;
    r.what[0] = 0;
    g_run = &r;
    g_last_error = hipSuccess;
    g_last_msg[0] = 0;
    const mla_gpu_args &g = *r.g;
    const mla_gpu_tier tier = (mla_gpu_tier)r.tier;
    size_t bytes = 0;
    mla_error ws_err;
    if (mla_gpu_workspace_size(&g.shape, tier, nullptr, &bytes, &ws_err) == MLA_ERR_INVALID) {
        r.status = mla_emu::FAULT_CONFIG;
        r.invalid = 1;
        snprintf(r.msg, sizeof r.msg, "%s", ws_err.msg);
        g_run = nullptr;
        return;
    }
    bytes = (bytes + 255) / 256 * 256; // the buffer ends at its guard: a 256-byte multiple starts aligned
    void *ws = bytes ? mla_emu::alloc(bytes, mla_emu::BUF_TRACK_INIT, "workspace (partials)") : nullptr;
    if (bytes && !ws) {
        r.status = mla_emu::FAULT_CONFIG;
        snprintf(r.msg, sizeof r.msg, "out of memory for the workspace (%zu bytes)", bytes);
        g_run = nullptr;
        return;
    }
    mla_gpu_run_info info;
    mla_error err;
    memset(&err, 0, sizeof err);
    const mla_status st = mla_gpu_run(&g, tier, nullptr, ws, bytes, nullptr, &info, &err);
    if (r.status == 0 && st != MLA_OK) {
        r.status = mla_emu::FAULT_CONFIG;
        r.declined = st == MLA_ERR_DECLINED;
        r.invalid = st == MLA_ERR_INVALID;
        snprintf(r.msg, sizeof r.msg, "mla_gpu_run: %s", err.msg);
    }
    mla_emu::release(ws);
    g_run = nullptr;
}

} // namespace mla_dev
