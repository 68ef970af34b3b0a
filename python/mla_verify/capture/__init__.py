"""Capture target-verify attention calls from a serving process as fixtures.

Wrap the function an SGLang attention backend calls for the target-verify
step (``extend_attention_fwd``, ``verify_mla_fwd`` / ``verify_shared_kv_fwd``,
``verify_splitkv_fwd``: all take the same leading arguments, see
``SGLANG_PARAMS``) and every selected call is written as one schema-1.0.0
fixture (SPEC section 6; schema 1.1.0 when the KV pool is fp8) holding the call's inputs and, as ``/expected/o``,
the output the production kernel wrote. ``mla-validate --backend captured``
then judges that output against the fp32 reference, and every other backend
can replay the exact call.

    import mla_capture
    fwd = mla_capture.wrap(fwd, kind="extend_attention_fwd", out_dir="/data/caps",
                           sample_rate=0.01, layers={0, 11}, max_files=200)
    with mla_capture.context(layer=layer_id, step=step):
        fwd(q, k, v, o, k_buffer, v_buffer, qo_indptr, kv_indptr, kv_indices, ...)

Guarantees, because this runs inside a server:
  * the wrapped function runs first, with the caller's arguments untouched,
    and its result (and any exception it raises) reaches the caller
    unchanged; capture only reads the tensors afterwards;
  * nothing in capture code raises: an unusable output directory, a full
    disk or an unexpected error warns once and switches capture off; a
    failed write is logged and counted (stats["write_errors"]); a call the
    fixture format cannot represent (a tree mask, a separate V cache, ...)
    or whose arguments are malformed (an lse of the wrong shape, ...) is
    skipped with one warning per reason, and capture stays on;
  * a file is built in memory and written by this module alone: a new file
    with an unpredictable name, created exclusively next to the target,
    fsynced and renamed onto it; a failed write (ENOSPC, EFBIG, ...) leaves
    the old target intact and no partial file, and libhdf5 never sees the
    failing disk;
  * calls made while a CUDA/HIP graph is being captured are never touched
    (copying to the host there would break the graph); run captured steps
    eagerly (SGLang: --disable-cuda-graph, or batches above the graph sizes);
  * only the KV slots a call reads are copied, with kv_indices renumbered,
    so a call over a pool of millions of slots becomes a file of its prefix.

Tensors may be torch tensors (imported lazily, only when one is passed) or
numpy arrays; numpy has no bfloat16, so bf16 numpy tensors are uint16 arrays
of raw bits (or ml_dtypes.bfloat16 arrays). Dependencies: numpy and h5py.
Float arguments (sinks, lse) are read by dtype: bf16 (torch.bfloat16, numpy
uint16 bits) and float16/32/64 as their values; integer arrays are refused.

Paged KV (page_size > 1): kv_indptr counts tokens, kv_indices is a page
table (flat, or [num_seqs, max_pages]) and k_buffer [pages, page_size, ...]
or [pages * page_size, ...] (mla_verify._paging); the capture stores the
slot list it expands to (pool slot = page * page_size + t % page_size), so
the file is an ordinary schema-1.0.0/1.1.0 fixture, with the page size in
the root attribute `page_size` (informational).

fp8 KV pools (SGLang's fp8 KV cache: torch.float8_e4m3fn on NVIDIA and
MI350, torch.float8_e4m3fnuz on MI300) are stored as fp8, never widened:
/inputs/kv_buffer holds the uint8 codes with dtype "float8_e4m3fn" or
"float8_e4m3fnuz" and the file is schema 1.1.0; the root attribute
`kv_source_dtype` (and the description) names the dtype the pool had. A
numpy pool may be an ml_dtypes float8_e4m3fn/fnuz array or a uint8 view of
the codes with wrap(..., kv_fp8="float8_e4m3fn" | "float8_e4m3fnuz").
k_scale and v_scale are stored as the call passed them.

Settings come from wrap()'s arguments, else from the environment:
  MLA_CAPTURE_DIR        output directory (created if missing)
  MLA_CAPTURE_RATE       fraction of eligible calls written (default 1)
  MLA_CAPTURE_LAYERS     layer filter, e.g. "0,5,10-12" (default: all)
  MLA_CAPTURE_MAX_FILES  stop after this many files (default 100)
  MLA_CAPTURE_MODEL      model tag stored in each file (default "kimi-k3")
  MLA_CAPTURE_SEED       seed of the sampling decisions (default 0)
  MLA_CAPTURE_TAG        process tag in file names (default r<rank> or p<pid>)
  MLA_CAPTURE_GZIP       1: gzip+shuffle datasets (smaller files, slower step)
"""

import contextlib
import contextvars
import errno
import functools
import inspect
import io
import logging
import os
import random
import secrets
import shutil
import threading
import warnings

import numpy as np

from .._paging import expand_pages

__version__ = "1.0.0"
SCHEMA_NAME = "mla-verify-fixture"
SCHEMA_VERSION = "1.0.0"
SCHEMA_VERSION_FP8 = "1.1.0"  # /inputs/kv_buffer may hold fp8 codes
FP8_FLAVOURS = ("float8_e4m3fn", "float8_e4m3fnuz")

log = logging.getLogger("mla_capture")

# SGLang's positional order (python/sglang/kernels/ops/attention/
# extend_attention.py, verify_mla.py, verify_splitkv.py). Used only when the
# wrapped function's own signature cannot be inspected; older SGLang
# releases lack k_scale/v_scale, which binding by the real signature handles.
SGLANG_PARAMS = (
    "q_extend", "k_extend", "v_extend", "o_extend", "k_buffer", "v_buffer",
    "qo_indptr", "kv_indptr", "kv_indices", "custom_mask", "is_causal",
    "mask_indptr", "max_len_extend", "k_scale", "v_scale", "sm_scale",
    "logit_cap", "skip_prefix_custom_mask", "sliding_window_size", "sinks",
    "window_kv_offsets", "xai_temperature_len",
)
KINDS = ("extend_attention_fwd", "verify_mla_fwd", "verify_shared_kv_fwd",
         "verify_splitkv_fwd")
