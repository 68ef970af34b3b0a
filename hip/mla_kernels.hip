// Device code of the three GPU tiers (SPEC sections 2-4), HIP dialect.
//
// Tier FAST (two stages):
//   stage 1, grid (split, row block, seq): one CTA takes up to 96 query rows
//   (flattened r = draft_row * H + head, so all 12 heads x 8 drafts of a K3
//   TP8 sequence share one CTA) and one floor-partition piece of the prefix;
//   every 32-token latent tile it gathers serves all of those rows. QK^T and
//   PV run on tensor cores (mma.sync m16n8k16 bf16 on NVIDIA, MFMA 32x32x8
//   bf16 on AMD), fp32 accumulation, online softmax in base 2. Partials are
//   stored bf16 with an fp32 natural-log lse. A variant of the 64/96-row
//   kernels computes QK^T with Hopper wgmma from 128-byte swizzled tiles
//   (template flag WG, opt-in through MLA_GPU_FAST_S=wg; see FastConfig).
//   stage 2, grid (head, 64-column chunk, seq): merges the active splits,
//   adds the L x L causal draft block in fp32 and writes o and lse.
// Tier PERHEAD: the same machinery with the upstream per-head decomposition:
//   one program per (query head, split), 16-row tiles of that head's drafts,
//   split count 4/8/16 by average prefix, split length rounded up to 32, fp32
//   partials. It re-reads the KV once per head, which is exactly the cost the
//   fast tier removes.
// Tier GENERIC: one block per (query row, head) on CUDA cores, every feature.

#include "compat.h"
#include "mla/plan.h"

#include <stdint.h>

#ifndef MLA_HIP_MINIMAL
#include <math.h>
#endif

namespace mla_dev {

typedef uint16_t bf16_t;

// Tile geometry shared by host and device.
constexpr int TN = 32;         // prefix tokens per tile
constexpr int D_MAX = 576;     // widest head_dim stage 1 handles (512 nope + 64 rope)
constexpr int DV_MAX = 512;    // widest v_head_dim
constexpr int DP = D_MAX + 8;  // smem row pitch (elements): +16 B keeps ldmatrix rows on distinct banks
constexpr int SSP = TN + 4;    // fp32 score tile pitch
constexpr int PSP = TN + 8;    // bf16 probability tile pitch (80 B: conflict-free ldmatrix)
constexpr int STAGES = 2;      // K/V tiles in flight
constexpr float LOG2E = 1.4426950408889634f;
constexpr float LN2 = 0.6931471805599453f;

struct Stage1Params {
    const bf16_t *q;
    long long q_st, q_sh;
    const bf16_t *kv;
    long long kv_ss;
    const int32_t *qo_indptr;
    const int32_t *kv_indptr;
    const int64_t *kv_indices;
    int H, L, HL, D, Dv;
    int num_splits;
    int split_mode; // 0: plan floor partition (fast); 1: per-head ceil rounded up to 32
    int min_split;  // block_n of mla_plan_active_splits (mode 0)
    int row_mode;   // 0: contiguous chunks of flattened rows; 1: one head, 16-row chunks of its drafts
    float scale_log2; // sm_scale * k_scale * log2(e)
    float v_scale;
    void *part_o;     // [bs, num_splits, HL, Dv] of PT
    float *part_lse;  // [bs, num_splits, HL], natural log
};

struct Stage2Params {
    const bf16_t *q;
    long long q_st, q_sh;
    const bf16_t *k_ext;
    long long k_st;
    const bf16_t *v_ext;
    long long v_st;
    const int32_t *qo_indptr;
    const int32_t *kv_indptr;
    int H, L, HL, D, Dv;
    int num_splits, split_mode, min_split;
    int cw; // output columns per block (a multiple of 64 dividing Dv)
    float sm_scale;
    const void *part_o;
    const float *part_lse;
    bf16_t *o;
    long long o_st, o_sh;
    float *lse;
    long long lse_st;
};

struct GenericParams {
    const bf16_t *q;
    long long q_st, q_sh;
    const bf16_t *k_ext;
    long long k_st, k_sh;
    const bf16_t *v_ext;
    long long v_st, v_sh;
    const bf16_t *kv;
    long long kv_ss, kv_sh;
    const int32_t *qo_indptr;
    const int32_t *kv_indptr;
    const int64_t *kv_indices;
    const float *sinks;
    int num_seqs, H, Hkv, D, Dv;
    int is_causal, sliding_window;
    float sm_scale, k_scale, v_scale, logit_cap;
    bf16_t *o;
    long long o_st, o_sh;
    float *lse;
    long long lse_st;
};

// ---------------------------------------------------------------------------
// Small portable helpers
// ---------------------------------------------------------------------------

__device__ __forceinline__ float bf2f(bf16_t b)
{
    return __uint_as_float(((uint32_t)b) << 16);
}

// Round to nearest even; NaN stays a quiet NaN (as mla_f32_to_bf16).
__device__ __forceinline__ bf16_t f2bf(float f)
{
    uint32_t u = __float_as_uint(f);
    if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0)
        return (bf16_t)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (bf16_t)(u >> 16);
}

__device__ __forceinline__ uint32_t pack_bf2(float lo, float hi)
{
#if defined(MLA_TARGET_NVIDIA) && defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 800)
    uint32_t r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
#else
    return (uint32_t)f2bf(lo) | ((uint32_t)f2bf(hi) << 16);
#endif
}

template <typename PT> struct Partial;
template <> struct Partial<bf16_t> {
    __device__ static void store2(void *base, long long idx, float a, float b)
    {
        *(uint32_t *)((bf16_t *)base + idx) = pack_bf2(a, b);
    }
    __device__ static void load2(const void *base, long long idx, float &a, float &b)
    {
        uint32_t u = *(const uint32_t *)((const bf16_t *)base + idx);
        a = __uint_as_float(u << 16);
        b = __uint_as_float(u & 0xffff0000u);
    }
};
template <> struct Partial<float> {
    __device__ static void store2(void *base, long long idx, float a, float b)
    {
        *(float2 *)((float *)base + idx) = make_float2(a, b);
    }
    __device__ static void load2(const void *base, long long idx, float &a, float &b)
    {
        float2 v = *(const float2 *)((const float *)base + idx);
        a = v.x;
        b = v.y;
    }
};

__device__ __forceinline__ float warp_sum(float v)
{
    for (int off = 16; off > 0; off >>= 1)
        v += mla_shfl_xor(v, off, 32);
    return v;
}
__device__ __forceinline__ float warp_max(float v)
{
    for (int off = 16; off > 0; off >>= 1)
        v = fmaxf(v, mla_shfl_xor(v, off, 32));
    return v;
}

// Asynchronous 16-byte global->shared copy; src_bytes 0 fills zeros (tokens
// past a split's end and padded query rows must be 0, never stale smem: a
// stale NaN times a zero probability is NaN).
__device__ __forceinline__ void cp_async16(void *smem_dst, const void *gsrc, int src_bytes)
{
#if defined(MLA_TARGET_NVIDIA)
    uint32_t s = (uint32_t)__cvta_generic_to_shared(smem_dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gsrc),
                 "r"(src_bytes));
#else
    uint4 v = make_uint4(0, 0, 0, 0);
    if (src_bytes)
        v = *(const uint4 *)gsrc;
    *(uint4 *)smem_dst = v;
#endif
}
// The same with a shared-state-space address (no conversion per copy).
__device__ __forceinline__ void cp_async16_s(uint32_t s, const void *gsrc, int src_bytes)
{
#if defined(MLA_TARGET_NVIDIA)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gsrc),
                 "r"(src_bytes));
#else
    (void)s;
    (void)gsrc;
    (void)src_bytes;
#endif
}
__device__ __forceinline__ void cp_async_commit()
{
#if defined(MLA_TARGET_NVIDIA)
    asm volatile("cp.async.commit_group;\n" ::);
#endif
}
__device__ __forceinline__ void cp_async_wait_all()
{
#if defined(MLA_TARGET_NVIDIA)
    asm volatile("cp.async.wait_group 0;\n" ::);
#endif
}

// Programmatic dependent launch (sm_90): stage 1 lets stage 2 start early;
// stage 2 stages its inputs and computes the draft scores, then waits for
// stage 1's partials. Without a PDL launch the wait returns at once, and on
// other targets both are no-ops.
__device__ __forceinline__ void pdl_launch_dependents()
{
#if defined(MLA_TARGET_NVIDIA) && defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_wait()
{
#if defined(MLA_TARGET_NVIDIA) && defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

// Element offset of (row, col) in a shared-memory tile of R rows. Padded rows
// (SW false: the mma.sync path; the 16-byte pad keeps ldmatrix rows on
// distinct banks) or the 128-byte swizzled K-major layout of wgmma (SW true):
// the columns are cut into 64-element (128-byte) atoms; atom column a of all
// R rows is one block of R x 128 bytes, row r at r * 128 bytes in it, and its
// 16-byte chunk j stored at chunk j ^ (r % 8). Eight consecutive chunks of one
// row, or one chunk of eight consecutive rows, then fall on eight distinct
// bank groups: cp.async stores of whole rows and ldmatrix reads of 8-row
// blocks are conflict-free, and wgmma reads it through a descriptor in its
// 128-byte swizzle mode (8-row groups 1024 bytes apart).
template <bool SW, int PITCH = DP> __device__ __forceinline__ int toff(int r, int c, int R)
{
    if constexpr (SW)
        return (c >> 6) * R * 64 + r * 64 + ((((c >> 3) & 7) ^ (r & 7)) << 3) + (c & 7);
    else
        return r * PITCH + c;
}

// Shared memory written through the generic proxy (cp.async, plain stores)
// and read next by wgmma (async proxy) needs this fence in each writer
// before the barrier that publishes it.
__device__ __forceinline__ void fence_proxy_async()
{
#if defined(MLA_TARGET_NVIDIA) && defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

// ---------------------------------------------------------------------------
// Per-target MMA layer. Each target provides the two tile products of one
// KV tile with its own register layout:
//   s_tile:  Ss[ROWS][TN] (fp32, times scale) = Qs[ROWS][D] . Ks[TN][D]^T
//   PvAcc:   acc[ROWS][DV_MAX] += Ps[ROWS][TN] . Ks[TN][0:Dv] with a row
//            rescale before, and an epilogue that hands each (row, col pair)
//            of the accumulator to a callback.
// ---------------------------------------------------------------------------

#if defined(MLA_TARGET_NVIDIA)

__device__ __forceinline__ void ldsm_x4(uint32_t &r0, uint32_t &r1, uint32_t &r2, uint32_t &r3,
                                        const void *p)
{
    uint32_t s = (uint32_t)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(s));
}
__device__ __forceinline__ void ldsm_x2(uint32_t &r0, uint32_t &r1, const void *p)
{
    uint32_t s = (uint32_t)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
                 : "=r"(r0), "=r"(r1)
                 : "r"(s));
}
__device__ __forceinline__ void ldsm_x4_t(uint32_t &r0, uint32_t &r1, uint32_t &r2, uint32_t &r3,
                                          const void *p)
{
    uint32_t s = (uint32_t)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(s));
}
__device__ __forceinline__ void mma16816(float *c, uint32_t a0, uint32_t a1, uint32_t a2,
                                         uint32_t a3, uint32_t b0, uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// Hopper warpgroup MMA (sm_90a). Operands in shared memory through 64-bit
// descriptors: start address (16-byte units, bits 0-13), leading-dimension
// offset (bits 16-29; unused by K-major swizzled operands, 1 by convention),
// stride-dimension offset (bits 32-45: 1024 bytes between 8-row groups),
// bits 62-63 = 1: 128-byte swizzle. The swizzle is a function of the address
// bits, so the atoms sit on 1024-byte boundaries and a k16 step inside an
// atom just moves the start address by 32 bytes.
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define MLA_HAVE_WGMMA 1
#endif
__device__ __forceinline__ uint64_t wg_desc_sw128(uint32_t saddr)
{
    return (uint64_t)((saddr & 0x3ffffu) >> 4) | ((uint64_t)1 << 16) | ((uint64_t)(1024 >> 4) << 32) |
           ((uint64_t)1 << 62);
}
// D[64 x 32] += A[64 x 16] B[16 x 32], A and B K-major bf16, D fp32 in the
// mma.sync C layout repeated over the four 8-column blocks (warp w of the
// warpgroup holds rows 16w .. 16w + 15).
template <int SCALE_D>
__device__ __forceinline__ void wgmma_m64n32k16(float (&d)[16], uint64_t da, uint64_t db)
{
#if defined(MLA_HAVE_WGMMA)
    // scale-d 0 on the first step of a product: D = A B, no zeroing of the
    // accumulators by ordinary instructions (which would serialize the
    // wgmma pipeline, ptxas C7515).
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 "
                 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, %16, %17, p, 1, 1, 0, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
                   "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),
                   "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
                 : "l"(da), "l"(db), "n"(SCALE_D));
#else
    (void)d;
    (void)da;
    (void)db;
    __trap(); // the launcher selects this path only for sm_90a builds
#endif
}
// The same product with A (64 x 16, K-major) from registers: per warp the
// 16 x 16 slice of its rows in the mma.sync m16n8k16 A-fragment order.
template <int SCALE_D>
__device__ __forceinline__ void wgmma_m64n32k16_rs(float (&d)[16], const uint32_t (&a)[4], uint64_t db)
{
#if defined(MLA_HAVE_WGMMA)
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 "
                 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, {%16,%17,%18,%19}, %20, p, 1, 1, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
                   "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),
                   "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "n"(SCALE_D));
#else
    (void)d;
    (void)a;
    (void)db;
    __trap();
#endif
}
// D[64 x 256] += A[64 x 16] B[16 x 256]: A (P) K-major, B (V) MN-major
// (transpose-b 1), both 128-byte swizzled in shared memory; D fp32, the
// m64n32 layout repeated over 32 8-column blocks (128 registers).
__device__ __forceinline__ void wgmma_m64n256k16_tb(float (&d)[128], uint64_t da, uint64_t db)
{
#if defined(MLA_HAVE_WGMMA)
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
                 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111,%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127}, %128, %129, p, 1, 1, 0, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
                 : "l"(da), "l"(db));
