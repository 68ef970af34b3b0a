/* The contract every GPU tier shares (core/): the shape of a verify call as
 * the host knows it without touching device memory, and the decline
 * conditions of SPEC section 3. */
#ifndef MLA_SHAPE_H
#define MLA_SHAPE_H

#include "mla/common.h"

#if defined(__CUDACC__) || defined(__HIPCC__) || defined(__HIP__)
#define MLA_HD __host__ __device__
#else
#define MLA_HD
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* What the fast path needs to decide, known on the host without touching
 * device memory. */
typedef struct {
    int32_t num_seqs;
    int32_t num_heads;
    int32_t num_kv_heads;
    int32_t q_len;        /* declared drafts per sequence (0 = ragged) */
    int64_t num_q_tokens; /* rows of q */
    int32_t head_dim;     /* q width */
    int32_t kv_dim;       /* kv pool width */
    int32_t v_head_dim;   /* output width */
    int32_t v_extend_dim; /* v_extend width */
    int32_t is_causal;
    float logit_cap;
    int32_t sliding_window; /* -1 off, W >= 1 a window; 0 and below -1 are invalid (SPEC 6) */
    int32_t has_sinks;
    int32_t topk;
} mla_shape;

/* The shape view of a fixture, as the GPU API would see it (the fixture's
 * pool and q share head_dim, v_extend has v_head_dim). */
struct mla_fixture;
void mla_shape_from_fixture(const struct mla_fixture *fx, mla_shape *s);

/* NULL when the fast path accepts `s`, otherwise a static string naming the
 * first decline condition of SPEC section 3 that holds. */
const char *mla_can_handle(const mla_shape *s);

#ifdef __cplusplus
}
#endif
#endif
