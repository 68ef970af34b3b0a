// The AMD kernels of hip/kernels/*.h (the files hip/amd_kernels.hip
// instantiates), unchanged, built by the host compiler for an emulated
// gfx942 or gfx950 (compiled once per arch with -D__gfx9XX__
// -Dmla_dev=mla_emu_gfx9XX and mla_emu/device.h force-included). Stage 1
// is instantiated from the AMD list of hip/instances.h, and the LDS of every
// stage-1 launch is the arch's plan in hip/config.h (AmdStage1Arch), as the
// launchers of hip/launch_*.hip request it.
//
// The launch logic below mirrors the AMD branches of hip/api.hip
// (launch_fast / launch_perhead / run_generic, fill_common): every split,
// row and chunk rule comes from hip/split_policy.c (linked into
// mla_amd_emu), so only the parameter fills are a copy (emu/README.md,
// integration).
#include "mla_emu/device.h"

namespace mla_dev {
MLA_EMU_LDS_ARRAY(unsigned char, smem_raw);
}

#include "kernels/generic.h"
#include "kernels/stage1_mma.h"
#include "kernels/stage2_merge.h"
#include "instances.h"
#include "split_policy.h"

#include "mla_emu_internal.h"

#include <stdio.h>

namespace mla_dev {

static mla_emu::Arch emu_arch()
{
#if defined(__gfx950__)
    return mla_emu::GFX950;
#else
    return mla_emu::GFX942;
#endif
}

#if defined(__gfx950__)
static const mla_sp_target kTarget = MLA_SP_AMD_GFX950;
#else
static const mla_sp_target kTarget = MLA_SP_AMD_GFX942;
#endif

int emu_fast_rows(int HL)
{
    return mla_sp_fast_rows(HL, 0, kTarget);
}

long long emu_stage2_smem(int L, int NS, int D)
{
    return stage2_smem(L, NS, D, 512);
}

// Stage-1 entries of the AMD instance list (hip/instances.h): a block size
// not in the list has no entry (a configuration fault, as a missing
// instantiation fails to link on the device build).
typedef void (*EmuEntry)(const void *);
template <int MT, int NW, int RG, typename PT, int PADK> static void entry_stage1(const void *a)
{
    stage1_kernel<MT, NW, RG, PT, PADK>(*(const Stage1Params *)a);
}
struct EmuStage1 {
    int mt, nw, rg, pt_size, padk;
    EmuEntry entry;
    int lds;
};
#define MLA_EMU_S1(MT, NW, RG, PT, PADK)                                                           \
    {MT, NW, RG, (int)sizeof(PT), PADK, entry_stage1<MT, NW, RG, PT, PADK>,                        \
     amd_stage1_smem_plan(AMD_ARCH, 16 * MT, NW).bytes},
static const EmuStage1 kStage1[] = {MLA_STAGE1_MMA_AMD(MLA_EMU_S1)};
#undef MLA_EMU_S1
static const EmuStage1 *find_stage1(int rows, int pt_size)
{
    for (const EmuStage1 &e : kStage1)
        if (16 * e.mt == rows && e.pt_size == pt_size)
            return &e;
    return nullptr;
}

template <typename PT> static void entry_stage2(const void *a)
{
    stage2_kernel<PT>(*(const Stage2Params *)a);
}
static void entry_generic(const void *a)
{
    generic_kernel(*(const GenericParams *)a);
}

static int emu_launch(mla_emu_tier_run &r, const char *name, mla_emu::Dim3 grid, unsigned threads, size_t lds,
                      void (*entry)(const void *), const void *args, size_t size)
{
    mla_emu::Dim3 block;
    block.x = threads;
    const size_t n = strlen(r.what);
    snprintf(r.what + n, sizeof r.what - n, "%s%s grid %ux%ux%u x %u, LDS %zu", n ? "; " : "", name, grid.x,
             grid.y, grid.z, threads, lds);
    r.status = mla_emu::launch(emu_arch(), grid, block, lds, entry, args, size, name, r.msg, sizeof r.msg);
    return r.status;
}

static int emu_stage1(mla_emu_tier_run &r, const Stage1Params &p, mla_emu::Dim3 grid, int rows, int pt_size)
{
    const EmuStage1 *e = find_stage1(rows, pt_size);
    if (!e) {
        r.status = mla_emu::FAULT_CONFIG;
        snprintf(r.msg, sizeof r.msg, "no stage-1 instance of %d rows (%s partials) in this arch's list (hip/instances.h)",
                 rows, pt_size == 2 ? "bf16" : "fp32");
        return r.status;
    }
    char name[64];
    snprintf(name, sizeof name, "stage1_kernel<%d,%d,%d,%s,%d>", e->mt, e->nw, e->rg, pt_size == 2 ? "bf16" : "float",
             e->padk);
    return emu_launch(r, name, grid, e->nw * 32, (size_t)e->lds, e->entry, &p, sizeof p);
}

static void emu_fill_common(const mla_gpu_args &g, int ns, void *part_o, float *part_lse, Stage1Params &p1,
                            Stage2Params &p2)
{
    const int H = g.shape.num_heads, L = g.shape.q_len;
    memset(&p1, 0, sizeof p1);
    memset(&p2, 0, sizeof p2);
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
    p1.num_splits = ns;
    p1.scale_log2 = g.sm_scale * g.k_scale * LOG2E;
    p1.v_scale = g.v_scale;
    p1.part_o = part_o;
    p1.part_lse = part_lse;
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
    p2.num_splits = ns;
    p2.cw = mla_sp_stage2_cols(p2.Dv, g.shape.num_seqs, H, MLA_GPU_FAST_TARGET_CTAS);
    p2.sm_scale = g.sm_scale;
    p2.part_o = part_o;
    p2.part_lse = part_lse;
    p2.o = g.o;
    p2.o_st = g.o_stride_tok;
    p2.o_sh = g.o_stride_head;
    p2.lse = g.lse;
    p2.lse_st = g.lse_stride_tok;
}

void emu_run_tier(mla_emu_tier_run &r)
{
    const mla_gpu_args &g = *r.g;
    r.status = 0;
    r.msg[0] = 0;
    r.what[0] = 0;
    if (r.tier == MLA_GPU_TIER_GENERIC) {
        GenericParams p;
        memset(&p, 0, sizeof p);
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
        mla_emu::Dim3 grid;
        grid.x = (unsigned)g.shape.num_q_tokens;
        grid.y = (unsigned)p.H;
        emu_launch(r, "generic_kernel", grid, 128, (size_t)generic_smem(p.D, p.Dv), entry_generic, &p, sizeof p);
        return;
    }

    const mla_shape &s = g.shape;
    const int bs = s.num_seqs, HL = s.num_heads * s.q_len;
    const bool fast = r.tier == MLA_GPU_TIER_FAST;
    int ns;
    if (fast)
        ns = mla_sp_fast_num_splits(bs, mla_sp_fast_row_blocks(HL, emu_fast_rows(HL)), MLA_GPU_FAST_TARGET_CTAS);
    else
        ns = mla_sp_perhead_num_splits(bs, g.num_kv_indices);
    // Partials: written by stage 1 for the active splits only, read by
    // stage 2 for the active splits only; tracked, so a read of a partial
    // stage 1 never wrote is a fault.
    const size_t esize = fast ? 2 : 4;
    const size_t rows_total = (size_t)bs * ns * HL;
    void *part_o = mla_emu::alloc(rows_total * s.v_head_dim * esize, mla_emu::BUF_TRACK_INIT, "part_o");
    float *part_lse = (float *)mla_emu::alloc(rows_total * 4, mla_emu::BUF_TRACK_INIT, "part_lse");
    if (!part_o || !part_lse) {
        mla_emu::release(part_o);
        mla_emu::release(part_lse);
        r.status = mla_emu::FAULT_CONFIG;
        snprintf(r.msg, sizeof r.msg, "out of memory for the partials");
        return;
    }
    Stage1Params p1;
    Stage2Params p2;
    emu_fill_common(g, ns, part_o, part_lse, p1, p2);
    mla_emu::Dim3 grid;
    if (fast) {
        p1.split_mode = p2.split_mode = 0;
        p1.row_mode = 0;
        const int rows = emu_fast_rows(HL);
        grid.x = (unsigned)ns;
        grid.y = (unsigned)((HL + rows - 1) / rows);
        grid.z = (unsigned)bs;
        p1.min_split = p2.min_split = mla_sp_fast_min_split(MLA_GPU_FAST_MIN_SPLIT, 1, g.num_kv_indices, bs, ns,
                                                            p1.L, p2.cw);
        const int st = emu_stage1(r, p1, grid, rows, 2);
        if (st == 0) {
            mla_emu::Dim3 g2;
            g2.x = (unsigned)p2.H;
            g2.y = (unsigned)(p2.Dv / p2.cw);
            g2.z = (unsigned)bs;
            emu_launch(r, "stage2_kernel<bf16>", g2, S2_THREADS, (size_t)stage2_smem(p2.L, ns, p2.D, p2.cw),
                       entry_stage2<bf16_t>, &p2, sizeof p2);
        }
    } else {
        p1.split_mode = p2.split_mode = 1;
        p1.min_split = p2.min_split = 1;
        p1.row_mode = 1;
        constexpr int ROWS = 32;
        grid.x = (unsigned)ns;
        grid.y = (unsigned)(p1.H * ((p1.L + ROWS - 1) / ROWS));
        grid.z = (unsigned)bs;
        const int st = emu_stage1(r, p1, grid, ROWS, 4);
        if (st == 0) {
            mla_emu::Dim3 g2;
            g2.x = (unsigned)p2.H;
            g2.y = (unsigned)(p2.Dv / p2.cw);
            g2.z = (unsigned)bs;
            emu_launch(r, "stage2_kernel<float>", g2, S2_THREADS, (size_t)stage2_smem(p2.L, ns, p2.D, p2.cw),
                       entry_stage2<float>, &p2, sizeof p2);
        }
    }
    mla_emu::release(part_o);
    mla_emu::release(part_lse);
}

} // namespace mla_dev
