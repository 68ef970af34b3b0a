"""mla_verify.capture (issue 42's capture items, issue 40's paged KV): a
failed write raises a clean error and never crashes Python, inside wrap() it
is logged and counted; sinks are stored by dtype; a malformed argument skips
that call with a warning and capture stays on; a paged call is captured."""
import errno
import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import mla_verify as mv
from mla_verify import capture
from mla_verify.capture import standin
from paged import paged_pool

h5py = pytest.importorskip("h5py")


@pytest.fixture(scope="module")
def case():
    c, = mv.cases(names=["decline-sinks"])  # K3 shapes, sinks, small
    return c


def sglang_call(c, sinks="f32", lse=None, page_size=1):
    """SGLang extend_attention_fwd arguments for case c; sinks "f32"
    (float32 values) or "bits" (bf16 as uint16 bits)."""
    o = c.new_output()
    lse = np.zeros((c.num_q_tokens, c.num_heads), np.float32) if lse is None else lse
    s = capture.f32_to_bf16(c.sinks) if sinks == "bits" else c.sinks
    pool, kvi = c.kv_buffer, c.slots
    kw = {}
    if page_size > 1:  # the same call with the prefix in shuffled pages
        pool, kvi = paged_pool(c, page_size, np.random.default_rng(3))
        kw["page_size"] = page_size
    args = (c.q, c.k_extend, c.v_extend, o, pool, pool[..., :c.v_head_dim], c.qo_indptr,
            c.kv_indptr, kvi, None, True, None, int(np.diff(c.qo_indptr).max()), c.k_scale,
            c.v_scale, c.sm_scale, c.logit_cap, True, c.sliding_window, s)
    return args, dict(kw, lse_extend=lse)


def paged_kernel(q_extend, k_extend, v_extend, o_extend, k_buffer, v_buffer, qo_indptr,
                 kv_indptr, kv_indices, *rest, page_size=1, **kw):
    """A paged kernel: the stand-in on the page table's slots."""
    P = page_size
    slots = mv._paging.expand_pages(kv_indices, kv_indptr, P, k_buffer.shape[0])
    flat = k_buffer.reshape((-1,) + k_buffer.shape[2:])
    return standin.extend_attention_fwd(q_extend, k_extend, v_extend, o_extend, flat,
                                        flat[..., :v_extend.shape[2]], qo_indptr, kv_indptr,
                                        slots, *rest, **kw)


def only_o(q_extend, k_extend, v_extend, o_extend, k_buffer, v_buffer, qo_indptr, kv_indptr,
           kv_indices, *rest, lse_extend=None, **kw):
    """A kernel that takes lse_extend and ignores it."""
    return standin.extend_attention_fwd(q_extend, k_extend, v_extend, o_extend, k_buffer,
                                        v_buffer, qo_indptr, kv_indptr, kv_indices, *rest, **kw)


def _judged(path, c=None):
    """The captured file reads back (guarded reader) and its output PASSes
    on the fp32 path (the stand-in's)."""
    f = mv.load_fixture(path)
    v = mv.judge(f, f.expected_o, f.expected_lse, path="fp32")
    assert v.passed, str(v)
    return f


def _fixture_kwargs(c):
    return dict(case_name="t", source="trace", config={
        "num_seqs": c.num_seqs, "num_heads": c.num_heads, "num_kv_heads": c.num_kv_heads,
        "q_len": 0, "head_dim": c.head_dim, "v_head_dim": c.v_head_dim,
        "sm_scale": c.sm_scale, "k_scale": 1.0, "v_scale": 1.0, "is_causal": 1,
        "logit_cap": 0.0, "sliding_window": -1, "topk": 1},
        inputs={"q": c.q, "k_extend": c.k_extend, "v_extend": c.v_extend,
                "kv_buffer": c.kv_buffer, "qo_indptr": c.qo_indptr, "kv_indptr": c.kv_indptr,
                "kv_indices": c.slots})


# ------------------------------------------------------ failed writes ----

