"""Case, judge, Verdict, assert_verify_close, load_fixture, cases,
shipped_fixtures: the package's API over the C library (_native)."""
import ctypes
import glob
import math
import os
import sys

import numpy as np

from . import _native
from ._paging import expand_pages

__all__ = ["Case", "Verdict", "judge", "assert_verify_close", "load_fixture", "cases",
           "shipped_fixtures", "reference", "paths", "catalogue", "families"]

POISON_BF16 = 0xFFA5  # MLA_POISON_BF16 (include/mla/common.h): never written by arithmetic
_HERE = os.path.dirname(os.path.abspath(__file__))
# Installed: the package's copy of fixtures/data; run from a checkout
# (PYTHONPATH=python): the repository's own.
_DATA = next((d for d in (os.path.join(_HERE, "data"),
                          os.path.join(_HERE, "..", "..", "fixtures", "data"))
              if os.path.isdir(d)), os.path.join(_HERE, "data"))


# ------------------------------------------------------------ inputs ----

def _is_torch(x):
    return type(x).__module__.split(".", 1)[0] == "torch"


def _check_strides(name, shape, strides):
    if 0 in tuple(shape):
        return  # an empty tensor has no elements to alias
    for d, (n, s) in enumerate(zip(shape, strides)):
        if n > 1 and s <= 0:
            raise ValueError("%s: stride %d on dim %d of shape %s (a broadcast or reversed "
                             "view; pass a tensor that owns its elements)"
                             % (name, s, d, tuple(shape)))


def _torch_numpy(x, name):
    """A torch tensor -> (numpy array on the host, torch dtype name). bf16
    comes back as uint16 bits, fp8 as uint8 codes."""
    import torch
    t = x.detach()
    _check_strides(name, tuple(t.shape), tuple(t.stride()))
    dt = str(t.dtype).replace("torch.", "")
    t = t.cpu().contiguous()
    if dt == "bfloat16":
        return t.view(torch.int16).numpy().view(np.uint16), dt
    if dt.startswith("float8"):
        return t.view(torch.uint8).numpy(), dt
    return t.numpy(), dt


def _array(x, name):
    """(numpy array, dtype name): torch tensors and numpy arrays alike;
    ml_dtypes bfloat16/float8 arrays come back as their bits."""
    if _is_torch(x):
        return _torch_numpy(x, name)
    a = np.asarray(x)
    _check_strides(name, a.shape, a.strides)
    dn = a.dtype.name
    if dn == "bfloat16":
        return np.ascontiguousarray(a).view(np.uint16), dn
    if dn.startswith("float8"):
        return np.ascontiguousarray(a).view(np.uint8), dn
    return np.ascontiguousarray(a), dn


def _bf16(x, name, rank):
    a, dn = _array(x, name)
    if dn not in ("bfloat16", "uint16"):
        raise ValueError("%s: dtype %s; bf16 tensors are torch.bfloat16 or numpy uint16 bit "
                         "patterns" % (name, dn))
    if a.ndim != rank:
        raise ValueError("%s: %d dimensions (shape %s), expected %d" % (name, a.ndim, a.shape,
                                                                       rank))
    return a


def _ints(x, name):
    a, dn = _array(x, name)
    if a.dtype.kind not in "iu":
        raise ValueError("%s: dtype %s; index arrays are integers" % (name, dn))
    if a.ndim == 0:
        raise ValueError("%s: a scalar; expected a 1-D index array" % name)
    return a.astype(np.int64)


def _floats(x, name, what="float"):
    """Float values by dtype: float16/32/64 and bf16 (torch.bfloat16,
    numpy uint16 bits) -> float32; anything else is refused."""
    a, dn = _array(x, name)
    if dn in ("bfloat16", "uint16"):
        return (a.astype(np.uint32) << 16).view(np.float32)
    if a.dtype.kind != "f":
        raise ValueError("%s: dtype %s; %s values are float16/32/64 or bf16" % (name, dn, what))
    return a.astype(np.float32)


def _scalar(x, name, kind=float):
    if _is_torch(x) or isinstance(x, np.ndarray):
        a, _ = _array(x, name)
        if a.size != 1:
            raise ValueError("%s: %d values, expected one" % (name, a.size))
        x = a.reshape(-1)[0]
    try:
        v = kind(x)
    except (TypeError, ValueError):
        raise ValueError("%s: %r is not a %s" % (name, x, kind.__name__)) from None
    if kind is float and not math.isfinite(v):
        raise ValueError("%s: %r is not finite" % (name, v))
    return v


