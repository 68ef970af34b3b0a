/* Validation reports. The HTML page draws its plots as inline SVG so it
 * opens anywhere, offline, and can be attached to a review as one file. */
#include "mla/report.h"
#include "mla/fsutil.h"
#include "report_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Length of the valid UTF-8 sequence at s (1..4), or 0 when the bytes there
 * are not one (overlong, surrogate, truncated, out of range). */
static int utf8_len(const unsigned char *s)
{
    if (s[0] < 0x80)
        return 1;
    int n;
    uint32_t cp;
    if ((s[0] & 0xe0) == 0xc0)
        n = 2, cp = s[0] & 0x1f;
    else if ((s[0] & 0xf0) == 0xe0)
        n = 3, cp = s[0] & 0x0f;
    else if ((s[0] & 0xf8) == 0xf0)
        n = 4, cp = s[0] & 0x07;
    else
        return 0;
    for (int i = 1; i < n; ++i) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return n;
}

/* A JSON string. Names come from files (case_name is any byte string), so
 * bytes that are not UTF-8 are written as \u00XX of the byte (the JSON
 * stays valid; the byte value stays visible). */
static void json_str(FILE *f, const char *str)
{
    const unsigned char *s = (const unsigned char *)str;
    fputc('"', f);
    while (s && *s) {
        const unsigned char c = *s;
        if (c == '"' || c == '\\') {
            fprintf(f, "\\%c", c);
            s++;
        } else if (c < 0x20 || c == 0x7f) {
            fprintf(f, "\\u%04x", c);
            s++;
        } else {
            const int n = utf8_len(s);
            if (n == 0) {
                fprintf(f, "\\u%04x", c);
                s++;
            } else {
                fwrite(s, 1, (size_t)n, f);
                s += n;
            }
        }
    }
    fputc('"', f);
}

/* The split count a run reported: "-" when its path has none, "?" when the
 * backend could not tell. */
const char *mla_rep_splits_cell(int splits, char *buf, size_t n)
{
    if (splits == MLA_SPLITS_NONE)
        return "-";
    if (splits == MLA_SPLITS_UNKNOWN)
        return "?";
    snprintf(buf, n, "%d", splits);
    return buf;
}

/* JSON has no inf/NaN: write null. */
static void json_num(FILE *f, double v)
{
    if (isfinite(v))
        fprintf(f, "%.6g", v);
    else
        fputs("null", f);
}

void mla_rep_html_str(FILE *f, const char *s)
{
    for (; s && *s; ++s) {
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&#39;", f); break;
        default: fputc(*s, f);
        }
    }
}


void mla_rep_html_parts(FILE *f, const html_part *ps, size_t n)
{
    for (size_t k = 0; k < n; ++k) {
        fputs(ps[k].markup, f);
        mla_rep_html_str(f, ps[k].text);
    }
}

/* Text from a file in a Markdown table cell: a '|' or a line break would
 * end the cell, markup would be rendered; written as entities instead. */
