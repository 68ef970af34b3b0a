// Instruction semantics of the emulator against independent descriptions:
//  - MFMA: each bf16 32x32 variant of the arch against a scalar matrix
//    product, operands and result placed with the layout rules of AMD's
//    matrix instruction calculator (ROCm/amd_matrix_instruction_calculator,
//    matrix_calculator.py, class InstCalcGfx9: element -> register, lane),
//    restated below; the emulator implements the reverse direction (lane,
//    register -> element) from the ISA guides. A planted bug (the two
//    K-halves of A swapped between the lane halves) must change the result.
//  - shuffles (HIP/CUDA semantics), ds_bpermute (incl. inactive source
//    lanes), ds_swizzle (bit-mask and quad-permute modes), ballot,
//    readfirstlane in a divergent region, mbcnt;
//  - ids of a 3-D block, barriers with LDS exchange across waves.
#include "emu_test_util.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

// ---- the calculator's gfx9 layout rules (facts, restated) ----
// Input matrix, `outer` = M (A rows) or N (B columns), `inner` = K, blocks B:
// a lane's contiguous registers hold K / (64 / (outer * B)) values; value k
// sits at element k % that, lane b*outer + (k / that) * outer * B + i.
static void calc_input(int outer, int K, int Bk, int i, int k, int b, int *elem, int *lane)
{
    int per = 64 / (outer * Bk);
    per = K / per;
    *elem = k % per;
    *lane = b * outer + (k / per) * outer * Bk + i;
}
// 32-bit output M x N: segments 4 rows (registers) tall and N lanes wide;
// 64 / N of them side by side in one register set, then 4 registers on.
static void calc_output(int M, int N, int i, int j, int b, int *reg, int *lane)
{
    const int multirows = 64 / N, height = 4;
    int bpr = (64 + (N * M / height) - 1) / (N * M / height);
    *reg = b * (M * N / 64) + (i / (height * multirows)) * height + i % height;
    *lane = (b % bpr) * N + ((i / height) % multirows) * bpr * N + j;
}

static uint16_t f2bf(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16); // test values are exact in bf16
}

struct MfmaArgs {
    const uint16_t *A; // [32][K]
    const uint16_t *B; // [K][32]
    const float *C;    // [32][32]
    float *D;
    int K;
    int swap_k_halves; // planted bug
};

static void k_mfma(const MfmaArgs &p)
{
    const int lane = (int)threadIdx.x;
    uint16_t a[8] = {0}, b[8] = {0};
    float c[16] = {0};
    for (int i = 0; i < 32; ++i)
        for (int k = 0; k < p.K; ++k) {
            int e, l;
            calc_input(32, p.K, 1, i, k, 0, &e, &l);
            if (p.swap_k_halves)
                l ^= 32; // lanes 0-31 take the upper K half: a wrong operand load
            if (l == lane)
                a[e] = p.A[i * p.K + k];
            calc_input(32, p.K, 1, i, k, 0, &e, &l); // B: outer index = column i
            if (l == lane)
                b[e] = p.B[k * 32 + i];
        }
    for (int i = 0; i < 32; ++i)
        for (int j = 0; j < 32; ++j) {
            int r, l;
            calc_output(32, 32, i, j, 0, &r, &l);
            if (l == lane)
                c[r] = p.C[i * 32 + j];
        }
    typedef float v16f __attribute__((ext_vector_type(16)));
    v16f cv, dv;
    memcpy(&cv, c, 64);
    if (p.K == 8) {
        typedef short v4s __attribute__((ext_vector_type(4)));
        v4s av, bv;
        memcpy(&av, a, 8);
        memcpy(&bv, b, 8);
        dv = __builtin_amdgcn_mfma_f32_32x32x8bf16_1k(av, bv, cv, 0, 0, 0);
    } else {
#if defined(__gfx950__)
        typedef __bf16 v8b __attribute__((ext_vector_type(8)));
        v8b av, bv;
        memcpy(&av, a, 16);
        memcpy(&bv, b, 16);
        dv = __builtin_amdgcn_mfma_f32_32x32x16_bf16(av, bv, cv, 0, 0, 0);
#else
        dv = cv;
#endif
    }
    float d[16];
    memcpy(d, &dv, 64);
    for (int i = 0; i < 32; ++i)
        for (int j = 0; j < 32; ++j) {
            int r, l;
            calc_output(32, 32, i, j, 0, &r, &l);
            if (l == lane)
                p.D[i * 32 + j] = d[r];
        }
}

