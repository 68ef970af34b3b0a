/* File helpers for every writer of results (reports, dumps): create missing
 * parent directories, and write through a temporary name in the same
 * directory renamed into place, so a reader never sees half a file and a
 * failed write leaves the previous file intact. */
#ifndef MLA_FSUTIL_H
#define MLA_FSUTIL_H

#include "mla/common.h"

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* mkdir -p: creates `dir` and its missing parents. */
mla_status mla_mkdir_p(const char *dir, mla_error *err);

/* Creates the parent directories of `path`. */
mla_status mla_mkdir_parents(const char *path, mla_error *err);

/* Opens PATH.tmp.<pid> for writing; mla_atomic_close renames it onto PATH
 * when ok is nonzero and the writes succeeded, else removes it. */
typedef struct {
    FILE *f;
    char path[4096], tmp[4200];
} mla_atomic_file;

mla_status mla_atomic_open(mla_atomic_file *a, const char *path, mla_error *err);
mla_status mla_atomic_close(mla_atomic_file *a, int ok, mla_error *err);

/* The temporary name a writer should use for `path` (for writers that open
 * the file themselves, like HDF5): PATH.tmp.<pid>. */
void mla_temp_name(const char *path, char *out, size_t n);

#ifdef __cplusplus
}
#endif
#endif
