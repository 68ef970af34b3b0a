/* The AMD kernels of the hip/kernels headers end to end under the emulator
 * (mla_amd_emu_run), both archs, against an fp64 reference of SPEC section
 * 2 computed here: the fast tier at K3 (H 12, L 8: the 96-row stage 1),
 * DeepSeek (H 16, L 4: 64 rows) and a small shape (32 rows), the per-head
 * and generic tiers, empty and ragged-remainder prefixes, and a decline.
 * Every launch runs at the arch's own LDS limit (hip/config.h plans: gfx942
 * 32-row blocks with Q in registers, gfx950 64-row blocks). */
#include "mla_case.h"

static const char *arch_name(mla_amd_emu_arch a)
{
    return a == MLA_AMD_EMU_GFX950 ? "gfx950" : "gfx942";
}

static void run_case(const char *name, int H, int L, int bs, const int *P, mla_gpu_tier tier, mla_amd_emu_arch arch)
{
    Case c;
    make_case(&c, H, L, bs, P);
    mla_amd_emu_info info;
    mla_error err;
    memset(&err, 0, sizeof err);
    mla_status st = mla_amd_emu_run(&c.a, c.slots, tier, arch, 0, &info, &err);
    double le = 0, w = 0;
    if (st == MLA_OK)
        w = worst(&c, &le);
    CHECK(st == MLA_OK, "%s %s: status %d: %s", name, arch_name(arch), (int)st, err.msg);
    CHECK(st != MLA_OK || (w < 0.03 && le < 2e-3), "%s %s: worst row-relative error %.3g, lse error %.3g", name,
          arch_name(arch), w, le);
    printf("%-34s %s: %s, worst |o - ref| / max|o_row| %.2e, |lse - ref| %.2e\n    %s\n", name, arch_name(arch),
           st == MLA_OK ? "ok" : "FAILED", w, le, info.launches);
    free_case(&c);
}

int main(void)
{
    static const int p_small[2] = {0, 37};
    static const int p_k3[1] = {200};
    /* 17 active splits: stage 2 shares them among 4 thread groups and adds
     * the groups' sums (a planted bug dropping the last group failed this
     * case alone, both archs). */
    static const int p_k3_long[1] = {1100};
    static const int p_ds[2] = {130, 64};
    static const int p_gen[2] = {5, 0};
    for (int ai = 0; ai < 2; ++ai) {
        const mla_amd_emu_arch arch = ai ? MLA_AMD_EMU_GFX950 : MLA_AMD_EMU_GFX942;
        /* Stage-1 LDS (hip/config.h amd_stage1_smem_plan): gfx942 49,024 B
         * (32 rows, Q in registers, one K/V stage) of 64 KiB; gfx950
         * 162,560 B at 64 rows, 118,144 B at 32 rows, of 160 KiB. */
        run_case("fast H4 L2 bs2 P{0,37}", 4, 2, 2, p_small, MLA_GPU_TIER_FAST, arch);
        run_case("fast K3 H12 L8 bs1 P200", 12, 8, 1, p_k3, MLA_GPU_TIER_FAST, arch);
        run_case("fast K3 H12 L8 bs1 P1100", 12, 8, 1, p_k3_long, MLA_GPU_TIER_FAST, arch);
        run_case("fast DeepSeek H16 L4 bs2 P{130,64}", 16, 4, 2, p_ds, MLA_GPU_TIER_FAST, arch);
        run_case("perhead H4 L2 bs2 P{0,37}", 4, 2, 2, p_small, MLA_GPU_TIER_PERHEAD, arch);
        run_case("generic H3 L3 bs2 P{5,0}", 3, 3, 2, p_gen, MLA_GPU_TIER_GENERIC, arch);
    }
    {
        Case c;
        make_case(&c, 4, 2, 2, p_small);
        c.a.shape.logit_cap = 30.f;
        mla_error err;
        mla_amd_emu_info info;
        memset(&err, 0, sizeof err);
        const mla_status st = mla_amd_emu_run(&c.a, c.slots, MLA_GPU_TIER_FAST, MLA_AMD_EMU_GFX950, 0, &info, &err);
        CHECK(st == MLA_ERR_DECLINED, "logit_cap: fast tier must decline, got %d", (int)st);
        printf("fast tier with logit_cap: %s (%s)\n", st == MLA_ERR_DECLINED ? "declined" : "NOT declined", err.msg);
        free_case(&c);
    }
    {
        /* sliding_window 0 is no value (SPEC section 6: -1 is off): the
         * library's argument check rejects it for every tier, as the fixture
         * reader and the reference do. */
        Case c;
        make_case(&c, 4, 2, 2, p_small);
        c.a.shape.sliding_window = 0;
        for (int t = MLA_GPU_TIER_AUTO; t <= MLA_GPU_TIER_GENERIC; ++t) {
            mla_error err;
            mla_amd_emu_info info;
            memset(&err, 0, sizeof err);
            const mla_status st = mla_amd_emu_run(&c.a, c.slots, (mla_gpu_tier)t, MLA_AMD_EMU_GFX942, 0, &info, &err);
            CHECK(st == MLA_ERR_INVALID && strstr(err.msg, "sliding_window"),
                  "sliding_window 0, tier %d: expected MLA_ERR_INVALID naming the field, got %d: %s", t, (int)st,
                  err.msg);
        }
        free_case(&c);
    }
    {
        /* A pool declared one slot too short for the indices: the gather of
         * the highest slot must fault with the buffer and work-item named. */
        Case c;
        make_case(&c, 4, 2, 2, p_small);
        int64_t hi = 0;
        for (int64_t t = 0; t < c.a.num_kv_indices; ++t)
            if (c.idx[t] > hi)
                hi = c.idx[t];
        mla_error err;
        mla_amd_emu_info info;
        memset(&err, 0, sizeof err);
        const mla_status st = mla_amd_emu_run(&c.a, hi, MLA_GPU_TIER_FAST, MLA_AMD_EMU_GFX950, 0, &info, &err);
        CHECK(st == MLA_ERR_RUNTIME && info.fault == 1 && strstr(err.msg, "kv_buffer"),
              "short pool: expected a global out-of-bounds fault on kv_buffer, got %d: %s", (int)st, err.msg);
        printf("kv pool one slot short: %s\n", err.msg);
        free_case(&c);
    }
    printf(g_failures ? "FAILED (%d)\n" : "all passed\n", g_failures);
    return g_failures ? 1 : 0;
}