// Returns the number of mismatches against the scalar product.
static int mfma_case(int K, int swap, unsigned seed)
{
    uint16_t *A = galloc<uint16_t>(32 * K, "A"), *B = galloc<uint16_t>(K * 32, "B");
    float *C = galloc<float>(32 * 32, "C"), *D = galloc<float>(32 * 32, "D");
    float Af[32 * 16], Bf[16 * 32];
    srand(seed);
    for (int x = 0; x < 32 * K; ++x) {
        Af[x] = (float)(rand() % 9 - 4);
        A[x] = f2bf(Af[x]);
        Bf[x] = (float)(rand() % 9 - 4);
        B[x] = f2bf(Bf[x]);
    }
    for (int x = 0; x < 32 * 32; ++x) {
        C[x] = (float)(rand() % 21 - 10);
        D[x] = NAN;
    }
    MfmaArgs p{A, B, C, D, K, swap};
    char msg[1024];
    const int st = run_kernel<MfmaArgs, k_mfma>(p, d3(1), d3(64), 0, "mfma", msg, sizeof msg);
    CHECK(st == 0, "mfma K=%d: %s", K, msg);
    int bad = 0;
    for (int i = 0; i < 32; ++i)
        for (int j = 0; j < 32; ++j) {
            double ref = C[i * 32 + j];
            for (int k = 0; k < K; ++k)
                ref += (double)Af[i * K + k] * Bf[k * 32 + j];
            if (D[i * 32 + j] != (float)ref)
                ++bad;
        }
    mla_emu::release(A);
    mla_emu::release(B);
    mla_emu::release(C);
    mla_emu::release(D);
    return bad;
}

// ---- exchanges ----
enum { NX = 13 };
struct XArgs {
    const int *v;
    int *out; // [NX][64]
};
static void k_exchange(const XArgs &p)
{
    const int lane = (int)threadIdx.x;
    const int v = p.v[lane];
    int *o = p.out;
    o[0 * 64 + lane] = __shfl_xor(v, 5, 64);
    o[1 * 64 + lane] = __shfl_xor(v, 3, 16);
    o[2 * 64 + lane] = __shfl(v, 7, 32);
    o[3 * 64 + lane] = __shfl_up(v, 3u, 16);
    o[4 * 64 + lane] = __shfl_down(v, 5u, 32);
    o[5 * 64 + lane] = __builtin_amdgcn_ds_bpermute(((lane * 7) % 64) * 4, v);
    o[6 * 64 + lane] = __builtin_amdgcn_ds_swizzle(v, 0x041f); // bit mode: and 31, or 0, xor 1
    o[7 * 64 + lane] = __builtin_amdgcn_ds_swizzle(v, 0x801b); // quad mode: reverse each quad
    const uint64_t bal = __builtin_amdgcn_ballot_w64(v % 3 == 0);
    o[8 * 64 + lane] = (int)(uint32_t)bal;
    o[9 * 64 + lane] = (int)(uint32_t)(bal >> 32);
    int rf = -1;
    if (lane >= 5)
        rf = __builtin_amdgcn_readfirstlane(v); // first ACTIVE lane: 5
    o[10 * 64 + lane] = rf;
    int bp = -1;
    if (lane < 32)
        bp = __builtin_amdgcn_ds_bpermute(((lane + 40) % 64) * 4, v); // lanes 32-63 inactive: 0
    o[11 * 64 + lane] = bp;
    o[12 * 64 + lane] = (int)__builtin_amdgcn_mbcnt_hi(~0u, __builtin_amdgcn_mbcnt_lo(~0u, 0u));
}

static void test_exchanges()
{
    int *v = galloc<int>(64, "v"), *out = galloc<int>(NX * 64, "out");
    for (int l = 0; l < 64; ++l)
        v[l] = 1000 + l * 7 + (l * l) % 5;
    XArgs p{v, out};
    char msg[1024];
    const int st = run_kernel<XArgs, k_exchange>(p, d3(1), d3(64), 0, "exchange", msg, sizeof msg);
    CHECK(st == 0, "exchange: %s", msg);
    uint64_t bal = 0;
    for (int l = 0; l < 64; ++l)
        if (v[l] % 3 == 0)
            bal |= 1ull << l;
    for (int l = 0; l < 64; ++l) {
        const int g16 = l / 16 * 16, g32 = l / 32 * 32;
        int exp[NX];
        exp[0] = v[l ^ 5];
        exp[1] = v[l ^ 3];
        exp[2] = v[g32 + 7];
        exp[3] = l - 3 >= g16 ? v[l - 3] : v[l];
        exp[4] = (l % 32) + 5 < 32 ? v[l + 5] : v[l];
        exp[5] = v[(l * 7) % 64];
        exp[6] = v[l ^ 1];
        exp[7] = v[(l & ~3) | (3 - (l & 3))];
        exp[8] = (int)(uint32_t)bal;
        exp[9] = (int)(uint32_t)(bal >> 32);
        exp[10] = l >= 5 ? v[5] : -1;
        exp[11] = l < 32 ? ((l + 40) % 64 < 32 ? v[(l + 40) % 64] : 0) : -1;
        exp[12] = l;
        for (int t = 0; t < NX; ++t)
            CHECK(out[t * 64 + l] == exp[t], "exchange %d lane %d: got %d, want %d", t, l, out[t * 64 + l], exp[t]);
    }
    mla_emu::release(v);
    mla_emu::release(out);
}