def _pool(x, kv_dtype):
    a, dn = _array(x, "kv_buffer")
    if kv_dtype not in _native.KV_DTYPES:
        raise ValueError("kv_dtype: %r, expected one of %s" % (kv_dtype,
                                                                tuple(_native.KV_DTYPES)))
    if dn.startswith("float8"):
        if dn not in _native.KV_DTYPES:
            raise ValueError("kv_buffer: dtype %s; fp8 pools are float8_e4m3fn or "
                             "float8_e4m3fnuz" % dn)
        if kv_dtype not in ("bfloat16", dn):
            raise ValueError("kv_dtype: %r but kv_buffer is %s" % (kv_dtype, dn))
        return a, dn
    if dn in ("bfloat16", "uint16"):
        if kv_dtype != "bfloat16":
            raise ValueError("kv_buffer: bf16 (%s) but kv_dtype is %r" % (dn, kv_dtype))
        return a, "bfloat16"
    if dn == "uint8":
        if kv_dtype == "bfloat16":
            raise ValueError("kv_buffer: uint8 codes need kv_dtype 'float8_e4m3fn' or "
                             "'float8_e4m3fnuz'")
        return a, kv_dtype
    raise ValueError("kv_buffer: dtype %s; the pool is bf16 (torch.bfloat16, numpy uint16 "
                     "bits) or fp8 (torch float8, numpy uint8 codes with kv_dtype)" % dn)


def _indptr(x, name, n=None):
    a = _ints(x, name)
    if a.ndim != 1 or a.size < 1:
        raise ValueError("%s: shape %s; expected [num_seqs + 1]"
                         % (name, a.shape))
    if n is not None and a.size != n:
        raise ValueError("%s: %d entries, qo_indptr has %d" % (name, a.size, n))
    if a[0] != 0:
        raise ValueError("%s[0] is %d, must be 0" % (name, a[0]))
    d = np.diff(a)
    if (d < 0).any():
        i = int(np.argmax(d < 0))
        raise ValueError("%s decreases at entry %d (%d -> %d)" % (name, i + 1, a[i], a[i + 1]))
    if a[-1] > np.iinfo(np.int32).max:
        raise ValueError("%s[-1] = %d does not fit int32" % (name, a[-1]))
    return a.astype(np.int32)


# -------------------------------------------------------------- Case ----

