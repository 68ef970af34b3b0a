/* include/mla/fsutil.h. mkostemp and flock are outside POSIX 2008. */
#define _GNU_SOURCE
#include "mla/fsutil.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
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

/* ---- inputs no writer may replace (device + inode) ---- */

static struct protected_file {
    dev_t dev;
    ino_t ino;
} *protected_;
static size_t n_protected, cap_protected;

mla_status mla_protect_input(const char *path, mla_error *err)
{
    struct stat sb;
    if (stat(path, &sb) != 0) {
        mla_error_set(err, "%s: %s (errno %d)", path, strerror(errno), errno);
        return MLA_ERR_IO;
    }
    for (size_t i = 0; i < n_protected; ++i)
        if (protected_[i].dev == sb.st_dev && protected_[i].ino == sb.st_ino)
            return MLA_OK;
    if (n_protected == cap_protected) {
        const size_t nc = cap_protected ? 2 * cap_protected : 64;
        struct protected_file *np = realloc(protected_, nc * sizeof *np);
        if (!np) {
            mla_error_set(err, "%s: out of memory", path);
            return MLA_ERR_NOMEM;
        }
        protected_ = np;
        cap_protected = nc;
    }
    protected_[n_protected].dev = sb.st_dev;
    protected_[n_protected].ino = sb.st_ino;
    n_protected++;
    return MLA_OK;
}

mla_status mla_check_target(const char *path, mla_error *err)
{
    struct stat sb;
    if (lstat(path, &sb) != 0) {
        if (errno == ENOENT)
            return MLA_OK;
        mla_error_set(err, "%s: %s (errno %d)", path, strerror(errno), errno);
        return MLA_ERR_IO;
    }
    if (S_ISLNK(sb.st_mode)) {
        mla_error_set(err, "%s: is a symbolic link; not written through it nor replaced (remove "
                      "it, or choose another name)",
                      path);
        return MLA_ERR_IO;
    }
    if (!S_ISREG(sb.st_mode)) {
        mla_error_set(err, "%s: exists and is not a regular file (a directory?): not replaced",
                      path);
        return MLA_ERR_IO;
    }
    for (size_t i = 0; i < n_protected; ++i)
        if (protected_[i].dev == sb.st_dev && protected_[i].ino == sb.st_ino) {
            mla_error_set(err, "%s: is an input of this run (same file, device %llu inode %llu): "
                          "not replaced; write the output elsewhere",
                          path, (unsigned long long)sb.st_dev, (unsigned long long)sb.st_ino);
            return MLA_ERR_IO;
        }
    return MLA_OK;
}

/* ---- the exclusive temporary ---- */

/* DIR/.BASE.tmp-XXXXXX beside `path`, created O_EXCL by mkostemp with the
 * permissions a plain creat would give (mkostemp makes 0600). */
static int open_temp(const char *path, char *tmp, size_t n, mla_error *err)
{
    if (mla_check_target(path, err) != MLA_OK)
        return -1;
    if (mla_mkdir_parents(path, err) != MLA_OK)
        return -1;
    const char *slash = strrchr(path, '/');
    const int dlen = slash ? (int)(slash - path + 1) : 0;
    if ((size_t)snprintf(tmp, n, "%.*s.%s.tmp-XXXXXX", dlen, path, slash ? slash + 1 : path) >= n) {
        mla_error_set(err, "%.64s...: path too long", path);
        return -1;
    }
    const int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0) {
        mla_error_set(err, "%s: cannot create a temporary file beside it: %s (errno %d)", path,
                      strerror(errno), errno);
        return -1;
    }
    const mode_t um = umask(0);
    umask(um);
    if (fchmod(fd, 0666 & ~um) != 0) {
        mla_error_set(err, "%s: cannot set the permissions of %s: %s (errno %d)", path, tmp,
                      strerror(errno), errno);
        close(fd);
        unlink(tmp);
        return -1;
    }
    return fd;
}

/* fsync and close: the data is on disk under the temporary name. */
static mla_status finish_fd(int fd, const char *tmp, const char *path, mla_error *err)
{
    const char *what = "fsync";
    int ok = fsync(fd) == 0;
    if (!ok) {
        const int e = errno;
        close(fd);
        errno = e;
    } else {
        what = "close";
        ok = close(fd) == 0;
    }
    if (!ok) {
        mla_error_set(err, "%s: write failed (%s): %s (errno %d); the previous file, if any, is "
                      "unchanged",
                      path, what, strerror(errno), errno);
        unlink(tmp);
        return MLA_ERR_IO;
    }
    return MLA_OK;
}

/* The rename, the target checked once more just before it (an input or a
 * link planted while the file was written). */
static mla_status commit_tmp(const char *tmp, const char *path, mla_error *err)
{
    if (mla_check_target(path, err) != MLA_OK) {
        unlink(tmp);
        return MLA_ERR_IO;
    }
    if (rename(tmp, path) != 0) {
        mla_error_set(err, "%s: cannot rename %s into place: %s (errno %d)", path, tmp,
                      strerror(errno), errno);
        unlink(tmp);
        return MLA_ERR_IO;
    }
    return MLA_OK;
}