#else
    (void)d;
    (void)da;
    (void)db;
    __trap();
#endif
}
// Descriptor of an MN-major operand in the 128-byte swizzled layout of the
// K/V tiles: 64-element MN atoms TN * 128 bytes apart (leading offset),
// 8-row K groups 1024 bytes apart (stride offset).
__device__ __forceinline__ uint64_t wg_desc_mn_sw128(uint32_t saddr)
{
    return (uint64_t)((saddr & 0x3ffffu) >> 4) | ((uint64_t)((TN * 128) >> 4) << 16) |
           ((uint64_t)(1024 >> 4) << 32) | ((uint64_t)1 << 62);
}
// D[64 x 96] += A[64 x 16] B[16 x 96] for the swapped PV product of the
// 96-row kernel (O^T = V^T P^T): A = V^T, MN-major (transpose-a 1) in the
// 128-byte swizzled K/V tile; B = P^T, K-major, no swizzle (P rows of 64
// bytes); D fp32 in the m64n32 layout over 12 8-column blocks.
__device__ __forceinline__ void wgmma_m64n96k16_ta(float (&d)[48], uint64_t da, uint64_t db)
{
#if defined(MLA_HAVE_WGMMA)
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n96k16.f32.bf16.bf16 "
                 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47}, %48, %49, p, 1, 1, 1, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47])
                 : "l"(da), "l"(db));
#else
    (void)d;
    (void)da;
    (void)db;
    __trap();
#endif
}
// K-major operand without swizzle: 8-row x 16-byte core matrices stored
// contiguously, 128 bytes apart along K (leading offset) and 512 bytes
// apart along N (stride offset): P rows of 32 tokens, 8-row groups.
__device__ __forceinline__ uint64_t wg_desc_kint(uint32_t saddr)
{
    return (uint64_t)((saddr & 0x3ffffu) >> 4) | ((uint64_t)(128 >> 4) << 16) |
           ((uint64_t)(512 >> 4) << 32);
}
__device__ __forceinline__ void wg_fence()
{
#if defined(MLA_HAVE_WGMMA)
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wg_commit_wait()
{
#if defined(MLA_HAVE_WGMMA)
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
#endif
}

// S = Q K^T on the wgmma path: warpgroup g computes 64 query rows x the 32
// tokens of the tile (m64n32k16, 16 fp32 accumulators per thread, D / 16
// instructions issued back to back). Q and K stream from shared memory once
// per warpgroup, instead of once per warp as ldmatrix fragments. 64 rows:
// one warpgroup. 96 rows: warpgroup 0 takes rows 0-63, warpgroup 1 rows
// 32-95 and keeps 64-95 (a 64-row block cannot start elsewhere without
// padding Q to 128 rows, which shared memory has no room for); the others
// idle for this phase.
template <int MT, int NW>
__device__ __forceinline__ void s_tile_wg(const bf16_t *Qs, const bf16_t *Kb, float *Ss, int D,
                                          float scale)
{
    constexpr int ROWS = 16 * MT;
    static_assert(ROWS == 64 || ROWS == 96, "wgmma S tiling");
    constexpr int SWG = ROWS > 64 ? 2 : 1;
    const int wg = threadIdx.x >> 7;
    if (wg >= SWG)
        return;
    const int row0 = wg == 0 ? 0 : ROWS - 64;
    float acc[16];
    const uint32_t qa = (uint32_t)__cvta_generic_to_shared(Qs + toff<true>(row0, 0, ROWS));
    const uint32_t kb = (uint32_t)__cvta_generic_to_shared(Kb);
    wg_fence();
    // k16 step k: atom column k / 4 (ROWS x 128 or TN x 128 bytes each),
    // 32 bytes per step inside the atom.
    wgmma_m64n32k16<0>(acc, wg_desc_sw128(qa), wg_desc_sw128(kb));
    const int nk = D >> 4;
#pragma unroll 1
    for (int k = 1; k < nk; ++k) {
        const uint32_t in = (uint32_t)(k & 3) * 32u, at = (uint32_t)(k >> 2);
        wgmma_m64n32k16<1>(acc, wg_desc_sw128(qa + at * (ROWS * 128) + in),
                           wg_desc_sw128(kb + at * (TN * 128) + in));
    }
    wg_commit_wait();
    const int lane = threadIdx.x & 31, w = (threadIdx.x >> 5) & 3;
    const int row = row0 + 16 * w + (lane >> 2), t = lane & 3;
    if (row0 + 16 * w < wg * 64)
        return; // rows warpgroup 0 owns
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        const int tok = 8 * j + 2 * t;
        *(float2 *)(Ss + row * SSP + tok) = make_float2(acc[4 * j] * scale, acc[4 * j + 1] * scale);
        *(float2 *)(Ss + (row + 8) * SSP + tok) =
            make_float2(acc[4 * j + 2] * scale, acc[4 * j + 3] * scale);
    }
}

// S = Q K^T: warps tile the ROWS x TN scores as MT row tiles x SCG token
// groups (16 x 16 per warp for 96 rows and 12 warps). PITCH: smem row pitch
// of Q and K. PADK > 0 (the per-head baseline): one dot over PADK columns,
// the zero-filled columns past D included, as upstream's padded 1024 dot.
template <int MT, int NW, int PITCH = DP, int PADK = 0>
__device__ __forceinline__ void s_tile(const bf16_t *Qs, const bf16_t *Kb, float *Ss, int D,
                                       int Dn, float scale)
{
    constexpr int SCG = NW / MT;
    constexpr int S_NT = TN / (8 * SCG);
    static_assert(NW % MT == 0 && TN % (8 * SCG) == 0, "S tiling");
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int sr = warp / SCG, sc = warp % SCG;
    float acc[S_NT][4];
#pragma unroll
    for (int j = 0; j < S_NT; ++j)
        acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
    const bf16_t *qa = Qs + (sr * 16 + (lane & 15)) * PITCH + (lane >> 4) * 8;
    const int mi = lane >> 3, r8 = lane & 7;
    const int tok_base = sc * S_NT * 8;
    // The 512-wide nope product and the 64-wide rope product: both are whole
    // k16 steps, so 576 costs 36 steps with no padding to a power of two.
    for (int part = 0; part < (PADK ? 1 : 2); ++part) {
        const int k_lo = part == 0 ? 0 : Dn, k_hi = PADK ? PADK : part == 0 ? Dn : D;
#pragma unroll 4
        for (int kk = k_lo; kk < k_hi; kk += 16) {
            uint32_t a0, a1, a2, a3;
            ldsm_x4(a0, a1, a2, a3, qa + kk);
            if constexpr (S_NT % 2 == 0) {
#pragma unroll
                for (int np = 0; np < S_NT / 2; ++np) {
                    uint32_t b0, b1, b2, b3;
                    const bf16_t *kp =
                        Kb + (tok_base + np * 16 + (mi >> 1) * 8 + r8) * PITCH + kk + (mi & 1) * 8;
                    ldsm_x4(b0, b1, b2, b3, kp);
                    mma16816(acc[2 * np], a0, a1, a2, a3, b0, b1);
                    mma16816(acc[2 * np + 1], a0, a1, a2, a3, b2, b3);
                }
            } else {
                uint32_t b0, b1;
                const bf16_t *kp = Kb + (tok_base + r8) * PITCH + kk + (mi & 1) * 8;
                ldsm_x2(b0, b1, kp);
                mma16816(acc[0], a0, a1, a2, a3, b0, b1);
            }
        }
    }
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int j = 0; j < S_NT; ++j) {
        const int tok = tok_base + j * 8 + 2 * t;
        const int row = sr * 16 + g;
        *(float2 *)(Ss + row * SSP + tok) = make_float2(acc[j][0] * scale, acc[j][1] * scale);
        *(float2 *)(Ss + (row + 8) * SSP + tok) = make_float2(acc[j][2] * scale, acc[j][3] * scale);
    }
}

// O += P V: warps tile ROWS x DV_MAX as RG row groups x CG column groups
// (32 x 128 per warp for 96 rows and 12 warps: 128 fp32 accumulators).
template <int MT, int NW, int RG, bool CM, int PITCH = DP> struct PvAcc {
    static constexpr int CG = NW / RG;
    static constexpr int WM = 16 * MT / RG;
    static constexpr int PMT = WM / 16;
    static constexpr int WN = DV_MAX / CG;
    static constexpr int PNT = WN / 8;
    static_assert(NW % RG == 0 && (16 * MT) % RG == 0 && WM % 16 == 0 && PNT % 2 == 0, "PV tiling");
    float acc[PMT][PNT][4];

    __device__ __forceinline__ void zero()
    {
#pragma unroll
        for (int i = 0; i < PMT; ++i)
#pragma unroll
            for (int j = 0; j < PNT; ++j)
                acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.f;
    }

    __device__ __forceinline__ void rescale_mma(const float *Al, const bf16_t *Ps, const bf16_t *Vb,
                                                int Dv)
    {
        const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
        const int pr = warp / CG, pc = warp % CG;
        const int g = lane >> 2;
#pragma unroll
        for (int i = 0; i < PMT; ++i) {
            const int row = pr * WM + i * 16 + g;
            const float a0 = Al[row], a1 = Al[row + 8];
#pragma unroll
            for (int j = 0; j < PNT; ++j) {
                acc[i][j][0] *= a0;
                acc[i][j][1] *= a0;
                acc[i][j][2] *= a1;
                acc[i][j][3] *= a1;
            }
        }
        const int mi = lane >> 3, r8 = lane & 7;
#pragma unroll
        for (int kk = 0; kk < TN; kk += 16) {
            uint32_t a[PMT][4];
#pragma unroll
            for (int i = 0; i < PMT; ++i)
                ldsm_x4(a[i][0], a[i][1], a[i][2], a[i][3],
                        Ps + (pr * WM + i * 16 + (lane & 15)) * PSP + kk + (lane >> 4) * 8);
#pragma unroll
            for (int np = 0; np < PNT / 2; ++np) {
                const int col0 = pc * WN + np * 16;
                if (col0 < Dv) {
                    uint32_t b0, b1, b2, b3;
                    ldsm_x4_t(b0, b1, b2, b3, Vb + toff<CM, PITCH>(kk + (mi & 1) * 8 + r8, col0 + (mi >> 1) * 8, TN));
#pragma unroll
                    for (int i = 0; i < PMT; ++i) {
                        mma16816(acc[i][2 * np], a[i][0], a[i][1], a[i][2], a[i][3], b0, b1);
                        mma16816(acc[i][2 * np + 1], a[i][0], a[i][1], a[i][2], a[i][3], b2, b3);
                    }
                }
            }
        }
    }

    // f(local_row, col, v0, v1) for the pair (col, col + 1).
    template <typename F> __device__ __forceinline__ void for_each(int Dv, F f) const
    {
        const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
        const int pr = warp / CG, pc = warp % CG;
        const int g = lane >> 2, t = lane & 3;
#pragma unroll
        for (int i = 0; i < PMT; ++i)
#pragma unroll
            for (int j = 0; j < PNT; ++j) {
                const int col = pc * WN + j * 8 + 2 * t;
                if (col < Dv) {
                    const int row = pr * WM + i * 16 + g;
                    f(row, col, acc[i][j][0], acc[i][j][1]);
                    f(row + 8, col, acc[i][j][2], acc[i][j][3]);
                }
            }
    }
};

#else // AMD: wave64, MFMA 32x32 bf16: 32x32x8 (gfx90a/gfx942) or 32x32x16 (gfx950)

