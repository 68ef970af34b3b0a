/* Shared vocabulary of every component: status codes, the error message
 * buffer library calls fill instead of printing or exiting, and bf16. */
#ifndef MLA_COMMON_H
#define MLA_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    MLA_OK = 0,
    MLA_ERR_INVALID = 1,  /* input breaks a rule (schema, shapes, indices) */
    MLA_ERR_IO = 2,       /* file could not be opened, read or written */
    MLA_ERR_NOMEM = 3,    /* allocation failed or a size overflowed */
    MLA_ERR_DECLINED = 4, /* a backend does not handle this case (not a failure) */
    MLA_ERR_RUNTIME = 5   /* device or library call failed */
} mla_status;

/* Library calls write a human-readable reason here on failure. */
typedef struct {
    char msg[1024];
} mla_error;

void mla_error_set(mla_error *err, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

const char *mla_status_name(mla_status s);

/* bf16 stored as raw bits: inputs are exact bf16 values, outputs are rounded
 * to nearest even; NaN stays NaN (quiet), inf stays inf. */
typedef uint16_t mla_bf16;

static inline float mla_bf16_to_f32(mla_bf16 b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline mla_bf16 mla_f32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0)
        return (mla_bf16)((u >> 16) | 0x0040u); /* keep NaN, force quiet */
    u += 0x7fffu + ((u >> 16) & 1u);             /* round to nearest even */
    return (mla_bf16)(u >> 16);
}

/* Output poison: NaNs with a payload no arithmetic produces, written into
 * every output buffer before a backend runs, so an element still holding it
 * was never written (told apart from a computed NaN). */
#define MLA_POISON_BF16 ((uint16_t)0xffa5u)
#define MLA_POISON_F32 ((uint32_t)0xffa5a5a5u)

/* Overflow-checked size arithmetic: return 0 and leave *out untouched on
 * overflow, so every caller can turn a hostile shape into an error. */
int mla_mul_size(size_t a, size_t b, size_t *out);
int mla_mul3_size(size_t a, size_t b, size_t c, size_t *out);

#ifdef __cplusplus
}
#endif
#endif
