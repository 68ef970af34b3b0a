/* Validation reports: Markdown summary, JSON with every metric, and a
 * self-contained HTML page with SVG plots (no network needed to view it). */
#ifndef MLA_REPORT_H
#define MLA_REPORT_H

#include "mla/validate.h"

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    const char *commit;
    const char *machine;
    const char *command;
    const char *date;
    const char *backends; /* comma-separated */
} mla_report_meta;

/* Writes DIR/report.md, DIR/report.json and DIR/report.html (DIR is
 * created if missing). */
mla_status mla_report_write_dir(const char *dir, const mla_report_meta *meta,
                                const mla_case_result *r, size_t n, mla_error *err);

mla_status mla_report_write_json(const char *path, const mla_report_meta *meta,
                                 const mla_case_result *r, size_t n, mla_error *err);

/* The bias test's noise per backend and group level (issue 18) as
 * markdown: per backend and level the worst |s-1| over its judged cases
 * (against the fp64 oracle where it ran), the threshold of the worst group
 * and the largest |s-1|/threshold; with per_case, a table per case too.
 * Returns 0 on a write error. */
int mla_report_bias_noise_md(FILE *f, const mla_case_result *r, size_t n, int per_case);

#ifdef __cplusplus
}
#endif
#endif
