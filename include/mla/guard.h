/* The one output-guard convention, host and device alike (ggml's
 * test-backend-ops practice): every output buffer is laid out as
 *
 *     [ MLA_GUARD_BYTES of MLA_GUARD_BYTE | n elements of poison | MLA_GUARD_BYTES of MLA_GUARD_BYTE ]
 *
 * The poison is a NaN with a payload no arithmetic produces (MLA_POISON_BF16
 * / MLA_POISON_F32, common.h), so an element still holding it was never
 * written, told apart from a computed NaN. The guard byte is not a NaN
 * pattern in either width, so a stray write of poison-like data into a guard
 * is still seen. Device glue fills a host image with mla_guard_fill, uploads
 * it, runs, downloads the whole image and calls the same checks, so the GPU
 * tiers and the CPU backends are judged by one set of rules. */
#ifndef MLA_GUARD_H
#define MLA_GUARD_H

#include "mla/common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MLA_GUARD_BYTE 0x5Au
/* 64 KiB each side: far enough to catch a write one head block, one row of
 * 96 heads x 512 bf16 values, or one split stride out of range. */
#define MLA_GUARD_BYTES ((size_t)65536)

/* Bytes of the whole image for n elements of esize (2 or 4) bytes; 0 on
 * overflow. */
size_t mla_guard_image_bytes(size_t n, size_t esize);

/* Fills an image of mla_guard_image_bytes(n, esize): guards and poison. */
void mla_guard_fill(void *image, size_t n, size_t esize);

/* The data part of an image. */
static inline void *mla_guard_data(void *image)
{
    return (unsigned char *)image + MLA_GUARD_BYTES;
}

/* -1 when both guards are intact, else the offset of the first touched
 * guard byte counted from the start of the image (< MLA_GUARD_BYTES: the
 * guard before the data, otherwise the one after it). */
long long mla_guard_broken(const void *image, size_t n, size_t esize);

/* 1 if element i of the data still holds the poison. */
int mla_guard_is_poison(const void *data, size_t i, size_t esize);

/* Number of elements still holding the poison; when mask is not NULL,
 * mask[i] = 1 for each of them ("every element written" check). */
size_t mla_guard_unwritten(const void *data, size_t n, size_t esize, unsigned char *mask);

/* Index of the first element that no longer holds the poison, or n when
 * none was written ("declined but wrote nothing" check). */
size_t mla_guard_first_written(const void *data, size_t n, size_t esize);

/* A host-allocated guarded buffer. */
typedef struct {
    void *image;
    size_t n, esize;
} mla_guarded;

/* Allocates and fills; returns the data pointer or NULL (out of memory). */
void *mla_guarded_alloc(mla_guarded *g, size_t n, size_t esize);
void mla_guarded_free(mla_guarded *g);

/* The two checks every backend run goes through, with one message format:
 * after a run, both guards intact (else MLA_ERR_RUNTIME, "guard before/after
 * <name> touched"); after a decline, additionally every element still
 * poison (else MLA_ERR_RUNTIME, "declined but wrote <name> element i").
 * `who` names the backend or tier in the message. o_image/lse_image may be
 * NULL (not checked). */
mla_status mla_guard_check_run(const char *who, const void *o_image, size_t o_n, size_t o_esize,
                               const void *lse_image, size_t lse_n, int declined, mla_error *err);

#ifdef __cplusplus
}
#endif
#endif