# Verify kernels return False when they decline: they wrote nothing, the
# caller falls back, and that fallback call is the one worth capturing.
_RETURNS_RAN = ("verify_mla_fwd", "verify_shared_kv_fwd", "verify_splitkv_fwd")

# Arguments understood below. Anything else must still have its declared
# default, or the call is skipped: an unknown knob may change the math.
_KNOWN = set(SGLANG_PARAMS) | {
    "lse_extend", "skip_prefix", "skip_extend", "page_size", "score_mod",
    "aux_tensors", "identity_kv_indices", "kv_len_adjust",
}
# Performance-only arguments.
_HARMLESS = {"max_bs", "config", "extend_seq_lens_cpu", "force_v2_prefill"}

CONFIG_TYPES = {
    "num_seqs": np.int32, "num_heads": np.int32, "num_kv_heads": np.int32,
    "q_len": np.int32, "head_dim": np.int32, "v_head_dim": np.int32,
    "sm_scale": np.float32, "k_scale": np.float32, "v_scale": np.float32,
    "is_causal": np.int32, "logit_cap": np.float32, "sliding_window": np.int32,
    "topk": np.int32,
}
BF16_DATASETS = ("q", "k_extend", "v_extend", "kv_buffer")


class Unrepresentable(Exception):
    """The call is valid for its kernel but not expressible as a fixture."""


# ---------------------------------------------------------------- bf16 ----

def bf16_to_f32(bits):
    """uint16 bf16 bits -> float32 values (exact)."""
    b = np.asarray(bits, dtype=np.uint16)
    return (b.astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16(x):
    """float32 -> bf16 bits, round to nearest even; NaN stays a quiet NaN.
    Same rule as mla_f32_to_bf16 in include/mla/common.h."""
    f = np.ascontiguousarray(x, dtype=np.float32)
    u = f.view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(f)
    if nan.any():
        r[nan] = ((u[nan] >> 16) | 0x40).astype(np.uint16)
    return r


def fp8_to_f32(codes, flavour):
    """fp8 codes (uint8) -> float32 values, exact. float8_e4m3fn: bias 7,
    0x7F/0xFF NaN, max 448; float8_e4m3fnuz: bias 8, 0x80 the only NaN, no
    -0, max 240; subnormals in both, no infinities (schema 1.1.0)."""
    if flavour not in FP8_FLAVOURS:
        raise ValueError("unknown fp8 flavour %r (schema 1.1.0: %s)" % (flavour, FP8_FLAVOURS))
    c = np.asarray(codes, dtype=np.uint8).astype(np.int64)
    fnuz = flavour == "float8_e4m3fnuz"
    s, e, m = c >> 7, (c >> 3) & 15, c & 7
    bias = 8 if fnuz else 7
    v = np.where(e > 0, np.ldexp(1.0 + m / 8.0, e - bias), np.ldexp(m / 8.0, 1 - bias))
    v = np.where(s == 1, -v, v)
    nan = (c == 0x80) if fnuz else ((c & 0x7F) == 0x7F)
    return np.where(nan, np.nan, v).astype(np.float32)


# ------------------------------------------------------------- writing ----

def _attr_str(obj, name, value):
    if value is not None:
        obj.attrs[name] = str(value)


def _h5_file(fileobj, mode):
    """An HDF5 file in memory (fileobj: io.BytesIO): libhdf5 never writes
    to the disk, so a failing disk cannot leave it half-closed (issue 42:
    h5py raised, then the interpreter crashed)."""
    import h5py
    return h5py.File(fileobj, mode)


# The one call that writes to the disk; tests stand in a failing disk here.
_os_write = os.write


_DISK_FULL = {errno.ENOSPC, errno.EFBIG, getattr(errno, "EDQUOT", errno.ENOSPC)}


class CaptureWriteError(OSError):
    """A fixture could not be written: errno, the file and the reason. The
    target is left as it was, and no partial file remains."""


def _write_atomic(path, data):
    """data (bytes) -> path: a new file with an unpredictable name created
    exclusively (O_EXCL, never through a symlink) in path's directory,
    written, fsynced, then renamed onto path. Raises CaptureWriteError."""
    d = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(d, ".%s.%s.tmp" % (os.path.basename(path), secrets.token_hex(8)))
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0) | \
        getattr(os, "O_NOFOLLOW", 0)
    fd = -1
    try:
        fd = os.open(tmp, flags, 0o644)
        view = memoryview(data)
        while view:
            view = view[_os_write(fd, view):]
        os.fsync(fd)
        os.close(fd)
        fd = -1
        os.replace(tmp, path)
    except OSError as e:
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        code = e.errno or errno.EIO
        # str(): "[Errno 28] writing failed: No space left on device (ENOSPC): '<path>'"
        raise CaptureWriteError(code, "writing failed: %s (%s)"
                                % (os.strerror(code), errno.errorcode.get(code, "?")),
                                path) from None