// The per-arch K step (MFMA_K 8 or 16), operand loads and the layouts of
// both instructions are in amd/mfma_gfx9.h; the code below is written
// against it and is the same for every CDNA generation.
#include "amd/mfma_gfx9.h"
using mla_amd::mfma_ab_t;
using mla_amd::mfma_c_t;

template <int MT, int NW, int PITCH = DP, int PADK = 0>
__device__ __forceinline__ void s_tile(const bf16_t *Qs, const bf16_t *Kb, float *Ss, int D,
                                       int Dn, float scale)
{
    static_assert((16 * MT) % 32 == 0, "AMD tiles are 32 rows");
    static_assert(PITCH == DP && PADK == 0, "the padded per-head dot is NVIDIA-only");
    constexpr int NWAVE = NW / 2;
    constexpr int RT = 16 * MT / 32; // 32-row tiles; TN == 32 tokens is one column tile
    const int lane = threadIdx.x & 63, wave = threadIdx.x >> 6;
    (void)Dn;
    for (int rt = wave; rt < RT; rt += NWAVE) {
        mfma_c_t acc;
#pragma unroll
        for (int v = 0; v < 16; ++v)
            acc[v] = 0.f;
        const bf16_t *qa = Qs + (rt * 32 + (lane & 31)) * DP + mla_amd::k_lane_offset(lane);
        const bf16_t *kb = Kb + (lane & 31) * DP + mla_amd::k_lane_offset(lane);
        for (int kk = 0; kk < D; kk += mla_amd::MFMA_K)
            acc = mla_amd::mfma32(mla_amd::load_k(qa + kk), mla_amd::load_k(kb + kk), acc);
#pragma unroll
        for (int v = 0; v < 16; ++v)
            Ss[(rt * 32 + mla_amd::c_row(lane, v)) * SSP + (lane & 31)] = acc[v] * scale;
    }
}

template <int MT, int NW, int RG, bool CM, int PITCH = DP> struct PvAcc {
    static_assert(PITCH == DP, "AMD: unpadded rows");
    static_assert(!CM, "the swizzled layout is the wgmma path's");
    static constexpr int NWAVE = NW / 2;
    static constexpr int RT = 16 * MT / 32;
    static constexpr int CT = DV_MAX / 32;
    static constexpr int PER = RT * CT / NWAVE; // 32x32 output tiles per wave
    static_assert((16 * MT) % 32 == 0 && (RT * CT) % NWAVE == 0, "AMD PV tiling");
    mfma_c_t acc[PER];

    __device__ __forceinline__ void zero()
    {
#pragma unroll
        for (int i = 0; i < PER; ++i)
#pragma unroll
            for (int v = 0; v < 16; ++v)
                acc[i][v] = 0.f;
    }
    __device__ __forceinline__ static void tile_of(int i, int &rt, int &ct)
    {
        const int id = (threadIdx.x >> 6) * PER + i;
        rt = id / CT;
        ct = id % CT;
    }
    __device__ __forceinline__ void rescale_mma(const float *Al, const bf16_t *Ps, const bf16_t *Vb,
                                                int Dv)
    {
        const int lane = threadIdx.x & 63;
#pragma unroll
        for (int i = 0; i < PER; ++i) {
            int rt, ct;
            tile_of(i, rt, ct);
#pragma unroll
            for (int v = 0; v < 16; ++v)
                acc[i][v] *= Al[rt * 32 + mla_amd::c_row(lane, v)];
            if (ct * 32 >= Dv)
                continue;
            const int kl = mla_amd::k_lane_offset(lane);
            for (int kk = 0; kk < TN; kk += mla_amd::MFMA_K) {
                const mfma_ab_t a = mla_amd::load_k(Ps + (rt * 32 + (lane & 31)) * PSP + kk + kl);
                const mfma_ab_t b = mla_amd::gather_k(Vb + (kk + kl) * DP + ct * 32 + (lane & 31), DP);
                acc[i] = mla_amd::mfma32(a, b, acc[i]);
            }
        }
    }
    // One column per lane on AMD: pairs are (col, col) with the second value
    // ignored by the callers' odd-column check; hand single columns instead.
    template <typename F> __device__ __forceinline__ void for_each_single(int Dv, F f) const
    {
        const int lane = threadIdx.x & 63;
#pragma unroll
        for (int i = 0; i < PER; ++i) {
            int rt, ct;
            tile_of(i, rt, ct);
            const int col = ct * 32 + (lane & 31);
            if (col >= Dv)
                continue;
#pragma unroll
            for (int v = 0; v < 16; ++v)
                f(rt * 32 + mla_amd::c_row(lane, v), col, acc[i][v]);
        }
    }
};

#endif

// ---------------------------------------------------------------------------
// Split rules (shape-only counts; per-sequence ranges read kv_indptr on the
// device). Mode 0 is the plan's floor partition (plan.h), mode 1 the
// per-head baseline's: ceil(P / n) rounded up to 32, the tail splits empty.
// ---------------------------------------------------------------------------
__device__ __forceinline__ int active_splits(int mode, int P, int ns, int min_split)
{
    return mode == 0 ? mla_plan_active_splits(P, ns, min_split) : ns;
}
__device__ __forceinline__ void split_range(int mode, int P, int ns, int min_split, int s, int &beg,
                                            int &end)
{
    if (mode == 0) {
        const int act = mla_plan_active_splits(P, ns, min_split);
        int32_t b0, e0;
        mla_plan_split_range(P, act, s, &b0, &e0);
        beg = b0;
        end = e0;
    } else {
        int len = (P + ns - 1) / ns;
        len = (len + 31) & ~31;
        long long b0 = (long long)s * len;
        beg = b0 < P ? (int)b0 : P;
        end = beg + len < P ? beg + len : P;
    }
}

// Flattened row r (= draft_row * H + head) of local row k in row block y.
__device__ __forceinline__ int row_of(const Stage1Params &p, int rows, int y, int k, bool &valid)
{
    if (p.row_mode == 0) {
        const int r = y * rows + k;
        valid = r < p.HL;
        return r;
    }
    const int h = y % p.H, c = y / p.H;
    const int i = c * rows + k;
    valid = i < p.L;
    return i * p.H + h;
}

// The Q rows of row block y (flattened r = draft_row * H + head) into shared
// memory through cp.async, zero-filled past the last valid row, in the
// swizzled (SW) or pitched layout of the stage-1 kernel.
template <int ROWS, int NT, bool SW, int PITCH>
__device__ __forceinline__ void load_q(const Stage1Params &p, int y, int q0, int chunks, bf16_t *Qs)
{
    for (int idx = threadIdx.x; idx < ROWS * chunks; idx += NT) {
        const int k = idx / chunks, c = idx - k * chunks;
        bool ok;
        const int r = row_of(p, ROWS, y, k, ok);
        const bf16_t *src = p.q;
        if (ok)
            src = p.q + (long long)(q0 + r / p.H) * p.q_st + (long long)(r % p.H) * p.q_sh + c * 8;
        cp_async16(Qs + toff<SW, PITCH>(k, c * 8, ROWS), src, ok ? 16 : 0);
    }
}

// ---------------------------------------------------------------------------
// Stage 1
// ---------------------------------------------------------------------------
// WG: the S product on wgmma (sm_90a) with Q and the K/V tiles in the
// 128-byte swizzled layout (toff<true>); otherwise mma.sync with padded rows.
template <int MT, int NW, int RG, typename PT, bool WG, int PADK>
__global__ void __launch_bounds__(NW * 32, 1) stage1_kernel(Stage1Params p)
{
    constexpr int ROWS = 16 * MT;
    constexpr int NT = NW * 32;
    constexpr int TPR = NT / ROWS; // softmax threads per row
    constexpr int TPT = TN / TPR;  // tokens per softmax thread
    static_assert(NT % ROWS == 0 && TN % TPR == 0 && TPR <= 32, "softmax tiling");

    extern __shared__ __align__(16) unsigned char smem_raw[];
    // wgmma path: swizzle atoms on 1024-byte boundaries (the launch adds
    // 1024 bytes of slack), Q and the tiles unpadded (D_MAX columns).
    // PADK (per-head baseline): rows PADK + 8 wide, zero past D.
    constexpr int QPITCH = WG ? D_MAX : PADK ? PADK + 8 : DP;
    static_assert(!(WG && PADK), "the padded dot is an mma.sync path");
    unsigned char *base = smem_raw;
#if defined(MLA_TARGET_NVIDIA)
    if constexpr (WG)
        base += (1024u - ((uint32_t)__cvta_generic_to_shared(smem_raw) & 1023u)) & 1023u;
#endif
    bf16_t *Qs = (bf16_t *)base;
    bf16_t *Ks = Qs + ROWS * QPITCH;
    float *Ss = (float *)(Ks + STAGES * TN * QPITCH);
    bf16_t *Ps = (bf16_t *)(Ss + ROWS * SSP);
    float *Al = (float *)(Ps + ROWS * PSP);
    float *Linv = Al + ROWS;
    float *Lse = Linv + ROWS;

    pdl_launch_dependents();
    const int s = blockIdx.x, y = blockIdx.y, b = blockIdx.z;
    const int tid = threadIdx.x;
    const int kv0 = p.kv_indptr[b];
    const int P = p.kv_indptr[b + 1] - kv0;
    if (s >= active_splits(p.split_mode, P, p.num_splits, p.min_split))
        return; // whole block: stage 2 reads active splits only
    int beg, end;
    split_range(p.split_mode, P, p.num_splits, p.min_split, s, beg, end);
    const int n = end - beg;
    const int q0 = p.qo_indptr[b];
    const int chunks = p.D >> 3; // 16-byte chunks per row
    const int ntiles = (n + TN - 1) / TN;

    // Gather: TPK threads share one token of the tile, so each thread looks
    // up one slot per tile (prefetched a tile ahead: the index load's latency
    // never sits in front of the copies) and issues its row's 16-byte chunks.
    // (A first wgmma version gave the 32 lanes of a warp 32 different tokens
    // for conflict-free stores into an unswizzled layout: 32 rows per
    // request, and the tile took 1.4 us longer. The swizzled layout keeps
    // this mapping's whole-row requests and is conflict-free as well.)
    constexpr int TPK = NT / TN;
    static_assert(NT % TN == 0, "gather mapping");
    const int my_tok = tid / TPK, my_c0 = tid % TPK;
    const int D = p.D;
    auto slot_of = [&](int t) -> int64_t {
        const int gt = beg + t * TN + my_tok;
        return (t < ntiles && gt < end) ? p.kv_indices[kv0 + gt] : (int64_t)-1;
    };
    auto load_tile = [&](int buf, int64_t slot) {
        const bool ok = slot >= 0;
        const bf16_t *src = p.kv + (ok ? slot : 0) * p.kv_ss;
        if constexpr (WG) {
            bf16_t *dst = Ks + buf * TN * QPITCH;
            for (int c = my_c0; c < chunks; c += TPK)
                cp_async16(dst + toff<true>(my_tok, c * 8, TN), src + c * 8, ok ? 16 : 0);
        } else {
            bf16_t *dst = Ks + buf * TN * QPITCH + my_tok * QPITCH;
            for (int c = my_c0; c < chunks; c += TPK)
                cp_async16(dst + c * 8, src + c * 8, ok ? 16 : 0);
        }
    };

    int64_t slot_next = -1;
    if (n > 0) {
        load_q<ROWS, NT, WG, QPITCH>(p, y, q0, chunks, Qs);
        if constexpr (PADK > 0) {
            // Upstream's masked loads of columns D .. PADK - 1 read zeros;
            // here they are zeroed once in Q and in every K/V stage (the
            // gather never writes them).
            const int pc = (PADK - D) >> 3;
            for (int idx = tid; idx < (ROWS + STAGES * TN) * pc; idx += NT) {
                const int r = idx / pc, c = D + (idx - r * pc) * 8;
                bf16_t *row = r < ROWS ? Qs + r * QPITCH : Ks + (r - ROWS) * QPITCH;
                *(uint4 *)(row + c) = make_uint4(0, 0, 0, 0);
            }
        }
        load_tile(0, slot_of(0));
        cp_async_commit();
        slot_next = slot_of(1);
    }

    PvAcc<MT, NW, RG, WG, QPITCH> pv;
    pv.zero();
    const int srow = tid / TPR, sub = tid % TPR;
    float m_run = -INFINITY, l_run = 0.f;

    for (int t = 0; t < ntiles; ++t) {
        cp_async_wait_all();
        if constexpr (WG)
            fence_proxy_async(); // wgmma reads what cp.async wrote
        __syncthreads(); // tile t landed; every warp is done with tile t-1
        if (t + 1 < ntiles) {
            load_tile((t + 1) & 1, slot_next);
            cp_async_commit();
            slot_next = slot_of(t + 2);
        }
        const bf16_t *Kb = Ks + (t & 1) * TN * QPITCH;
#if defined(MLA_TARGET_NVIDIA)
        if constexpr (WG)
            s_tile_wg<MT, NW>(Qs, Kb, Ss, D, p.scale_log2);
        else
#endif
            s_tile<MT, NW, QPITCH, PADK>(Qs, Kb, Ss, D, p.Dv, p.scale_log2);
        __syncthreads();

        // Online softmax of row srow over this tile (base 2).
        {
            const int valid = n - t * TN < TN ? n - t * TN : TN;
            float sv[TPT];
            float tmax = -INFINITY;
#pragma unroll
            for (int j = 0; j < TPT; j += 4) {
                const float4 v4 = *(const float4 *)(Ss + srow * SSP + sub * TPT + j);
                sv[j] = v4.x;
                sv[j + 1] = v4.y;
                sv[j + 2] = v4.z;
                sv[j + 3] = v4.w;
            }
#pragma unroll
            for (int j = 0; j < TPT; ++j) {
                if (sub * TPT + j >= valid)
                    sv[j] = -INFINITY;
                tmax = fmaxf(tmax, sv[j]);
            }
#pragma unroll
            for (int off = TPR / 2; off > 0; off >>= 1)
                tmax = fmaxf(tmax, mla_shfl_xor(tmax, off, TPR));
            const float m_new = fmaxf(m_run, tmax);
            // A row whose max is still -inf has seen nothing: keep exp2 away
            // from (-inf) - (-inf).
            const float m_use = m_new == -INFINITY ? 0.f : m_new;
            const float alpha = exp2f(m_run - m_use);
            float sum = 0.f;
            uint32_t pk[TPT / 2];
#pragma unroll
            for (int j = 0; j < TPT; j += 2) {
                const float p0 = exp2f(sv[j] - m_use), p1 = exp2f(sv[j + 1] - m_use);
                pk[j / 2] = pack_bf2(p0, p1);
                sum += p0 + p1;
            }
            if constexpr (TPT == 8)
                *(uint4 *)(Ps + srow * PSP + sub * TPT) = make_uint4(pk[0], pk[1], pk[2], pk[3]);
            else
#pragma unroll
                for (int j = 0; j < TPT / 2; ++j)
                    *(uint32_t *)(Ps + srow * PSP + sub * TPT + 2 * j) = pk[j];
#pragma unroll
            for (int off = TPR / 2; off > 0; off >>= 1)
                sum += mla_shfl_xor(sum, off, TPR);
            l_run = l_run * alpha + sum;
            m_run = m_new;
            if (sub == 0)
                Al[srow] = alpha;
        }
        __syncthreads();
        pv.rescale_mma(Al, Ps, Kb, p.Dv);
    }

    if (sub == 0) {
        const bool any = l_run > 0.f;
        Linv[srow] = any ? p.v_scale / l_run : 0.f;
        Lse[srow] = any ? (m_run + __log2f(l_run)) * LN2 : -INFINITY;
    }
    __syncthreads();

    const long long part_row0 = ((long long)b * p.num_splits + s) * p.HL;
#if defined(MLA_TARGET_NVIDIA)
    pv.for_each(p.Dv, [&](int k, int col, float v0, float v1) {
        bool ok;
        const int r = row_of(p, ROWS, y, k, ok);
        if (ok) {
            const float sc = Linv[k];
            Partial<PT>::store2(p.part_o, (part_row0 + r) * p.Dv + col, v0 * sc, v1 * sc);
        }
    });
#else
    pv.for_each_single(p.Dv, [&](int k, int col, float v) {
        bool ok;
        const int r = row_of(p, ROWS, y, k, ok);
        if (ok) {
            const float x = v * Linv[k];
            if (sizeof(PT) == 2)
                ((bf16_t *)p.part_o)[(part_row0 + r) * p.Dv + col] = f2bf(x);
            else
                ((float *)p.part_o)[(part_row0 + r) * p.Dv + col] = x;
        }
    });
#endif
    if (tid < ROWS) {
        bool ok;
        const int r = row_of(p, ROWS, y, tid, ok);
        if (ok)
            p.part_lse[part_row0 + r] = Lse[tid];
    }
}

