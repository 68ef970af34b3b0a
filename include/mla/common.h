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

/* fp8 KV pools (schema 1.1.0): e4m3 codes as SGLang stores them.
 * e4m3fn (NVIDIA, MI350): bias 7, 0x7F/0xFF NaN, no infinities, max 448,
 * subnormals m * 2^-9. e4m3fnuz (MI300): bias 8, 0x80 the only NaN, no
 * negative zero, no infinities, max 240, subnormals m * 2^-10. Every value
 * of either flavour is exact in fp32 (and in bf16: 3 mantissa bits, exponents
 * -10..8). NaN codes decode to a quiet NaN carrying the code's sign bit. */
typedef enum {
    MLA_KV_BF16 = 0,         /* H5T_STD_U16LE, dtype "bfloat16" */
    MLA_KV_FP8_E4M3FN = 1,   /* H5T_STD_U8LE, dtype "float8_e4m3fn" */
    MLA_KV_FP8_E4M3FNUZ = 2  /* H5T_STD_U8LE, dtype "float8_e4m3fnuz" */
} mla_kv_dtype;

/* Bytes per element of a pool of this dtype (2 or 1); 0 for an unknown value. */
static inline size_t mla_kv_dtype_size(mla_kv_dtype t)
{
    return t == MLA_KV_BF16 ? 2u : (t == MLA_KV_FP8_E4M3FN || t == MLA_KV_FP8_E4M3FNUZ) ? 1u : 0u;
}

/* The schema's dtype tag ("bfloat16", "float8_e4m3fn", "float8_e4m3fnuz"). */
const char *mla_kv_dtype_name(mla_kv_dtype t);

/* e4m3 with exponent bias `bias` and no infinities; the caller decides NaN. */
static inline float mla_fp8_e4m3_finite_(uint8_t b, int bias)
{
    const uint32_t sign = (uint32_t)(b & 0x80u) << 24, e = (b >> 3) & 15u, m = b & 7u;
    uint32_t u;
    float f;
    if (e == 0) { /* subnormal: m * 2^(1 - bias - 3), exact in fp32 */
        f = (float)m / (bias == 7 ? 512.0f : 1024.0f);
        memcpy(&u, &f, sizeof u);
        u |= sign;
    } else {
        u = sign | ((e + 127u - (uint32_t)bias) << 23) | (m << 20);
    }
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline float mla_fp8_e4m3fn_to_f32(uint8_t b)
{
    if ((b & 0x7fu) == 0x7fu) {
        uint32_t u = ((uint32_t)(b & 0x80u) << 24) | 0x7fc00000u;
        float f;
        memcpy(&f, &u, sizeof f);
        return f;
    }
    return mla_fp8_e4m3_finite_(b, 7);
}

static inline float mla_fp8_e4m3fnuz_to_f32(uint8_t b)
{
    if (b == 0x80u) {
        uint32_t u = 0x7fc00000u;
        float f;
        memcpy(&f, &u, sizeof f);
        return f;
    }
    return mla_fp8_e4m3_finite_(b, 8);
}

/* Decode one pool code of an fp8 dtype (MLA_KV_BF16 is not a byte code). */
static inline float mla_fp8_to_f32(mla_kv_dtype t, uint8_t b)
{
    return t == MLA_KV_FP8_E4M3FNUZ ? mla_fp8_e4m3fnuz_to_f32(b) : mla_fp8_e4m3fn_to_f32(b);
}

/* The NaN code of each fp8 flavour (poison for unreferenced pool slots). */
#define MLA_FP8_E4M3FN_NAN ((uint8_t)0x7fu)
#define MLA_FP8_E4M3FNUZ_NAN ((uint8_t)0x80u)

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
