/* File helpers for every writer of results (reports, dumps, fixtures): a
 * result file is written whole or not at all, never through a name an
 * attacker can predict or plant, and never over an input of the run.
 *
 * - Each file is written to a temporary created with O_EXCL under an
 *   unpredictable name (mkostemp) in the target's own directory, flushed
 *   and fsync'ed, then renamed onto the target. A failed write (ENOSPC,
 *   EFBIG, EIO) removes the temporary, leaves the old target as it was and
 *   reports the file and the errno.
 * - A target that exists must be a regular file: a symbolic link is
 *   refused (rename would not follow it, but a link the user made points
 *   somewhere the writer was not asked to touch), as is a directory.
 * - A target that is one of the run's inputs (same device and inode,
 *   whatever its name: mla_protect_input) is refused.
 * - Writers that produce a set of files in one directory (the reports)
 *   hold that directory's lock (mla_dir_lock), so concurrent runs each
 *   leave a consistent set. */
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

/* Registers `path` (which must exist) as an input of this run: no writer
 * of this process replaces it, under any name. */
mla_status mla_protect_input(const char *path, mla_error *err);

/* MLA_OK when `path` may be written: absent, or a regular file that is no
 * registered input. Otherwise MLA_ERR_IO with a message naming it. */
mla_status mla_check_target(const char *path, mla_error *err);

/* A file written through an exclusive temporary (see above). */
typedef struct {
    FILE *f;
    char path[4096], tmp[4200];
} mla_atomic_file;

mla_status mla_atomic_open(mla_atomic_file *a, const char *path, mla_error *err);
/* Renames the temporary onto the target when ok is nonzero and every write,
 * the flush and the fsync succeeded; otherwise removes it. The message
 * names the target and the errno. */
mla_status mla_atomic_close(mla_atomic_file *a, int ok, mla_error *err);
/* mla_atomic_close in two steps, for a set of files that must all be
 * replaced or none: finish (flush, fsync; on failure the temporary is
 * removed) each, then commit (rename) each, or discard every one. */
mla_status mla_atomic_finish(mla_atomic_file *a, int ok, mla_error *err);
mla_status mla_atomic_commit(mla_atomic_file *a, mla_error *err);
void mla_atomic_discard(mla_atomic_file *a);

/* The whole of `path` from one buffer, the same way. */
mla_status mla_atomic_write(const char *path, const void *buf, size_t n, mla_error *err);

/* An advisory lock (flock) on DIR/.mla-write.lock, created without
 * following a symbolic link; it waits for another holder and is released
 * by mla_dir_unlock or when the process ends. */
typedef struct {
    int fd;
} mla_dir_lock;

mla_status mla_dir_lock_take(const char *dir, mla_dir_lock *l, mla_error *err);
void mla_dir_unlock(mla_dir_lock *l);

/* Ignore SIGXFSZ, so a file-size limit (ulimit -f) is a write failing with
 * EFBIG, reported like any other, instead of a kill: every tool that
 * writes calls it first. */
void mla_write_signals(void);

/* This process's resident size in bytes (/proc/self/statm; 0 where it
 * cannot be read): what it holds of the run's memory budget. */
uint64_t mla_resident_bytes(void);

#ifdef __cplusplus
}
#endif
#endif
