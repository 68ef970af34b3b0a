/* --dump: a backend's output written back as a fixture with /expected, so
 * it can be replayed, diffed or judged later as a captured output. */
#include "internal.h"
#include "mla/fsutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int val_dump_output(const char *dir, const char *backend, int per_backend_dir, const char *label,
                    const mla_fixture *fx, const mla_bf16 *o16, const float *lse,
                    const char *commit)
{
    char path[4096], sub[4096];
    if (per_backend_dir) {
        snprintf(sub, sizeof sub, "%s/%s", dir, backend);
        for (char *p = sub + strlen(dir) + 1; *p; ++p)
            if (*p == ':')
                *p = '_';
        snprintf(path, sizeof path, "%s/%s", sub, label);
    } else
        snprintf(path, sizeof path, "%s/%s", dir, label);
    mla_fixture out;
    mla_error err = {{0}};
    if (mla_mkdir_parents(path, &err) != MLA_OK) {
        fprintf(stderr, "mla-validate: dump %s: %s\n", path, err.msg);
        return 0;
    }
    if (mla_fixture_copy_inputs(fx, &out, &err) != MLA_OK) {
        fprintf(stderr, "mla-validate: dump %s: %s\n", path, err.msg);
        return 0;
    }
    mla_fixture_sizes sz;
    mla_fixture_sizes_of(fx, &sz, &err);
    char producer[512];
    snprintf(producer, sizeof producer, "mla-validate backend=%s commit=%s", backend, commit);
    out.expected_o = malloc(sz.o * 2 + 2);
    out.expected_lse = lse ? malloc(sz.lse * 4 + 4) : NULL;
    out.expected_producer = strdup(producer);
    int ok = out.expected_o && out.expected_producer && (!lse || out.expected_lse);
    if (ok) {
        memcpy(out.expected_o, o16, sz.o * 2);
        if (lse)
            memcpy(out.expected_lse, lse, sz.lse * 4);
        /* Through an exclusive temporary renamed into place; never over an
         * input of the run (include/mla/fsutil.h). */
        ok = mla_fixture_write(path, &out, 6, &err) == MLA_OK;
        if (!ok)
            fprintf(stderr, "mla-validate: dump: %s\n", err.msg);
    } else
        fprintf(stderr, "mla-validate: dump %s: out of memory\n", path);
    mla_fixture_free(&out);
    return ok;
}
