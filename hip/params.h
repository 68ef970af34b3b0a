// Kernel parameter structs: plain data, filled by the launchers from
// mla_gpu_args (api.hip -> launch_*.hip) and passed by value.
#ifndef MLA_GPU_PARAMS_H
#define MLA_GPU_PARAMS_H

#include "config.h"

namespace mla_dev {

// Element type of the KV pool (the values of mla_kv_dtype).
enum KvFmt { KV_BF16 = 0, KV_E4M3FN = 1, KV_E4M3FNUZ = 2 };

// Which tier's work a stage-1 / stage-2 launch does: the fast tier's
// balanced chunks over flattened rows (r = draft_row * H + head), or the
// per-head tier's splits over one head's draft rows per CTA.
enum Stage1Mode { S1_FAST = 0, S1_PERHEAD = 1 };

struct Stage1Params {
    const bf16_t *q;
    long long q_st, q_sh;
    // The pool: bf16 elements, or (kv_fmt KV_E4M3FN / KV_E4M3FNUZ) fp8 codes
    // at the same address, read as bytes. One pointer, and kv_fmt in the
    // padding after v_scale: the struct keeps the bf16-only layout's 128
    // bytes (at 144, nvcc addressed the parameters through a pointer in the
    // bf16 kernels' tile loops, 1% slower; PTX compared).
    const bf16_t *kv;
    long long kv_ss;       // elements per slot, of the pool's type
    const int32_t *qo_indptr;
    const int32_t *kv_indptr;
    const int64_t *kv_indices;
    int H, L, D, Dv;
    int num_splits;   // S1_FAST: chunks per row block (grid x); S1_PERHEAD: splits per sequence
    int mode;         // Stage1Mode
    int num_seqs;
    float scale_log2; // sm_scale * k_scale * log2(e)
    float v_scale;
    int kv_fmt;       // KvFmt
    long long work;   // S1_FAST: the partition's cost line length (split_policy.h)
    void *part_o;     // [slots, H L, Dv] of PT (Piece::slot)
    float *part_lse;  // [slots, H L], natural log
};
static_assert(sizeof(Stage1Params) == 128, "128 bytes: kernels read the parameters directly (kv_fmt note)");

// The draft keys for stage1_ws_kernel's ws-pvsm form, a second kernel
// argument so that Stage1Params keeps its 128 bytes (see kv_fmt above). on:
// the CTA holding each sequence's last piece appends the causal L x L draft
// block to that piece as one more tile (k_ext rows as keys, v_ext rows as
// values), so stage 2 only merges pieces (Stage2Params s1_draft). Set only
// where the drafts' scores and values need no scale of their own (k_scale
// == v_scale == 1: SPEC section 2 scales prefix keys and values alone) and
// L fits a tile. direct: a sequence's only piece writes its rows straight
// into o and lse (dense [tokens][H][Dv] and [tokens][H], q_len rows a
// sequence), and stage 2 skips that sequence (Stage2Params s1_direct).
struct Stage1Draft {
    const bf16_t *k_ext;
    const bf16_t *v_ext;
    long long k_st, v_st;
    bf16_t *o;
    float *lse;
    int on, direct;
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
    int H, L, HL, D, Dv, num_seqs;
    int num_splits; // S1_FAST: chunks; S1_PERHEAD: splits per sequence
    int max_pieces; // most pieces a sequence has (the split weights staged per row)
    int mode;       // Stage1Mode
    long long work; // S1_FAST: the partition's cost line length
    int cw; // output columns per block (a multiple of 64 dividing Dv)
    int s1_draft; // stage 1 folded the draft block into the last piece (Stage1Draft)
    int s1_direct; // a sequence's only piece wrote o and lse itself (Stage1Draft direct)
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
    const bf16_t *kv;   // bf16 elements, or fp8 codes read as bytes (kv_fmt)
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
    int kv_fmt;         // KvFmt
};

} // namespace mla_dev

#endif
