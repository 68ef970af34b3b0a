// The kernels' fp8 decode (device/fp8.h) against the C decoder of the
// schema (mla/common.h), over every code of both flavours: the packed path
// of the warp-specialized producer (fp8x4_to_bf16x4, each code in each of
// the four byte positions, next to every other code) and the scalar one.
// Bits must match exactly; a NaN code must give a NaN. Exit 77 without a GPU.
#include "device/fp8.h"
#include "mla/common.h"

#include <stdio.h>
#include <string.h>

using namespace mla_dev;

// Word i holds codes (i, i + 1, i + 2, i + 3) mod 256, so every code sits
// in every byte position; out[4 i + k] is byte k's bf16, packed path;
// out[1024 + c] the scalar path of code c.
__global__ void decode_all(int fmt, uint16_t *out)
{
    const int i = threadIdx.x;
    const uint32_t w = (uint32_t)(i & 255) | (uint32_t)((i + 1) & 255) << 8 |
                       (uint32_t)((i + 2) & 255) << 16 | (uint32_t)((i + 3) & 255) << 24;
    uint32_t lo, hi;
    fp8x4_to_bf16x4(w, fmt, lo, hi);
    out[4 * i] = (uint16_t)lo;
    out[4 * i + 1] = (uint16_t)(lo >> 16);
    out[4 * i + 2] = (uint16_t)hi;
    out[4 * i + 3] = (uint16_t)(hi >> 16);
    out[1024 + i] = fp8_to_bf16((uint32_t)i, fmt);
}

static int check_code(const char *what, int fmt, int code, uint16_t got)
{
    const float want = mla_fp8_to_f32((mla_kv_dtype)fmt, (uint8_t)code);
    uint32_t u = (uint32_t)got << 16;
    float g;
    memcpy(&g, &u, sizeof g);
    uint32_t wb;
    memcpy(&wb, &want, sizeof wb);
    const bool ok = want != want ? g != g : (wb >> 16) == got && (wb & 0xffffu) == 0;
    if (!ok)
        fprintf(stderr, "FAIL %s %s code 0x%02x: bf16 0x%04x (%g), want %g\n", what,
                mla_kv_dtype_name((mla_kv_dtype)fmt), code, got, g, want);
    return ok ? 0 : 1;
}

int main(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        printf("test_fp8: no GPU, skipped\n");
        return 77;
    }
    uint16_t *d = nullptr, h[1024 + 256];
    int fails = 0;
    if (cudaMalloc(&d, sizeof h) != cudaSuccess) {
        fprintf(stderr, "cudaMalloc failed\n");
        return 1;
    }
    for (int fmt = KV_E4M3FN; fmt <= KV_E4M3FNUZ; ++fmt) {
        memset(h, 0xa5, sizeof h); // poison: every element must be written
        cudaError_t e = cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice);
        decode_all<<<1, 256>>>(fmt, d);
        if (e == cudaSuccess)
            e = cudaGetLastError();
        if (e == cudaSuccess)
            e = cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
        if (e != cudaSuccess) {
            fprintf(stderr, "FAIL: %s\n", cudaGetErrorString(e));
            return 1;
        }
        for (int i = 0; i < 256; ++i)
            for (int k = 0; k < 4; ++k)
                fails += check_code("packed", fmt, (i + k) & 255, h[4 * i + k]);
        for (int c = 0; c < 256; ++c)
            fails += check_code("scalar", fmt, c, h[1024 + c]);
    }
    cudaFree(d);
    if (fails) {
        fprintf(stderr, "test_fp8: %d mismatches\n", fails);
        return 1;
    }
    printf("test_fp8: 2 flavours x 256 codes, packed (4 byte positions) and scalar decode exact\n");
    return 0;
}
