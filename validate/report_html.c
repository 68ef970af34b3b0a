/* The HTML report page (mla_report_write_dir): summary, trace captures and
 * SVG plots of the judged cases; every string from a file escaped. */
#include "report_internal.h"

#include <math.h>
#include <string.h>

/* ---- SVG plots ---- */

static const char *COLORS[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                               "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

/* A judged case's point in svg_scatter: x its longest prefix (xsel 0) or
 * its split count (xsel 1; cases without one are left out), log2(x + 1)
 * when xlog; y log10 of its cos_diff. 0 when the case is not plotted. */
static int scatter_point(const mla_case_result *c, int xsel, int xlog, double *x, double *y)
{
    if ((c->verdict != MLA_VERDICT_PASS && c->verdict != MLA_VERDICT_FAIL) ||
        c->m.n_elems == 0 || (xsel && c->splits < 1))
        return 0;
    *x = xsel ? c->splits : (double)c->max_prefix;
    if (xlog)
        *x = log2(*x + 1);
    *y = log10(fmax(c->m.cos_diff, 1e-16));
    return 1;
}

/* One legend line per backend, 16 px apart: `marker` (an SVG element format
 * taking x, y and the colour) at (mx, my), the name at (tx, ty). */
static void svg_legend(FILE *f, const backend_summary *s, size_t ns, const char *marker, int mx,
                       int my, int tx, int ty)
{
    for (size_t k = 0; k < ns; ++k) {
        fprintf(f, marker, mx, my + k * 16, COLORS[k % 10]);
        fprintf(f, "<text x=\"%d\" y=\"%zu\">", tx, ty + k * 16);
        mla_rep_html_str(f, s[k].name);
        fputs("</text>\n", f);
    }
}

/* Scatter of log10(y) against x (log2 of x+1 when xlog) per backend. */
static void svg_scatter(FILE *f, const char *title, const char *xlabel, const char *ylabel,
                        const mla_case_result *r, size_t n, const backend_summary *s, size_t ns,
                        int xsel, int xlog)
{
    const int W = 640, Hh = 340, L = 70, R = 150, T = 30, B = 50;
    double xmin = INFINITY, xmax = -INFINITY, ymin = INFINITY, ymax = -INFINITY;
    for (size_t i = 0; i < n; ++i) {
        double x, y;
        if (!scatter_point(&r[i], xsel, xlog, &x, &y))
            continue;
        xmin = fmin(xmin, x), xmax = fmax(xmax, x), ymin = fmin(ymin, y), ymax = fmax(ymax, y);
    }
    fprintf(f, "<h3>");
    mla_rep_html_str(f, title);
    fprintf(f, "</h3>\n<svg width=\"%d\" height=\"%d\" xmlns=\"http://www.w3.org/2000/svg\" "
               "style=\"font:11px sans-serif;background:#fff\">\n",
            W, Hh);
    if (!isfinite(xmin)) {
        fprintf(f, "<text x=\"20\" y=\"40\">no judged cases</text></svg>\n");
        return;
    }
    if (xmax - xmin < 1e-9)
        xmax = xmin + 1;
    ymin = floor(ymin), ymax = ceil(ymax);
    if (ymax - ymin < 1)
        ymax = ymin + 1;
    const int pw = W - L - R, ph = Hh - T - B;
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#999\"/>\n",
            L, T, pw, ph);
    for (double yt = ymin; yt <= ymax + 1e-9; yt += 1) {
        double py = T + ph - (yt - ymin) / (ymax - ymin) * ph;
        fprintf(f, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/>"
                   "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">1e%.0f</text>\n",
                L, L + pw, py, py, L - 4, py + 4, yt);
    }
    /* Integer axes with few values get one tick per integer. */
    int nt = (!xlog && xmax - xmin <= 10) ? (int)(xmax - xmin + 0.5) : 5;
    if (nt < 1)
        nt = 1;
    for (int k = 0; k <= nt; ++k) {
        double xv = xmin + (xmax - xmin) * k / nt;
        double px = L + (double)pw * k / nt;
        double lab = xlog ? exp2(xv) - 1 : xv;
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%.0f</text>\n", px,
                T + ph + 14, lab);
    }
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">", L + pw / 2, Hh - 10);
    mla_rep_html_str(f, xlabel);
    fprintf(f, "</text><text x=\"14\" y=\"%d\" transform=\"rotate(-90 14 %d)\" "
               "text-anchor=\"middle\">",
            T + ph / 2, T + ph / 2);
    mla_rep_html_str(f, ylabel);
    fprintf(f, "</text>\n");
    for (size_t i = 0; i < n; ++i) {
        double x, y;
        if (!scatter_point(&r[i], xsel, xlog, &x, &y))
            continue;
        size_t k = 0;
        while (k < ns && strcmp(s[k].name, r[i].backend) != 0)
            ++k;
        double px = L + (x - xmin) / (xmax - xmin) * pw + (double)(k % 5) * 2 - 4;
        double py = T + ph - (y - ymin) / (ymax - ymin) * ph;
        if (r[i].verdict == MLA_VERDICT_FAIL)
            fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" fill=\"%s\" text-anchor=\"middle\">x</text>",
                    px, py + 4, COLORS[k % 10]);
        else
        {
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\" fill-opacity=\"0.7\">"
                       "<title>",
                    px, py, COLORS[k % 10]);
            const html_part t[] = {{"", r[i].fixture}, {" ", r[i].backend}};
            mla_rep_html_parts(f, t, NFIELDS(t));
            fprintf(f, " cos %.2e</title></circle>", r[i].m.cos_diff);
        }
    }
    svg_legend(f, s, ns, "<circle cx=\"%d\" cy=\"%zu\" r=\"4\" fill=\"%s\"/>", L + pw + 14, T + 8,
               L + pw + 22, T + 12);
    fprintf(f, "</svg>\n");
}