// ---- ids and barriers ----
struct BArgs {
    int *out;
    int rounds;
};
static void k_barrier(const BArgs &p)
{
    const int n = (int)(blockDim.x * blockDim.y * blockDim.z);
    const int t = (int)(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z));
    int *s = (int *)emu_test::lds;
    int v = t * 3 + (int)blockIdx.x * 100000;
    for (int r = 0; r < p.rounds; ++r) {
        s[t] = v;
        __syncthreads();
        v = s[(t + 77) % n] + 1; // another wave's value: needs the barrier
        __syncthreads();         // and every read done before the next store
    }
    p.out[blockIdx.x * n + t] = v;
    p.out[gridDim.x * n + blockIdx.x * n + t] = (int)(threadIdx.x + 100 * threadIdx.y + 10000 * threadIdx.z);
}

static void test_barriers()
{
    const int n = 256, G = 3, R = 4;
    int *out = galloc<int>(2 * G * n, "out");
    BArgs p{out, R};
    char msg[1024];
    const int st = run_kernel<BArgs, k_barrier>(p, d3(G), d3(16, 4, 4), n * 4, "barrier", msg, sizeof msg);
    CHECK(st == 0, "barrier: %s", msg);
    for (int g = 0; g < G; ++g)
        for (int t = 0; t < n; ++t) {
            int v = t * 3 + g * 100000, idx = t;
            for (int r = 0; r < R; ++r) {
                idx = (idx + 77) % n;
            }
            // After R rounds thread t holds thread ((t + 77R) mod n)'s start + R.
            v = ((t + 77 * R) % n) * 3 + g * 100000 + R;
            CHECK(out[g * n + t] == v, "barrier wg %d t %d: got %d want %d", g, t, out[g * n + t], v);
            const int x = t % 16, y = (t / 16) % 4, z = t / 64;
            CHECK(out[G * n + g * n + t] == x + 100 * y + 10000 * z, "ids t %d", t);
            (void)idx;
        }
    mla_emu::release(out);
}

int main()
{
    printf("emulated %s\n", ARCH_NAME);
    int bad = mfma_case(8, 0, 1);
    CHECK(bad == 0, "v_mfma_f32_32x32x8bf16_1k: %d of 1024 results differ from the scalar product", bad);
    printf("v_mfma_f32_32x32x8bf16_1k vs scalar product (calculator layout): %d mismatches\n", bad);
    bad = mfma_case(8, 1, 2);
    CHECK(bad > 0, "planted bug (K halves of A swapped) not visible in the 32x32x8 result");
    printf("planted bug, A K-halves swapped (32x32x8): %d of 1024 results differ (caught: %s)\n", bad,
           bad ? "yes" : "NO");
#if defined(__gfx950__)
    bad = mfma_case(16, 0, 3);
    CHECK(bad == 0, "v_mfma_f32_32x32x16_bf16: %d of 1024 results differ", bad);
    printf("v_mfma_f32_32x32x16_bf16 vs scalar product (calculator layout): %d mismatches\n", bad);
    bad = mfma_case(16, 1, 4);
    CHECK(bad > 0, "planted bug (K halves of A swapped) not visible in the 32x32x16 result");
    printf("planted bug, A K-halves swapped (32x32x16): %d of 1024 results differ (caught: %s)\n", bad,
           bad ? "yes" : "NO");
#endif
    test_exchanges();
    printf("shuffles, ds_bpermute, ds_swizzle, ballot, readfirstlane, mbcnt: checked\n");
    test_barriers();
    printf("3-D block ids, LDS exchange across 4 waves over 4 barrier rounds, 3 workgroups: checked\n");
    printf(g_failures ? "FAILED (%d)\n" : "all passed\n", g_failures);
    return g_failures ? 1 : 0;
}