def write_fixture(path, *, case_name, source, config, inputs, expected=None,
                  producer=None, model=None, description=None, created_by=None,
                  seed=None, extra_attrs=None, compression=None, kv_dtype="bfloat16"):
    """Write one schema-1.0.0 fixture (SPEC section 6) atomically; with
    kv_dtype "float8_e4m3fn" / "float8_e4m3fnuz" the pool is uint8 fp8 codes
    and the file schema 1.1.0.

    config: the 13 /config values (cast to their exact types here).
    inputs: q, k_extend, v_extend, kv_buffer (uint16 bf16 bits), qo_indptr,
      kv_indptr (int32), kv_indices (int64), optional sinks (float32).
    expected: None or {"o": uint16 bits, optional "lse": float32}; needs
      producer. extra_attrs: additional root attributes (numpy scalars or str).
    compression: None, or "gzip" (level 4, with shuffle).
    The file is built in memory, then appears under `path` only when
    complete (_write_atomic): a full disk or a file-size limit raises
    CaptureWriteError (an OSError naming the file and the errno), leaves no
    truncated fixture behind and the old `path` intact.
    """
    missing = set(CONFIG_TYPES) - set(config)
    if missing:
        raise ValueError("config lacks %s" % sorted(missing))
    if expected is not None and not producer:
        raise ValueError("/expected needs a producer")
    fp8 = kv_dtype != "bfloat16"
    if fp8 and kv_dtype not in FP8_FLAVOURS:
        raise ValueError("kv_dtype %r: bfloat16 or one of %s" % (kv_dtype, FP8_FLAVOURS))
    buf = io.BytesIO()
    # The in-memory file; the disk is touched only by _write_atomic.
    with _h5_file(buf, "w") as f:
        f.attrs["schema"] = SCHEMA_NAME
        f.attrs["schema_version"] = SCHEMA_VERSION_FP8 if fp8 else SCHEMA_VERSION
        f.attrs["case_name"] = str(case_name)
        f.attrs["source"] = str(source)
        _attr_str(f, "model", model)
        _attr_str(f, "description", description)
        _attr_str(f, "created_by", created_by)
        if seed is not None:
            f.attrs["seed"] = np.int64(seed)
        for k, v in (extra_attrs or {}).items():
            f.attrs[k] = v
        g = f.create_group("config")
        for k, t in CONFIG_TYPES.items():
            g.attrs[k] = t(config[k])
        gi = f.create_group("inputs")
        types = {"qo_indptr": np.int32, "kv_indptr": np.int32,
                 "kv_indices": np.int64, "sinks": np.float32}
        for name, arr in inputs.items():
            if arr is None:
                continue
            if fp8 and name == "kv_buffer":
                _dataset(gi, name, arr, np.uint8, compression, fp8=kv_dtype)
                continue
            dt = np.uint16 if name in BF16_DATASETS else types[name]
            _dataset(gi, name, arr, dt, compression)
        if expected is not None:
            ge = f.create_group("expected")
            _dataset(ge, "o", expected["o"], np.uint16, compression)
            if expected.get("lse") is not None:
                _dataset(ge, "lse", expected["lse"], np.float32, compression)
            ge.attrs["producer"] = str(producer)
    _write_atomic(path, buf.getbuffer())


def _dataset(group, name, arr, dtype, compression, fp8=None):
    a = np.ascontiguousarray(arr)
    if a.dtype != dtype:
        if dtype == np.uint8:
            raise TypeError("%s: fp8 data must be uint8 codes, got %s" % (name, a.dtype))
        if dtype == np.uint16:
            raise TypeError("%s: bf16 data must be uint16 bits, got %s" % (name, a.dtype))
        if dtype in (np.int32, np.int64):
            info = np.iinfo(dtype)
            if a.size and (a.min() < info.min or a.max() > info.max):
                raise OverflowError("%s does not fit %s" % (name, np.dtype(dtype)))
        a = a.astype(dtype)
    kw = {}
    # HDF5 cannot chunk an empty extent; tiny datasets gain nothing.
    if compression == "gzip" and a.size >= 64:
        kw = dict(compression="gzip", compression_opts=4, shuffle=True)
    d = group.create_dataset(name, data=a, **kw)
    if dtype == np.uint16:
        d.attrs["dtype"] = "bfloat16"
    if fp8 is not None:
        d.attrs["dtype"] = fp8
    return d


# ------------------------------------------------- tensor conversion ----

def _is_torch(x):
    return type(x).__module__.split(".", 1)[0] == "torch"


def _bits(x, what):
    """A bf16 tensor -> np.uint16 bits (an fp8 tensor other than the pool is
    widened exactly; the pool itself goes through _pool_fp8/_gather_codes)."""
    if _is_torch(x):
        import torch
        t = x.detach()
        if t.dtype != torch.bfloat16:
            if "float8" in str(t.dtype):
                # Every fp8 (e4m3/e5m2) value is a bf16 value: exact.
                t = t.to(torch.bfloat16)
            else:
                raise Unrepresentable("%s has dtype %s; fixtures hold bf16" % (what, t.dtype))
        return t.contiguous().view(torch.int16).cpu().numpy().view(np.uint16)
    a = np.asarray(x)
    if a.dtype == np.uint16:
        return a
    if a.dtype.name == "bfloat16":
        return a.view(np.uint16)
    if "float8" in a.dtype.name:
        return f32_to_bf16(a.astype(np.float32))
    raise Unrepresentable("%s has dtype %s; bf16 numpy tensors are uint16 bits" % (what, a.dtype))


def _pool_fp8(x, flavour):
    """(flavour, description of the dtype seen) when pool x holds fp8 codes,
    else None. flavour: the kv_fp8 setting, needed for a uint8 numpy view."""
    if _is_torch(x):
        name = str(x.dtype).replace("torch.", "")
        if "float8" not in name:
            return None
        if name not in FP8_FLAVOURS:
            raise Unrepresentable("KV pool dtype %s: schema 1.1.0 holds %s" % (x.dtype, FP8_FLAVOURS))
        return name, str(x.dtype)
    a = np.asarray(x) if not hasattr(x, "dtype") else x
    name = np.dtype(a.dtype).name
    if "float8" in name:
        if name not in FP8_FLAVOURS:
            raise Unrepresentable("KV pool dtype %s: schema 1.1.0 holds %s" % (name, FP8_FLAVOURS))
        return name, "numpy " + name
    if np.dtype(a.dtype) == np.uint8:
        if flavour not in FP8_FLAVOURS:
            raise Unrepresentable("uint8 KV pool without its fp8 flavour (pass kv_fp8=%s)"
                                  % " or ".join(FP8_FLAVOURS))
        return flavour, "numpy uint8 codes (kv_fp8=%s)" % flavour
    return None


def _codes(x):
    """An fp8 tensor or array -> np.uint8 codes (its bytes, no conversion)."""
    if _is_torch(x):
        import torch
        return x.detach().contiguous().view(torch.uint8).cpu().numpy()
    return np.ascontiguousarray(np.asarray(x)).view(np.uint8)


def _gather_codes(buf, slots):
    """Rows `slots` (np.int64, sorted unique) of an fp8 pool, as uint8 codes."""
    if _is_torch(buf):
        import torch
        out = np.empty((len(slots),) + _shape(buf)[1:], dtype=np.uint8)
        for s in range(0, len(slots), GATHER_ROWS):
            idx = torch.as_tensor(slots[s:s + GATHER_ROWS], dtype=torch.int64,
                                  device=buf.device)
            out[s:s + GATHER_ROWS] = _codes(buf.index_select(0, idx))
        return out
    return _codes(np.asarray(buf)[slots])


