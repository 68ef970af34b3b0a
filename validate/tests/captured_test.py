#!/usr/bin/env python3
"""The `captured` backend judges a file's /expected/o like any other backend.

A file whose /expected/o is the correctly rounded reference output must
pass; copies with one row off by 3%, a single NaN, one head zeroed, or 2%
multiplicative noise must each fail (exit 1).

usage: captured_test.py MLA_VALIDATE DATA_DIR WORK_DIR
"""
import os
import shutil
import sys

# The shared helpers (validate/tests/h5test_util.py); exits 77 without h5py/numpy.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from h5test_util import np, h5py, run, to_bf16, to_f32  # noqa: E402

CASES = ["k3-splits.h5", "k3-edges.h5", "dsv3-edges.h5"]


def main():
    validate, data, work = sys.argv[1:4]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    good = os.path.join(work, "good")
    rc, out = run(validate, "--backend", "reference", "--dump", good,
                  *[os.path.join(data, c) for c in CASES])
    if rc != 0:
        print(out)
        print("FAIL: dumping the reference output failed")
        return 1
    failures = 0
    rc, out = run(validate, "--backend", "captured", good)
    ok = rc == 0 and "0 failed" in out
    print(("ok  " if ok else "FAIL") + " correctly rounded output passes (exit %d)" % rc)
    if not ok:
        print(out)
        failures += 1

    rng = np.random.default_rng(20261129)

    def row_off(o):
        t, h = rng.integers(o.shape[0]), rng.integers(o.shape[1])
        o[t, h, :] *= 1.03
        return "row (%d,%d) x1.03" % (t, h)

    def one_nan(o):
        t, h, c = (rng.integers(s) for s in o.shape)
        o[t, h, c] = np.nan
        return "NaN at (%d,%d,%d)" % (t, h, c)

    def head_zero(o):
        h = rng.integers(o.shape[1])
        o[:, h, :] = 0
        return "head %d zeroed" % h

    def noise(o):
        o *= 1 + 0.02 * rng.standard_normal(o.shape).astype(np.float32)
        return "2% noise"

    for name, fn in [("row3pct", row_off), ("nan", one_nan), ("headzero", head_zero),
                     ("noise2pct", noise)]:
        for case in CASES:
            d = os.path.join(work, name)
            os.makedirs(d, exist_ok=True)
            dst = os.path.join(d, case)
            shutil.copy(os.path.join(good, case), dst)
            with h5py.File(dst, "r+") as f:
                o = to_f32(f["expected/o"][()])
                what = fn(o)
                f["expected/o"][...] = to_bf16(o)
            rc, out = run(validate, "--backend", "captured", dst)
            ok = rc == 1
            print(("ok  " if ok else "FAIL") + " %-10s %-14s %-22s caught=%s (exit %d)"
                  % (name, case, what, ok, rc))
            if not ok:
                print(out)
                failures += 1
    print("captured: %d failures" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
