/* The fp32 reference against the fp64 oracle on every catalogue case that
 * ships (large = 0), generated in memory from its default seed; with
 * --large, on the cases made at test time instead (large = 1: prefixes of
 * 4k to 128k; the oracle takes tens of seconds there). Prints the error
 * ratios per case and the worst per family; the limit and the error model
 * behind the ratios are in ref_test_util.c. */
#include <stdio.h>
#include <string.h>

#include "ref_test_util.h"

#define MAX_FAMILIES 64

int main(int argc, char **argv)
{
    static const char *const known[] = {"--large", NULL};
    rt_cli(argc, argv,
           "Checks the fp32 reference against the fp64 oracle on every catalogue case\n"
           "(--large: the large ones too).",
           known);
    const int want_large = argc > 1 && strcmp(argv[1], "--large") == 0;
    struct {
        const char *name;
        double o, lse;
        int cases;
    } fam[MAX_FAMILIES];
    int nfam = 0, failed = 0, ran = 0;
    const size_t n = mla_catalogue_count();
    printf("%-22s %-12s %10s %10s %10s %10s %8s %6s\n", "case", "family", "o_ratio",
           "lse_ratio", "max_abs", "max_rel", "E", "rows");
    for (size_t i = 0; i < n; i++) {
        const mla_case_info *info = mla_catalogue_get(i);
        if (info->large != want_large)
            continue;
        mla_fixture fx;
        mla_error err = {{0}};
        mla_status st =
            mla_catalogue_generate(info->name, mla_catalogue_default_seed(info->name), &fx, &err);
        if (st != MLA_OK) {
            printf("FAIL %s: generate: %s: %s\n", info->name, mla_status_name(st), err.msg);
            failed = 1;
            continue;
        }
        const mla_ref_opts opts = mla_ref_opts_default();
        rt_cmp r;
        if (rt_compare(&fx, &opts, &r) != 0) {
            printf("FAIL %s: run failed\n", info->name);
            failed = 1;
            mla_fixture_free(&fx);
            continue;
        }
        mla_fixture_free(&fx);
        ran++;
        const int ok =
            r.failures == 0 && r.o_ratio <= RT_RATIO_LIMIT && r.lse_ratio <= RT_RATIO_LIMIT;
        failed |= !ok;
        printf("%-22s %-12s %10.4f %10.4f %10.3g %10.3g %8.1f %6ld%s\n", info->name, info->family,
               r.o_ratio, r.lse_ratio, r.max_abs, r.max_rel, r.dot_err, r.rows, ok ? "" : "  FAIL");
        int f = 0;
        while (f < nfam && strcmp(fam[f].name, info->family) != 0)
            f++;
        if (f == nfam && nfam < MAX_FAMILIES) {
            fam[f].name = info->family;
            fam[f].o = fam[f].lse = 0;
            fam[f].cases = 0;
            nfam++;
        }
        if (f < nfam) {
            fam[f].o = r.o_ratio > fam[f].o ? r.o_ratio : fam[f].o;
            fam[f].lse = r.lse_ratio > fam[f].lse ? r.lse_ratio : fam[f].lse;
            fam[f].cases++;
        }
    }
    printf("\nper family (worst case), limit %.1f:\n%-12s %6s %10s %10s\n", RT_RATIO_LIMIT,
           "family", "cases", "o_ratio", "lse_ratio");
    for (int f = 0; f < nfam; f++)
        printf("%-12s %6d %10.4f %10.4f\n", fam[f].name, fam[f].cases, fam[f].o, fam[f].lse);
    if (ran == 0) {
        printf("FAIL: the catalogue has no %s case to compare\n",
               want_large ? "large = 1" : "shipped (large = 0)");
        failed = 1;
    }
    printf("%s\n", failed ? "FAILED" : "all catalogue cases within the limit");
    return failed;
}