def _floats(x, what):
    """Float values by dtype, never by bit pattern: torch float tensors
    (bfloat16 included) and numpy float16/32/64 as their values, numpy
    uint16 as bf16 bits (this module's bf16 convention), ml_dtypes bfloat16
    as its values. Integer data is refused (Unrepresentable)."""
    if _is_torch(x):
        if not x.dtype.is_floating_point:
            raise Unrepresentable("%s has dtype %s; float values expected" % (what, x.dtype))
        return x.detach().float().cpu().numpy()
    a = np.asarray(x)
    if a.dtype == np.uint16:
        return bf16_to_f32(a)
    if a.dtype.kind == "f" or a.dtype.name == "bfloat16":
        return a.astype(np.float32)
    raise Unrepresentable("%s has dtype %s; float values (or bf16 as uint16 bits) expected"
                          % (what, a.dtype))


def _unpage(buf, page_size, what):
    """A paged pool [pages, page_size, heads, dim] as [slots, heads, dim]
    (a view); other pools unchanged."""
    if buf is None or page_size == 1 or len(buf.shape) != 4:
        return buf
    if int(buf.shape[1]) != page_size:
        raise Unrepresentable("%s shape %s: pages of %d tokens expected"
                              % (what, _shape(buf), page_size))
    return buf.reshape((int(buf.shape[0]) * page_size,) + _shape(buf)[2:])


def _ints(x):
    if _is_torch(x):
        return x.detach().cpu().numpy().astype(np.int64).reshape(-1)
    return np.asarray(x).astype(np.int64).reshape(-1)


def _scalar(x, default):
    if x is None:
        return default
    if _is_torch(x):
        return float(x.detach().float().reshape(-1)[0].item())
    return float(np.asarray(x, dtype=np.float64).reshape(-1)[0])


def _shape(x):
    return tuple(int(s) for s in x.shape)


# Rows gathered on the device per step: the copy costs ~20 MB of device
# memory at 576 bf16 columns instead of the whole prefix at once (a long
# batch reads hundreds of MB, more than a serving process may have spare).
GATHER_ROWS = 16384


def _gather_rows(buf, slots, what):
    """Rows `slots` (np.int64, sorted unique) of a pool, as bf16 bits."""
    if _is_torch(buf):
        import torch
        out = np.empty((len(slots),) + _shape(buf)[1:], dtype=np.uint16)
        for s in range(0, len(slots), GATHER_ROWS):
            idx = torch.as_tensor(slots[s:s + GATHER_ROWS], dtype=torch.int64,
                                  device=buf.device)
            out[s:s + GATHER_ROWS] = _bits(buf.index_select(0, idx), what)
        return out
    return _bits(np.asarray(buf)[slots], what)


def _same_storage_prefix(k_buffer, v_buffer):
    """True when v_buffer is k_buffer[..., :Dv] (MLA's latent view), so the
    values need no comparison."""
    if _is_torch(k_buffer) != _is_torch(v_buffer):
        return False
    if _is_torch(k_buffer):
        return (k_buffer.data_ptr() == v_buffer.data_ptr()
                and tuple(k_buffer.stride()[:2]) == tuple(v_buffer.stride()[:2])
                and k_buffer.dtype == v_buffer.dtype)
    a, b = np.asarray(k_buffer), np.asarray(v_buffer)
    return (a.__array_interface__["data"][0] == b.__array_interface__["data"][0]
            and a.strides[:2] == b.strides[:2] and a.dtype == b.dtype)


def _capturing_graph(x):
    if not _is_torch(x) or not x.is_cuda:
        return False
    import torch
    return bool(torch.cuda.is_current_stream_capturing())


# ------------------------------------------------------------ context ----

_context = contextvars.ContextVar("mla_capture_context", default=None)


@contextlib.contextmanager
def context(**kw):
    """Per-call information the kernel's arguments lack: layer (int), step
    (int), enabled (False: do not capture calls made inside)."""
    cur = _context.get() or {}
    token = _context.set({**cur, **kw})
    try:
        yield
    finally:
        _context.reset(token)


def set_context(**kw):
    """context() without a with-block (values persist in this thread/task)."""
    cur = _context.get() or {}
    _context.set({**cur, **kw})


def parse_layers(spec):
    """"0,5,10-12" -> {0, 5, 10, 11, 12}; None/"" -> None (all layers)."""
    if spec is None:
        return None
    if isinstance(spec, str):
        out = set()
        for part in spec.replace(" ", "").split(","):
            if not part:
                continue
            lo, _, hi = part.partition("-")
            out.update(range(int(lo), int(hi or lo) + 1))
        return out or None
    return {int(v) for v in spec}


# ------------------------------------------------------------ capture ----