#if defined(MLA_TARGET_NVIDIA)
// ---------------------------------------------------------------------------
// Stage 1, warp-specialized (sm_90a; the default fast path for every 64-row
// block on NVIDIA; 96-row CTAs only through MLA_GPU_FAST_ROWS=96, PERF.md
// 18). Why: the single-role kernel above runs gather -> S ->
// softmax -> PV of a tile one after the other behind __syncthreads, so a CTA
// is latency-bound (PERF.md versions 9-10: ~4.3 us per 32-token tile even
// alone on an SM). Here warpgroup 0 gathers the tiles and computes S on
// wgmma (m64n32k16; 96 rows as two 64-row chains, rows 0-63 and 32-95) with
// the softmax in the wgmma accumulators, while warpgroups 1 and 2 only run
// the PV product, also on wgmma (64 rows: O = P V, m64n256k16; 96 rows:
// O^T = V^T P^T, m64n96k16, since 96 is no multiple of wgmma's 64 rows):
// S of tile t+1 overlaps PV of tile t. The gather runs STG - 1 tiles ahead.
// The roles hand over through two named barriers, both sides bar.sync (a
// bar.arrive would let warpgroup 0 run on, but it waits at the next barrier
// anyway, and compute-sanitizer racecheck models only bar.sync):
//   BAR_P_FULL: warpgroup 0 has written P(t) and alpha(t);
//   BAR_P_FREE: the PV warpgroups are done with P(t) and tile t's K/V stage,
//               which warpgroup 0 then overwrites.
// 96 rows: 192 PV accumulators per thread; setmaxnreg moves registers from
// warpgroup 0 (56) to the PV warpgroups (224) of the 384 x 168 at launch.
// 64 rows: the other way (184 / 160): warpgroup 0 holds most of Q in
// registers for its S chain (RS-form wgmma, PERF.md 21).
// ---------------------------------------------------------------------------
// K/V stages in flight: 4 for 64 rows (the gather runs three tiles ahead),
// 3 for 96 rows (a 110 KB Q leaves no room for a fourth).
template <int ROWS> constexpr int ws_stages()
{
    return ROWS == 64 ? 4 : 3;
}
// BAR_P_FULL / BAR_P_FREE: the hand-over; BAR_END: all threads once the
// last tile is done (Linv, Lse ready; K/V stages free), then once the
// partial is staged. Every barrier spans all threads: a barrier of a subset
// (warpgroup 0 alone, to publish each tile's cp.async data) makes
// compute-sanitizer 2025.3 racecheck report hazards on accesses that the
// full barriers do order (hip/tests/racecheck_subset_barrier.cu reproduces
// it in 40 lines), so each tile's data is published by the P_FULL barrier
// of the tile before instead.
enum { BAR_P_FULL = 2, BAR_P_FREE = 3, BAR_END = 4 };

// Named barrier over n threads that reach it at different instructions
// (producer and PV code): barrier.sync without .aligned. The .aligned forms
// (bar.sync, __syncthreads) require every participating thread of the CTA
// at the same instruction; compute-sanitizer synccheck reports "divergent
// threads in block" for them here, and racecheck hazards across them. The
// __syncwarp reconverges the warp after lane-divergent code for the
// .aligned wgmma instructions that follow.
__device__ __forceinline__ void nbar_sync(int id, int n)
{
    __syncwarp();
    asm volatile("barrier.sync %0, %1;\n" ::"r"(id), "r"(n) : "memory");
}
template <int N> __device__ __forceinline__ void cp_async_wait_group()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
template <int N> __device__ __forceinline__ void regs_inc()
{
#if defined(MLA_HAVE_WGMMA)
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
#endif
}
template <int N> __device__ __forceinline__ void regs_dec()
{
#if defined(MLA_HAVE_WGMMA)
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
#endif
}
__device__ __forceinline__ void wg_commit()
{
#if defined(MLA_HAVE_WGMMA)
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
template <int N> __device__ __forceinline__ void wg_wait()
{
#if defined(MLA_HAVE_WGMMA)
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}

// Online softmax (base 2) of two rows held as a wgmma m64n32 accumulator
// quarter: acc[4j + 0/1] is row r0, tokens 8j + 2t (+1); acc[4j + 2/3] row
// r0 + 8. The four lanes of a quad share a row. The probabilities stay in
// registers as packed bf16 (pk[h][j]: row r0 + 8h, tokens 8j + 2t, +1) until
// the P tile is free: the next chain's wgmma reuses the accumulators.
__device__ __forceinline__ void ws_softmax_rows(const float (&acc)[16], int valid, float scale,
                                                float (&m_run)[2], float (&l_run)[2],
                                                uint32_t (&pk)[2][4], float (&alpha)[2])
{
    const int t = threadIdx.x & 3;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        float v[8];
        float tmax = -INFINITY;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int tok = 8 * j + 2 * t;
            v[2 * j] = tok < valid ? acc[4 * j + 2 * h] * scale : -INFINITY;
            v[2 * j + 1] = tok + 1 < valid ? acc[4 * j + 2 * h + 1] * scale : -INFINITY;
            tmax = fmaxf(tmax, fmaxf(v[2 * j], v[2 * j + 1]));
        }
        tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, 1));
        tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, 2));
        const float m_new = fmaxf(m_run[h], tmax);
        // A row whose max is still -inf has seen nothing: keep exp2 away
        // from (-inf) - (-inf).
        const float m_use = m_new == -INFINITY ? 0.f : m_new;
        alpha[h] = exp2f(m_run[h] - m_use);
        float sum = 0.f;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const float p0 = exp2f(v[2 * j] - m_use), p1 = exp2f(v[2 * j + 1] - m_use);
            pk[h][j] = pack_bf2(p0, p1);
            sum += p0 + p1;
        }
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        sum += __shfl_xor_sync(0xffffffffu, sum, 2);
        l_run[h] = l_run[h] * alpha[h] + sum;
        m_run[h] = m_new;
    }
}
// P layouts of the PV operand: 64 rows, the 128-byte swizzled K-major layout
// of an m64 A operand; 96 rows, K-major without swizzle (8 x 16-byte core
// matrices, 4 per 8-row group: 64-byte rows, the 6 KB that fit).
template <bool SW>
__device__ __forceinline__ void ws_store_rows(int r0, const uint32_t (&pk)[2][4],
                                              const float (&alpha)[2], bf16_t *Ps, float *Al)
{
    const int t = threadIdx.x & 3;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int r = r0 + 8 * h, c = 8 * j + 2 * t;
            *(uint32_t *)(Ps + (SW ? toff<true>(r, c, 64) : (r >> 3) * 256 + (c >> 3) * 64 + (r & 7) * 8 + (c & 7))) =
                pk[h][j];
        }
        if (t == 0)
            Al[r0 + 8 * h] = alpha[h];
    }
    // No reconvergence here: what follows is a full-warp shuffle or
    // nbar_sync, which begins with __syncwarp.
}

// S of one 64-row block of Q (descriptor da) against the K tile (db) over
// the 576 columns (36 k16 steps; the launcher checks D == 576), fully
// unrolled: a rolled loop makes ptxas fence the accumulators in it (C7519;
// each wgmma then waits for the previous one, 15% slower on the 64-row
// shapes). The descriptors advance in place through an asm add (16-byte
// units; no carry out of the address field for shared addresses): written
// as base + immediate, ptxas materializes all 72 of them up front in
// uniform registers and spills (352 bytes at 56 registers).
template <int ROWS>
__device__ __forceinline__ void ws_s_chain(float (&acc)[16], uint64_t da, uint64_t db)
{
    wg_fence();
    wgmma_m64n32k16<0>(acc, da, db);
#pragma unroll
    for (int k = 1; k < D_MAX / 16; ++k) {
        // Next k16 step: 32 bytes on inside a 64-column atom, else the next
        // atom (ROWS x 128 or TN x 128 bytes) minus the three steps taken.
        const uint64_t ia = (k & 3) ? 2 : (ROWS * 128 >> 4) - 6, ib = (k & 3) ? 2 : (TN * 128 >> 4) - 6;
        asm volatile("add.s64 %0, %0, %2;\nadd.s64 %1, %1, %3;\n" : "+l"(da), "+l"(db) : "l"(ia), "l"(ib));
        wgmma_m64n32k16<1>(acc, da, db);
    }
    wg_commit();
}
// ws_s_chain with the first QR k16 steps taking Q from registers (loaded
// once per CTA), the rest from shared memory; da is the descriptor of step
// QR (a multiple of 4: an atom boundary).
template <int ROWS, int QR>
__device__ __forceinline__ void ws_s_chain_rq(float (&acc)[16], const uint32_t (&qf)[QR][4], uint64_t da,
                                              uint64_t db)
{
    static_assert(QR > 0 && QR % 4 == 0 && QR < D_MAX / 16, "register k16 steps");
    wg_fence();
    wgmma_m64n32k16_rs<0>(acc, qf[0], db);
#pragma unroll
    for (int k = 1; k < D_MAX / 16; ++k) {
        const uint64_t ib = (k & 3) ? 2 : (TN * 128 >> 4) - 6;
        asm volatile("add.s64 %0, %0, %1;\n" : "+l"(db) : "l"(ib));
        if (k < QR) {
            wgmma_m64n32k16_rs<1>(acc, qf[k < QR ? k : 0], db);
        } else {
            if (k > QR) {
                const uint64_t ia = (k & 3) ? 2 : (ROWS * 128 >> 4) - 6;
                asm volatile("add.s64 %0, %0, %1;\n" : "+l"(da) : "l"(ia));
            }
            wgmma_m64n32k16<1>(acc, da, db);
        }
    }
    wg_commit();
}

