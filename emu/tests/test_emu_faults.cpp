// Fatal on hardware, fatal here: planted kernel bugs and the fault each must
// produce (status code, message with workgroup / work-item / address), and
// the process carries on (a good kernel runs after every fault).
#include "emu_test_util.h"

#include <stdint.h>

struct FArgs {
    float *out;
    const float *in;
    int n;
    int variant;
};

// A correct LDS exchange; the variants plant one bug each.
static void k_lds(const FArgs &p)
{
    const int t = (int)threadIdx.x, n = (int)blockDim.x;
    float *s = (float *)emu_test::lds;
    switch (p.variant) {
    case 0: // correct: store, barrier, read another wave's element
        s[t] = p.in[t];
        __syncthreads();
        p.out[t] = s[(t + 64) % n];
        break;
    case 1: // missing barrier: wave 1 reads what wave 0 stored in this epoch
        s[t] = p.in[t];
        p.out[t] = s[t >= 64 ? t - 64 : t];
        break;
    case 2: // off-by-one LDS offset: s[t + 1] for a launch of n floats
        s[t + 1] = p.in[t];
        break;
    case 3: // read before any store (uninitialised LDS)
        p.out[t] = s[t];
        break;
    case 4: // double buffer overwritten without a barrier after the reads (WAR)
        s[t] = p.in[t];
        __syncthreads();
        p.out[t] = s[(t + 64) % n];
        s[t] = 0.f; // another wave may still read this: needs a barrier first
        break;
    case 5: // barrier in divergent code
        if (t < 64)
            __syncthreads();
        else
            __syncthreads();
        break;
    case 6: // work-items exit before a barrier the others wait at
        if (t >= 64)
            return;
        __syncthreads();
        break;
    case 7: // global read one past the end of `in` (n floats)
        p.out[t] = p.in[t + 1];
        break;
    case 8: // store into a read-only input
        ((float *)p.in)[t] = 1.f;
        break;
    case 9: // read of a tracked output never written
        p.out[t] = p.out[(t + 1) % n] + 1.f;
        break;
    case 10: { // MFMA in divergent code
        typedef short v4s __attribute__((ext_vector_type(4)));
        typedef float v16f __attribute__((ext_vector_type(16)));
        v4s a = {0, 0, 0, 0};
        v16f c = {};
        if (t % 64 < 32)
            c = __builtin_amdgcn_mfma_f32_32x32x8bf16_1k(a, a, c, 0, 0, 0);
        p.out[t] = c[0];
        break;
    }
    case 12: { // a 16-byte vector type at an LDS offset that is only 4-byte aligned
        typedef float v4f __attribute__((ext_vector_type(4)));
        s[t] = p.in[t];
        __syncthreads();
        if (t < 16)
            p.out[t] = (*(const v4f *)(s + 4 * t + 1))[0];
        break;
    }
    case 11: { // another work-item's private memory through LDS
        float mine[4] = {1, 2, 3, (float)t};
        if (t < 64)
            ((float **)s)[t] = mine;
        __syncthreads();
        if (t < 64)
            p.out[t] = ((float **)s)[(t + 1) % 64][3];
        __syncthreads();
        break;
    }
    }
}

static void expect(int variant, int want, const char *what, int track_out = 0)
{
    const int n = 128;
    float *in = galloc<float>(n, "in", mla_emu::BUF_READONLY);
    float *out = galloc<float>(n, "out", track_out ? mla_emu::BUF_TRACK_INIT : 0);
    FArgs p{out, in, n, variant};
    char msg[1024];
    const int st = run_kernel<FArgs, k_lds>(p, d3(2), d3(n), n * sizeof(float), "k_lds", msg, sizeof msg);
    CHECK(st == want, "%s: status %d (%s), want %d (%s): %s", what, st, mla_emu::status_name(st), want,
          mla_emu::status_name(want), msg);
    printf("%-58s -> %s\n    %s\n", what, mla_emu::status_name(st), msg[0] ? msg : "(no fault)");
    mla_emu::release(in);
    mla_emu::release(out);
    // The runtime recovers: the correct kernel runs after every fault.
    if (want != 0) {
        in = galloc<float>(n, "in");
        out = galloc<float>(n, "out");
        for (int i = 0; i < n; ++i)
            in[i] = (float)i;
        FArgs q{out, in, n, 0};
        const int s2 = run_kernel<FArgs, k_lds>(q, d3(2), d3(n), n * sizeof(float), "k_lds", msg, sizeof msg);
        CHECK(s2 == 0 && out[0] == 64.f && out[127] == 63.f, "recovery after %s: %d %s", what, s2, msg);
        mla_emu::release(in);
        mla_emu::release(out);
    }
}

int main()
{
    printf("emulated %s\n", ARCH_NAME);
    expect(0, mla_emu::OK, "correct LDS exchange");
    expect(1, mla_emu::FAULT_LDS_RACE, "planted: missing barrier (RAW across waves)");
    expect(2, mla_emu::FAULT_LDS_OOB, "planted: off-by-one LDS offset");
    expect(3, mla_emu::FAULT_LDS_UNINIT, "planted: LDS read before any store");
    expect(4, mla_emu::FAULT_LDS_RACE, "planted: LDS overwritten before others' reads (WAR)");
    expect(5, mla_emu::FAULT_BARRIER, "planted: barriers at different sites");
    expect(6, mla_emu::FAULT_BARRIER, "planted: exit before a barrier");
    expect(7, mla_emu::FAULT_GLOBAL_OOB, "planted: global read one past the end");
    expect(8, mla_emu::FAULT_GLOBAL_READONLY, "planted: store into a read-only input");
    expect(9, mla_emu::FAULT_GLOBAL_UNINIT, "planted: read of never-written output", 1);
    expect(10, mla_emu::FAULT_DIVERGENT_MFMA, "planted: MFMA under a divergent branch");
    expect(11, mla_emu::FAULT_PRIVATE, "planted: another work-item's private memory");
    expect(12, mla_emu::FAULT_LDS_MISALIGNED, "planted: 16-byte vector at a 4-byte aligned LDS offset");
    {
        char msg[512];
        float *o = galloc<float>(4, "o");
        FArgs p{o, o, 4, 0};
        const int st = run_kernel<FArgs, k_lds>(p, d3(1), d3(64), mla_emu::lds_arch_limit(ARCH) + 4, "k_lds", msg,
                                                sizeof msg);
        CHECK(st == mla_emu::FAULT_CONFIG, "LDS over the arch limit: %d %s", st, msg);
        printf("%-58s -> %s\n    %s\n", "launch with LDS over the arch limit", mla_emu::status_name(st), msg);
        mla_emu::release(o);
    }
    printf(g_failures ? "FAILED (%d)\n" : "all passed\n", g_failures);
    return g_failures ? 1 : 0;
}