class Capture:
    """State of one wrapped function: settings, counters, one-time warnings.

    stats: calls, eligible (passed enabled/layer/graph checks), sampled,
    written, skipped (reason -> count), bytes, files (paths), disabled
    (reason, or None while capturing), write_errors (failed writes)."""

    def __init__(self, fn, kind="extend_attention_fwd", out_dir=None, sample_rate=None,
                 layers=None, max_files=None, model=None, seed=None, layer_fn=None,
                 step_fn=None, tag=None, name_prefix="trace", compression=None,
                 max_bytes=None, min_free_bytes=256 << 20, producer=None, kv_fp8=None):
        if kind not in KINDS:
            raise ValueError("kind must be one of %s" % (KINDS,))
        if kv_fp8 is not None and kv_fp8 not in FP8_FLAVOURS:
            raise ValueError("kv_fp8 must be one of %s" % (FP8_FLAVOURS,))
        self.kv_fp8 = kv_fp8  # flavour of a uint8 numpy pool
        env = os.environ.get
        self.fn = fn
        self.kind = kind
        self._warned = set()
        self.stats = {"calls": 0, "eligible": 0, "sampled": 0, "written": 0,
                      "skipped": {}, "bytes": 0, "files": [], "disabled": None,
                      "write_errors": 0}
        self.out_dir = out_dir if out_dir is not None else env("MLA_CAPTURE_DIR")
        self.model = model if model is not None else env("MLA_CAPTURE_MODEL", "kimi-k3")
        try:
            self.sample_rate = float(sample_rate if sample_rate is not None
                                     else env("MLA_CAPTURE_RATE", "1"))
            self.layers = parse_layers(layers if layers is not None
                                       else env("MLA_CAPTURE_LAYERS"))
            self.max_files = int(max_files if max_files is not None
                                 else env("MLA_CAPTURE_MAX_FILES", "100"))
            self.seed = int(seed if seed is not None else env("MLA_CAPTURE_SEED", "0"))
        except (TypeError, ValueError) as e:
            # A typo in a setting must not stop the server from starting.
            self.sample_rate, self.layers, self.max_files, self.seed = 0.0, None, 0, 0
            self._disable("bad capture setting: %s" % e)
        if compression is None and env("MLA_CAPTURE_GZIP", "0") not in ("", "0"):
            compression = "gzip"
        self.compression = compression
        self.layer_fn = layer_fn
        self.step_fn = step_fn
        self.tag = tag if tag is not None else env("MLA_CAPTURE_TAG")
        self.name_prefix = name_prefix
        self.max_bytes = max_bytes
        self.min_free_bytes = min_free_bytes
        self.producer = producer or "%s (production, captured by mla_capture %s)" % (
            kind, __version__)
        self.layer = None  # set by a monkey-patch that knows the layer
        self._rng = random.Random(self.seed)
        self._lock = threading.Lock()
        self._params = _param_names(fn)
        self._defaults = _defaults_of(fn) if self._params else {}
        if self._params == ():
            self._disable("%r does not take SGLang's target-verify arguments (q_extend, ..., "
                          "o_extend, k_buffer, ..., kv_indptr, kv_indices, ...)"
                          % getattr(fn, "__name__", fn))
        if not self.out_dir:
            self._disable("no output directory (set out_dir or MLA_CAPTURE_DIR)")

    # -- warnings ------------------------------------------------------
    def _warn(self, key, msg):
        if key in self._warned:
            return
        self._warned.add(key)
        text = "mla_capture: " + msg
        # A server with logging configured gets it in its log; without
        # handlers logging would only repeat the warning on stderr.
        if log.handlers or logging.getLogger().handlers:
            log.warning(text)
        warnings.warn(text, RuntimeWarning, stacklevel=2)

    def _disable(self, reason):
        if self.stats["disabled"] is None:
            self.stats["disabled"] = reason
            self._warn("disabled", reason + "; capture is off for this process")

    def _skip(self, reason, warn=True):
        s = self.stats["skipped"]
        s[reason] = s.get(reason, 0) + 1
        if warn:
            self._warn("skip:" + reason, "call not captured: " + reason)

    # -- the wrapper body ----------------------------------------------
    def __call__(self, *args, **kwargs):
        result = self.fn(*args, **kwargs)
        try:
            with self._lock:
                self._after(args, kwargs, result)
        except Exception as e:  # capture must never reach the caller
            try:
                self._disable("unexpected error in capture code: %r" % (e,))
            except Exception:
                pass
        return result

    def _after(self, args, kwargs, result):
        st = self.stats
        call_index = st["calls"]
        st["calls"] += 1
        if st["disabled"] is not None:
            return
        ctx = _context.get() or {}
        if ctx.get("enabled", True) is False:
            return
        if self.kind in _RETURNS_RAN and result is False:
            self._skip("the verify kernel declined (returned False)", warn=False)
            return
        try:
            bound = self._bind(args, kwargs)
        except Unrepresentable as e:
            self._skip(str(e))
            return
        q = bound.get("q_extend")
        if q is not None and _capturing_graph(q):
            self._skip("inside CUDA/HIP graph capture (capture runs on eager steps only)")
            return
        layer = self._layer(ctx)
        if self.layers is not None:
            if layer is None:
                self._skip("a layer filter is set but the layer is unknown "
                           "(use mla_capture.context(layer=...))")
                return
            if int(layer) not in self.layers:
                return
        st["eligible"] += 1
        if self.sample_rate < 1.0 and self._rng.random() >= self.sample_rate:
            return
        if st["written"] >= self.max_files:
            self._warn("max_files", "max_files=%d reached; no more captures" % self.max_files)
            return
        st["sampled"] += 1
        step = ctx.get("step")
        if step is None and self.step_fn is not None:
            step = self.step_fn()
        if step is None:
            step = call_index
        try:
            fx = build_fixture(bound, result, kv_fp8=self.kv_fp8)
        except Unrepresentable as e:
            self._skip(str(e))
            return
        except Exception as e:  # a malformed argument: this call only, capture stays on
            self._skip("malformed arguments (%s: %s)" % (type(e).__name__, e))
            return
        self._write(fx, layer, int(step), call_index)

    def _bind(self, args, kwargs):
        """Argument name -> value, by the wrapped function's own signature
        when it has SGLang's parameter names, else by SGLANG_PARAMS."""
        names = self._params or SGLANG_PARAMS
        if len(args) > len(names):
            raise Unrepresentable("more positional arguments than %s takes" % self.kind)
        bound = dict(zip(names, args))
        bound.update(kwargs)
        for k, d in self._defaults.items():
            bound.setdefault(k, d)
        for k, v in bound.items():
            if k in _KNOWN or k in _HARMLESS:
                continue
            d = self._defaults.get(k, inspect.Parameter.empty)
            if d is inspect.Parameter.empty or not _same(v, d):
                raise Unrepresentable("unknown argument %r with a non-default value" % k)
        return bound

    def _layer(self, ctx):
        if self.layer_fn is not None:
            return self.layer_fn()
        if ctx.get("layer") is not None:
            return ctx["layer"]
        return self.layer

    def _tag(self):
        if self.tag:
            return self.tag
        rank = os.environ.get("RANK")
        try:
            import sys
            torch = sys.modules.get("torch")
            if torch is not None and torch.distributed.is_available() and \
                    torch.distributed.is_initialized():
                rank = torch.distributed.get_rank()
        except Exception:
            pass
        self.tag = "r%s" % rank if rank is not None else "p%d" % os.getpid()
        return self.tag

    def _write(self, fx, layer, step, call_index):
        st = self.stats
        raw = fx.pop("_raw_bytes")
        if self.max_bytes is not None and st["bytes"] + raw > self.max_bytes:
            self._disable("max_bytes=%d would be exceeded" % self.max_bytes)
            return
        try:
            os.makedirs(self.out_dir, exist_ok=True)
            free = shutil.disk_usage(self.out_dir).free
        except OSError as e:
            self._disable("output directory %r unusable: %s" % (self.out_dir, e))
            return
        if free < raw + self.min_free_bytes:
            self._disable("only %d bytes free in %r (need %d + a reserve of %d)"
                          % (free, self.out_dir, raw, self.min_free_bytes))
            return
        lname = "lx" if layer is None else "l%02d" % int(layer)
        case = "%s-%s-%s-s%06d-%s-c%06d" % (self.name_prefix, self.model, lname, step,
                                            self._tag(), call_index)
        path = os.path.join(self.out_dir, case + ".h5")
        n = 0
        while os.path.exists(path):  # another wrapper's call with the same numbers
            n += 1
            path = os.path.join(self.out_dir, "%s-%d.h5" % (case, n))
        case = os.path.basename(path)[:-3]
        extra = {"step": np.int64(step), "call_index": np.int64(call_index),
                 "kernel": self.kind}
        if layer is not None:
            extra["layer"] = np.int32(layer)
        extra.update(fx.pop("extra"))
        desc = ("captured %s call %d, layer %s, step %d: %d sequences, prefixes %s, "
                "%d of %d pool slots referenced"
                % (self.kind, call_index, "?" if layer is None else layer, step,
                   fx["config"]["num_seqs"], fx.pop("prefix_summary"),
                   fx["inputs"]["kv_buffer"].shape[0], fx.pop("pool_slots_total")))
        if fx["kv_dtype"] != "bfloat16":
            desc += "; fp8 KV pool %s (%s), stored as fp8" % (
                fx["kv_dtype"], extra.get("kv_source_dtype", "?"))
        try:
            write_fixture(path, case_name=case, source="trace", model=self.model,
                          description=desc, created_by="mla_capture %s" % __version__,
                          producer=self.producer, extra_attrs=extra,
                          compression=self.compression, **fx)
        except OSError as e:
            # Logged and counted, never raised into the serving process; a
            # disk that is full or at its size limit stays so: capture off.
            st["write_errors"] += 1
            log.error("mla_capture: %s", e)
            if e.errno in _DISK_FULL:
                self._disable("%s (disk full or at its size limit)" % e)
            else:
                self._warn("write:%s" % e.errno, "%s; %d failed write(s) so far"
                           % (e, st["write_errors"]))
            return
        st["written"] += 1
        st["bytes"] += os.path.getsize(path)
        st["files"].append(path)