template <int MT, int NPW>
__global__ void __launch_bounds__((NPW + 4) * 32, 1) stage1_ws_kernel(Stage1Params p)
{
    constexpr int ROWS = 16 * MT;
    constexpr int NT = (NPW + 4) * 32;
    static_assert(ROWS == 64 || ROWS == 96, "warp-specialized stage 1 takes 64 or 96 rows");
    constexpr bool TWO = ROWS == 96; // second wgmma chain: rows 32-95, keeps 64-95
    constexpr int STG = ws_stages<ROWS>();
    // PV on wgmma in two warpgroups. 64 rows: O[64 x 512] as m64n256k16
    // (256 output columns each, 128 accumulators). 96 rows do not fit
    // wgmma's 64-row blocks, so the product is swapped: O^T[512 x 96] =
    // V^T P^T as m64n96k16 over four 64-column dv blocks per warpgroup (192
    // accumulators; setmaxnreg gives the PV warps 224 registers).
    constexpr bool PVWG = ROWS == 64;
    static_assert(NPW == 8, "PV: two warpgroups");
    // P: 64 rows, 128-byte swizzled K-major (an atom of 64 columns, 32
    // used); 96 rows, K-major without swizzle (64-byte rows).
    constexpr int PBYTES = PVWG ? ROWS * 128 : ROWS * TN * 2;

    extern __shared__ __align__(16) unsigned char smem_raw[];
    unsigned char *base =
        smem_raw + ((1024u - ((uint32_t)__cvta_generic_to_shared(smem_raw) & 1023u)) & 1023u);
    bf16_t *Qs = (bf16_t *)base;
    bf16_t *Ks = Qs + ROWS * D_MAX;
    bf16_t *Ps = Ks + STG * TN * D_MAX; // 1024-byte aligned
    float *Al = (float *)((unsigned char *)Ps + PBYTES);
    float *Linv = Al + ROWS;
    float *Lse = Linv + ROWS;
    // The two Q descriptors, re-read from shared memory every tile: ptxas
    // would otherwise hoist all tile-invariant Q descriptors out of the
    // tile loop into registers.
    uint64_t *Qdesc = (uint64_t *)(Lse + ROWS);

    pdl_launch_dependents();
    const int s = blockIdx.x, y = blockIdx.y, b = blockIdx.z;
    const int tid = threadIdx.x;
    const int kv0 = p.kv_indptr[b];
    const int P = p.kv_indptr[b + 1] - kv0;
    if (s >= active_splits(p.split_mode, P, p.num_splits, p.min_split))
        return; // whole block: stage 2 reads active splits only
    int beg, end;
    split_range(p.split_mode, P, p.num_splits, p.min_split, s, beg, end);
    const int n = end - beg;
    const int q0 = p.qo_indptr[b];
    const int D = p.D;
    if (tid == 0) {
        Qdesc[0] = wg_desc_sw128((uint32_t)__cvta_generic_to_shared(Qs));
        Qdesc[1] = wg_desc_sw128((uint32_t)__cvta_generic_to_shared(Qs + toff<true>(32, 0, ROWS)));
    }
    const int chunks = D >> 3;
    const int ntiles = (n + TN - 1) / TN;
    // Warp-uniform for the compiler as well (a broadcast, as CUTLASS does):
    // wgmma inside a branch it cannot prove uniform is serialized (C7520).
    const int wg_idx = __shfl_sync(0xffffffffu, tid >> 7, 0);
    const bool producer = wg_idx == 0;

    // Gather (warpgroup 0): 4 threads per token, one slot lookup per thread
    // per tile, prefetched a tile ahead; whole-row requests, conflict-free
    // stores in the swizzled layout.
    constexpr int TPK = 128 / TN;
    const int my_tok = (tid & 127) / TPK, my_c0 = tid % TPK;
    auto slot_of = [&](int t) -> int64_t {
        const int gt = beg + t * TN + my_tok;
        return (t < ntiles && gt < end) ? p.kv_indices[kv0 + gt] : (int64_t)-1;
    };
    // Thread (my_tok, my_c0) copies chunks c = my_c0 + 4j, j < 18, of its
    // row: c / 8 = j / 2 and c % 8 = my_c0 + 4 (j % 2), so the swizzled
    // destinations are two per-thread offsets plus immediates, and the
    // sources one base plus immediates (D == 576 here). Address arithmetic
    // per chunk was half of warpgroup 0's time (ncu source counters).
    static_assert(TPK == 4 && D_MAX == 576, "gather unrolling");
    const uint32_t ks_base = (uint32_t)__cvta_generic_to_shared(Ks);
    const uint32_t dst_even = (uint32_t)(my_tok * 128 + ((my_c0 ^ (my_tok & 7)) << 4));
    const uint32_t dst_odd = (uint32_t)(my_tok * 128 + (((my_c0 + 4) ^ (my_tok & 7)) << 4));
    auto load_tile = [&](int t, int64_t slot) {
        if (t >= ntiles)
            return;
        const bool ok = slot >= 0;
        const unsigned char *src = (const unsigned char *)(p.kv + (ok ? slot : 0) * p.kv_ss + my_c0 * 8);
        const uint32_t st = ks_base + (uint32_t)((t % STG) * TN * D_MAX * 2);
        const int nb = ok ? 16 : 0;
#pragma unroll
        for (int j = 0; j < D_MAX / 32; ++j)
            cp_async16_s(st + (j & 1 ? dst_odd : dst_even) + (uint32_t)((j >> 1) * TN * 128), src + 64 * j, nb);
    };

    int64_t slot_next = -1;
    if (n > 0) {
        load_q<ROWS, NT, true, DP>(p, y, q0, chunks, Qs);
        cp_async_commit();
        if (producer) {
            // Tiles 0 .. STG - 2 ahead, one group each; iteration t then
            // issues tile t + STG - 1 into the stage tile t - 1 leaves.
            for (int t = 0; t < STG - 1; ++t) {
                load_tile(t, slot_of(t));
                cp_async_commit();
            }
            slot_next = slot_of(STG - 1);
            cp_async_wait_group<STG - 2>(); // Q and tile 0
        } else {
            cp_async_wait_all();
        }
        fence_proxy_async();
    }
    __syncwarp();
    __syncthreads();

    // 64 rows: warpgroup 0 keeps Q's k16 steps 0-31 (the 512 nope columns)
    // in registers for the whole CTA, so its S chain reads only K from
    // shared memory on those steps (RS-form wgmma; PERF.md 21: 6-9% on the
    // producer-bound shapes). setmaxnreg moves registers to warpgroup 0:
    // 184 there, 160 in the PV warpgroups (of 168 x 384 at launch); all 36
    // steps would need the PV warps below 152, which ptxas refuses.
    constexpr int QR = TWO ? 0 : 32;
    constexpr int RPROD = 184, RPV = (504 - RPROD) / 2;
    if (producer) {
        if constexpr (TWO)
            regs_dec<56>();
        if constexpr (QR > 0)
            regs_inc<RPROD>();
        const int w = __shfl_sync(0xffffffffu, tid >> 5, 0), lane = tid & 31;
        uint32_t qf[QR > 0 ? QR : 1][4];
        uint64_t qda = 0;
        if (QR > 0 && ntiles > 0) { // Q was loaded only for a non-empty split
            // ldmatrix x4 of rows 16w .. 16w + 15, columns 16k .. 16k + 15:
            // lanes 0-7 / 8-15 rows 0-7 / 8-15 at column 16k, lanes 16-31
            // the same rows at 16k + 8 (a0..a3 of the A fragment).
            const int lr = 16 * w + (lane & 7) + ((lane >> 3) & 1) * 8;
#pragma unroll
            for (int k = 0; k < QR; ++k)
                ldsm_x4(qf[k][0], qf[k][1], qf[k][2], qf[k][3],
                        Qs + toff<true>(lr, 16 * k + (lane >> 4) * 8, ROWS));
            qda = wg_desc_sw128((uint32_t)__cvta_generic_to_shared(Qs + toff<true>(0, 16 * QR, ROWS)));
        }
        const int rA = 16 * w + (lane >> 2);      // chain A rows rA, rA + 8
        const int rB = 32 + 16 * w + (lane >> 2); // chain B rows (kept for w >= 2)
        float mA[2] = {-INFINITY, -INFINITY}, lA[2] = {0.f, 0.f};
        float mB[2] = {-INFINITY, -INFINITY}, lB[2] = {0.f, 0.f};
        for (int t = 0; t < ntiles; ++t) {
            // Tile t landed and is visible to the whole warpgroup: waited
            // for by every thread before the previous P_FULL barrier (or the
            // prologue's __syncthreads).
            const uint64_t kb =
                wg_desc_sw128((uint32_t)__cvta_generic_to_shared(Ks + (t % STG) * TN * D_MAX));
            const int valid = n - t * TN < TN ? n - t * TN : TN;
            // The products (and as much of the softmax as registers allow)
            // run before the P tile is free: the PV warps may still be
            // reading tile t - 1. 96 rows: chain B (rows 32-95, kept 64-95)
            // first, its probabilities held packed; then chain A, whose
            // softmax goes straight to shared memory after the wait, so at
            // most 16 accumulators + 8 packed words are live (warpgroup 0
            // has 56 registers next to the PV warps' 224).
            float acc[16];
            uint32_t pk[2][4];
            float al[2];
            if constexpr (TWO) {
                ws_s_chain<ROWS>(acc, ((volatile uint64_t *)Qdesc)[1], kb);
                wg_wait<0>();
                if (w >= 2)
                    ws_softmax_rows(acc, valid, p.scale_log2, mB, lB, pk, al);
            }
            if constexpr (QR > 0)
                ws_s_chain_rq<ROWS, QR>(acc, qf, qda, kb);
            else
                ws_s_chain<ROWS>(acc, ((volatile uint64_t *)Qdesc)[0], kb);
            wg_wait<0>();
            if constexpr (!TWO)
                ws_softmax_rows(acc, valid, p.scale_log2, mA, lA, pk, al);
            // P is free once the PV warps are done with tile t - 1; so is
            // that tile's K/V stage, which then takes tile t + STG - 1
            // (issued after the hand-over, off its path).
            if (t > 0)
                nbar_sync(BAR_P_FREE, NT);
            if constexpr (TWO) {
                if (w >= 2)
                    ws_store_rows<PVWG>(rB, pk, al, Ps, Al);
                ws_softmax_rows(acc, valid, p.scale_log2, mA, lA, pk, al);
            }
            ws_store_rows<PVWG>(rA, pk, al, Ps, Al);
            // Tile t + 1 must have landed (this thread's copies; the
            // barrier publishes everyone's) before it is read by wgmma
            // after the barrier. Groups: Q, tiles 0 .. STG - 2, then one per
            // iteration before this one (t + STG in all); tile t + 1 is
            // group t + 2, so STG - 3 may still be in flight.
            cp_async_wait_group<STG - 3>();
            fence_proxy_async(); // wgmma (async proxy) reads P and the tile
            nbar_sync(BAR_P_FULL, NT);
            load_tile(t + STG - 1, slot_next);
            cp_async_commit(); // possibly empty: keeps one group per tile
            slot_next = slot_of(t + STG);
        }
        if (ntiles > 0)
            nbar_sync(BAR_P_FREE, NT); // the last tile's release
        if ((lane & 3) == 0) {
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const bool any = lA[h] > 0.f;
                Linv[rA + 8 * h] = any ? p.v_scale / lA[h] : 0.f;
                Lse[rA + 8 * h] = any ? (mA[h] + __log2f(lA[h])) * LN2 : -INFINITY;
                if (TWO && w >= 2) {
                    const bool anyB = lB[h] > 0.f;
                    Linv[rB + 8 * h] = anyB ? p.v_scale / lB[h] : 0.f;
                    Lse[rB + 8 * h] = anyB ? (mB[h] + __log2f(lB[h])) * LN2 : -INFINITY;
                }
            }
        }
        nbar_sync(BAR_END, NT);
        if (tid < ROWS) {
            bool ok;
            const int r = row_of(p, ROWS, y, tid, ok);
            if (ok)
                p.part_lse[((long long)b * p.num_splits + s) * p.HL + r] = Lse[tid];
        }
    }

    const long long part_row0 = ((long long)b * p.num_splits + s) * p.HL;
    // Epilogue: the scaled bf16 partial goes through shared memory (the K/V
    // stages, free once every thread passed the first BAR_END) so
    // that it leaves in coalesced 16-byte rows instead of 2- or 4-byte
    // scattered stores. Pitch + 8: conflict-light fills.
    constexpr int OSP = DV_MAX + 8;
    static_assert(ROWS * OSP <= STG * TN * D_MAX, "partial staging fits the K/V stages");
    bf16_t *Os = Ks;
    if (producer) {
        // Warpgroup 0 only joins the copy-out below.
    } else if constexpr (PVWG) {
        // PV warpgroup g (1 or 2) owns output columns 256 (g - 1) ..; each
        // thread the rows r0 and r0 + 8 of the m64 accumulator layout.
        if constexpr (QR > 0)
            regs_dec<RPV>();
        const int c0 = 256 * (wg_idx - 1);
        const int lane = tid & 31, r0 = 16 * ((tid >> 5) & 3) + (lane >> 2), tq = lane & 3;
        const uint64_t dp = wg_desc_sw128((uint32_t)__cvta_generic_to_shared(Ps));
        float acc[128];
#pragma unroll
        for (int i = 0; i < 128; ++i)
            acc[i] = 0.f;
        for (int t = 0; t < ntiles; ++t) {
            nbar_sync(BAR_P_FULL, NT);
            const float a0 = Al[r0], a1 = Al[r0 + 8];
#pragma unroll
            for (int j = 0; j < 32; ++j) {
                acc[4 * j] *= a0;
                acc[4 * j + 1] *= a0;
                acc[4 * j + 2] *= a1;
                acc[4 * j + 3] *= a1;
            }
            // V columns c0 .. c0 + 255 of the tile: atoms c0 / 64 .., a
            // k16 step is 16 token rows (2048 bytes) further.
            const uint64_t dv = wg_desc_mn_sw128(
                (uint32_t)__cvta_generic_to_shared(Ks + (t % STG) * TN * D_MAX + (c0 / 64) * TN * 64));
            wg_fence();
            wgmma_m64n256k16_tb(acc, dp, dv);
            wgmma_m64n256k16_tb(acc, dp + 2, dv + (2048 >> 4));
            wg_commit();
            wg_wait<0>();
            nbar_sync(BAR_P_FREE, NT);
        }
        nbar_sync(BAR_END, NT);
        const float s0 = Linv[r0], s1 = Linv[r0 + 8];
#pragma unroll
        for (int j = 0; j < 32; ++j) {
            const int col = c0 + 8 * j + 2 * tq;
            *(uint32_t *)(Os + r0 * OSP + col) = pack_bf2(acc[4 * j] * s0, acc[4 * j + 1] * s0);
            *(uint32_t *)(Os + (r0 + 8) * OSP + col) = pack_bf2(acc[4 * j + 2] * s1, acc[4 * j + 3] * s1);
        }
    } else {
        // Swapped product: warpgroup g (1 or 2) owns dv blocks 4 (g - 1) ..
        // + 3; thread rows (dv) r0, r0 + 8 of each block, columns (query
        // rows) 8j + 2tq and + 1.
        regs_inc<224>();
        const int mb0 = 4 * (wg_idx - 1);
        const int lane = tid & 31, r0 = 16 * ((tid >> 5) & 3) + (lane >> 2), tq = lane & 3;
        const uint64_t dp = wg_desc_kint((uint32_t)__cvta_generic_to_shared(Ps));
        float acc[4][48];
#pragma unroll
        for (int m = 0; m < 4; ++m)
#pragma unroll
            for (int i = 0; i < 48; ++i)
                acc[m][i] = 0.f;
        for (int t = 0; t < ntiles; ++t) {
            nbar_sync(BAR_P_FULL, NT);
#pragma unroll
            for (int j = 0; j < 12; ++j) {
                const float2 a = *(const float2 *)(Al + 8 * j + 2 * tq);
#pragma unroll
                for (int m = 0; m < 4; ++m) {
                    acc[m][4 * j] *= a.x;
                    acc[m][4 * j + 1] *= a.y;
                    acc[m][4 * j + 2] *= a.x;
                    acc[m][4 * j + 3] *= a.y;
                }
            }
            const uint32_t vs =
                (uint32_t)__cvta_generic_to_shared(Ks + (t % STG) * TN * D_MAX + mb0 * TN * 64);
            wg_fence();
#pragma unroll
            for (int m = 0; m < 4; ++m) {
                const uint64_t dv = wg_desc_mn_sw128(vs + (uint32_t)(m * TN * 128));
                wgmma_m64n96k16_ta(acc[m], dv, dp);
                wgmma_m64n96k16_ta(acc[m], dv + (2048 >> 4), dp + (256 >> 4));
            }
            wg_commit();
            wg_wait<0>();
            nbar_sync(BAR_P_FREE, NT);
        }
        nbar_sync(BAR_END, NT);
#pragma unroll
        for (int j = 0; j < 12; ++j)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                const int k = 8 * j + 2 * tq + e;
                const float sc = Linv[k];
#pragma unroll
                for (int m = 0; m < 4; ++m) {
                    const int c = 64 * (mb0 + m) + r0;
                    Os[k * OSP + c] = f2bf(acc[m][4 * j + e] * sc);
                    Os[k * OSP + c + 8] = f2bf(acc[m][4 * j + 2 + e] * sc);
                }
            }
    }
    // The partial rows leave in 16-byte chunks, a whole row per 64 lanes.
    nbar_sync(BAR_END, NT);
    const int cpr = p.Dv >> 3;
    for (int idx = tid; idx < ROWS * cpr; idx += NT) {
        const int k = idx / cpr, c = (idx - k * cpr) * 8;
        bool ok;
        const int r = row_of(p, ROWS, y, k, ok);
        if (ok)
            *(uint4 *)((bf16_t *)p.part_o + (part_row0 + r) * p.Dv + c) = *(const uint4 *)(Os + k * OSP + c);
    }
}
#endif // MLA_TARGET_NVIDIA