class Case:
    """One target-verify call, in SGLang's layout (forward_extend, target
    verify): q [tokens, heads, head_dim], k_extend [tokens, kv_heads,
    head_dim], v_extend [tokens, kv_heads, v_head_dim], kv_buffer the pool
    (v is its first v_head_dim columns, MLA's latent cache), qo_indptr and
    kv_indptr [num_seqs + 1] (kv_indptr counts tokens), kv_indices the
    prefix: pool slots (page_size 1) or, with page_size > 1, a page table,
    either flat (sequence b's ceil(prefix_b / page_size) pages in a row) or
    one row per sequence ([num_seqs, max_pages], FlashMLA's block table),
    with kv_buffer [pages, page_size, kv_heads, head_dim] or [pages *
    page_size, kv_heads, head_dim]. Token t of sequence b then sits in slot
    page * page_size + t % page_size of page kv_indices[b][t // page_size].

    bf16 tensors: torch.bfloat16 or numpy uint16 bit patterns; an fp8 pool:
    a torch float8 tensor, or numpy uint8 codes with kv_dtype naming the
    flavour. Everything is checked here: a wrong dtype, shape, stride or
    index range raises ValueError naming the argument."""

    def __init__(self, *, q, k_extend, v_extend, kv_buffer, qo_indptr, kv_indptr, kv_indices,
                 sm_scale, k_scale=1.0, v_scale=1.0, is_causal=True, logit_cap=0.0,
                 sliding_window=-1, sinks=None, kv_dtype="bfloat16", page_size=1, name=None):
        self.q = _bf16(q, "q", 3)
        T, H, D = self.q.shape
        self.k_extend = _bf16(k_extend, "k_extend", 3)
        if self.k_extend.shape[0] != T or self.k_extend.shape[2] != D:
            raise ValueError("k_extend: shape %s, expected [%d, num_kv_heads, %d] (q is %s)"
                             % (self.k_extend.shape, T, D, self.q.shape))
        Hkv = self.k_extend.shape[1]
        if Hkv < 1 or H % Hkv:
            raise ValueError("k_extend: %d KV heads do not divide q's %d heads" % (Hkv, H))
        self.v_extend = _bf16(v_extend, "v_extend", 3)
        if self.v_extend.shape[:2] != (T, Hkv) or not 0 < self.v_extend.shape[2] <= D:
            raise ValueError("v_extend: shape %s, expected [%d, %d, v_head_dim <= %d]"
                             % (self.v_extend.shape, T, Hkv, D))
        Dv = self.v_extend.shape[2]
        self.page_size = _scalar(page_size, "page_size", int)
        if self.page_size < 1:
            raise ValueError("page_size: %d, must be >= 1" % self.page_size)
        P = self.page_size
        pool, self.kv_dtype = _pool(kv_buffer, kv_dtype)
        if pool.ndim == 4 and P > 1 and pool.shape[1] == P:
            pool = pool.reshape((pool.shape[0] * P,) + pool.shape[2:])
        if pool.ndim != 3 or pool.shape[1:] != (Hkv, D):
            want = "[pages, %d, %d, %d] or " % (P, Hkv, D) if P > 1 else ""
            raise ValueError("kv_buffer: shape %s, expected %s[slots, %d, %d]"
                             % (tuple(pool.shape), want, Hkv, D))
        if pool.shape[0] % P:
            raise ValueError("kv_buffer: %d slots are not whole pages of %d"
                             % (pool.shape[0], P))
        self.kv_buffer = pool
        self.qo_indptr = _indptr(qo_indptr, "qo_indptr")
        if self.qo_indptr[-1] != T:
            raise ValueError("qo_indptr: ends at %d but q has %d tokens"
                             % (self.qo_indptr[-1], T))
        self.kv_indptr = _indptr(kv_indptr, "kv_indptr", self.qo_indptr.size)
        self.kv_indices = _ints(kv_indices, "kv_indices")
        self.slots = self._slots(self.kv_indices, pool.shape[0])
        self.sinks = None
        if sinks is not None:
            self.sinks = _floats(sinks, "sinks").reshape(-1)
            if self.sinks.size != H:
                raise ValueError("sinks: %d values for %d heads" % (self.sinks.size, H))
        self.sm_scale = _scalar(sm_scale, "sm_scale")
        self.k_scale = _scalar(k_scale, "k_scale")
        self.v_scale = _scalar(v_scale, "v_scale")
        self.is_causal = bool(is_causal)
        self.logit_cap = _scalar(logit_cap, "logit_cap")
        self.sliding_window = _scalar(sliding_window, "sliding_window", int)
        self.name = name or "case"
        self.topk = 1
        self.seed = None
        self.family = None
        self.source = "synthetic"
        self.description = None
        self.expected_o = None
        self.expected_lse = None
        self.producer = None
        self.num_heads, self.head_dim, self.v_head_dim, self.num_kv_heads = H, D, Dv, Hkv
        self._check()

    def _slots(self, kvi, nslots):
        """kv_indices -> the slot list of page size 1 (pool row per token)."""
        n = int(self.kv_indptr[-1])
        if self.page_size > 1:
            slots = expand_pages(kvi, self.kv_indptr, self.page_size, nslots // self.page_size)
        elif kvi.ndim != 1 or kvi.size < n:
            raise ValueError("kv_indices: shape %s, expected at least kv_indptr[-1] = %d slots"
                             % (kvi.shape, n))
        else:
            slots = kvi[:n]
        if slots.size and (slots.min() < 0 or slots.max() >= nslots):
            bad = slots[(slots < 0) | (slots >= nslots)][0]
            raise ValueError("kv_indices: slot %d outside the pool's %d slots" % (bad, nslots))
        return np.ascontiguousarray(slots, dtype=np.int64)

    # -- the C view ------------------------------------------------------
    def _c(self):
        """The mla_py_case of this case; pointers into this object's arrays
        (kept alive by self while the C call runs)."""
        c = _native.CCase()
        g = c.cfg
        drafts = np.diff(self.qo_indptr)
        g.num_seqs = drafts.size
        g.num_heads, g.num_kv_heads = self.num_heads, self.num_kv_heads
        g.q_len = int(drafts[0]) if drafts.size and (drafts == drafts[0]).all() else 0
        g.head_dim, g.v_head_dim = self.head_dim, self.v_head_dim
        g.sm_scale, g.k_scale, g.v_scale = self.sm_scale, self.k_scale, self.v_scale
        g.is_causal = int(self.is_causal)
        g.logit_cap = self.logit_cap
        g.sliding_window = self.sliding_window
        g.topk = self.topk
        c.kv_dtype = _native.KV_DTYPES[self.kv_dtype]
        c.has_seed = self.seed is not None
        c.seed = int(self.seed or 0)
        c.num_q_tokens = self.q.shape[0]
        c.pool_slots = self.kv_buffer.shape[0]
        c.num_kv_indices = self.slots.size
        for f in ("q", "k_extend", "v_extend", "qo_indptr", "kv_indptr", "sinks"):
            a = getattr(self, f)
            setattr(c, f, None if a is None else a.ctypes.data)
        c.kv = self.kv_buffer.ctypes.data
        c.kv_indices = self.slots.ctypes.data
        return c

    def _check(self):
        m = _native.msgbuf()
        c = self._c()
        if _native.lib().mla_py_check(ctypes.byref(c), m, len(m)) != _native.OK:
            raise ValueError(_native.text(m))

    @property
    def num_q_tokens(self):
        return self.q.shape[0]

    @property
    def num_seqs(self):
        return self.qo_indptr.size - 1

    def __repr__(self):
        return "<mla_verify.Case %s: %d seqs, %d tokens, %d heads, head_dim %d/%d, %s pool%s>" % (
            self.name, self.num_seqs, self.num_q_tokens, self.num_heads, self.head_dim,
            self.v_head_dim, self.kv_dtype, ", page_size %d" % self.page_size
            if self.page_size > 1 else "")

    def __str__(self):
        return self.name

    def new_output(self):
        """An output buffer [tokens, heads, v_head_dim] of bf16 bits, every
        element the poison pattern the judge counts as never written."""
        return np.full((self.num_q_tokens, self.num_heads, self.v_head_dim), POISON_BF16,
                       np.uint16)

    def call_sglang(self, fn, lse=True, device=None):
        """Call `fn` with SGLang's extend_attention_fwd arguments for this
        case (q_extend, k_extend, v_extend, o_extend, k_buffer, v_buffer,
        qo_indptr, kv_indptr, kv_indices, custom_mask, is_causal,
        mask_indptr, max_len_extend, k_scale, v_scale, sm_scale, logit_cap,
        skip_prefix_custom_mask, sliding_window_size, sinks, and
        lse_extend= when lse) and return (o, lse) as it wrote them; o starts
        as the never-written poison. kv_indices is the slot list (page size
        1). device None: numpy arrays (bf16 as uint16 bits; an fp8 pool
        widened to bf16, exactly, since numpy has no fp8 a kernel could
        read); else torch tensors on that device (fp8 pools as torch
        float8)."""
        o = self.new_output()
        lo = np.full((self.num_q_tokens, self.num_heads), np.nan, np.float32) if lse else None
        pool = self.kv_buffer
        if device is None and self.kv_dtype != "bfloat16":
            pool = _f32_to_bf16(_fp8_to_f32(pool, self.kv_dtype))
        args = dict(q=self.q, ke=self.k_extend, ve=self.v_extend, o=o, pool=pool,
                    qo=self.qo_indptr, kvp=self.kv_indptr, kvi=self.slots,
                    sinks=self.sinks, lse=lo)
        if device is not None:
            args = {k: _to_torch(v, device, self.kv_dtype if k == "pool" else None)
                    for k, v in args.items()}
        drafts = np.diff(self.qo_indptr)
        kw = {"lse_extend": args["lse"]} if lse else {}
        fn(args["q"], args["ke"], args["ve"], args["o"], args["pool"],
           args["pool"][..., :self.v_head_dim], args["qo"], args["kvp"], args["kvi"], None,
           self.is_causal, None, int(drafts.max()) if drafts.size else 0, self.k_scale,
           self.v_scale, self.sm_scale, self.logit_cap, True, self.sliding_window,
           args["sinks"], **kw)
        return args["o"], args["lse"]


def _to_torch(a, device, fp8=None):
    if a is None:
        return None
    import torch
    if a.dtype == np.uint16:
        return torch.from_numpy(a.view(np.int16).copy()).view(torch.bfloat16).to(device)
    if a.dtype == np.uint8 and fp8:
        return torch.from_numpy(a.copy()).view(getattr(torch, fp8)).to(device)
    return torch.from_numpy(a.copy()).to(device)


def _f32_to_bf16(x):
    from .capture import f32_to_bf16
    return f32_to_bf16(x)


def _fp8_to_f32(codes, flavour):
    from .capture import fp8_to_f32
    return fp8_to_f32(codes, flavour)


# ----------------------------------------------------- from the C side ----

def _copy(ptr, ctype, shape):
    n = int(np.prod(shape)) if shape else 1
    if n == 0 or not ptr:
        return np.zeros(shape, dtype=ctype)
    return np.ctypeslib.as_array(ctypes.cast(ptr, ctypes.POINTER(
        np.ctypeslib.as_ctypes_type(ctype))), shape=(n,)).reshape(shape).copy()


def _case_from_c(c, name):
    g = c.cfg
    T, H, Hkv = c.num_q_tokens, g.num_heads, g.num_kv_heads
    D, Dv, S, B = g.head_dim, g.v_head_dim, c.pool_slots, g.num_seqs
    kvdt = _native.KV_DTYPE_NAMES[c.kv_dtype]
    case = Case(
        q=_copy(c.q, np.uint16, (T, H, D)), k_extend=_copy(c.k_extend, np.uint16, (T, Hkv, D)),
        v_extend=_copy(c.v_extend, np.uint16, (T, Hkv, Dv)),
        kv_buffer=_copy(c.kv, np.uint16 if kvdt == "bfloat16" else np.uint8, (S, Hkv, D)),
        qo_indptr=_copy(c.qo_indptr, np.int32, (B + 1,)),
        kv_indptr=_copy(c.kv_indptr, np.int32, (B + 1,)),
        kv_indices=_copy(c.kv_indices, np.int64, (c.num_kv_indices,)),
        sinks=None if not c.sinks else _copy(c.sinks, np.float32, (H,)),
        sm_scale=g.sm_scale, k_scale=g.k_scale, v_scale=g.v_scale, is_causal=g.is_causal,
        logit_cap=g.logit_cap, sliding_window=g.sliding_window, kv_dtype=kvdt, name=name)
    case.topk = g.topk
    case.seed = c.seed if c.has_seed else None
    case.source = _native.text(c.source) or "synthetic"
    case.description = _native.text(c.description) or None
    if c.expected_o:
        case.expected_o = _copy(c.expected_o, np.uint16, (T, H, Dv))
        case.producer = _native.text(c.expected_producer) or None
    if c.expected_lse:
        case.expected_lse = _copy(c.expected_lse, np.float32, (T, H))
    return case


def load_fixture(path, max_memory=0):
    """Read one fixture file (schema 1.x) through the project's guarded
    reader (a child process parses the file; max_memory bytes, 0 = the
    reader's default, bounds what it may allocate) -> Case, with
    .expected_o / .expected_lse (and .producer) where the file has them.
    A bad file raises ValueError with the reader's message."""
    path = os.fspath(path)
    c = _native.CCase()
    m = _native.msgbuf()
    L = _native.lib()
    h = L.mla_py_fixture_read(os.fsencode(path), int(max_memory), ctypes.byref(c), m, len(m))
    if not h:
        raise ValueError(_native.text(m))
    try:
        return _case_from_c(c, os.path.basename(path))
    finally:
        L.mla_py_fixture_free(h)


def catalogue():
    """[(name, family, description, large)] of the seeded catalogue."""
    L = _native.lib()
    out = []
    for i in range(L.mla_py_catalogue_count()):
        n, f, d = ctypes.c_char_p(), ctypes.c_char_p(), ctypes.c_char_p()
        lg = ctypes.c_int()
        L.mla_py_catalogue_info(i, ctypes.byref(n), ctypes.byref(f), ctypes.byref(d),
                                ctypes.byref(lg))
        out.append((_native.text(n.value), _native.text(f.value), _native.text(d.value),
                    bool(lg.value)))
    return out


def families():
    return sorted({f for _, f, _, _ in catalogue()})


def _generate(name, seed, family):
    L = _native.lib()
    if seed is None:
        seed = L.mla_py_catalogue_default_seed(name.encode())
    c = _native.CCase()
    m = _native.msgbuf()
    h = L.mla_py_catalogue_generate(name.encode(), int(seed), ctypes.byref(c), m, len(m))
    if not h:
        raise ValueError("%s: %s" % (name, _native.text(m)))
    try:
        case = _case_from_c(c, name)
    finally:
        L.mla_py_fixture_free(h)
    case.family = family
    return case


def cases(family=None, small=True, seed=None, names=None):
    """The catalogue's cases (edges, needles, NaN, fp8, declines, ...) as
    Cases generated in memory by the C catalogue. family: a family name or
    a list of them (None: all); small: leave out the large ones (prefixes to
    128k); seed: None for each case's fixed default seed (the shipped
    files'), or one seed for all; names: only these cases."""
    cat = catalogue()
    fams = None if family is None else ({family} if isinstance(family, str) else set(family))
    known = {f for _, f, _, _ in cat}
    if fams is not None and not fams <= known:
        raise ValueError("family: %s not in the catalogue (%s)"
                         % (sorted(fams - known), ", ".join(sorted(known))))
    if names is not None:
        missing = set(names) - {n for n, _, _, _ in cat}
        if missing:
            raise ValueError("names: %s not in the catalogue" % sorted(missing))
    return [_generate(n, seed, f) for n, f, _, large in cat
            if (fams is None or f in fams) and not (small and large)
            and (names is None or n in names)]


def shipped_fixtures(trace=True):
    """Paths of the fixture files shipped with the package (the
    repository's fixtures/data): the synthetic set, then (trace=True) the
    real SGLang captures of trace/, whose known-bad outputs are listed in
    trace/manifest.json."""
    out = sorted(glob.glob(os.path.join(_DATA, "*.h5")))
    if trace:
        out += sorted(glob.glob(os.path.join(_DATA, "trace", "*.h5")))
    return out


# ------------------------------------------------------------ judging ----

def paths():
    """{path name: the judge's description of it}. "auto" is the loosest
    path (the captured backend's); a kernel declares a stricter one to be
    held to its tolerance (SPEC section 7, validate/judge.c)."""
    L = _native.lib()
    return {_native.text(L.mla_py_path_name(i)): _native.text(L.mla_py_path_description(i))
            for i in range(L.mla_py_path_count())}


class Verdict:
    """The judge's verdict on one output. status: "PASS" | "FAIL" | "N/A" |
    "ERROR"; reason: the judge's first reason; worst: where the output is
    furthest from the reference (the row figure, the first element past
    its bound, the bias group); metrics: every figure; tolerances: the
    limits of the declared path."""

    def __init__(self, case, path, r):
        self.case_name = case.name
        self.status = _native.VERDICTS.get(r.verdict, "ERROR")
        self.reason = _native.text(r.reason)
        self.path = path
        self.path_description = _native.text(r.path_name)
        self.metrics = {n: getattr(r, n) for n in _native._RESULT_DOUBLES + _native._RESULT_INTS}
        self.metrics["bias_group"] = _native.text(r.bias_group)
        self.metrics["seconds"] = r.seconds
        fb = r.first_bad
        H, Dv = case.num_heads, case.v_head_dim
        self.worst = {
            "row_cos_diff": r.worst_row_cos,
            "row_rel_err": r.worst_row_rel,
            "element_ratio": r.worst_ratio,
            "first_bad": None if fb < 0 else (fb // (H * Dv), (fb // Dv) % H, fb % Dv),
            "bias_group": _native.text(r.bias_group),
            "bias_ratio": r.bias_ratio,
        }
        self.tolerances = {"cos_limit": r.cos_limit, "row_cos_limit": r.row_cos_limit,
                           "rel_tol": r.rel_tol}

    @property
    def passed(self):
        return self.status == "PASS"

    def __bool__(self):
        return self.passed

    def __repr__(self):
        return "<mla_verify.Verdict %s %s (%s)>" % (self.status, self.case_name, self.path)

    def __str__(self):
        m = self.metrics
        head = "%s %s [path %s: %s]" % (self.status, self.case_name, self.path,
                                        self.path_description)
        if self.status != "PASS":
            return head + ": " + self.reason
        return ("%s: cos_diff %.2e (limit %.1e), worst row %.2e (limit %.1e), max|err| %.3g, "
                "bound %.2f, bias %.2f" % (head, m["cos_diff"], m["cos_limit"],
                                           m["worst_row_cos"], m["row_cos_limit"], m["max_abs"],
                                           m["worst_ratio"], m["bias_ratio"]))


def _output(o, case):
    a, dn = _array(o, "o")
    want = (case.num_q_tokens, case.num_heads, case.v_head_dim)
    if a.shape != want:
        raise ValueError("o: shape %s, expected %s [tokens, heads, v_head_dim]"
                         % (tuple(a.shape), want))
    if dn in ("bfloat16", "uint16"):
        return np.ascontiguousarray(a, dtype=np.uint16), 2
    if dn == "float32":
        return np.ascontiguousarray(a), 4
    raise ValueError("o: dtype %s; outputs are bf16 (torch.bfloat16, numpy uint16 bits) or "
                     "float32" % dn)


def _lse(lse, case):
    if lse is None:
        return None
    a, dn = _array(lse, "lse")
    if a.dtype.kind != "f":
        raise ValueError("lse: dtype %s; lse is float32" % dn)
    want = (case.num_q_tokens, case.num_heads)
    if a.shape != want:
        raise ValueError("lse: shape %s, expected %s [tokens, heads]" % (tuple(a.shape), want))
    return np.ascontiguousarray(a, dtype=np.float32)


def judge(case, o, lse=None, path="auto"):
    """Judge output o (and lse, when given) of `case` against the project's
    fp32 reference with the tolerance of `path` (SPEC section 7): "fp32"
    (fp32 math, bf16 out), "bf16-partials", "p-bf16" (P rounded to bf16),
    or "auto" (P in bf16 and bf16 partials: the loosest, what a capture
    gets). -> Verdict. Bad arguments raise ValueError naming them."""
    if not isinstance(case, Case):
        raise ValueError("case: %r is not an mla_verify.Case" % (case,))
    if not isinstance(path, str) or path not in paths():
        raise ValueError("path: %r, expected one of %s" % (path, ", ".join(paths())))
    oa, esize = _output(o, case)
    la = _lse(lse, case)
    c = case._c()
    r = _native.CResult()
    m = _native.msgbuf()
    st = _native.lib().mla_py_judge(ctypes.byref(c), path.encode(), oa.ctypes.data, esize,
                                    None if la is None else la.ctypes.data, ctypes.byref(r),
                                    m, len(m))
    if st == _native.ERR_INVALID:
        raise ValueError(_native.text(m))
    if st == _native.ERR_NOMEM:
        raise MemoryError(_native.text(m))
    if st != _native.OK:
        raise RuntimeError(_native.text(m))
    return Verdict(case, path, r)


def assert_verify_close(case, o, lse=None, path="auto"):
    """judge(), raising AssertionError with the verdict's text (and the
    Verdict as .verdict) unless it is PASS. Returns the Verdict.

    N/A (nothing to judge: a case without output elements) is never a
    pass: under pytest the test is skipped with the reason, elsewhere it
    raises AssertionError like a failure."""
    v = judge(case, o, lse, path)
    if v.status == "N/A" and "pytest" in sys.modules:
        sys.modules["pytest"].skip(str(v))
    if not v.passed:
        err = AssertionError(str(v))
        err.verdict = v
        raise err
    return v


def reference(case):
    """The project's fp32 reference (OpenBLAS) for `case`: (o float32
    [tokens, heads, v_head_dim], lse float32 [tokens, heads])."""
    if not isinstance(case, Case):
        raise ValueError("case: %r is not an mla_verify.Case" % (case,))
    o = np.empty((case.num_q_tokens, case.num_heads, case.v_head_dim), np.float32)
    lse = np.empty((case.num_q_tokens, case.num_heads), np.float32)
    c = case._c()
    m = _native.msgbuf()
    if _native.lib().mla_py_reference(ctypes.byref(c), o.ctypes.data, lse.ctypes.data, m,
                                      len(m)) != _native.OK:
        raise ValueError(_native.text(m))
    return o, lse