static void svg_hist(FILE *f, const backend_summary *s, size_t ns)
{
    const int W = 640, Hh = 300, L = 60, T = 20, B = 50, R = 150;
    const int pw = W - L - R, ph = Hh - T - B;
    fprintf(f, "<h3>Histogram of |o - ref| in bf16 ulps of ref (share of elements)</h3>\n"
               "<svg width=\"%d\" height=\"%d\" xmlns=\"http://www.w3.org/2000/svg\" "
               "style=\"font:11px sans-serif;background:#fff\">\n",
            W, Hh);
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#999\"/>\n",
            L, T, pw, ph);
    for (int t = 0; t <= 4; ++t) {
        double py = T + ph - ph * t / 4.0;
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%d%%</text>", L - 4, py + 4,
                25 * t);
    }
    size_t nb = ns ? ns : 1;
    double gw = (double)pw / 8.0, bw = (gw - 6) / (double)nb;
    for (int b = 0; b < 8; ++b) {
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>",
                L + gw * b + gw / 2, T + ph + 14, MLA_REP_ULP_LABELS[b]);
        for (size_t k = 0; k < ns; ++k) {
            long long tot = 0;
            for (int j = 0; j < 8; ++j)
                tot += s[k].hist[j];
            double frac = tot ? (double)s[k].hist[b] / (double)tot : 0;
            double h = frac * ph;
            fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\">"
                       "<title>",
                    L + gw * b + 3 + bw * (double)k, T + ph - h, bw, h, COLORS[k % 10]);
            mla_rep_html_str(f, s[k].name);
            fprintf(f, " %s: %.2f%%</title></rect>", MLA_REP_ULP_LABELS[b], 100 * frac);
        }
    }
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">|o - ref| / ulp(ref)</text>\n",
            L + pw / 2, Hh - 10);
    svg_legend(f, s, ns, "<rect x=\"%d\" y=\"%zu\" width=\"10\" height=\"10\" fill=\"%s\"/>",
               L + pw + 10, T + 4, L + pw + 24, T + 13);
    fprintf(f, "</svg>\n");
}