def test_failed_write_is_a_clean_error(case, tmp_path, monkeypatch):
    """ENOSPC after part of the file: CaptureWriteError (an OSError) naming
    the file and the errno; the old file intact, no partial file left."""
    target = tmp_path / "t.h5"
    target.write_bytes(b"old contents")

    def full(fd, data):
        if os.fstat(fd).st_size:
            raise OSError(errno.ENOSPC, "No space left on device")
        return os.write(fd, data[:len(data) // 2])
    monkeypatch.setattr(capture, "_os_write", full)
    with pytest.raises(capture.CaptureWriteError) as e:
        capture.write_fixture(str(target), **_fixture_kwargs(case))
    assert isinstance(e.value, OSError) and e.value.errno == errno.ENOSPC
    assert str(target) in str(e.value) and "ENOSPC" in str(e.value)
    assert target.read_bytes() == b"old contents"
    assert os.listdir(tmp_path) == ["t.h5"]
    monkeypatch.undo()
    capture.write_fixture(str(target), **_fixture_kwargs(case))
    assert mv.load_fixture(target).num_q_tokens == case.num_q_tokens


EFBIG_CHILD = textwrap.dedent("""
    import logging, os, resource, signal, sys, warnings
    import numpy as np
    import mla_verify as mv
    from mla_verify import capture
    from mla_verify.capture import standin
    sys.path.insert(0, {here!r})
    from test_capture import sglang_call, _fixture_kwargs
    logging.basicConfig(level=logging.ERROR, format="%(message)s")
    c, = mv.cases(names=["decline-sinks"])
    out = sys.argv[1]
    old = os.path.join(out, "old.h5")
    capture.write_fixture(old, **_fixture_kwargs(c))
    before = open(old, "rb").read()
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)       # EFBIG instead of a signal
    resource.setrlimit(resource.RLIMIT_FSIZE, (8192, 8192))
    try:
        capture.write_fixture(old, **_fixture_kwargs(c))
        print("no error")
    except capture.CaptureWriteError as e:
        print("clean error", e.errno == 27 and old in str(e))
    print("old intact", open(old, "rb").read() == before)
    f = capture.wrap(standin.extend_attention_fwd, out_dir=out)
    args, kw = sglang_call(c)
    ref = sglang_call(c)
    standin.extend_attention_fwd(*ref[0], **ref[1])
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        for _ in range(2):
            f(*args, **kw)
    st = f.capture.stats
    print("wrap", st["write_errors"], st["written"], np.array_equal(args[3], ref[0][3]))
    print("files", sorted(os.listdir(out)))
""")


def test_file_size_limit_in_a_real_process(tmp_path):
    """A real EFBIG (RLIMIT_FSIZE): write_fixture raises its clean error and
    the process lives on; inside wrap() the server's call returns its
    result, the failure is logged and counted, and nothing is left."""
    here = os.path.dirname(os.path.abspath(__file__))
    p = subprocess.run([sys.executable, "-c", EFBIG_CHILD.format(here=here), str(tmp_path)],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    assert lines[:3] == ["clean error True", "old intact True", "wrap 1 0 True"], p.stdout
    assert lines[3] == "files ['old.h5']", p.stdout
    assert "File too large" in p.stderr and "EFBIG" in p.stderr, p.stderr  # logged


# -------------------------------------------------------------- sinks ----

@pytest.mark.parametrize("kind", ["f32", "bits"])
def test_sinks_stored_by_dtype(case, tmp_path, kind):
    """bf16 sinks as uint16 bits are stored as their values, like float32
    sinks: both files hold the same float32 sinks and judge the same."""
    f = capture.wrap(standin.extend_attention_fwd, out_dir=str(tmp_path))
    args, kw = sglang_call(case, sinks=kind)
    f(*args, **kw)
    assert f.capture.stats["written"] == 1, f.capture.stats
    path = f.capture.stats["files"][0]
    with h5py.File(path, "r") as h:
        s = h["inputs/sinks"][()]
    want = (capture.f32_to_bf16(case.sinks).astype(np.uint32) << 16).view(np.float32) \
        if kind == "bits" else case.sinks
    assert s.dtype == np.float32 and np.array_equal(s, want)
    _judged(path)


def test_integer_sinks_skipped(case, tmp_path):
    f = capture.wrap(lambda *a, **k: standin.extend_attention_fwd(*a, **k),
                     out_dir=str(tmp_path))
    f.capture._params = None  # a lambda: bind by SGLang's order
    args, kw = sglang_call(case)
    args = args[:-1] + (np.zeros(case.num_heads, np.int32),)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        f(*args, **kw)
    st = f.capture.stats
    assert st["written"] == 0 and st["disabled"] is None
    assert any("sinks has dtype int32" in r for r in st["skipped"]), st
    assert sum("sinks has dtype int32" in str(x.message) for x in w) == 1


# ---------------------------------------------------- malformed args ----

def test_malformed_lse_skips_one_call(case, tmp_path):
    f = capture.wrap(only_o, out_dir=str(tmp_path))
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for lse in (np.zeros(3, np.float32), np.zeros((case.num_q_tokens, 2), np.float32),
                    None):
            args, kw = sglang_call(case, lse=lse)
            if lse is None:
                kw.pop("lse_extend")
            f(*args, **kw)
    st = f.capture.stats
    assert st["disabled"] is None and st["written"] == 1, st
    assert sum(st["skipped"].values()) == 2
    msgs = [str(x.message) for x in w if "lse_extend" in str(x.message)]
    assert len(msgs) == 2 and all("call not captured" in m for m in msgs), msgs
    _judged(st["files"][0])


# ------------------------------------------------------------- paging ----

def test_paged_call_captured(case, tmp_path):
    """page_size 16 with a page table: captured as its slot list (the file
    an ordinary fixture, the page size a root attribute), judged PASS, the
    same inputs as the unpaged call."""
    f = capture.wrap(paged_kernel, out_dir=str(tmp_path))
    args, kw = sglang_call(case, page_size=16)
    f(*args, **kw)
    st = f.capture.stats
    assert st["written"] == 1 and not st["skipped"], st
    path = st["files"][0]
    with h5py.File(path, "r") as h:
        assert int(h.attrs["page_size"]) == 16
    got = _judged(path)
    # Renumbered slots: the gathered rows per token equal the case's.
    assert np.array_equal(got.kv_buffer[got.slots], case.kv_buffer[case.slots])
    assert np.array_equal(got.q, case.q) and np.array_equal(got.kv_indptr, case.kv_indptr)


# ------------------------------------------------ the moved entry points ----

def test_module_entry_point(tmp_path):
    """`python -m mla_verify.capture` (the SGLang driver) runs, here with
    the numpy stand-ins in the kernels' places; its captures judge PASS."""
    out = tmp_path / "caps"
    p = subprocess.run([sys.executable, "-m", "mla_verify.capture", "--stub", "--only",
                        "k3-p113", "--out", str(out)], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, cwd=str(tmp_path))
    assert p.returncode == 0, p.stdout
    files = sorted(out.glob("*.h5"))
    assert [f.name for f in files] == ["k3-p113--extend.h5", "k3-p113--verify_mla.h5"]
    for f in files:
        c = mv.load_fixture(f)
        assert mv.judge(c, c.expected_o, c.expected_lse).passed


def test_sglang_hook_and_old_import(case, tmp_path):
    """install_sglang() patches a backend class shaped like SGLang's
    TritonAttnBackend; `import mla_capture` is the same module."""
    import mla_capture
    assert mla_capture is capture

    class Mode:
        def __init__(self, verify):
            self.verify = verify

        def is_target_verify(self):
            return self.verify

    class Backend:
        def __init__(self):
            self.extend_attention_fwd = standin.extend_attention_fwd

        def forward_extend(self, q, k, v, layer, forward_batch, save_kv_cache=True):
            args, kw = sglang_call(case)
            return self.extend_attention_fwd(*args, **kw)

    states = mla_capture.install_sglang(Backend, out_dir=str(tmp_path))
    be = Backend()
    layer = type("L", (), {"layer_id": 5})()
    be.forward_extend(None, None, None, layer, type("B", (), {"forward_mode": Mode(True)})())
    be.forward_extend(None, None, None, layer, type("B", (), {"forward_mode": Mode(False)})())
    st = states[0].stats
    assert st["written"] == 1 and st["calls"] == 2, st
    with h5py.File(st["files"][0], "r") as h:
        assert int(h.attrs["layer"]) == 5
