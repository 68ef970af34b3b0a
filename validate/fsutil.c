/* include/mla/fsutil.h */
#include "mla/fsutil.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

mla_status mla_mkdir_p(const char *dir, mla_error *err)
{
    char p[4096];
    if (!dir || !dir[0]) {
        mla_error_set(err, "empty directory name");
        return MLA_ERR_INVALID;
    }
    if (strlen(dir) >= sizeof p) {
        mla_error_set(err, "%.64s...: path too long", dir);
        return MLA_ERR_INVALID;
    }
    snprintf(p, sizeof p, "%s", dir);
    for (char *s = p + 1;; ++s) {
        const int end = *s == '\0';
        if (*s == '/' || end) {
            *s = '\0';
            struct stat sb;
            if (stat(p, &sb) != 0) {
                if (mkdir(p, 0777) != 0 && errno != EEXIST) {
                    mla_error_set(err, "%s: cannot create directory: %s", p, strerror(errno));
                    return MLA_ERR_IO;
                }
            } else if (!S_ISDIR(sb.st_mode)) {
                mla_error_set(err, "%s: exists and is not a directory", p);
                return MLA_ERR_IO;
            }
            if (end)
                break;
            *s = '/';
        }
    }
    return MLA_OK;
}

mla_status mla_mkdir_parents(const char *path, mla_error *err)
{
    char p[4096];
    snprintf(p, sizeof p, "%s", path);
    char *s = strrchr(p, '/');
    if (!s || s == p)
        return MLA_OK;
    *s = '\0';
    return mla_mkdir_p(p, err);
}

void mla_temp_name(const char *path, char *out, size_t n)
{
    snprintf(out, n, "%s.tmp.%ld", path, (long)getpid());
}

mla_status mla_atomic_open(mla_atomic_file *a, const char *path, mla_error *err)
{
    a->f = NULL;
    if (strlen(path) >= sizeof a->path) {
        mla_error_set(err, "%.64s...: path too long", path);
        return MLA_ERR_INVALID;
    }
    snprintf(a->path, sizeof a->path, "%s", path);
    mla_status st = mla_mkdir_parents(path, err);
    if (st != MLA_OK)
        return st;
    mla_temp_name(path, a->tmp, sizeof a->tmp);
    a->f = fopen(a->tmp, "w");
    if (!a->f) {
        mla_error_set(err, "%s: %s", a->tmp, strerror(errno));
        return MLA_ERR_IO;
    }
    return MLA_OK;
}

mla_status mla_atomic_close(mla_atomic_file *a, int ok, mla_error *err)
{
    if (!a->f)
        return MLA_ERR_IO;
    ok = ok && !ferror(a->f);
    ok = (fclose(a->f) == 0) && ok;
    a->f = NULL;
    if (!ok) {
        remove(a->tmp);
        mla_error_set(err, "%s: write failed", a->path);
        return MLA_ERR_IO;
    }
    if (rename(a->tmp, a->path) != 0) {
        mla_error_set(err, "%s: cannot rename into place: %s", a->path, strerror(errno));
        remove(a->tmp);
        return MLA_ERR_IO;
    }
    return MLA_OK;
}