int mla_rep_write_html(FILE *f, const mla_report_meta *meta, const mla_case_result *r, size_t n)
{
    backend_summary s[32];
    size_t ns = mla_rep_summarise(r, n, s, 32);
    int nfail = 0;
    for (size_t k = 0; k < ns; ++k)
        nfail += s[k].fail;
    fprintf(f, "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>MLA verify validation"
               "</title>\n<style>body{font:14px sans-serif;margin:24px;max-width:1200px}"
               "table{border-collapse:collapse;font-size:12px}td,th{border:1px solid #ccc;"
               "padding:3px 6px}.PASS{color:#1a7f37}.FAIL,.ERROR{color:#c00;font-weight:bold}"
               ".DECLINED{color:#666}.banner{padding:8px 12px;font-size:16px;margin:8px 0}"
               ".ok{background:#dafbe1}.bad{background:#ffebe9}</style></head><body>\n");
    fprintf(f, "<h1>MLA verify validation report</h1>\n<div class=\"banner %s\">%s</div>\n",
            nfail ? "bad" : "ok",
            nfail ? "FAILURES: see the table below" : "Every judged case passed");
    const html_part head[] = {{"<p>commit <code>", meta->commit},
                              {"</code> &middot; ", meta->date},
                              {"<br>machine: ", meta->machine},
                              {"<br>command: <code>", meta->command},
                              {"</code><br>backends: ", meta->backends}};
    mla_rep_html_parts(f, head, NFIELDS(head));
    fprintf(f, "</p>\n<h2>Summary</h2>\n<table><tr><th>backend</th><th>pass</th><th>fail</th>"
               "<th>expected fail</th><th>declined</th><th>n/a</th><th>splits ran</th><th>worst cos_diff</th>"
               "<th>worst bound ratio</th><th>worst bias ratio</th></tr>\n");
    mla_rep_summary_rows(f, s, ns, "<tr><td>", mla_rep_html_str,
                 "</td><td>%d</td><td>%d</td><td>%d</td><td>%d</td><td>%d</td><td>%s</td>"
                 "<td>%.2e</td><td>%.3f</td><td>%.3f</td></tr>\n");
    mla_rep_trace_section(f, r, n, 1);
    fprintf(f, "</table>\n<h2>Plots</h2>\n");
    svg_scatter(f, "Tensor cos_diff against the longest prefix in the case",
                "longest prefix (keys, log scale)", "cos_diff (log)", r, n, s, ns, 0, 1);
    svg_scatter(f, "Tensor cos_diff against the split count each run reported",
                "active splits (fast-path plan)", "cos_diff (log)", r, n, s, ns, 1, 0);
    svg_hist(f, s, ns);
    fprintf(f, "<h2>Every case</h2>\n<table><tr><th>fixture</th><th>family</th><th>backend</th>"
               "<th>verdict</th><th>max prefix</th><th>splits</th><th>cos_diff</th>"
               "<th>worst row cos</th><th>max abs</th><th>bound ratio</th><th>1 ulp</th>"
               "<th>note</th></tr>\n");
    for (size_t i = 0; i < n; ++i) {
        const mla_case_result *c = &r[i];
        int judged = c->verdict == MLA_VERDICT_PASS || c->verdict == MLA_VERDICT_FAIL;
        const html_part names[] = {
            {"<tr><td>", c->fixture}, {"</td><td>", c->family}, {"</td><td>", c->backend}};
        mla_rep_html_parts(f, names, NFIELDS(names));
        char sb[16];
        fprintf(f, "</td><td class=\"%s\">%s</td><td>%lld</td><td>%s</td>",
                mla_verdict_name(c->verdict), mla_verdict_name(c->verdict),
                (long long)c->max_prefix, mla_rep_splits_cell(c->splits, sb, sizeof sb));
        if (judged && c->m.n_elems)
            fprintf(f, "<td>%.2e</td><td>%.2e</td><td>%.3g</td><td>%.3f</td><td>%.1f%%</td>",
                    c->m.cos_diff, c->m.worst_row_cos, c->m.max_abs, c->m.worst_ratio,
                    100 * c->m.within_1ulp);
        else
            fprintf(f, "<td></td><td></td><td></td><td></td><td></td>");
        fprintf(f, "<td>");
        mla_rep_html_str(f, c->reason);
        fprintf(f, "</td></tr>\n");
    }
    fprintf(f, "</table>\n</body></html>\n");
    return !ferror(f);
}