mla_status mla_atomic_open(mla_atomic_file *a, const char *path, mla_error *err)
{
    a->f = NULL;
    a->tmp[0] = '\0';
    if (strlen(path) >= sizeof a->path) {
        mla_error_set(err, "%.64s...: path too long", path);
        return MLA_ERR_INVALID;
    }
    snprintf(a->path, sizeof a->path, "%s", path);
    const int fd = open_temp(path, a->tmp, sizeof a->tmp, err);
    if (fd < 0)
        return MLA_ERR_IO;
    if (!(a->f = fdopen(fd, "w"))) {
        mla_error_set(err, "%s: %s (errno %d)", path, strerror(errno), errno);
        close(fd);
        unlink(a->tmp);
        return MLA_ERR_IO;
    }
    return MLA_OK;
}

mla_status mla_atomic_finish(mla_atomic_file *a, int ok, mla_error *err)
{
    if (!a->f)
        return MLA_ERR_IO;
    /* A failed fprintf leaves errno set; the flush that follows retries the
     * write and sets it again, so the message names the real cause. */
    int e = ferror(a->f) ? (errno ? errno : EIO) : 0;
    if (!e && fflush(a->f) != 0)
        e = errno ? errno : EIO;
    const int fd = dup(fileno(a->f));
    if (fd < 0 && !e)
        e = errno;
    fclose(a->f); /* nothing left to flush: its result adds nothing */
    a->f = NULL;
    if (e || !ok) {
        if (e)
            mla_error_set(err, "%s: write failed: %s (errno %d); the previous file, if any, is "
                          "unchanged",
                          a->path, strerror(e), e);
        else
            mla_error_set(err, "%s: not written (the writer failed)", a->path);
        if (fd >= 0)
            close(fd);
        unlink(a->tmp);
        a->tmp[0] = '\0';
        return MLA_ERR_IO;
    }
    if (finish_fd(fd, a->tmp, a->path, err) != MLA_OK) {
        a->tmp[0] = '\0';
        return MLA_ERR_IO;
    }
    return MLA_OK;
}

mla_status mla_atomic_commit(mla_atomic_file *a, mla_error *err)
{
    const mla_status st = commit_tmp(a->tmp, a->path, err);
    a->tmp[0] = '\0';
    return st;
}

void mla_atomic_discard(mla_atomic_file *a)
{
    if (a->f)
        fclose(a->f);
    a->f = NULL;
    if (a->tmp[0])
        unlink(a->tmp);
    a->tmp[0] = '\0';
}

mla_status mla_atomic_close(mla_atomic_file *a, int ok, mla_error *err)
{
    if (mla_atomic_finish(a, ok, err) != MLA_OK)
        return MLA_ERR_IO;
    return mla_atomic_commit(a, err);
}

mla_status mla_atomic_write(const char *path, const void *buf, size_t n, mla_error *err)
{
    char tmp[4200];
    const int fd = open_temp(path, tmp, sizeof tmp, err);
    if (fd < 0)
        return MLA_ERR_IO;
    const char *p = buf;
    while (n > 0) {
        const ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            const int e = w < 0 ? errno : ENOSPC;
            mla_error_set(err, "%s: write failed: %s (errno %d); the previous file, if any, is "
                          "unchanged",
                          path, strerror(e), e);
            close(fd);
            unlink(tmp);
            return MLA_ERR_IO;
        }
        p += w;
        n -= (size_t)w;
    }
    if (finish_fd(fd, tmp, path, err) != MLA_OK)
        return MLA_ERR_IO;
    return commit_tmp(tmp, path, err);
}

/* ---- the directory lock ---- */

mla_status mla_dir_lock_take(const char *dir, mla_dir_lock *l, mla_error *err)
{
    char p[4200];
    l->fd = -1;
    if (mla_mkdir_p(dir, err) != MLA_OK)
        return MLA_ERR_IO;
    snprintf(p, sizeof p, "%s/.mla-write.lock", dir);
    const int fd = open(p, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0) {
        mla_error_set(err, "%s: cannot open the lock file: %s (errno %d)%s", p, strerror(errno),
                      errno, errno == ELOOP ? " (a symbolic link: refused)" : "");
        return MLA_ERR_IO;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        if (errno != EWOULDBLOCK) {
            mla_error_set(err, "%s: cannot lock: %s (errno %d)", p, strerror(errno), errno);
            close(fd);
            return MLA_ERR_IO;
        }
        fprintf(stderr, "mla: %s: another process is writing there; waiting for it\n", dir);
        while (flock(fd, LOCK_EX) != 0)
            if (errno != EINTR) {
                mla_error_set(err, "%s: cannot lock: %s (errno %d)", p, strerror(errno), errno);
                close(fd);
                return MLA_ERR_IO;
            }
    }
    l->fd = fd;
    return MLA_OK;
}

void mla_dir_unlock(mla_dir_lock *l)
{
    if (l->fd >= 0)
        close(l->fd); /* releases the flock */
    l->fd = -1;
}

void mla_write_signals(void)
{
    signal(SIGXFSZ, SIG_IGN);
}

uint64_t mla_resident_bytes(void)
{
    unsigned long long size = 0, res = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f)
        return 0;
    const int ok = fscanf(f, "%llu %llu", &size, &res) == 2;
    fclose(f);
    const long page = sysconf(_SC_PAGE_SIZE);
    return ok && page > 0 ? (uint64_t)res * (uint64_t)page : 0;
}
