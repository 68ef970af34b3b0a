"""The API of issue 40: declared paths, bad inputs, fixtures, the catalogue,
paged KV."""
import os

import numpy as np
import pytest

import mla_verify as mv
from mla_verify.capture import f32_to_bf16
from paged import paged_pool


@pytest.fixture(scope="module")
def edges():
    case, = mv.cases(names=["k3-edges"])
    return case


def _args(case):
    """Keyword arguments that rebuild `case` (numpy, page size 1)."""
    return dict(q=case.q, k_extend=case.k_extend, v_extend=case.v_extend,
                kv_buffer=case.kv_buffer, qo_indptr=case.qo_indptr, kv_indptr=case.kv_indptr,
                kv_indices=case.slots, sm_scale=case.sm_scale, k_scale=case.k_scale,
                v_scale=case.v_scale, is_causal=case.is_causal, logit_cap=case.logit_cap,
                sliding_window=case.sliding_window, sinks=case.sinks,
                kv_dtype=case.kv_dtype)


# ------------------------------------------------------------- paths ----

def test_declared_paths():
    """The four names, each the judge's own path; the reference rounded to
    bf16 passes every one, and a declared path is never looser than auto."""
    assert list(mv.paths()) == ["fp32", "bf16-partials", "p-bf16", "auto"]
    case, = mv.cases(names=["k3-splits"])
    o = f32_to_bf16(mv.reference(case)[0])
    tol = {}
    for p in mv.paths():
        v = mv.judge(case, o, path=p)
        assert v.passed, str(v)
        assert v.path == p and v.path_description == mv.paths()[p]
        tol[p] = v.tolerances
    for p in ("fp32", "bf16-partials", "p-bf16"):
        assert tol[p]["cos_limit"] <= tol["auto"]["cos_limit"]
    assert tol["fp32"]["cos_limit"] < tol["auto"]["cos_limit"]


def test_stricter_path_is_stricter():
    """Some uniform output error passes the loosest path and fails the fp32
    path: a kernel that declares fp32 is held to fp32's tolerance."""
    case, = mv.cases(names=["k3-l2"])
    ref = mv.reference(case)[0]
    rng = np.random.default_rng(40)
    noise = rng.standard_normal(ref.shape).astype(np.float32)
    found = []
    for eps in np.geomspace(3e-4, 3e-2, 9):
        o = f32_to_bf16(ref + np.float32(eps) * noise * np.abs(ref).mean())
        a, f = mv.judge(case, o, path="auto"), mv.judge(case, o, path="fp32")
        assert not (f.passed and not a.passed), eps  # never the other way round
        if a.passed and not f.passed:
            found.append(eps)
    assert found, "no error level separates the auto and fp32 tolerances"


# ------------------------------------------------------- bad inputs ----

def _bad(case):
    a = _args(case)
    T, H, D = case.q.shape
    return [
        ("q", dict(q=case.q.astype(np.float32))),
        ("q", dict(q=case.q[0])),
        ("q", dict(q=np.broadcast_to(case.q[:, :1], case.q.shape))),
        ("k_extend", dict(k_extend=case.k_extend[:, :, :D - 1])),
        ("v_extend", dict(v_extend=np.zeros((T, 1, D + 1), np.uint16))),
        ("kv_buffer", dict(kv_buffer=np.zeros((8, 2, D), np.uint16))),
        ("kv_buffer", dict(kv_buffer=case.kv_buffer.astype(np.uint8))),
        ("kv_buffer", dict(kv_buffer=case.kv_buffer.astype(np.float32))),
        ("kv_dtype", dict(kv_dtype="float8_e5m2")),
        ("qo_indptr", dict(qo_indptr=case.qo_indptr.astype(np.float32))),
        ("qo_indptr", dict(qo_indptr=case.qo_indptr[::-1].copy())),
        ("qo_indptr", dict(qo_indptr=case.qo_indptr - 1)),
        ("kv_indptr", dict(kv_indptr=case.kv_indptr[:-1])),
        ("kv_indices", dict(kv_indices=case.slots[:-1])),
        ("kv_indices", dict(kv_indices=case.slots + case.kv_buffer.shape[0])),
        ("sinks", dict(sinks=np.zeros(H + 1, np.float32))),
        ("sinks", dict(sinks=np.zeros(H, np.int32))),
        ("sm_scale", dict(sm_scale=float("nan"))),
        ("sm_scale", dict(sm_scale="x")),
        ("page_size", dict(page_size=0)),
    ], a


def test_bad_case_inputs(edges):
    bad, a = _bad(edges)
    for name, change in bad:
        with pytest.raises(ValueError) as e:
            mv.Case(**{**a, **change})
        assert str(e.value).startswith(name), (name, str(e.value))


def test_bad_judge_inputs(edges):
    o = edges.new_output()
    T, H, Dv = o.shape
    for name, args in [
        ("o", dict(o=o[:, :, :Dv - 1])),
        ("o", dict(o=o.astype(np.float64))),
        ("o", dict(o=o.astype(np.int32))),
        ("lse", dict(o=o, lse=np.zeros((T, H + 1), np.float32))),
        ("lse", dict(o=o, lse=np.zeros((T, H), np.int32))),
        ("path", dict(o=o, path="fp16")),
        ("case", dict(case=object(), o=o)),
    ]:
        kw = {"case": edges, **args}
        with pytest.raises(ValueError) as e:
            mv.judge(**kw)
        assert str(e.value).startswith(name), (name, str(e.value))


