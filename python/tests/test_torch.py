"""torch inputs (skipped where torch is not importable): the same case
and output as torch tensors and as numpy arrays give the same verdict."""
import numpy as np
import pytest

import mla_verify as mv
from mla_verify.capture import f32_to_bf16

torch = pytest.importorskip("torch")


def _t(a, dtype=None):
    if a.dtype == np.uint16:
        return torch.from_numpy(a.view(np.int16).copy()).view(torch.bfloat16)
    t = torch.from_numpy(np.ascontiguousarray(a).copy())
    return t.view(dtype) if dtype is not None else t


def _torch_case(c):
    pool = _t(c.kv_buffer) if c.kv_dtype == "bfloat16" else \
        _t(c.kv_buffer, getattr(torch, c.kv_dtype))
    return mv.Case(q=_t(c.q), k_extend=_t(c.k_extend), v_extend=_t(c.v_extend), kv_buffer=pool,
                   qo_indptr=_t(c.qo_indptr), kv_indptr=_t(c.kv_indptr),
                   kv_indices=_t(c.slots), sm_scale=torch.tensor(c.sm_scale),
                   k_scale=c.k_scale, v_scale=c.v_scale, is_causal=c.is_causal,
                   logit_cap=c.logit_cap, sliding_window=c.sliding_window,
                   sinks=None if c.sinks is None else _t(c.sinks))


@pytest.mark.parametrize("name", ["k3-l2", "k3-fp8-e4m3fn", "decline-sinks"])
def test_torch_equals_numpy(name):
    c, = mv.cases(names=[name])
    t = _torch_case(c)
    for a in ("q", "k_extend", "v_extend", "kv_buffer", "qo_indptr", "kv_indptr", "slots"):
        assert np.array_equal(getattr(t, a), getattr(c, a)), a
    assert t.kv_dtype == c.kv_dtype
    ref, lse = mv.reference(c)
    o = f32_to_bf16(ref)
    vn = mv.judge(c, o, lse, path="fp32")
    vt = mv.judge(t, _t(o), torch.from_numpy(lse), path="fp32")
    assert vt.status == vn.status == "PASS" and vt.metrics == {**vn.metrics,
                                                               "seconds": vt.metrics["seconds"]}
    # fp32 torch output, bf16 torch sinks, a non-contiguous view: accepted.
    assert mv.judge(t, torch.from_numpy(ref), path="fp32").passed
    assert mv.judge(t, _t(o).transpose(0, 1).contiguous().transpose(0, 1), path="fp32").passed


def test_torch_bad_inputs():
    c, = mv.cases(names=["k3-l2"])
    t = _torch_case(c)
    with pytest.raises(ValueError, match="^o: dtype float16"):
        mv.judge(t, torch.zeros(c.new_output().shape, dtype=torch.float16))
    with pytest.raises(ValueError, match="^q: dtype float32"):
        mv.Case(q=torch.zeros(c.q.shape), k_extend=_t(c.k_extend), v_extend=_t(c.v_extend),
                kv_buffer=_t(c.kv_buffer), qo_indptr=_t(c.qo_indptr), kv_indptr=_t(c.kv_indptr),
                kv_indices=_t(c.slots), sm_scale=c.sm_scale)
    with pytest.raises(ValueError, match="^q: stride 0"):
        mv.Case(q=_t(c.q)[:, :1].expand(c.q.shape), k_extend=_t(c.k_extend),
                v_extend=_t(c.v_extend), kv_buffer=_t(c.kv_buffer), qo_indptr=_t(c.qo_indptr),
                kv_indptr=_t(c.kv_indptr), kv_indices=_t(c.slots), sm_scale=c.sm_scale)


def test_call_sglang_torch_device():
    """call_sglang(device=...) hands the kernel torch tensors (bf16, an fp8
    pool as torch float8) and returns what it wrote."""
    c, = mv.cases(names=["k3-fp8-e4m3fn"])
    seen = {}

    def kernel(q, ke, ve, o, kb, vb, qo, kvp, kvi, *rest, **kw):
        seen.update(q=q.dtype, kb=kb.dtype, o=o.dtype)
        o.copy_(_t(f32_to_bf16(mv.reference(c)[0])))

    o, lse = c.call_sglang(kernel, device="cpu")
    assert seen == {"q": torch.bfloat16, "kb": torch.float8_e4m3fn, "o": torch.bfloat16}
    assert mv.judge(c, o, path="fp32").passed


def test_bf16_sinks_by_dtype():
    """bf16 sinks as a torch.bfloat16 tensor and as numpy uint16 bits are
    the same values."""
    c, = mv.cases(names=["decline-sinks"])
    bits = f32_to_bf16(c.sinks)
    a = {k: getattr(c, k) for k in ("q", "k_extend", "v_extend", "kv_buffer", "qo_indptr",
                                    "kv_indptr")}
    n = mv.Case(**a, kv_indices=c.slots, sm_scale=c.sm_scale, sinks=bits)
    t = mv.Case(**a, kv_indices=c.slots, sm_scale=c.sm_scale, sinks=_t(bits))
    assert np.array_equal(n.sinks, t.sinks) and np.array_equal(
        n.sinks, (bits.astype(np.uint32) << 16).view(np.float32))