def _same(a, b):
    try:
        r = a == b
        return bool(r) if isinstance(r, (bool, np.bool_)) else False
    except Exception:
        return False


def _param_names(fn):
    """Positional parameter names of fn; None when the signature cannot be
    inspected (then SGLANG_PARAMS applies), () when it is not SGLang's."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    names, star = [], False
    for p in sig.parameters.values():
        star |= p.kind == p.VAR_POSITIONAL
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.KEYWORD_ONLY):
            continue
        names.append(p.name)
    # f(q_extend, ..., kv_indices, *rest) forwards the rest in SGLang's order.
    if star and tuple(names) == SGLANG_PARAMS[:len(names)]:
        names = list(SGLANG_PARAMS)
    if not {"q_extend", "o_extend", "k_buffer", "kv_indptr", "kv_indices"} <= set(names):
        return ()
    return tuple(names)


def _defaults_of(fn):
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return {}
    return {p.name: p.default for p in sig.parameters.values()
            if p.default is not inspect.Parameter.empty}


# ----------------------------------------------- arguments -> fixture ----

def _mask_causality(mask, mask_indptr, qo, kvp, skip_prefix_mask):
    """is_causal (1/0) that reproduces SGLang's custom mask, or raise.

    Layout (extend_attention.py): sequence b's rows start at mask_indptr[b],
    row i holds prefix_len + extend_len entries, prefix columns first. With
    skip_prefix_custom_mask the kernel ignores the prefix columns."""
    if _is_torch(mask):
        # SGLang hands the verify mask over on the GPU; numpy cannot read it there.
        mask = mask.detach().reshape(-1).cpu().numpy()
    m = np.asarray(mask).reshape(-1).astype(bool)
    mi = _ints(mask_indptr)
    verdict = None
    for b in range(len(qo) - 1):
        L = int(qo[b + 1] - qo[b])
        P = int(kvp[b + 1] - kvp[b])
        n = P + L
        start = int(mi[b])
        if start < 0 or start + L * n > m.size:
            raise Unrepresentable("custom_mask shorter than its layout")
        blk = m[start:start + L * n].reshape(L, n)
        if not skip_prefix_mask and not blk[:, :P].all():
            raise Unrepresentable("custom_mask hides prefix keys")
        ext = blk[:, P:]
        tri = np.tril(np.ones((L, L), dtype=bool))
        if np.array_equal(ext, tri):
            v = 1
        elif ext.all():
            v = 0
        else:
            raise Unrepresentable("custom_mask is a tree mask (topk > 1), not causal or full")
        if L > 1:
            if verdict is not None and v != verdict:
                raise Unrepresentable("custom_mask mixes causal and full sequences")
            verdict = v
    return 1 if verdict is None else verdict


def build_fixture(bound, result=None, kv_fp8=None):
    """Bound call arguments (after the call) -> write_fixture() keywords.
    kv_fp8: the fp8 flavour of a uint8 numpy pool (torch and ml_dtypes
    pools say theirs).

    Raises Unrepresentable for calls the schema cannot hold."""
    g = bound.get
    for name in ("q_extend", "k_extend", "v_extend", "k_buffer", "v_buffer",
                 "qo_indptr", "kv_indptr", "kv_indices"):
        if g(name) is None:
            raise Unrepresentable("argument %s missing" % name)
    if g("skip_prefix") or g("skip_extend"):
        raise Unrepresentable("skip_prefix/skip_extend (a partial, DCP-style call)")
    if g("score_mod") is not None or g("aux_tensors") is not None:
        raise Unrepresentable("score_mod changes the logits")
    if g("xai_temperature_len") is not None and g("xai_temperature_len", -1) > 0:
        raise Unrepresentable("xai_temperature_len scales the logits")
    page_size = g("page_size")
    page_size = 1 if page_size is None else int(page_size)
    if page_size < 1:
        raise Unrepresentable("page_size %d" % page_size)
    if g("kv_len_adjust") not in (None, 0):
        raise Unrepresentable("kv_len_adjust %s" % g("kv_len_adjust"))
    if g("window_kv_offsets") is not None and g("custom_mask") is not None:
        raise Unrepresentable("custom_mask with window_kv_offsets")

    q, ke, ve = g("q_extend"), g("k_extend"), g("v_extend")
    kb, vb = _unpage(g("k_buffer"), page_size, "k_buffer"), _unpage(g("v_buffer"), page_size,
                                                                     "v_buffer")
    o = g("o_extend")
    if o is None and result is not None and hasattr(result, "shape"):
        o = result
    if o is None:
        raise Unrepresentable("no output tensor")
    if len(q.shape) != 3 or len(ke.shape) != 3 or len(ve.shape) != 3 or len(kb.shape) != 3:
        raise Unrepresentable("tensors are not [tokens, heads, dim]")
    _, H, D = _shape(q)
    Hkv = _shape(ke)[1]
    Dv = _shape(ve)[2]
    if _shape(kb)[1:] != (Hkv, D) or _shape(ke)[2] != D:
        raise Unrepresentable("k_buffer %s does not match q/k_extend (%d heads, %d wide)"
                              % (_shape(kb), Hkv, D))
    if _shape(vb)[1] != Hkv or _shape(vb)[2] < Dv or Dv > D:
        raise Unrepresentable("v_buffer %s does not match v_extend width %d" % (_shape(vb), Dv))
    if Hkv < 1 or H % Hkv:
        raise Unrepresentable("%d query heads over %d KV heads" % (H, Hkv))

    qo = _ints(g("qo_indptr"))
    kvp = _ints(g("kv_indptr"))
    bs = len(qo) - 1
    kvp = kvp[:bs + 1]  # a buffer sized for the largest batch holds more
    if bs < 1 or len(kvp) != bs + 1:
        raise Unrepresentable("qo_indptr/kv_indptr lengths %d/%d" % (len(qo), len(kvp)))
    if qo[0] != 0 or np.any(np.diff(qo) < 0) or np.any(np.diff(kvp) < 0):
        raise Unrepresentable("indptr not a non-decreasing offset list from 0")
    ntok = int(qo[-1])
    if ntok > _shape(q)[0] or ntok > _shape(o)[0]:
        raise Unrepresentable("qo_indptr ends past the tensors")
    kv0, kv1 = int(kvp[0]), int(kvp[-1])
    kvp = kvp - kv0
    if page_size > 1:
        raw = g("kv_indices")
        table = raw.detach().cpu().numpy() if _is_torch(raw) else np.asarray(raw)
        if kv0:
            raise Unrepresentable("paged KV with kv_indptr[0] = %d (not 0)" % kv0)
        try:
            kvi = expand_pages(table, kvp, page_size, _shape(kb)[0] // page_size)
        except ValueError as e:
            raise Unrepresentable(str(e)) from None
    elif g("identity_kv_indices"):
        kvi = np.arange(kv0, kv1, dtype=np.int64)
    else:
        raw = g("kv_indices")
        # Graph-era buffers are sized for the largest batch: read only the
        # referenced range.
        kvi = _ints(raw[kv0:kv1])
    if kvi.size != kv1 - kv0:
        raise Unrepresentable("kv_indices shorter than kv_indptr says")
    slots, inv = np.unique(kvi, return_inverse=True)
    pool_total = _shape(kb)[0]
    if slots.size and (slots[0] < 0 or slots[-1] >= pool_total):
        raise Unrepresentable("kv_indices outside the pool")
    fp8 = _pool_fp8(kb, kv_fp8)
    if fp8 is not None:
        vfp8 = _pool_fp8(vb, kv_fp8)
        if vfp8 is None or vfp8[0] != fp8[0]:
            raise Unrepresentable("k_buffer is %s but v_buffer is %s" % (
                fp8[1], getattr(vb, "dtype", "?")))
    gather = (lambda buf, what: _gather_codes(buf, slots)) if fp8 is not None else \
        (lambda buf, what: _gather_rows(buf, slots, what))
    kv_rows = gather(kb, "k_buffer")
    if slots.size and not _same_storage_prefix(kb, vb):
        v_rows = gather(vb, "v_buffer")[:, :, :Dv]
        if not np.array_equal(v_rows, kv_rows[:, :, :Dv]):
            raise Unrepresentable("v_buffer is not the first %d columns of k_buffer "
                                  "(a separate V cache)" % Dv)

    if g("custom_mask") is not None:
        if g("mask_indptr") is None:
            raise Unrepresentable("custom_mask without mask_indptr")
        is_causal = _mask_causality(g("custom_mask"), g("mask_indptr"), qo, kvp,
                                    bool(g("skip_prefix_custom_mask", True)))
    else:
        ic = g("is_causal", True)
        is_causal = 1 if (ic is None or bool(ic)) else 0

    sm = g("sm_scale")
    sm = float(sm) if sm else 1.0 / (D ** 0.5)  # SGLang: `sm_scale or 1/sqrt(Lq)`
    lc = _scalar(g("logit_cap"), 0.0)
    sw = g("sliding_window_size")
    sw = int(sw) if sw is not None and int(sw) > 0 else -1
    drafts = np.diff(qo)
    q_len = int(drafts[0]) if np.all(drafts == drafts[0]) else 0

    inputs = {
        "q": _bits(q[:ntok], "q_extend"),
        "k_extend": _bits(ke[:ntok], "k_extend"),
        "v_extend": _bits(ve[:ntok], "v_extend"),
        "kv_buffer": kv_rows.reshape(slots.size, Hkv, D),
        "qo_indptr": qo,
        "kv_indptr": kvp,
        "kv_indices": inv.astype(np.int64).reshape(-1),
        "sinks": None if g("sinks") is None else _floats(g("sinks"), "sinks").reshape(-1),
    }
    if inputs["sinks"] is not None and inputs["sinks"].size != H:
        raise Unrepresentable("sinks has %d entries for %d heads" % (inputs["sinks"].size, H))
    o_bits = _bits(o[:ntok], "o_extend")
    if o_bits.shape != (ntok, H, Dv):
        raise Unrepresentable("o_extend shape %s, expected %s" % (o_bits.shape, (ntok, H, Dv)))
    expected = {"o": o_bits}
    if g("lse_extend") is not None:
        lse = _floats(g("lse_extend"), "lse_extend")
        if lse.ndim not in (1, 2) or lse.shape[0] < ntok or lse[:ntok].size != ntok * H:
            raise Unrepresentable("lse_extend has shape %s, expected [%d, %d]"
                                  % (lse.shape, ntok, H))
        expected["lse"] = lse[:ntok].reshape(ntok, H)

    config = {
        "num_seqs": bs, "num_heads": H, "num_kv_heads": Hkv, "q_len": q_len,
        "head_dim": D, "v_head_dim": Dv, "sm_scale": sm,
        "k_scale": _scalar(g("k_scale"), 1.0), "v_scale": _scalar(g("v_scale"), 1.0),
        "is_causal": is_causal, "logit_cap": lc, "sliding_window": sw, "topk": 1,
    }
    prefixes = np.diff(kvp)
    summary = ("%d..%d" % (prefixes.min(), prefixes.max()) if bs > 1
               else "%d" % prefixes[0])
    raw_bytes = sum(a.nbytes for a in inputs.values() if a is not None) + o_bits.nbytes
    extra = {"pool_slots_original": np.int64(pool_total)}
    if page_size > 1:
        extra["page_size"] = np.int32(page_size)  # informational: the slots are expanded
    if fp8 is not None:
        extra["kv_source_dtype"] = fp8[1]  # what the pool was in the server
    return {"config": config, "inputs": inputs, "expected": expected,
            "kv_dtype": "bfloat16" if fp8 is None else fp8[0], "extra": extra,
            "prefix_summary": summary, "pool_slots_total": pool_total,
            "_raw_bytes": raw_bytes}


# -------------------------------------------------------------- wrap ----

def wrap(fn, kind="extend_attention_fwd", out_dir=None, sample_rate=None, layers=None,
         max_files=None, model=None, seed=None, layer_fn=None, step_fn=None, **kw):
    """Return `fn` wrapped: same signature, same result, plus capture.

    The returned function has a `.capture` attribute (the Capture state:
    `.capture.stats`, and `.capture.layer`, a layer id a monkey-patch may set
    instead of using context()). See the module docstring for settings."""
    cap = Capture(fn, kind=kind, out_dir=out_dir, sample_rate=sample_rate, layers=layers,
                  max_files=max_files, model=model, seed=seed, layer_fn=layer_fn,
                  step_fn=step_fn, **kw)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return cap(*args, **kwargs)

    wrapper.capture = cap
    return wrapper


def patch(owner, attr, **kw):
    """Replace owner.<attr> (a module, class or instance attribute) by its
    wrapped version; returns the wrapper. Undo: setattr(owner, attr,
    wrapper.__wrapped__)."""
    w = wrap(getattr(owner, attr), **kw)
    setattr(owner, attr, w)
    return w


def install_sglang(backend_cls=None, kinds=("extend_attention_fwd",), **kw):
    """Monkey-patch an SGLang Triton attention backend class:

    * each instance's `extend_attention_fwd` attribute (set in __init__) is
      wrapped, and so is any of `kinds` the instance or its module exposes;
    * forward_extend runs inside context(layer=layer.layer_id,
      enabled=forward_batch.forward_mode.is_target_verify()), so only
      target-verify calls are captured and each file knows its layer.

    backend_cls defaults to sglang's TritonAttnBackend. Every wrapped
    function has its own Capture state (and its own max_files); the returned
    list collects them as they are created. Call it in every worker process
    before the backend is created."""
    if backend_cls is None:
        from sglang.srt.layers.attention.triton_backend import TritonAttnBackend
        backend_cls = TritonAttnBackend
    import sys
    module = sys.modules.get(backend_cls.__module__)
    states = []
    orig_init = backend_cls.__init__
    orig_fe = backend_cls.forward_extend

    def _wrap_attr(owner, name):
        fn = getattr(owner, name, None)
        if fn is None or hasattr(fn, "capture"):
            return
        w = wrap(fn, kind=name if name in KINDS else "extend_attention_fwd", **kw)
        states.append(w.capture)
        setattr(owner, name, w)

    if module is not None:
        for k in kinds:
            if k != "extend_attention_fwd":
                _wrap_attr(module, k)

    @functools.wraps(orig_init)
    def __init__(self, *a, **k):
        orig_init(self, *a, **k)
        try:
            for name in kinds:
                if name in vars(self):
                    _wrap_attr(self, name)
        except Exception as e:
            warnings.warn("mla_capture: install failed: %r" % (e,), RuntimeWarning)

    @functools.wraps(orig_fe)
    def forward_extend(self, *a, **k):
        # SGLang: forward_extend(q, k, v, layer, forward_batch, save_kv_cache, ...)
        try:
            layer = k["layer"] if "layer" in k else a[3]
            batch = k["forward_batch"] if "forward_batch" in k else a[4]
            info = {"layer": int(layer.layer_id),
                    "enabled": bool(batch.forward_mode.is_target_verify())}
        except Exception:
            info = {"enabled": False}
        with context(**info):
            return orig_fe(self, *a, **k)

    backend_cls.__init__ = __init__
    backend_cls.forward_extend = forward_extend
    return states
