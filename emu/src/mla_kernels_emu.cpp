// The AMD kernels of hip/mla_kernels.hip, unchanged, built by the host
// compiler for an emulated gfx942 or gfx950 (compiled once per arch with
// -D__gfx9XX__ -Dmla_dev=mla_emu_gfx9XX and mla_emu/device.h force-included;
// the MLA_HIP_MINIMAL path of the source gives the kernels without its
// host launchers, whose <<<>>> a host compiler cannot parse).
//
// The launch logic below mirrors the AMD branches of the launchers in
// mla_kernels.hip (mla_launch_fast / _perhead / _generic, fill_common,
// fast_min_split, mla_fast_rows) and mla_gpu.hip (fast_num_splits,
// perhead_num_splits, the partial buffers). It is a copy, so the two must
// change together until the launchers take a launch macro the emulator can
// define (emu/README.md, integration).
#include "mla_emu/device.h"

namespace mla_dev {
MLA_EMU_LDS_ARRAY(unsigned char, smem_raw);
}

#include "mla_kernels.hip"

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

int emu_fast_rows(int HL)
{
    const int r = HL < 96 ? HL : 96;
    return r <= 32 ? 32 : r <= 64 ? 64 : 96; // MFMA tiles are 32 rows (AMD branch)
}

long long emu_stage2_smem(int L, int NS, int D)
{
    return stage2_smem(L, NS, D, 512);
}

template <int MT, int NW, bool WG = false, int PADK = 0> constexpr int emu_stage1_smem()
{
    return (16 * MT) * DP * 2 + STAGES * TN * DP * 2 + (16 * MT) * SSP * 4 + (16 * MT) * PSP * 2 +
           3 * (16 * MT) * 4;
}

template <int MT, int NW, int RG, typename PT> static void entry_stage1(const void *a)
{
    stage1_kernel<MT, NW, RG, PT, false, 0>(*(const Stage1Params *)a);
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

template <int MT, int NW, int RG, typename PT>
static int emu_stage1(mla_emu_tier_run &r, const Stage1Params &p, mla_emu::Dim3 grid, const char *name)
{
    return emu_launch(r, name, grid, NW * 32, emu_stage1_smem<MT, NW>(), entry_stage1<MT, NW, RG, PT>, &p,
                      sizeof p);
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
    {
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
    p2.part_o = part_o;
    p2.part_lse = part_lse;
    p2.o = g.o;
    p2.o_st = g.o_stride_tok;
    p2.o_sh = g.o_stride_head;
    p2.lse = g.lse;
    p2.lse_st = g.lse_stride_tok;
}

// fast_min_split of mla_kernels.hip with the default configuration
// (MLA_GPU_FAST_MIN_SPLIT, split rule on; the environment switches are
// NVIDIA development knobs).
static int emu_fast_min_split(long long kv_total, int bs, int ns, int L, int cw)
{
    const int ms = MLA_GPU_FAST_MIN_SPLIT;
    if (bs <= 0 || kv_total <= 0)
        return ms;
    const long long avg = kv_total / bs;
    long long act = avg / ms < ns ? avg / ms : ns;
    if (act < 1)
        act = 1;
    const long long max_act = 8LL * S2_THREADS * 8 / ((long long)L * cw);
    if (act <= max_act || max_act < 1)
        return ms;
    long long want = (avg + max_act - 1) / max_act;
    want = (want + TN - 1) / TN * TN;
    if (want > 8 * TN)
        want = 8 * TN;
    return want > ms ? (int)want : ms;
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
        emu_launch(r, "generic_kernel", grid, 128, (size_t)(p.D + 4 * p.Dv + 8) * 4, entry_generic, &p, sizeof p);
        return;
    }

    const mla_shape &s = g.shape;
    const int bs = s.num_seqs, HL = s.num_heads * s.q_len;
    const bool fast = r.tier == MLA_GPU_TIER_FAST;
    int ns;
    if (fast) {
        const int rows = emu_fast_rows(HL);
        const long long per = (long long)bs * ((HL + rows - 1) / rows);
        const long long n = MLA_GPU_FAST_TARGET_CTAS / (per > 0 ? per : 1);
        ns = n < 1 ? 1 : (int)n;
    } else {
        const long long avg = g.num_kv_indices / (bs > 0 ? bs : 1);
        ns = avg < 4096 ? 4 : avg < 8192 ? 8 : MLA_GPU_PERHEAD_MAX_SPLITS;
    }
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
        p1.min_split = p2.min_split = emu_fast_min_split(g.num_kv_indices, bs, ns, p1.L, p2.cw);
        int st;
        if (rows <= 32)
            st = emu_stage1<2, 4, 1, bf16_t>(r, p1, grid, "stage1_kernel<2,4,1,bf16>");
        else if (rows == 64)
            st = emu_stage1<4, 8, 2, bf16_t>(r, p1, grid, "stage1_kernel<4,8,2,bf16>");
        else
            st = emu_stage1<6, 12, 3, bf16_t>(r, p1, grid, "stage1_kernel<6,12,3,bf16>");
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
        const int st = emu_stage1<2, 4, 1, float>(r, p1, grid, "stage1_kernel<2,4,1,float>");
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