def test_c_checks_name_the_field(edges):
    """Rules only the C checker knows (SPEC section 6) come back as
    ValueError with its message."""
    with pytest.raises(ValueError, match="sliding_window"):
        mv.Case(**{**_args(edges), "sliding_window": -5})


def test_unwritten_output_fails(edges):
    """An output never written (the poison of Case.new_output) FAILs."""
    v = mv.judge(edges, edges.new_output())
    assert v.status == "FAIL" and v.metrics["n_unwritten"] == v.metrics["n_elems"]


# ------------------------------------------------ fixtures, catalogue ----

def test_shipped_fixture_is_its_catalogue_case(edges):
    """fixtures/data/k3-edges.h5 is the catalogue's k3-edges at its default
    seed: load_fixture and cases() agree element for element."""
    path, = [p for p in mv.shipped_fixtures() if os.path.basename(p) == "k3-edges.h5"]
    f = mv.load_fixture(path)
    for a in ("q", "k_extend", "v_extend", "kv_buffer", "qo_indptr", "kv_indptr", "slots"):
        assert np.array_equal(getattr(f, a), getattr(edges, a)), a
    assert f.seed == edges.seed and f.expected_o is None


def test_fixture_with_expected():
    path, = [p for p in mv.shipped_fixtures() if os.path.basename(p) == "trace-k3-sinks.h5"]
    f = mv.load_fixture(path)
    assert f.expected_o.shape == (f.num_q_tokens, f.num_heads, f.v_head_dim)
    assert f.producer
    assert mv.judge(f, f.expected_o, f.expected_lse).passed


def test_load_fixture_rejects_a_bad_file(tmp_path):
    p = tmp_path / "garbage.h5"
    p.write_bytes(b"\x89HDF\r\n\x1a\n" + os.urandom(4000))
    with pytest.raises(ValueError, match="garbage.h5"):
        mv.load_fixture(p)
    with pytest.raises(ValueError):
        mv.load_fixture(tmp_path / "missing.h5")


def test_cases_filters():
    fams = mv.families()
    assert {"k3-tp8", "needle", "fp8", "nonfinite", "decline"} <= set(fams)
    fp8 = mv.cases(family="fp8")
    assert fp8 and all(c.family == "fp8" and c.kv_dtype != "bfloat16" for c in fp8)
    small = [c for c in mv.catalogue() if not c[3]]
    assert [c.name for c in mv.cases()] == [c[0] for c in small]
    a, = mv.cases(names=["k3-l2"], seed=5)
    b, = mv.cases(names=["k3-l2"], seed=5)
    c, = mv.cases(names=["k3-l2"], seed=6)
    assert np.array_equal(a.q, b.q) and not np.array_equal(a.q, c.q)
    with pytest.raises(ValueError, match="family"):
        mv.cases(family="no-such-family")


# ----------------------------------------------------------- paging ----

def _paged(case, P, rng, table_2d):
    """The same case with its prefix in pages of P tokens (paged.py)."""
    pool, kvi = paged_pool(case, P, rng, table_2d)
    return mv.Case(**{**_args(case), "kv_buffer": pool, "kv_indices": kvi, "page_size": P})


@pytest.mark.parametrize("table_2d", [False, True])
def test_paged_case_equals_slot_list(edges, table_2d):
    """page_size > 1 with a page table is the same call: same reference,
    same verdicts."""
    rng = np.random.default_rng(64)
    paged = _paged(edges, 16, rng, table_2d)
    assert paged.page_size == 16
    r0, r1 = mv.reference(edges), mv.reference(paged)
    assert np.array_equal(r0[0], r1[0]) and np.array_equal(r0[1], r1[1])
    o = f32_to_bf16(r0[0])
    assert mv.judge(paged, o, r0[1], path="fp32").passed
    bad = o.copy()
    bad[0, 0, :] = f32_to_bf16(r0[0][0, 0, :] * np.float32(1.01))
    assert (mv.judge(paged, bad, path="fp32").reason ==
            mv.judge(edges, bad, path="fp32").reason != "")


def test_paged_bad_table(edges):
    rng = np.random.default_rng(1)
    good = _paged(edges, 16, rng, False)
    a = {**_args(edges), "kv_buffer": good.kv_buffer.reshape((-1,) + good.kv_buffer.shape[1:]),
         "page_size": 16}
    with pytest.raises(ValueError, match="^kv_indices"):
        mv.Case(**{**a, "kv_indices": good.kv_indices[:-1]})
    with pytest.raises(ValueError, match="^kv_indices"):
        mv.Case(**{**a, "kv_indices": good.kv_indices + 1000})
    with pytest.raises(ValueError, match="^kv_buffer"):
        mv.Case(**{**a, "kv_buffer": good.kv_buffer[:-1, :5].reshape(-1, *good.kv_buffer.shape[1:])
                   [:-1], "kv_indices": good.kv_indices})