static void md_str(FILE *f, const char *s)
{
    for (; s && *s; ++s) {
        switch (*s) {
        case '|': fputs("&#124;", f); break;
        case '\n': case '\r': fputc(' ', f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '`': fputs("&#96;", f); break;
        default: fputc(*s, f);
        }
    }
}

/* Named values of one JSON object, written in order after its first key. */
typedef struct {
    const char *key, *v;
} json_str_field;
typedef struct {
    const char *key;
    double v;
} json_num_field;

static void json_strs(FILE *f, const char *sep, const json_str_field *fs, size_t n)
{
    for (size_t k = 0; k < n; ++k) {
        fprintf(f, "%s\"%s\": ", sep, fs[k].key);
        json_str(f, fs[k].v);
    }
}

static void json_nums(FILE *f, const json_num_field *fs, size_t n)
{
    for (size_t k = 0; k < n; ++k) {
        fprintf(f, ", \"%s\": ", fs[k].key);
        json_num(f, fs[k].v);
    }
}


static int write_json_file(FILE *f, const mla_report_meta *meta, const mla_case_result *r,
                           size_t n)
{
    fputs("{\n  \"commit\": ", f);
    json_str(f, meta->commit);
    const json_str_field head[] = {{"machine", meta->machine}, {"command", meta->command},
                                   {"date", meta->date}, {"backends", meta->backends}};
    json_strs(f, ",\n  ", head, NFIELDS(head));
    fputs(",\n  \"results\": [\n", f);
    for (size_t i = 0; i < n; ++i) {
        const mla_case_result *c = &r[i];
        const mla_metrics *m = &c->m;
        fputs("    {\"fixture\": ", f);
        json_str(f, c->fixture);
        const json_str_field names[] = {
            {"case", c->case_name}, {"family", c->family}, {"backend", c->backend},
            {"path", mla_path_name(c->path)}, {"verdict", mla_verdict_name(c->verdict)},
            {"reason", c->reason}};
        json_strs(f, ", ", names, NFIELDS(names));
        fprintf(f, ", \"expected_failure\": %s", c->expected_fail ? "true" : "false");
        fprintf(f, ", \"num_seqs\": %d, \"num_heads\": %d, \"q_len\": %d, \"max_prefix\": %lld, "
                   "\"splits\": ",
                c->num_seqs, c->num_heads, c->q_len, (long long)c->max_prefix);
        if (c->splits == MLA_SPLITS_UNKNOWN)
            fputs("null", f); /* the backend did not report it */
        else
            fprintf(f, "%d", c->splits);
        const json_num_field metrics[] = {
            {"seconds", c->seconds}, {"max_abs", m->max_abs},
            {"worst_row_rel", m->worst_row_rel}, {"nmse", m->nmse},
            {"cos_diff", m->cos_diff}, {"worst_row_cos", m->worst_row_cos},
            {"within_1ulp", m->within_1ulp}, {"worst_ratio", m->worst_ratio},
            {"lse_max_abs", m->lse_max_abs}, {"lse_ratio", m->lse_ratio},
            {"cos_vs_oracle", m->cos_vs_oracle}, {"max_abs_vs_oracle", m->max_abs_vs_oracle},
            {"bias_ratio", m->bias_ratio}, {"bias_slope", m->bias_slope},
            {"bias_threshold", m->bias_threshold}};
        json_nums(f, metrics, NFIELDS(metrics));
        fputs(", \"bias_group\": ", f);
        json_str(f, m->bias_group);
        fprintf(f, ", \"n_bias_groups\": %lld, \"n_bias_over\": %lld, \"n_bias_apriori_p\": %lld",
                (long long)m->n_bias_groups, (long long)m->n_bias_over,
                (long long)m->n_bias_apriori_p);
        /* The bias test's noise per group level: the largest |s-1| (against
         * the judge's baseline and against the oracle, -1 where it did not
         * run), its group and threshold, the level's largest |s-1|/tau. */
        fputs(", \"bias_levels\": {", f);
        for (int l = 0; l < MLA_BIAS_LEVELS; ++l) {
            const mla_bias_level_stats *b = &m->bias_level[l];
            fprintf(f, "%s\"%s\": {\"groups\": %lld", l ? ", " : "", mla_bias_level_name(l),
                    (long long)b->n);
            const json_num_field lv[] = {{"worst_dev", b->dev}, {"tau_of_worst", b->tau},
                                         {"worst_ratio", b->ratio},
                                         {"worst_dev_vs_oracle", b->dev_oracle}};
            json_nums(f, lv, NFIELDS(lv));
            fputs(", \"group\": ", f);
            json_str(f, b->group);
            fputc('}', f);
        }
        fputc('}', f);
        const json_num_field limits[] = {
            {"cos_limit", m->cos_limit}, {"row_cos_limit", m->row_cos_limit}, {"rel_tol", m->rel_tol}};
        json_nums(f, limits, NFIELDS(limits));
        fprintf(f, ", \"n_compared\": %lld, \"n_ref_nonfinite\": %lld",
                (long long)m->n_compared, (long long)m->n_ref_nonfinite);
        fprintf(f, ", \"n_elems\": %lld, \"n_nan\": %lld, \"n_unwritten\": %lld, \"n_over\": %lld, "
                   "\"n_rows_over\": %lld, \"ulp_hist\": [",
                (long long)m->n_elems, (long long)m->n_nan, (long long)m->n_unwritten,
                (long long)m->n_over, (long long)m->n_rows_over);
        for (int k = 0; k < 8; ++k)
            fprintf(f, "%s%d", k ? ", " : "", m->ulp_hist[k]);
        fprintf(f, "]}%s\n", i + 1 < n ? "," : "");
    }
    fputs("  ]\n}\n", f);
    return !ferror(f);
}

typedef int (*report_writer)(FILE *, const mla_report_meta *, const mla_case_result *, size_t);

/* Open, write, close: every failure is an I/O error naming the file. */
static mla_status write_file(const char *path, report_writer w, const mla_report_meta *meta,
                             const mla_case_result *r, size_t n, mla_error *err)
{
    mla_atomic_file a;
    mla_status st = mla_atomic_open(&a, path, err);
    if (st != MLA_OK)
        return st;
    return mla_atomic_close(&a, w(a.f, meta, r, n), err);
}

mla_status mla_report_write_json(const char *path, const mla_report_meta *meta,
                                 const mla_case_result *r, size_t n, mla_error *err)
{
    return write_file(path, write_json_file, meta, r, n, err);
}

/* ---- counts per backend ---- */


size_t mla_rep_summarise(const mla_case_result *r, size_t n, backend_summary *s, size_t cap)
{
    size_t ns = 0;
    for (size_t i = 0; i < n; ++i) {
        size_t k = 0;
        while (k < ns && strcmp(s[k].name, r[i].backend) != 0)
            ++k;
        if (k == ns) {
            if (ns == cap)
                continue;
            memset(&s[ns], 0, sizeof s[ns]);
            snprintf(s[ns].name, sizeof s[ns].name, "%s", r[i].backend);
            ++ns;
        }
        switch (r[i].verdict) {
        case MLA_VERDICT_PASS: s[k].pass++; break;
        case MLA_VERDICT_DECLINED: s[k].declined++; break;
        case MLA_VERDICT_NA: s[k].na++; break;
        default:
            if (r[i].expected_fail)
                s[k].xfail++;
            else
                s[k].fail++;
            break;
        }
        if (r[i].verdict == MLA_VERDICT_PASS || r[i].verdict == MLA_VERDICT_FAIL) {
            if (r[i].m.cos_diff > s[k].worst_cos)
                s[k].worst_cos = r[i].m.cos_diff;
            if (r[i].m.worst_ratio > s[k].worst_ratio)
                s[k].worst_ratio = r[i].m.worst_ratio;
            if (r[i].m.bias_ratio > s[k].worst_bias)
                s[k].worst_bias = r[i].m.bias_ratio;
            if (r[i].splits == MLA_SPLITS_UNKNOWN)
                s[k].s_unknown++;
            else if (r[i].splits >= 1) {
                if (s[k].smax == 0 || r[i].splits < s[k].smin)
                    s[k].smin = r[i].splits;
                if (r[i].splits > s[k].smax)
                    s[k].smax = r[i].splits;
            }
            for (int b = 0; b < 8; ++b)
                s[k].hist[b] += r[i].m.ulp_hist[b];
        }
    }
    return ns;
}

/* The split counts a tier really ran, as its runs reported them. */
static void splits_ran(const backend_summary *b, char *out, size_t n)
{
    if (b->smax == 0)
        snprintf(out, n, "%s", b->s_unknown ? "not reported" : "none");
    else if (b->smin == b->smax)
        snprintf(out, n, "%d%s", b->smin, b->s_unknown ? " (some not reported)" : "");
    else
        snprintf(out, n, "%d..%d%s", b->smin, b->smax,
                 b->s_unknown ? " (some not reported)" : "");
}

/* One line per backend of the summary table (markdown or HTML), row_fmt
 * taking: name (string), pass, fail, declined, n/a (int), splits ran
 * (string), worst cos_diff, bound ratio and bias ratio (double). */
/* One row per backend: `lead`, the name written by name_out (escaped for
 * the format), then row_fmt with the figures. */
void mla_rep_summary_rows(FILE *f, const backend_summary *s, size_t ns, const char *lead,
                         void (*name_out)(FILE *, const char *), const char *row_fmt)
{
    for (size_t k = 0; k < ns; ++k) {
        char sr[64];
        splits_ran(&s[k], sr, sizeof sr);
        fputs(lead, f);
        name_out(f, s[k].name);
        fprintf(f, row_fmt, s[k].pass, s[k].fail, s[k].xfail, s[k].declined, s[k].na, sr,
                s[k].worst_cos, s[k].worst_ratio, s[k].worst_bias);
    }
}

/* ---- the bias test's noise per group level (issue 18) ---- */

/* A result's level figure: |s-1| against the oracle where it ran (*star
 * 0), else against the judge's baseline (*star 1). */
static double level_dev(const mla_bias_level_stats *b, int *star)
{
    *star = b->dev_oracle < 0;
    return *star ? b->dev : b->dev_oracle;
}

static int judged_result(const mla_case_result *c)
{
    return (c->verdict == MLA_VERDICT_PASS || c->verdict == MLA_VERDICT_FAIL) &&
           c->m.n_bias_groups > 0;
}


int mla_report_bias_noise_md(FILE *f, const mla_case_result *r, size_t n, int per_case)
{
    fprintf(f, "Worst |s-1| per group level (docs/accuracy.md, bias test): s = sum(o x) / "
               "sum(x^2) over a group, x the fp64 oracle where it ran, else the judge's "
               "baseline (marked *: the fp32 reference, whose own |s-1| against the oracle is "
               "~1e-7). The threshold is the judge's tau of the group with the worst |s-1| "
               "against its baseline; the last ratio is the largest |s-1|/tau of the level "
               "(any group).\n\n");
    fprintf(f, "| backend | level | cases | worst \\|s-1\\| | worst \\|s-1\\| vs baseline "
               "| its tau | its ratio | largest \\|s-1\\|/tau | where (vs baseline) |\n"
               "|---|---|---|---|---|---|---|---|---|\n");
    char seen[64][64];
    size_t nseen = 0;
    for (size_t i = 0; i < n; ++i) {
        if (!judged_result(&r[i]))
            continue;
        size_t k = 0;
        while (k < nseen && strcmp(seen[k], r[i].backend) != 0)
            ++k;
        if (k < nseen || nseen == 64)
            continue;
        snprintf(seen[nseen++], sizeof seen[0], "%s", r[i].backend);
        for (int l = 0; l < MLA_BIAS_LEVELS; ++l) {
            int cases = 0, stars = 0, any = 0;
            double worst = 0, wb = 0, wtau = 0, wratio = 0;
            char where[256] = "";
            for (size_t j = i; j < n; ++j) {
                const mla_case_result *c = &r[j];
                if (!judged_result(c) || strcmp(c->backend, r[i].backend) != 0)
                    continue;
                const mla_bias_level_stats *b = &c->m.bias_level[l];
                if (b->n == 0)
                    continue;
                int star;
                const double d = level_dev(b, &star);
                cases++;
                stars += star;
                if (!any || d > worst)
                    worst = d;
                if (!any || b->dev > wb) {
                    wb = b->dev;
                    wtau = b->tau;
                    snprintf(where, sizeof where, "%s, %s", c->fixture, b->group);
                }
                if (b->ratio > wratio)
                    wratio = b->ratio;
                any = 1;
            }
            if (!any)
                continue;
            fprintf(f, "| %s | %s | %d | %.2e%s | %.2e | %.2e | %.3f | %.3f | ", r[i].backend,
                    mla_bias_level_name(l), cases, worst,
                    stars == cases ? "*" : stars ? " (*some)" : "", wb, wtau,
                    wtau > 0 ? wb / wtau : 0.0, wratio);
            md_str(f, where);
            fprintf(f, " |\n");
        }
    }
    if (per_case) {
        fprintf(f, "\n| case | backend | verdict |");
        for (int l = 0; l < MLA_BIAS_LEVELS; ++l)
            fprintf(f, " %s |", mla_bias_level_name(l));
        fprintf(f, "\n|---|---|---|");
        for (int l = 0; l < MLA_BIAS_LEVELS; ++l)
            fprintf(f, "---|");
        fprintf(f, "\n");
        for (size_t i = 0; i < n; ++i) {
            const mla_case_result *c = &r[i];
            if (!judged_result(c))
                continue;
            fprintf(f, "| ");
            md_str(f, c->fixture);
            fprintf(f, " | %s | %s |", c->backend, mla_verdict_name(c->verdict));
            for (int l = 0; l < MLA_BIAS_LEVELS; ++l) {
                const mla_bias_level_stats *b = &c->m.bias_level[l];
                int star;
                const double d = level_dev(b, &star);
                if (b->n)
                    fprintf(f, " %.2e%s (%.2f) |", d, star ? "*" : "", b->ratio);
                else
                    fprintf(f, " - |");
            }
            fprintf(f, "\n");
        }
        fprintf(f, "\nCells: worst |s-1| of the level (largest |s-1|/tau of the level).\n");
    }
    return !ferror(f);
}

const char *const MLA_REP_ULP_LABELS[8] = {"0", "<=0.5", "<=1", "<=2", "<=4", "<=8", "<=16", ">16"};

/* The SGLang captures (family "trace": fixtures/data/trace) in a section of
 * their own: the captured output's verdict per file, known-bad ones marked
 * as expected failures. */
static const char *trace_verdict(const mla_case_result *c)
{
    return c->expected_fail ? "XFAIL (known-bad upstream output)" : mla_verdict_name(c->verdict);
}

static int trace_capture(const mla_case_result *c)
{
    return strcmp(c->family, "trace") == 0 && strcmp(c->backend, "captured") == 0;
}

/* The section, as Markdown or (html) as an HTML table that closes the
 * summary table before it. */
void mla_rep_trace_section(FILE *f, const mla_case_result *r, size_t n, int html)
{
    size_t k = 0;
    for (size_t i = 0; i < n; ++i)
        k += trace_capture(&r[i]);
    if (!k)
        return;
    fputs(html ? "</table>\n<h2>SGLang captures</h2>\n<p>" : "\n## SGLang captures\n\n", f);
    fputs("The kernel outputs captured from SGLang (fixtures/data/trace/manifest.json), judged as "
          "backend captured. XFAIL: a known-bad upstream output failing for its recorded "
          "reason.",
          f);
    fputs(html ? "</p>\n<table><tr><th>capture</th><th>verdict</th><th>note</th></tr>\n"
               : "\n\n| capture | verdict | note |\n|---|---|---|\n",
          f);
    void (*esc)(FILE *, const char *) = html ? mla_rep_html_str : md_str;
    for (size_t i = 0; i < n; ++i) {
        const mla_case_result *c = &r[i];
        if (!trace_capture(c))
            continue;
        fputs(html ? "<tr><td>" : "| ", f);
        esc(f, c->fixture);
        if (html)
            fprintf(f, "</td><td class=\"%s\">%s</td><td>",
                    c->expected_fail ? "DECLINED" : mla_verdict_name(c->verdict), trace_verdict(c));
        else
            fprintf(f, " | **%s** | ", trace_verdict(c));
        esc(f, c->reason);
        fputs(html ? "</td></tr>\n" : " |\n", f);
    }
}

static int write_md(FILE *f, const mla_report_meta *meta, const mla_case_result *r, size_t n)
{
    backend_summary s[32];
    size_t ns = mla_rep_summarise(r, n, s, 32);
    fprintf(f, "# MLA verify validation report\n\n");
    /* The command line holds file names: escaped, not in a code span (a
     * backtick in a name would end it). */
    const struct {
        const char *label, *text;
    } head[] = {{"- commit: ", meta->commit}, {"\n- machine: ", meta->machine},
                {"\n- date: ", meta->date}, {"\n- command: ", meta->command},
                {"\n- backends: ", meta->backends}};
    for (size_t k = 0; k < NFIELDS(head); ++k) {
        fputs(head[k].label, f);
        md_str(f, head[k].text);
    }
    fputs("\n\n", f);
    fprintf(f, "## Summary per backend\n\n| backend | pass | fail | expected fail | declined | n/a "
               "| splits ran | worst cos_diff | worst bound ratio | worst bias ratio |\n"
               "|---|---|---|---|---|---|---|---|---|---|\n");
    mla_rep_summary_rows(f, s, ns, "| ", md_str,
                 " | %d | %d | %d | %d | %d | %s | %.2e | %.3f | %.3f |\n");
    mla_rep_trace_section(f, r, n, 0);
    fprintf(f, "\n## Every case\n\n| fixture | backend | verdict | max prefix | splits | "
               "cos_diff | worst row cos | max abs | bound ratio | within 1 ulp | lse max abs "
               "| note |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (size_t i = 0; i < n; ++i) {
        const mla_case_result *c = &r[i];
        int judged = c->verdict == MLA_VERDICT_PASS || c->verdict == MLA_VERDICT_FAIL;
        char sb[16];
        fputs("| ", f);
        md_str(f, c->fixture);
        fputs(" | ", f);
        md_str(f, c->backend);
        fprintf(f, " | **%s** | %lld | %s | ", mla_verdict_name(c->verdict), (long long)c->max_prefix,
                mla_rep_splits_cell(c->splits, sb, sizeof sb));
        char lse_cell[32] = "-";
        if (judged && c->m.lse_max_abs >= 0)
            snprintf(lse_cell, sizeof lse_cell, "%.2e", c->m.lse_max_abs);
        if (judged && c->m.n_elems)
            fprintf(f, "%.2e | %.2e | %.3g | %.3f | %.1f%% | %s | ", c->m.cos_diff,
                    c->m.worst_row_cos, c->m.max_abs, c->m.worst_ratio, 100 * c->m.within_1ulp,
                    lse_cell);
        else
            fprintf(f, "- | - | - | - | - | - | ");
        md_str(f, c->reason);
        fprintf(f, " |\n");
    }
    fprintf(f, "\n## Bias noise per group level\n\n");
    mla_report_bias_noise_md(f, r, n, 1);
    fprintf(f, "\n## bf16 ulp histogram of |o - ref| per backend\n\n| backend |");
    for (int b = 0; b < 8; ++b)
        fprintf(f, " %s |", MLA_REP_ULP_LABELS[b]);
    fprintf(f, "\n|---|");
    for (int b = 0; b < 8; ++b)
        fprintf(f, "---|");
    fprintf(f, "\n");
    for (size_t k = 0; k < ns; ++k) {
        fprintf(f, "| %s |", s[k].name);
        for (int b = 0; b < 8; ++b)
            fprintf(f, " %lld |", s[k].hist[b]);
        fprintf(f, "\n");
    }
    return !ferror(f);
}

mla_status mla_report_write_dir(const char *dir, const mla_report_meta *meta,
                                const mla_case_result *r, size_t n, mla_error *err)
{
    /* The directory's lock, held over the three files: two runs writing
     * into one directory each leave a consistent set, one after the other.
     * All three are written and synced before any is renamed, so a failure
     * leaves the previous set whole. */
    mla_dir_lock lock;
    if (mla_dir_lock_take(dir, &lock, err) != MLA_OK)
        return MLA_ERR_IO;
    const struct {
        const char *name;
        report_writer w;
    } outs[] = {{"report.json", write_json_file}, {"report.md", write_md},
                {"report.html", mla_rep_write_html}};
    enum { NOUT = sizeof outs / sizeof outs[0] };
    mla_atomic_file a[NOUT];
    size_t done = 0;
    mla_status st = MLA_OK;
    for (; done < NOUT && st == MLA_OK; ++done) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, outs[done].name);
        st = mla_atomic_open(&a[done], path, err);
        if (st == MLA_OK)
            st = mla_atomic_finish(&a[done], outs[done].w(a[done].f, meta, r, n), err);
    }
    for (size_t i = 0; i < done; ++i) {
        if (st == MLA_OK)
            st = mla_atomic_commit(&a[i], err);
        else
            mla_atomic_discard(&a[i]);
    }
    mla_dir_unlock(&lock);
    return st;
}
