"""ctypes binding of libmla_verify.so (python/pyapi.c): the project's judge,
fp32 reference, catalogue and guarded fixture reader, in this process.

Loaded on first use, so `mla_verify.capture` works where only the Python
files are present (the capture tests run from the source tree)."""
import ctypes
import os
import threading

ABI = 2  # MLA_PY_ABI in python/pyapi.c
LIB_NAME = "libmla_verify.so"

# mla_status (include/mla/common.h)
OK, ERR_INVALID, ERR_IO, ERR_NOMEM = 0, 1, 2, 3
# mla_verdict (include/mla/validate.h)
VERDICTS = {0: "PASS", 1: "FAIL", 2: "DECLINED", 3: "N/A", 4: "ERROR"}
# mla_kv_dtype (include/mla/common.h)
KV_DTYPES = {"bfloat16": 0, "float8_e4m3fn": 1, "float8_e4m3fnuz": 2}
KV_DTYPE_NAMES = {v: k for k, v in KV_DTYPES.items()}

_c = ctypes
_p = ctypes.c_void_p


class CConfig(ctypes.Structure):
    """mla_config (include/mla/fixture.h)."""
    _fields_ = [(n, _c.c_int32) for n in ("num_seqs", "num_heads", "num_kv_heads", "q_len",
                                          "head_dim", "v_head_dim")] + [
        ("sm_scale", _c.c_float), ("k_scale", _c.c_float), ("v_scale", _c.c_float),
        ("is_causal", _c.c_int32), ("logit_cap", _c.c_float),
        ("sliding_window", _c.c_int32), ("topk", _c.c_int32)]


class CCase(ctypes.Structure):
    """mla_py_case."""
    _fields_ = [("cfg", CConfig), ("kv_dtype", _c.c_int32),
        ("has_seed", _c.c_int32), ("seed", _c.c_int64),
        ("num_q_tokens", _c.c_int64), ("pool_slots", _c.c_int64),
        ("num_kv_indices", _c.c_int64),
        ("q", _p), ("k_extend", _p), ("v_extend", _p), ("kv", _p),
        ("qo_indptr", _p), ("kv_indptr", _p), ("kv_indices", _p), ("sinks", _p),
        ("expected_o", _p), ("expected_lse", _p),
        ("case_name", _c.c_char_p), ("source", _c.c_char_p), ("model", _c.c_char_p),
        ("description", _c.c_char_p), ("expected_producer", _c.c_char_p),
    ]


_RESULT_DOUBLES = ("cos_diff", "worst_row_cos", "worst_row_rel", "max_abs", "worst_ratio",
                   "nmse", "within_1ulp", "lse_max_abs", "lse_ratio", "bias_ratio",
                   "bias_slope", "bias_threshold", "cos_limit", "row_cos_limit", "rel_tol")
_RESULT_INTS = ("first_bad", "n_over", "n_rows_over", "n_elems", "n_compared", "n_nan",
                "n_unwritten", "n_ref_nonfinite", "n_bias_groups", "n_bias_over")


class CResult(ctypes.Structure):
    """mla_py_result."""
    _fields_ = [("verdict", _c.c_int32), ("path", _c.c_int32),
                ("reason", _c.c_char * 512), ("path_name", _c.c_char * 64),
                ("bias_group", _c.c_char * 64)] + \
        [(n, _c.c_double) for n in _RESULT_DOUBLES] + \
        [(n, _c.c_int64) for n in _RESULT_INTS] + [("seconds", _c.c_double)]


_lib = None
_lock = threading.Lock()


def _find():
    here = os.path.dirname(os.path.abspath(__file__))
    env = os.environ.get("MLA_VERIFY_LIB")
    for cand in ([env] if env else []) + [os.path.join(here, LIB_NAME)]:
        if cand and os.path.exists(cand):
            return cand
    raise ImportError(
        "mla_verify: %s not found next to %s (install the package with "
        "`python3 -m pip install .` from the repository root, or set MLA_VERIFY_LIB)"
        % (LIB_NAME, here))


def lib():
    """The loaded library (loaded once, thread-safe)."""
    global _lib
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is not None:
            return _lib
        L = ctypes.CDLL(_find())
        L.mla_py_sizeof.restype = _c.c_size_t
        L.mla_py_sizeof.argtypes = (_c.c_int,)
        sizes = [L.mla_py_sizeof(i) for i in range(3)]
        want = [ctypes.sizeof(t) for t in (CCase, CConfig, CResult)]
        if L.mla_py_abi() != ABI or sizes != want:
            raise ImportError("mla_verify: %s has ABI %d and struct sizes %s, this package "
                              "needs %d and %s (reinstall)"
                              % (LIB_NAME, L.mla_py_abi(), sizes, ABI, want))
        msg = (_c.c_char_p, _c.c_size_t)
        for name, res, args in [
            ("mla_py_path_count", _c.c_int, ()),
            ("mla_py_path_name", _c.c_char_p, (_c.c_int,)),
            ("mla_py_path_description", _c.c_char_p, (_c.c_int,)),
            ("mla_py_check", _c.c_int, (_c.POINTER(CCase),) + msg),
            ("mla_py_reference", _c.c_int, (_c.POINTER(CCase), _p, _p) + msg),
            ("mla_py_judge", _c.c_int, (_c.POINTER(CCase), _c.c_char_p, _p, _c.c_int, _p,
                                        _c.POINTER(CResult)) + msg),
            ("mla_py_catalogue_count", _c.c_size_t, ()),
            ("mla_py_catalogue_info", _c.c_int,
             (_c.c_size_t, _c.POINTER(_c.c_char_p), _c.POINTER(_c.c_char_p),
              _c.POINTER(_c.c_char_p), _c.POINTER(_c.c_int))),
            ("mla_py_catalogue_default_seed", _c.c_uint64, (_c.c_char_p,)),
            ("mla_py_catalogue_generate", _p,
             (_c.c_char_p, _c.c_uint64, _c.POINTER(CCase)) + msg),
            ("mla_py_fixture_read", _p, (_c.c_char_p, _c.c_uint64, _c.POINTER(CCase)) + msg),
            ("mla_py_fixture_free", None, (_p,)),
        ]:
            f = getattr(L, name)
            f.restype = res
            f.argtypes = args
        _lib = L
        return L


def msgbuf():
    return ctypes.create_string_buffer(1024)


def text(b):
    return b.decode("utf-8", "replace") if isinstance(b, bytes) else (b.value.decode(
        "utf-8", "replace") if b is not None else "")
