/* bf16 rounding, bit-exact: mla_f32_to_bf16 (common.h) and mla_round_bf16
 * (reference.h) against a table of fp32 bit patterns written by hand, then
 * every bf16 value through fp32 and back. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "mla/reference.h"
#include "ref_test_util.h"

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static int is_nan16(mla_bf16 b)
{
    return (b & 0x7f80u) == 0x7f80u && (b & 0x007fu) != 0;
}

int main(int argc, char **argv)
{
    rt_cli(argc, argv, "Checks bf16 rounding bit-exactly: mla_f32_to_bf16 and mla_round_bf16 on a table of\nedge cases (ties, NaN, inf, subnormals) and every bf16 value round trip.", NULL);
    /* want NAN_OUT: any quiet NaN (exponent all ones, quiet bit 0x0040 set) */
    enum { NAN_OUT = 0x10000 };
    static const struct {
        uint32_t in;
        uint32_t want;
        const char *what;
    } T[] = {
        {0x3F800000u, 0x3F80u, "1.0 exact"},
        {0x40490000u, 0x4049u, "3.140625 exact"},
        {0x3F808000u, 0x3F80u, "tie, even below: stays"},
        {0x3F818000u, 0x3F82u, "tie, odd below: up to even"},
        {0x3F808001u, 0x3F81u, "just above a tie: up"},
        {0x3F807FFFu, 0x3F80u, "just below a tie: down"},
        {0x3F817FFFu, 0x3F81u, "just below a tie (odd): down"},
        {0x3F81FFFFu, 0x3F82u, "just below the next value: up"},
        {0xBF808000u, 0xBF80u, "negative tie, even: stays"},
        {0xBF818000u, 0xBF82u, "negative tie, odd: away to even"},
        {0xBF808001u, 0xBF81u, "negative just above a tie"},
        {0xBF807FFFu, 0xBF80u, "negative just below a tie"},
        {0x3FFFFFFFu, 0x4000u, "carry into the exponent"},
        {0x7F7F0000u, 0x7F7Fu, "largest bf16 finite"},
        {0x7F7F7FFFu, 0x7F7Fu, "just below the overflow tie"},
        {0x7F7F8000u, 0x7F80u, "overflow tie rounds to inf (odd below)"},
        {0x7F7FFFFFu, 0x7F80u, "fp32 max finite rounds to inf"},
        {0xFF7FFFFFu, 0xFF80u, "-fp32 max finite rounds to -inf"},
        {0x00000000u, 0x0000u, "+0"},
        {0x80000000u, 0x8000u, "-0"},
        {0x00000001u, 0x0000u, "smallest denormal rounds to +0"},
        {0x80000001u, 0x8000u, "smallest negative denormal rounds to -0"},
        {0x00008000u, 0x0000u, "denormal tie, even: 0"},
        {0x00018000u, 0x0002u, "denormal tie, odd: up"},
        {0x00008001u, 0x0001u, "denormal just above a tie"},
        {0x00010000u, 0x0001u, "bf16 smallest denormal exact"},
        {0x807FFFFFu, 0x8080u, "largest negative denormal rounds to min normal"},
        {0x007F8000u, 0x0080u, "denormal tie (odd) up to min normal"},
        {0x7F800000u, 0x7F80u, "+inf"},
        {0xFF800000u, 0xFF80u, "-inf"},
        {0x7FC00000u, NAN_OUT, "qNaN"},
        {0xFFC00000u, NAN_OUT, "negative qNaN"},
        {0x7F800001u, NAN_OUT, "sNaN, payload only in the dropped bits"},
        {0x7FA00000u, NAN_OUT, "sNaN with high payload"},
        {0x7FFFFFFFu, NAN_OUT, "NaN with all payload bits (must not carry to inf or wrap)"},
        {0xFFFFFFFFu, NAN_OUT, "negative NaN with all payload bits"},
    };
    const size_t n = sizeof T / sizeof T[0];
    float src[64];
    mla_bf16 arr[64];
    int fails = 0;
    for (size_t i = 0; i < n; i++)
        src[i] = from_bits(T[i].in);
    mla_round_bf16(src, arr, n);
    for (size_t i = 0; i < n; i++) {
        const mla_bf16 one = mla_f32_to_bf16(src[i]);
        for (int which = 0; which < 2; which++) {
            const mla_bf16 got = which ? arr[i] : one;
            int ok;
            if (T[i].want == NAN_OUT)
                ok = is_nan16(got) && (got & 0x0040u) && (got >> 15) == (T[i].in >> 31);
            else
                ok = got == T[i].want;
            if (!ok) {
                printf("FAIL %s: 0x%08X -> 0x%04X, want 0x%04X (%s)\n",
                       which ? "mla_round_bf16" : "mla_f32_to_bf16", (unsigned)T[i].in,
                       (unsigned)got, (unsigned)T[i].want, T[i].what);
                fails++;
            }
        }
    }
    /* Every bf16 value is exact in fp32 and must come back unchanged; NaNs
     * come back NaN (quieted). */
    for (uint32_t b = 0; b <= 0xFFFFu; b++) {
        const float f = mla_bf16_to_f32((mla_bf16)b);
        uint32_t u;
        memcpy(&u, &f, sizeof u);
        const mla_bf16 back = mla_f32_to_bf16(f);
        int ok = (u == (b << 16)) &&
                 (is_nan16((mla_bf16)b) ? (is_nan16(back) && (back & 0x0040u) &&
                                           (back & 0x8000u) == (b & 0x8000u))
                                        : back == b);
        if (!ok) {
            if (fails < 20)
                printf("FAIL round trip 0x%04X -> 0x%08X -> 0x%04X\n", (unsigned)b, (unsigned)u,
                       (unsigned)back);
            fails++;
        }
    }
    printf("%zu table entries (both functions), 65536 round trips: %s\n", n,
           fails ? "FAILED" : "ok");
    return fails != 0;
}
