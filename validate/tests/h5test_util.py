"""What the validate/ h5py tests share: bf16 <-> fp32 on uint16 arrays, a
fixture file's header and config group, and running mla-validate.

Import it from a test script's own directory:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from h5test_util import h5py, np, ...
Without h5py/numpy the import exits 77 (ctest's skip code for these tests).
"""
import subprocess
import sys

try:
    import h5py
    import numpy as np
except ImportError:
    print("h5py/numpy not available: skipped")
    sys.exit(77)


def to_f32(b):
    return (b.astype(np.uint32) << 16).view(np.float32)


def to_bf16(f):
    f = np.ascontiguousarray(f, dtype=np.float32)
    u = f.view(np.uint32).astype(np.uint64)
    nan = np.isnan(f)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    r[nan] = ((u[nan] >> 16) | 0x40).astype(np.uint16)
    return r


def run(validate, *args):
    p = subprocess.run([validate, "--quiet", *args], capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def write_header(f, case_name, B, H, L, D, DV, sm_scale, **attrs):
    """Root attributes (schema, case_name, source synthetic, then `attrs` in
    order) and the /config group of a causal one-KV-head MLA case."""
    f.attrs["schema"] = "mla-verify-fixture"
    f.attrs["schema_version"] = "1.0.0"
    f.attrs["case_name"] = case_name
    f.attrs["source"] = "synthetic"
    for k, v in attrs.items():
        f.attrs[k] = v
    c = f.create_group("config")
    for k, v in dict(num_seqs=B, num_heads=H, num_kv_heads=1, q_len=L, head_dim=D,
                     v_head_dim=DV, is_causal=1, sliding_window=-1, topk=1).items():
        c.attrs[k] = np.int32(v)
    for k, v in dict(sm_scale=sm_scale, k_scale=1.0, v_scale=1.0, logit_cap=0.0).items():
        c.attrs[k] = np.float32(v)