// ---------------------------------------------------------------------------
// Stage 2: merge of the prefix splits, causal L x L draft block in fp32,
// final merge. Grid (H, Dv / 64, bs), 256 threads. Everything a block needs
// from global memory except the partial outputs is staged in shared memory
// in one parallel burst first: a chain of dependent global loads per warp
// costs microseconds, which is the whole budget of a small call.
// ---------------------------------------------------------------------------
constexpr int S2_THREADS = 256;
// Columns per block: Dv / n_chunks, a multiple of 64. Small grids split the
// columns over more blocks for parallelism; large grids use one block per
// (sequence, head) so the draft scores are computed once, not per chunk.

__host__ __device__ constexpr int s2_items(int L, int cw)
{
    return L * (cw / 8);
}
__host__ __device__ constexpr int s2_groups(int L, int cw)
{
    return s2_items(L, cw) >= S2_THREADS ? 1 : S2_THREADS / s2_items(L, cw);
}
__host__ __device__ constexpr long long s2_bf16_offset(int L, int NS, int cw)
{
    return (4LL * (2LL * L * L + (long long)L * NS +
                   (s2_groups(L, cw) > 1 ? (long long)S2_THREADS * 8 : 0)) +
            15) &
           ~15LL;
}
// Shared-memory bytes of stage 2 (host and device agree on the layout).
__host__ __device__ constexpr long long stage2_smem(int L, int NS, int D, int cw)
{
    return s2_bf16_offset(L, NS, cw) + 2LL * (2LL * L * D + (long long)L * cw);
}

template <typename PT> __device__ __forceinline__ void load8(const void *base, long long idx, float *o)
{
    if (sizeof(PT) == 2) {
        const uint4 v = *(const uint4 *)((const bf16_t *)base + idx);
        const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            o[2 * k] = __uint_as_float(w[k] << 16);
            o[2 * k + 1] = __uint_as_float(w[k] & 0xffff0000u);
        }
    } else {
        const float *f = (const float *)base + idx;
#pragma unroll
        for (int k = 0; k < 8; ++k)
            o[k] = f[k];
    }
}

template <typename PT> __global__ void __launch_bounds__(S2_THREADS) stage2_kernel(Stage2Params p)
{
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const int L = p.L, NS = p.num_splits, D = p.D;
    const int cw = p.cw, CG = cw / 8;
    const int SG = s2_groups(L, cw), items = s2_items(L, cw);
    float *sc = (float *)smem_raw; // [L][L] draft scores
    float *wd = sc + L * L;        // [L][L] normalized draft weights
    float *wsp = wd + L * L;       // [L][NS] split lse, then normalized split weights
    float *red = wsp + L * NS;     // [SG][items][8] partial sums when SG > 1
    // 16-byte aligned start of the bf16 part (uint4 reads of vs).
    bf16_t *qs = (bf16_t *)(smem_raw + s2_bf16_offset(L, NS, cw)); // [L][D]
    bf16_t *ks = qs + L * D;       // [L][D]
    bf16_t *vs = ks + L * D;       // [L][cw]

    const int h = blockIdx.x, chunk = blockIdx.y, b = blockIdx.z;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int q0 = p.qo_indptr[b];
    const int P = p.kv_indptr[b + 1] - p.kv_indptr[b];
    const int act = active_splits(p.split_mode, P, NS, p.min_split);
    const long long part_row0 = (long long)b * NS * p.HL;

    // Phase 0: stage q rows of this head, k_extend rows, this block's v_extend
    // columns and the split lse values.
    // q rows are 16-byte aligned (a fast/per-head condition), k_extend and
    // v_extend rows too (idem); 8-element chunks, no division in the loop.
    {
        const int cpr = D / 8; // chunks per row
        for (int i = warp; i < L; i += S2_THREADS / 32) {
            const uint4 *qg = (const uint4 *)(p.q + (long long)(q0 + i) * p.q_st + (long long)h * p.q_sh);
            const uint4 *kg = (const uint4 *)(p.k_ext + (long long)(q0 + i) * p.k_st);
            for (int c = lane; c < cpr; c += 32) {
                ((uint4 *)(qs + i * D))[c] = qg[c];
                ((uint4 *)(ks + i * D))[c] = kg[c];
            }
        }
        for (int idx = tid; idx < L * CG; idx += S2_THREADS) {
            const int j = idx / CG, c = idx - j * CG;
            ((uint4 *)vs)[idx] =
                *(const uint4 *)(p.v_ext + (long long)(q0 + j) * p.v_st + chunk * cw + 8 * c);
        }
    }
    __syncthreads();

    // Phase 1: causal draft scores in fp32.
    for (int pair = warp; pair < L * L; pair += S2_THREADS / 32) {
        const int i = pair / L, j = pair - i * L;
        if (j > i) { // causal: later drafts are invisible
            if (lane == 0)
                sc[pair] = -INFINITY;
            continue;
        }
        const uint32_t *qr = (const uint32_t *)(qs + i * D), *kr = (const uint32_t *)(ks + j * D);
        float acc = 0.f;
        for (int d = lane; d < D / 2; d += 32) {
            const uint32_t qa = qr[d], ka = kr[d];
            acc += __uint_as_float(qa << 16) * __uint_as_float(ka << 16);
            acc += __uint_as_float(qa & 0xffff0000u) * __uint_as_float(ka & 0xffff0000u);
        }
        acc = warp_sum(acc);
        if (lane == 0)
            sc[pair] = acc * p.sm_scale;
    }
    __syncthreads();

    // Everything above read inputs only; the partials come from stage 1.
    pdl_wait();
    for (int idx = tid; idx < L * act; idx += S2_THREADS) {
        const int i = idx / act, s = idx - i * act;
        wsp[i * NS + s] = p.part_lse[part_row0 + (long long)s * p.HL + i * p.H + h];
    }
    __syncthreads();

    // Phase 2: one warp per row: max, denominator, normalized weights.
    for (int i = warp; i < L; i += S2_THREADS / 32) {
        float M = -INFINITY;
        for (int s = lane; s < act; s += 32)
            M = fmaxf(M, wsp[i * NS + s]);
        for (int j = lane; j < L; j += 32)
            M = fmaxf(M, sc[i * L + j]);
        M = warp_max(M);
        float sum = 0.f;
        if (M != -INFINITY) {
            for (int s = lane; s < act; s += 32)
                sum += __expf(wsp[i * NS + s] - M);
            for (int j = lane; j < L; j += 32)
                sum += __expf(sc[i * L + j] - M);
        }
        sum = warp_sum(sum);
        // No visible key at all: o = 0, lse = -inf, and no 0/0 anywhere.
        const bool any = sum > 0.f;
        const float inv = any ? 1.f / sum : 0.f;
        for (int s = lane; s < act; s += 32)
            wsp[i * NS + s] = any ? __expf(wsp[i * NS + s] - M) * inv : 0.f;
        for (int j = lane; j < L; j += 32)
            wd[i * L + j] = any ? __expf(sc[i * L + j] - M) * inv : 0.f;
        if (chunk == 0 && lane == 0 && p.lse)
            p.lse[(long long)(q0 + i) * p.lse_st + h] = any ? M + __logf(sum) : -INFINITY;
    }
    __syncthreads();

    // Phase 3: weighted sum of the partials, 8 columns (16 bytes) per thread,
    // the splits shared among SG thread groups, then the draft values.
    auto finish = [&](int item, float *acc) {
        const int i = item / CG, cg = item - i * CG;
        for (int j = 0; j <= i; ++j) {
            const float w = wd[i * L + j];
            const uint4 v = *(const uint4 *)(vs + j * cw + cg * 8);
            const uint32_t vw[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                acc[2 * k] += w * __uint_as_float(vw[k] << 16);
                acc[2 * k + 1] += w * __uint_as_float(vw[k] & 0xffff0000u);
            }
        }
        *(uint4 *)(p.o + (long long)(q0 + i) * p.o_st + (long long)h * p.o_sh + chunk * cw + cg * 8) =
            make_uint4(pack_bf2(acc[0], acc[1]), pack_bf2(acc[2], acc[3]), pack_bf2(acc[4], acc[5]),
                       pack_bf2(acc[6], acc[7]));
    };
    auto gather = [&](int item, int s0, int step, float *acc) {
        const int i = item / CG, cg = item - i * CG;
        const long long base = (part_row0 + i * p.H + h) * p.Dv + chunk * cw + cg * 8;
#pragma unroll 4
        for (int s = s0; s < act; s += step) {
            float o[8];
            load8<PT>(p.part_o, base + (long long)s * p.HL * p.Dv, o);
            const float w = wsp[i * NS + s];
#pragma unroll
            for (int k = 0; k < 8; ++k)
                acc[k] += w * o[k];
        }
    };
    if (SG == 1) {
        for (int item = tid; item < items; item += S2_THREADS) {
            float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            gather(item, 0, 1, acc);
            finish(item, acc);
        }
    } else {
        const int sg = tid / items, item = tid - sg * items;
        float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        if (sg < SG) {
            gather(item, sg, SG, acc);
#pragma unroll
            for (int k = 0; k < 8; ++k)
                red[tid * 8 + k] = acc[k];
        }
        __syncthreads();
        if (sg == 0) {
            for (int g = 1; g < SG; ++g)
#pragma unroll
                for (int k = 0; k < 8; ++k)
                    acc[k] += red[(g * items + item) * 8 + k];
            finish(item, acc);
        }
    }
}

