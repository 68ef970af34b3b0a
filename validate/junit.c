/* --junit FILE: the results as JUnit XML, the format CI systems read into
 * their test tabs. One <testcase> per fixture and backend (classname: the
 * backend); FAIL and ERROR are <failure>, N/A and DECLINED <skipped>, an
 * expected failure (XFAIL) <skipped> saying so. */
#include "internal.h"
#include "mla/fsutil.h"

#include <string.h>

/* XML text or attribute: markup escaped; control bytes XML 1.0 forbids
 * become '?' (file names and reasons come from files). */
static void xml_str(FILE *f, const char *s)
{
    for (; s && *s; ++s) {
        const unsigned char c = (unsigned char)*s;
        switch (c) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&apos;", f); break;
        default: fputc(c < 0x20 && c != '\t' && c != '\n' ? '?' : c, f);
        }
    }
}

static int write_junit(FILE *f, const mla_case_result *r, size_t n)
{
    size_t fails = 0, skipped = 0;
    double total = 0;
    for (size_t i = 0; i < n; ++i) {
        const int fail = (r[i].verdict == MLA_VERDICT_FAIL || r[i].verdict == MLA_VERDICT_ERROR) &&
                         !r[i].expected_fail;
        fails += fail;
        skipped += !fail && r[i].verdict != MLA_VERDICT_PASS;
        total += r[i].seconds;
    }
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n"
               "<testsuite name=\"mla-validate\" tests=\"%zu\" failures=\"%zu\" errors=\"0\" "
               "skipped=\"%zu\" time=\"%.3f\">\n",
            n, fails, skipped, total);
    for (size_t i = 0; i < n; ++i) {
        const mla_case_result *c = &r[i];
        fputs("  <testcase classname=\"", f);
        xml_str(f, c->backend);
        fputs("\" name=\"", f);
        xml_str(f, c->fixture);
        fprintf(f, "\" time=\"%.3f\"", c->seconds);
        const char *tag = NULL, *prefix = "";
        if (c->expected_fail)
            tag = "skipped", prefix = "expected failure (known-bad capture): ";
        else if (c->verdict == MLA_VERDICT_FAIL || c->verdict == MLA_VERDICT_ERROR)
            tag = "failure", prefix = c->verdict == MLA_VERDICT_ERROR ? "ERROR: " : "";
        else if (c->verdict != MLA_VERDICT_PASS)
            tag = "skipped", prefix = c->verdict == MLA_VERDICT_NA ? "N/A: " : "DECLINED: ";
        if (!tag) {
            fputs("/>\n", f);
            continue;
        }
        fprintf(f, ">\n    <%s message=\"%s", tag, prefix);
        xml_str(f, c->reason);
        fprintf(f, "\"%s/>\n  </testcase>\n", strcmp(tag, "failure") ? "" : " type=\"FAIL\"");
    }
    fputs("</testsuite>\n</testsuites>\n", f);
    return !ferror(f);
}

mla_status val_write_junit(const char *path, const mla_case_result *r, size_t n, mla_error *err)
{
    mla_atomic_file a;
    if (mla_atomic_open(&a, path, err) != MLA_OK)
        return MLA_ERR_IO;
    return mla_atomic_close(&a, write_junit(a.f, r, n), err);
}
