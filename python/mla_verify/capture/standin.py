"""A numpy stand-in for SGLang's extend_attention_fwd (and a verify kernel).

Same positional arguments as SGLang's Triton extend_attention_fwd, so that
mla_capture can be exercised, and its README followed, without SGLang or a
GPU. bf16 tensors are uint16 arrays of raw bits. The math is float32 on the
exact bf16 inputs (SPEC section 2); the output is rounded to bf16 and written
into o_extend in place, the natural-log lse into lse_extend when given.
Not a reference: plain, slow, and only as accurate as float32.
"""

import numpy as np

from mla_verify.capture import bf16_to_f32, f32_to_bf16


def extend_attention_fwd(q_extend, k_extend, v_extend, o_extend, k_buffer, v_buffer,
                         qo_indptr, kv_indptr, kv_indices, custom_mask, is_causal,
                         mask_indptr, max_len_extend, k_scale, v_scale, sm_scale=None,
                         logit_cap=0.0, skip_prefix_custom_mask=True, sliding_window_size=-1,
                         sinks=None, window_kv_offsets=None, xai_temperature_len=-1,
                         lse_extend=None):
    if window_kv_offsets is not None or (xai_temperature_len or -1) > 0:
        raise NotImplementedError("window_kv_offsets / xai_temperature_len")
    _, H, D = q_extend.shape
    Hkv = k_extend.shape[1]
    Dv = v_extend.shape[2]
    group = H // Hkv
    sm = np.float32(sm_scale or 1.0 / D ** 0.5)
    ks = np.float32(1.0 if k_scale is None else k_scale)
    vs = np.float32(1.0 if v_scale is None else v_scale)
    qo = np.asarray(qo_indptr, dtype=np.int64)
    kvp = np.asarray(kv_indptr, dtype=np.int64)
    kvi = np.asarray(kv_indices, dtype=np.int64)
    mask = None if custom_mask is None else np.asarray(custom_mask).astype(bool)
    sink = None if sinks is None else np.asarray(sinks)
    if sink is not None:  # bf16 sinks come as uint16 bits, like every bf16 array here
        sink = bf16_to_f32(sink) if sink.dtype == np.uint16 else sink.astype(np.float32)
    win = sliding_window_size if sliding_window_size and sliding_window_size > 0 else -1
    for b in range(len(qo) - 1):
        t0, t1 = int(qo[b]), int(qo[b + 1])
        L = t1 - t0
        slots = kvi[kvp[b]:kvp[b + 1]]
        P = len(slots)
        if L == 0:
            continue
        # visible[i, key]: keys are the P prefix slots then the L drafts.
        vis = np.ones((L, P + L), dtype=bool)
        i = np.arange(L)[:, None]
        j = np.arange(L)[None, :]
        if mask is not None:
            blk = mask[int(mask_indptr[b]):int(mask_indptr[b]) + L * (P + L)].reshape(L, P + L)
            vis[:, P:] = blk[:, P:]
            if not skip_prefix_custom_mask:
                vis[:, :P] = blk[:, :P]
        elif is_causal:
            vis[:, P:] = j <= i
        if win > 0:
            qpos = P + i
            kpos = np.concatenate([np.arange(P), P + np.arange(L)])[None, :]
            vis &= (qpos - kpos) <= win
        for kh in range(Hkv):
            kp = bf16_to_f32(k_buffer[slots, kh, :])              # [P, D]
            vp = bf16_to_f32(v_buffer[slots, kh, :Dv]) * vs        # [P, Dv]
            kd = bf16_to_f32(k_extend[t0:t1, kh, :])               # [L, D]
            vd = bf16_to_f32(v_extend[t0:t1, kh, :])               # [L, Dv]
            vals = np.concatenate([vp, vd], axis=0)
            for h in range(kh * group, (kh + 1) * group):
                qh = bf16_to_f32(q_extend[t0:t1, h, :])            # [L, D]
                s = np.concatenate([(qh @ kp.T) * (sm * ks), (qh @ kd.T) * sm], axis=1)
                if logit_cap and logit_cap > 0:
                    s = np.float32(logit_cap) * np.tanh(s / np.float32(logit_cap))
                s = np.where(vis, s, np.float32(-np.inf)).astype(np.float32)
                m = s.max(axis=1, keepdims=True)
                if sink is not None:
                    m = np.maximum(m, sink[h])
                m = np.where(np.isfinite(m), m, np.float32(0))
                p = np.exp(s - m)
                den = p.sum(axis=1, keepdims=True)
                if sink is not None:
                    den = den + np.exp(sink[h] - m)
                # Row by row over its visible keys only: a NaN in a key
                # the row cannot see (a later draft) must not reach it
                # through 0 * NaN.
                out = np.stack([p[r, vis[r]] @ vals[vis[r]] for r in range(L)])
                out = out / np.where(den > 0, den, 1)
                o_extend[t0:t1, h, :] = f32_to_bf16(out)
                if lse_extend is not None:
                    with np.errstate(divide="ignore"):
                        lse_extend[t0:t1, h] = (np.log(den) + m)[:, 0]
    return None


def verify_mla_fwd(q_extend, k_extend, v_extend, o_extend, k_buffer, v_buffer, qo_indptr,
                   kv_indptr, kv_indices, custom_mask, is_causal, mask_indptr, max_len_extend,
                   k_scale, v_scale, sm_scale=None, logit_cap=0.0, skip_prefix_custom_mask=True,
                   sliding_window_size=-1, sinks=None, window_kv_offsets=None,
                   xai_temperature_len=-1, max_bs=None):
    """The fast path's contract (SPEC section 3, shape checks only): False
    and nothing written when it declines, else the same result as above."""
    bs = len(qo_indptr) - 1
    if (sinks is not None or (sliding_window_size or -1) > 0 or (logit_cap or 0) > 0
            or not is_causal or k_extend.shape[1] != 1 or bs < 1
            or q_extend.shape[0] != bs * int(max_len_extend)):
        return False
    extend_attention_fwd(q_extend, k_extend, v_extend, o_extend, k_buffer, v_buffer,
                         qo_indptr, kv_indptr, kv_indices, custom_mask, is_causal,
                         mask_indptr, max_len_extend, k_scale, v_scale, sm_scale=sm_scale)
    return True
