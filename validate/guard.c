/* One guard/poison convention for every backend (include/mla/guard.h). */
#include "mla/guard.h"

#include <stdlib.h>
#include <string.h>

size_t mla_guard_image_bytes(size_t n, size_t esize)
{
    size_t b;
    if (!mla_mul_size(n, esize, &b) || b > SIZE_MAX - 2 * MLA_GUARD_BYTES)
        return 0;
    return b + 2 * MLA_GUARD_BYTES;
}

static void put_poison(unsigned char *p, size_t esize)
{
    if (esize == 4) {
        const uint32_t v = MLA_POISON_F32;
        memcpy(p, &v, 4);
    } else {
        const uint16_t v = MLA_POISON_BF16;
        memcpy(p, &v, 2);
    }
}

void mla_guard_fill(void *image, size_t n, size_t esize)
{
    unsigned char *p = image;
    memset(p, MLA_GUARD_BYTE, MLA_GUARD_BYTES);
    for (size_t i = 0; i < n; ++i)
        put_poison(p + MLA_GUARD_BYTES + i * esize, esize);
    memset(p + MLA_GUARD_BYTES + n * esize, MLA_GUARD_BYTE, MLA_GUARD_BYTES);
}

long long mla_guard_broken(const void *image, size_t n, size_t esize)
{
    const unsigned char *p = image;
    const size_t after = MLA_GUARD_BYTES + n * esize;
    for (size_t i = 0; i < MLA_GUARD_BYTES; ++i)
        if (p[i] != MLA_GUARD_BYTE)
            return (long long)i;
    for (size_t i = 0; i < MLA_GUARD_BYTES; ++i)
        if (p[after + i] != MLA_GUARD_BYTE)
            return (long long)(after + i);
    return -1;
}

int mla_guard_is_poison(const void *data, size_t i, size_t esize)
{
    const unsigned char *p = (const unsigned char *)data + i * esize;
    if (esize == 4) {
        uint32_t v;
        memcpy(&v, p, 4);
        return v == MLA_POISON_F32;
    }
    uint16_t v;
    memcpy(&v, p, 2);
    return v == MLA_POISON_BF16;
}

size_t mla_guard_unwritten(const void *data, size_t n, size_t esize, unsigned char *mask)
{
    size_t c = 0;
    for (size_t i = 0; i < n; ++i) {
        const int p = mla_guard_is_poison(data, i, esize);
        c += (size_t)p;
        if (mask)
            mask[i] = (unsigned char)p;
    }
    return c;
}

size_t mla_guard_first_written(const void *data, size_t n, size_t esize)
{
    for (size_t i = 0; i < n; ++i)
        if (!mla_guard_is_poison(data, i, esize))
            return i;
    return n;
}

void *mla_guarded_alloc(mla_guarded *g, size_t n, size_t esize)
{
    g->n = n;
    g->esize = esize;
    const size_t bytes = mla_guard_image_bytes(n, esize);
    g->image = bytes ? malloc(bytes) : NULL;
    if (!g->image)
        return NULL;
    mla_guard_fill(g->image, n, esize);
    return mla_guard_data(g->image);
}

void mla_guarded_free(mla_guarded *g)
{
    free(g->image);
    g->image = NULL;
}

static mla_status check_one(const char *who, const char *name, const void *image, size_t n,
                            size_t esize, int declined, mla_error *err)
{
    if (!image)
        return MLA_OK;
    const long long b = mla_guard_broken(image, n, esize);
    if (b >= 0) {
        mla_error_set(err, "%s wrote outside its %s buffer: sentinel guard %s it touched (byte %lld "
                      "of the image)",
                      who, name, b < (long long)MLA_GUARD_BYTES ? "before" : "after", b);
        return MLA_ERR_RUNTIME;
    }
    if (declined) {
        const size_t w = mla_guard_first_written(
            (const unsigned char *)image + MLA_GUARD_BYTES, n, esize);
        if (w < n) {
            mla_error_set(err, "%s declined but wrote %s element %zu", who, name, w);
            return MLA_ERR_RUNTIME;
        }
    }
    return MLA_OK;
}

mla_status mla_guard_check_run(const char *who, const void *o_image, size_t o_n, size_t o_esize,
                               const void *lse_image, size_t lse_n, int declined, mla_error *err)
{
    mla_status st = check_one(who, "o", o_image, o_n, o_esize, declined, err);
    if (st == MLA_OK)
        st = check_one(who, "lse", lse_image, lse_n, 4, declined, err);
    return st;
}