// ---------------------------------------------------------------------------
// Generic tier: grid (q token, head), 128 threads. Each warp streams every
// fourth visible key with an online softmax in natural log; the four warp
// states merge at the end with the sink term.
// ---------------------------------------------------------------------------
__global__ void __launch_bounds__(128) generic_kernel(GenericParams p)
{
    extern __shared__ __align__(16) unsigned char smem_raw[];
    float *qf = (float *)smem_raw;   // [D]
    float *acc = qf + p.D;           // [4][Dv]
    float *wm = acc + 4 * p.Dv;      // [4]
    float *wl = wm + 4;              // [4]

    const int tok = blockIdx.x, h = blockIdx.y;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    // Sequence of this row: last b with qo_indptr[b] <= tok (skips empty ones).
    int lo = 0, hi = p.num_seqs - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) >> 1;
        if (p.qo_indptr[mid] <= tok)
            lo = mid;
        else
            hi = mid - 1;
    }
    const int b = lo;
    const int q0 = p.qo_indptr[b];
    const int i = tok - q0;
    const int Lb = p.qo_indptr[b + 1] - q0;
    const int kv0 = p.kv_indptr[b];
    const int P = p.kv_indptr[b + 1] - kv0;
    const int kvh = h / (p.H / p.Hkv);

    const bf16_t *qr = p.q + (long long)tok * p.q_st + (long long)h * p.q_sh;
    for (int d = threadIdx.x; d < p.D; d += 128)
        qf[d] = bf2f(qr[d]);
    float *my = acc + warp * p.Dv;
    for (int c = lane; c < p.Dv; c += 32)
        my[c] = 0.f;
    __syncthreads();

    const long long qpos = (long long)P + i;
    float m = -INFINITY, l = 0.f;
    for (int key = warp; key < P + Lb; key += 4) {
        const bf16_t *kr, *vr;
        float ks, vs;
        long long pos;
        if (key < P) {
            pos = key;
            kr = p.kv + p.kv_indices[kv0 + key] * p.kv_ss + (long long)kvh * p.kv_sh;
            vr = kr;
            ks = p.k_scale;
            vs = p.v_scale;
        } else {
            const int j = key - P;
            if (p.is_causal && j > i)
                continue;
            pos = (long long)P + j;
            kr = p.k_ext + (long long)(q0 + j) * p.k_st + (long long)kvh * p.k_sh;
            vr = p.v_ext + (long long)(q0 + j) * p.v_st + (long long)kvh * p.v_sh;
            ks = vs = 1.f;
        }
        if (p.sliding_window > 0 && qpos - pos > p.sliding_window)
            continue;
        float dot = 0.f;
        for (int d = lane; d < p.D; d += 32)
            dot += qf[d] * bf2f(kr[d]);
        dot = warp_sum(dot);
        float sc = dot * p.sm_scale * ks;
        if (p.logit_cap > 0.f)
            sc = p.logit_cap * tanhf(sc / p.logit_cap);
        const float m_new = fmaxf(m, sc);
        const float alpha = m == -INFINITY ? 0.f : __expf(m - m_new);
        const float pw = __expf(sc - m_new);
        l = l * alpha + pw;
        const float pv = pw * vs;
        for (int c = lane; c < p.Dv; c += 32)
            my[c] = my[c] * alpha + pv * bf2f(vr[c]);
        m = m_new;
    }
    if (lane == 0) {
        wm[warp] = m;
        wl[warp] = l;
    }
    __syncthreads();

    float M = fmaxf(fmaxf(wm[0], wm[1]), fmaxf(wm[2], wm[3]));
    const bool any = M != -INFINITY;
    float sink = -INFINITY;
    if (p.sinks)
        sink = p.sinks[h];
    if (any)
        M = fmaxf(M, sink);
    float wgt[4];
    float den = 0.f;
#pragma unroll
    for (int w = 0; w < 4; ++w) {
        wgt[w] = wm[w] == -INFINITY ? 0.f : __expf(wm[w] - M);
        den += wl[w] * wgt[w];
    }
    if (any && p.sinks)
        den += __expf(sink - M);
    const float inv = any ? 1.f / den : 0.f;
    bf16_t *orow = p.o + (long long)tok * p.o_st + (long long)h * p.o_sh;
    for (int c = threadIdx.x; c < p.Dv; c += 128) {
        float v = 0.f;
#pragma unroll
        for (int w = 0; w < 4; ++w)
            v += acc[w * p.Dv + c] * wgt[w];
        orow[c] = f2bf(v * inv);
    }
    if (threadIdx.x == 0 && p.lse)
        p.lse[(long long)tok * p.lse_st + h] = any ? M + __logf(den) : -INFINITY;
}

} // namespace mla_dev

// ---------------------------------------------------------------------------
// Host launchers (not part of the AMD device-only compile check, which has no
// runtime to launch with).
// ---------------------------------------------------------------------------
#if !defined(MLA_HIP_MINIMAL)
#include "mla_launch.h"

#include <stdlib.h>
#include <string.h>

