/* The shipped fixtures (fixtures/data) through the emulated AMD tiers, as
 * the validator's amd-gfx942-emu / amd-gfx950-emu backends would run them
 * (mla_amd_emu_backend_run), judged against the fp32 reference: every tier
 * must decline exactly what the fast path's rules decline, and what runs
 * must be within the bf16-partials bound and fault-free. The fast and
 * per-head tiers run with the LDS limit lifted (their stage 1 does not fit
 * the hardware's LDS: emu/README.md); the generic tier without. */
#include "mla_amd_emu.h"
#include "mla/fixture.h"
#include "mla/reference.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

static float bf(mla_bf16 b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static int cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s FIXTURE_DIR\n", argv[0]);
        return 2;
    }
    DIR *d = opendir(argv[1]);
    if (!d) {
        printf("FAIL: cannot open %s\n", argv[1]);
        return 1;
    }
    char *names[256];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 256) {
        const size_t l = strlen(e->d_name);
        if (l > 3 && !strcmp(e->d_name + l - 3, ".h5"))
            names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof names[0], cmp);
    static const struct {
        const char *name;
        int tier;
        mla_amd_emu_arch arch;
        unsigned flags;
    } runs[] = {
        {"fast gfx942", MLA_GPU_TIER_FAST, MLA_AMD_EMU_GFX942, MLA_AMD_EMU_RELAX_LDS},
        {"fast gfx950", MLA_GPU_TIER_FAST, MLA_AMD_EMU_GFX950, MLA_AMD_EMU_RELAX_LDS},
        {"perhead gfx950", MLA_GPU_TIER_PERHEAD, MLA_AMD_EMU_GFX950, MLA_AMD_EMU_RELAX_LDS},
        {"generic gfx942", MLA_GPU_TIER_GENERIC, MLA_AMD_EMU_GFX942, 0},
    };
    for (int f = 0; f < n; ++f) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", argv[1], names[f]);
        mla_fixture fx;
        mla_error err;
        memset(&err, 0, sizeof err);
        if (mla_fixture_read(path, &fx, &err) != MLA_OK) {
            printf("FAIL %s: %s\n", names[f], err.msg);
            ++failures;
            continue;
        }
        const size_t T = (size_t)fx.num_q_tokens, H = (size_t)fx.cfg.num_heads, Dv = (size_t)fx.cfg.v_head_dim;
        float *ro = malloc(sizeof(float) * (T * H * Dv + 1)), *rl = malloc(sizeof(float) * (T * H + 1));
        mla_bf16 *o = malloc(sizeof(mla_bf16) * (T * H * Dv + 1));
        float *l = malloc(sizeof(float) * (T * H + 1));
        if (mla_reference_run(&fx, ro, rl, &err) != MLA_OK) {
            printf("FAIL %s: reference: %s\n", names[f], err.msg);
            ++failures;
        } else {
            for (size_t r = 0; r < sizeof runs / sizeof runs[0]; ++r) {
                memset(&err, 0, sizeof err);
                const mla_status st =
                    mla_amd_emu_backend_run(&fx, runs[r].tier, runs[r].arch, runs[r].flags, o, l, &err);
                if (st == MLA_ERR_DECLINED) {
                    const int must_run = runs[r].tier == MLA_GPU_TIER_GENERIC;
                    if (must_run) {
                        printf("FAIL %-26s %-15s declined: %s\n", names[f], runs[r].name, err.msg);
                        ++failures;
                    } else {
                        printf("     %-26s %-15s declined: %s\n", names[f], runs[r].name, err.msg);
                    }
                    continue;
                }
                if (st != MLA_OK) {
                    printf("FAIL %-26s %-15s %s\n", names[f], runs[r].name, err.msg);
                    ++failures;
                    continue;
                }
                double w = 0, le = 0;
                for (size_t row = 0; row < T * H; ++row) {
                    double mx = 1e-6;
                    for (size_t c = 0; c < Dv; ++c)
                        if (fabs(ro[row * Dv + c]) > mx)
                            mx = fabs(ro[row * Dv + c]);
                    for (size_t c = 0; c < Dv; ++c) {
                        const double x = fabs(bf(o[row * Dv + c]) - ro[row * Dv + c]) / mx;
                        if (!(x <= w))
                            w = isnan(x) ? INFINITY : x;
                    }
                    const double dl = isinf(rl[row]) && rl[row] == l[row] ? 0 : fabs(l[row] - rl[row]) / (1 + fabs(rl[row]));
                    if (!(dl <= le))
                        le = isnan(dl) ? INFINITY : dl;
                }
                const int ok = w < 0.03 && le < 1e-3;
                printf("%s %-26s %-15s worst |o - ref| / max|o_row| %.2e, lse %.2e\n", ok ? "    " : "FAIL", names[f],
                       runs[r].name, w, le);
                failures += !ok;
            }
        }
        free(ro);
        free(rl);
        free(o);
        free(l);
        mla_fixture_free(&fx);
        free(names[f]);
    }
    printf(failures ? "FAILED (%d)\n" : "all passed\n", failures);
    return failures ? 1 : 0;
}
