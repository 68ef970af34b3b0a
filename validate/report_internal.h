/* Internal to the report writers (report.c: JSON, Markdown and the
 * directory; report_html.c: the HTML page and its SVG plots): the
 * escaping, the per-backend counts and the sections both formats share. */
#ifndef MLA_REPORT_INTERNAL_H
#define MLA_REPORT_INTERNAL_H

#include "mla/report.h"

#include <stdio.h>

#define NFIELDS(a) (sizeof(a) / sizeof((a)[0]))

/* Literal markup, each followed by its text HTML-escaped. */
typedef struct {
    const char *markup, *text;
} html_part;

/* ---- counts per backend ---- */
typedef struct {
    char name[64];
    int pass, fail, declined, na, xfail;
    double worst_cos, worst_ratio, worst_bias;
    int smin, smax, s_unknown; /* split counts the runs reported (smax 0: none had splits) */
    long long hist[8];
} backend_summary;

void mla_rep_html_str(FILE *f, const char *s);
void mla_rep_html_parts(FILE *f, const html_part *ps, size_t n);
size_t mla_rep_summarise(const mla_case_result *r, size_t n, backend_summary *s, size_t cap);
void mla_rep_summary_rows(FILE *f, const backend_summary *s, size_t ns, const char *lead,
                          void (*name_out)(FILE *, const char *), const char *row_fmt);
void mla_rep_trace_section(FILE *f, const mla_case_result *r, size_t n, int html);
const char *mla_rep_splits_cell(int splits, char *buf, size_t n);
extern const char *const MLA_REP_ULP_LABELS[8];
/* The HTML page (report_html.c). */
int mla_rep_write_html(FILE *f, const mla_report_meta *meta, const mla_case_result *r, size_t n);

#endif