namespace mla_dev {

template <int MT, int NW, bool WG = false, int PADK = 0> constexpr int stage1_smem()
{
    if constexpr (PADK > 0)
        return (16 * MT + STAGES * TN) * (PADK + 8) * 2 + (16 * MT) * SSP * 4 + (16 * MT) * PSP * 2 +
               3 * (16 * MT) * 4;
    // wgmma path: unpadded rows plus 1024 bytes of slack for the alignment
    // of the swizzle atoms.
    return WG ? 1024 + (16 * MT) * D_MAX * 2 + STAGES * TN * D_MAX * 2 + (16 * MT) * SSP * 4 +
                    (16 * MT) * PSP * 2 + 3 * (16 * MT) * 4
              : (16 * MT) * DP * 2 + STAGES * TN * DP * 2 + (16 * MT) * SSP * 4 + (16 * MT) * PSP * 2 +
                    3 * (16 * MT) * 4;
}

template <int MT, int NW, int RG, typename PT, bool WG = false, int PADK = 0>
static hipError_t launch_stage1(const Stage1Params &p, dim3 grid, hipStream_t st)
{
    const int smem = stage1_smem<MT, NW, WG, PADK>();
    // Setting a function attribute is no stream operation: legal under
    // graph capture, and cheap enough to repeat.
    hipError_t e = hipFuncSetAttribute((const void *)stage1_kernel<MT, NW, RG, PT, WG, PADK>,
                                       hipFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (e != hipSuccess)
        return e;
    stage1_kernel<MT, NW, RG, PT, WG, PADK><<<grid, NW * 32, smem, st>>>(p);
    return hipGetLastError();
}

#if defined(MLA_TARGET_NVIDIA)
template <int MT> constexpr int stage1_ws_smem()
{
    // 1024 bytes of slack for the alignment of the swizzle atoms; P as in
    // stage1_ws_kernel (PBYTES); Al, Linv, Lse; two Q descriptors.
    return 1024 + (16 * MT) * D_MAX * 2 + ws_stages<16 * MT>() * TN * D_MAX * 2 +
           (MT == 4 ? (16 * MT) * 128 : (16 * MT) * TN * 2) + 3 * (16 * MT) * 4 + 16;
}
static_assert(stage1_ws_smem<4>() <= 232448, "64-row warp-specialized stage 1 exceeds 227 KB");
static_assert(stage1_ws_smem<6>() <= 232448, "96-row warp-specialized stage 1 exceeds 227 KB");

template <int MT, int NPW>
static hipError_t launch_stage1_ws(const Stage1Params &p, dim3 grid, hipStream_t st)
{
    const int smem = stage1_ws_smem<MT>();
    hipError_t e = hipFuncSetAttribute((const void *)stage1_ws_kernel<MT, NPW>,
                                       hipFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (e != hipSuccess)
        return e;
    stage1_ws_kernel<MT, NPW><<<grid, (NPW + 4) * 32, smem, st>>>(p);
    return hipGetLastError();
}
#endif

template <typename PT>
static hipError_t launch_stage2(const Stage2Params &p, int bs, hipStream_t st, bool pdl)
{
    const int smem = (int)stage2_smem(p.L, p.num_splits, p.D, p.cw);
    hipError_t e = hipFuncSetAttribute((const void *)stage2_kernel<PT>,
                                       hipFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (e != hipSuccess)
        return e;
#if defined(MLA_TARGET_NVIDIA)
    // Same L1/shared split as stage 1 (which needs the maximum): an SM then
    // need not drain and reconfigure between the two kernels.
    e = cudaFuncSetAttribute((const void *)stage2_kernel<PT>,
                             cudaFuncAttributePreferredSharedMemoryCarveout, 100);
    if (e != hipSuccess)
        return e;
#endif
    dim3 grid(p.H, p.Dv / p.cw, bs);
#if defined(MLA_TARGET_NVIDIA)
    if (pdl) {
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = grid;
        cfg.blockDim = dim3(S2_THREADS, 1, 1);
        cfg.dynamicSmemBytes = smem;
        cfg.stream = st;
        cudaLaunchAttribute attr[1];
        attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr[0].val.programmaticStreamSerializationAllowed = 1;
        cfg.attrs = attr;
        cfg.numAttrs = 1;
        e = cudaLaunchKernelEx(&cfg, stage2_kernel<PT>, p);
        if (e != hipSuccess)
            return e;
        return hipGetLastError();
    }
#else
    (void)pdl;
#endif
    stage2_kernel<PT><<<grid, S2_THREADS, smem, st>>>(p);
    return hipGetLastError();
}

} // namespace mla_dev

using namespace mla_dev;

static void fill_common(const mla_launch_args &a, Stage1Params &p1, Stage2Params &p2)
{
    const mla_gpu_args &g = *a.g;
    const int H = g.shape.num_heads, L = g.shape.q_len;
    p1.q = g.q;
    p1.q_st = g.q_stride_tok;
    p1.q_sh = g.q_stride_head;
    p1.kv = g.kv_buffer;
    p1.kv_ss = g.kv_stride_slot;
    p1.qo_indptr = g.qo_indptr;
    p1.kv_indptr = g.kv_indptr;
    p1.kv_indices = g.kv_indices;
    p1.H = H;
    p1.L = L;
    p1.HL = H * L;
    p1.D = g.shape.head_dim;
    p1.Dv = g.shape.v_head_dim;
    p1.num_splits = a.num_splits;
    p1.scale_log2 = g.sm_scale * g.k_scale * LOG2E;
    p1.v_scale = g.v_scale;
    p1.part_o = a.part_o;
    p1.part_lse = a.part_lse;

    p2.q = g.q;
    p2.q_st = g.q_stride_tok;
    p2.q_sh = g.q_stride_head;
    p2.k_ext = g.k_extend;
    p2.k_st = g.k_stride_tok;
    p2.v_ext = g.v_extend;
    p2.v_st = g.v_stride_tok;
    p2.qo_indptr = g.qo_indptr;
    p2.kv_indptr = g.kv_indptr;
    p2.H = H;
    p2.L = L;
    p2.HL = H * L;
    p2.D = p1.D;
    p2.Dv = p1.Dv;
    p2.num_splits = a.num_splits;
    {
        // Enough blocks for about two per SM (MLA_GPU_FAST_TARGET_CTAS SMs),
        // rounded to a divisor of Dv / 64.
        const int units = p2.Dv / 64;
        const long long per = (long long)g.shape.num_seqs * H;
        int nch = (int)((2LL * MLA_GPU_FAST_TARGET_CTAS + per - 1) / per);
        if (nch > units)
            nch = units;
        if (nch < 1)
            nch = 1;
        while (units % nch)
            ++nch;
        p2.cw = p2.Dv / nch;
    }
    p2.sm_scale = g.sm_scale;
    p2.part_o = a.part_o;
    p2.part_lse = a.part_lse;
    p2.o = g.o;
    p2.o_st = g.o_stride_tok;
    p2.o_sh = g.o_stride_head;
    p2.lse = g.lse;
    p2.lse_st = g.lse_stride_tok;
}

// Development switches of the fast tier, read once from the environment so
// that variants can be validated and timed side by side in one device run:
//   MLA_GPU_FAST_S=ws|wg|mma  stage 1 of the 64/96-row shapes on NVIDIA: the
//                             warp-specialized kernel (ws, default; PERF.md
//                             versions 11-15), or the single-role kernel with
//                             S on wgmma (wg) or on mma.sync (mma; versions
//                             1-9)
//   MLA_GPU_FAST_MIN_SPLIT=n  smallest split (tokens, >= 16) instead of
//                             MLA_GPU_FAST_MIN_SPLIT, fixed (implies
//                             MLA_GPU_FAST_SPLIT_RULE=0 unless that is set)
//   MLA_GPU_FAST_SPLIT_RULE=0 keep the smallest split fixed (no
//                             fast_min_split growth; A/B of PERF.md 22)
//   MLA_GPU_FAST_ROWS=96      on NVIDIA, give up to 96 flattened rows to one
//                             CTA (the one-pass kernels of PERF.md 11-17)
//                             instead of 64-row blocks (PERF.md 18)
enum FastVariant { FAST_WS, FAST_MMA, FAST_WG };
struct FastConfig {
    FastVariant variant;
    int min_split;
    bool rows96;
    int split_rule;
};
static const FastConfig &fast_config()
{
    static const FastConfig c = [] {
        FastConfig f;
        const char *e = getenv("MLA_GPU_FAST_S");
        f.variant = !e || !strcmp(e, "ws") ? FAST_WS : !strcmp(e, "wg") ? FAST_WG : FAST_MMA;
        e = getenv("MLA_GPU_FAST_MIN_SPLIT");
        f.min_split = e && atoi(e) >= 16 ? atoi(e) : MLA_GPU_FAST_MIN_SPLIT;
        e = getenv("MLA_GPU_FAST_ROWS");
        f.rows96 = e && atoi(e) == 96;
        e = getenv("MLA_GPU_FAST_SPLIT_RULE");
        f.split_rule = e ? atoi(e) : getenv("MLA_GPU_FAST_MIN_SPLIT") ? 0 : 1;
        return f;
    }();
    return c;
}

int mla_fast_rows(int HL)
{
    const int r = HL < 96 ? HL : 96;
#if defined(MLA_TARGET_NVIDIA)
    // More than 64 rows go in 64-row blocks: the 96-row CTA reads the KV
    // once, but its producer warpgroup runs two 64-row S chains per tile
    // and bounds the loop; two 64-row CTAs, one chain each, run in parallel
    // and the second read of a tile mostly hits L2 (PERF.md 18: 2-40%
    // faster on every K3 TP8 shape measured).
    if (r > 64 && !fast_config().rows96)
        return 64;
    return r <= 16 ? 16 : r <= 32 ? 32 : r <= 64 ? 64 : 96;
#else
    return r <= 32 ? 32 : r <= 64 ? 64 : 96; // MFMA tiles are 32 rows
#endif
}

// Smallest split of a call. Stage 2 merges each row's active splits with
// act * L * (cw / 8) / S2_THREADS dependent 16-byte loads per thread
// (s2_groups: L rows x cw / 8 items), one L2 round trip per batch; at
// bs 1 the default 64-token splits give K3 64 splits, 16 loads a thread,
// and the merge costs more than the parallelism saves (PERF.md 22: K3 bs 1
// / 4k 27.0 us, with 128-token splits 20.4 us). So when that count exceeds 8
// the splits grow (multiples of 32 tokens, at most 8 tiles, where a longer
// stage 1 starts to cost more) until it is at most 8. A function of shapes
// and the total prefix only (no device reads).
static int fast_min_split(const FastConfig &cf, long long kv_total, int bs, int ns, int L, int cw)
{
    const int ms = cf.min_split;
    if (cf.split_rule == 0 || bs <= 0 || kv_total <= 0)
        return ms;
    const long long avg = kv_total / bs;
    long long act = avg / ms < ns ? avg / ms : ns;
    if (act < 1)
        act = 1;
    const long long max_act = 8LL * S2_THREADS * 8 / ((long long)L * cw); // 8 loads a thread
    if (act <= max_act || max_act < 1)
        return ms;
    long long want = (avg + max_act - 1) / max_act;
    want = (want + TN - 1) / TN * TN;
    if (want > 8 * TN)
        want = 8 * TN;
    return want > ms ? (int)want : ms;
}

hipError_t mla_launch_fast(const mla_launch_args &a)
{
    Stage1Params p1;
    Stage2Params p2;
    fill_common(a, p1, p2);
    p1.split_mode = p2.split_mode = 0;
    const FastConfig &cf = fast_config();
    p1.row_mode = 0;
    const int bs = a.g->shape.num_seqs;
    hipStream_t st = (hipStream_t)a.stream;
    const int rows = mla_fast_rows(p1.HL);
    dim3 grid(a.num_splits, (p1.HL + rows - 1) / rows, bs);
    p1.min_split = p2.min_split = fast_min_split(cf, a.g->num_kv_indices, bs, a.num_splits, p1.L, p2.cw);
    hipError_t e;
#if defined(MLA_TARGET_NVIDIA)
    // The warp-specialized kernel unrolls its k loop for 576 columns.
    const bool ws = cf.variant == FAST_WS && p1.D == D_MAX;
    if (rows == 16)
        e = launch_stage1<1, 4, 1, bf16_t>(p1, grid, st);
    else
#endif
    if (rows <= 32)
        e = launch_stage1<2, 4, 1, bf16_t>(p1, grid, st);
#if defined(MLA_TARGET_NVIDIA)
    else if (rows == 64)
        e = ws ? launch_stage1_ws<4, 8>(p1, grid, st)
            : cf.variant == FAST_WG ? launch_stage1<4, 8, 2, bf16_t, true>(p1, grid, st)
                                    : launch_stage1<4, 8, 2, bf16_t>(p1, grid, st);
    else
        e = ws ? launch_stage1_ws<6, 8>(p1, grid, st)
            : cf.variant == FAST_WG ? launch_stage1<6, 12, 3, bf16_t, true>(p1, grid, st)
                                    : launch_stage1<6, 12, 3, bf16_t>(p1, grid, st);
#else
    else if (rows == 64)
        e = launch_stage1<4, 8, 2, bf16_t>(p1, grid, st);
    else
        e = launch_stage1<6, 12, 3, bf16_t>(p1, grid, st);
#endif
    if (e != hipSuccess)
        return e;
    // The fast tier overlaps stage 2's prologue with stage 1 (PDL); the
    // per-head baseline keeps upstream's two plain launches.
    return launch_stage2<bf16_t>(p2, bs, st, true);
}

// The per-head baseline's S dot runs over the 576 columns padded to the next
// power of two, 1024 (SPEC section 4: upstream's verify_splitkv loads the
// head dim with BLOCK_DMODEL = next_pow2(576) and a mask, then one tl.dot);
// the zero columns cost what they cost upstream: 64 instead of 36 k16 steps
// and 1024-wide tiles in shared memory. (NVIDIA; the AMD build keeps 576.)
#if defined(MLA_TARGET_NVIDIA)
constexpr int PERHEAD_PADK = 1024;
#endif

hipError_t mla_launch_perhead(const mla_launch_args &a)
{
    Stage1Params p1;
    Stage2Params p2;
    fill_common(a, p1, p2);
    p1.split_mode = p2.split_mode = 1;
    p1.min_split = p2.min_split = 1;
    p1.row_mode = 1;
    const int bs = a.g->shape.num_seqs;
    hipStream_t st = (hipStream_t)a.stream;
#if defined(MLA_TARGET_NVIDIA)
    constexpr int ROWS = 16;
#else
    constexpr int ROWS = 32;
#endif
    dim3 grid(a.num_splits, p1.H * ((p1.L + ROWS - 1) / ROWS), bs);
    hipError_t e;
#if defined(MLA_TARGET_NVIDIA)
    e = launch_stage1<1, 4, 1, float, false, PERHEAD_PADK>(p1, grid, st);
#else
    e = launch_stage1<2, 4, 1, float>(p1, grid, st);
#endif
    if (e != hipSuccess)
        return e;
    return launch_stage2<float>(p2, bs, st, false);
}

hipError_t mla_launch_generic(const mla_gpu_args &g, void *stream)
{
    GenericParams p;
    p.q = g.q;
    p.q_st = g.q_stride_tok;
    p.q_sh = g.q_stride_head;
    p.k_ext = g.k_extend;
    p.k_st = g.k_stride_tok;
    p.k_sh = g.k_stride_head;
    p.v_ext = g.v_extend;
    p.v_st = g.v_stride_tok;
    p.v_sh = g.v_stride_head;
    p.kv = g.kv_buffer;
    p.kv_ss = g.kv_stride_slot;
    p.kv_sh = g.kv_stride_head;
    p.qo_indptr = g.qo_indptr;
    p.kv_indptr = g.kv_indptr;
    p.kv_indices = g.kv_indices;
    p.sinks = g.sinks;
    p.num_seqs = g.shape.num_seqs;
    p.H = g.shape.num_heads;
    p.Hkv = g.shape.num_kv_heads;
    p.D = g.shape.head_dim;
    p.Dv = g.shape.v_head_dim;
    p.is_causal = g.shape.is_causal;
    p.sliding_window = g.shape.sliding_window;
    p.sm_scale = g.sm_scale;
    p.k_scale = g.k_scale;
    p.v_scale = g.v_scale;
    p.logit_cap = g.shape.logit_cap;
    p.o = g.o;
    p.o_st = g.o_stride_tok;
    p.o_sh = g.o_stride_head;
    p.lse = g.lse;
    p.lse_st = g.lse_stride_tok;
    const int smem = (p.D + 4 * p.Dv + 8) * 4;
    hipError_t e = hipFuncSetAttribute((const void *)generic_kernel,
                                       hipFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (e != hipSuccess)
        return e;
    dim3 grid((unsigned)g.shape.num_q_tokens, p.H, 1);
    generic_kernel<<<grid, 128, smem, (hipStream_t)stream>>>(p);
    return hipGetLastError();
}

long long mla_stage2_smem_bytes(int L, int NS, int D)
{
    return stage2_smem(L, NS, D, 512); // the widest block (one chunk of Dv <= 512)
}
int mla_generic_smem_bytes(int D, int Dv)
{
    return (D + 4 * Dv + 8) * 4;
}

#else
// Device-only compile check: instantiate what the launchers would.
namespace mla_dev {
template __global__ void stage1_kernel<2, 4, 1, bf16_t, false, 0>(Stage1Params);
template __global__ void stage1_kernel<4, 8, 2, bf16_t, false, 0>(Stage1Params);
template __global__ void stage1_kernel<6, 12, 3, bf16_t, false, 0>(Stage1Params);
template __global__ void stage1_kernel<2, 4, 1, float, false, 0>(Stage1Params);
template __global__ void stage2_kernel<bf16_t>(Stage2Params);
template __global__ void stage2_kernel<float>(Stage2Params);
} // namespace mla_dev
#endif
