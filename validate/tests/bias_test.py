#!/usr/bin/env python3
"""Bias detection (issue 18): a systematic scale error of a few tenths of a
percent confined to one row, head or sequence must FAIL; the correctly
rounded output must PASS.

The case: K3 TP8 (12 heads, L 8, D 576/512), 4 sequences with prefixes
1000, 37, 129, 4099, slots drawn from shuffled 64-token pages, NaN in the
pool slots no sequence references. Its /expected/o is the fp64 oracle's
output rounded to bf16 (mla-validate --backend oracle --dump), judged by the
`captured` backend; scaled copies of it are judged the same way. Last, the
shipped k3-splits row (token 0, head 3), whose plain slope rests on two
outlier channels, x1.01 must FAIL (docs/accuracy.md, B7).

usage: bias_test.py MLA_VALIDATE WORK_DIR
"""
import os
import re
import shutil
import sys

# The shared helpers (validate/tests/h5test_util.py); exits 77 without h5py/numpy.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from h5test_util import np, h5py, run, to_bf16, to_f32, write_header  # noqa: E402

H, L, D, DV = 12, 8, 576, 512
PREFIXES = [1000, 37, 129, 4099]
SEED = 20261201


def write_case(path):
    rng = np.random.default_rng(SEED)
    B = len(PREFIXES)
    T = B * L
    total = sum(PREFIXES)
    pages = (total + 63) // 64 + 4  # a few pages no sequence references
    pool = pages * 64
    order = rng.permutation(pages)
    slots = np.concatenate([np.arange(p * 64, p * 64 + 64) for p in order])
    kv_indices = slots[:total].astype(np.int64)
    kv = to_bf16(rng.standard_normal((pool, 1, D)).astype(np.float32))
    unused = np.setdiff1d(np.arange(pool), kv_indices)
    kv[unused] = to_bf16(np.full((len(unused), 1, D), np.nan, np.float32))
    with h5py.File(path, "w") as f:
        write_header(f, "k3-bias4", B, H, L, D, DV, 192 ** -0.5,
                     description="K3 TP8, prefixes 1000,37,129,4099 (bias test)",
                     created_by="validate/tests/bias_test.py", seed=np.int64(SEED))
        g = f.create_group("inputs")

        def bf16(name, shape):
            d = g.create_dataset(name, data=to_bf16(rng.standard_normal(shape).astype(np.float32)))
            d.attrs["dtype"] = "bfloat16"

        bf16("q", (T, H, D))
        bf16("k_extend", (T, 1, D))
        bf16("v_extend", (T, 1, DV))
        d = g.create_dataset("kv_buffer", data=kv)
        d.attrs["dtype"] = "bfloat16"
        g.create_dataset("qo_indptr", data=np.arange(0, T + 1, L, dtype=np.int32))
        g.create_dataset("kv_indptr", data=np.concatenate([[0], np.cumsum(PREFIXES)]).astype(np.int32))
        g.create_dataset("kv_indices", data=kv_indices)


def seed_kernel_output(path, nsplit):
    """The seed kernel's arithmetic in numpy, fp32: per split of the prefix
    (nsplit contiguous chunks) and for the draft block, p = exp(s - m) with
    the chunk's max m, l = sum p in fp32, P rounded to bf16 before the PV
    product, the partial acc / l rounded to bf16, an lse merge, the output
    rounded to bf16. A correct kernel on the P-in-bf16, bf16-partials path:
    its output must PASS."""
    with h5py.File(path, "r") as f:
        g = f["inputs"]
        q = to_f32(g["q"][()])[:, :, :]
        ke = to_f32(g["k_extend"][()])[:, 0, :]
        ve = to_f32(g["v_extend"][()])[:, 0, :]
        kv = to_f32(g["kv_buffer"][()])[:, 0, :]
        kvi = g["kv_indices"][()]
        kvp = g["kv_indptr"][()]
        qop = g["qo_indptr"][()]
        sm = np.float32(f["config"].attrs["sm_scale"])
    out = np.zeros((q.shape[0], H, DV), np.float32)
    for b in range(len(PREFIXES)):
        q0, q1 = qop[b], qop[b + 1]
        qb = q[q0:q1]  # [L, H, D]
        kp = kv[kvi[kvp[b]:kvp[b + 1]]]
        chunks = [c for c in np.array_split(np.arange(kp.shape[0]), nsplit) if len(c)]
        parts = []
        for c in chunks:
            s = (np.einsum("lhd,nd->lhn", qb, kp[c][:, :D]) * sm).astype(np.float32)
            parts.append((s, kp[c][:, :DV], None))
        sd = (np.einsum("lhd,nd->lhn", qb, ke[q0:q1]) * sm).astype(np.float32)
        mask = np.tril(np.ones((L, L), bool))[:, None, :]
        parts.append((np.where(mask, sd, -np.inf).astype(np.float32), ve[q0:q1], mask))
        os_, ls_ = [], []
        for s, v, _ in parts:
            m = s.max(axis=2, keepdims=True)
            pp = np.exp(s - m).astype(np.float32)
            l = pp.sum(axis=2, dtype=np.float32)
            pb = to_f32(to_bf16(pp))
            acc = np.einsum("lhn,nc->lhc", pb, v).astype(np.float32)
            os_.append(to_f32(to_bf16(acc / l[:, :, None])))
            ls_.append(m[:, :, 0] + np.log(l))
        ls_ = np.stack(ls_)
        w = np.exp(ls_ - ls_.max(axis=0)).astype(np.float32)
        o = sum(w[k][:, :, None] * os_[k] for k in range(len(os_))) / w.sum(axis=0)[:, :, None]
        out[q0:q1] = o
    return to_bf16(out)


def main():
    validate, work = sys.argv[1:3]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    base = os.path.join(work, "k3-bias4.h5")
    write_case(base)
    good_dir = os.path.join(work, "good")
    rc, out = run(validate, "--backend", "oracle", "--dump", good_dir, base)
    if rc != 0:
        print(out)
        print("FAIL: the fp64 oracle output could not be dumped")
        return 1
    good = os.path.join(good_dir, "k3-bias4.h5")
    failures = 0
    # The captured output is judged against the fp32 reference; the oracle
    # already wrote it, so it is not run again (--oracle-max-gflop 0).
    rc, out = run(validate, "--backend", "captured", "--oracle-max-gflop", "0", good)
    ok = rc == 0 and re.search(r"^PASS", out, re.M)
    m = re.search(r"bias ([0-9.]+)", out)
    print("%s unscaled oracle output passes (exit %d, largest |s-1|/threshold %s)"
          % ("ok  " if ok else "FAIL", rc, m.group(1) if m else "?"))
    if not ok:
        print(out)
        failures += 1

    # A correct kernel with P in bf16 and bf16 partials (numpy model of the
    # seed kernel's arithmetic, several split counts: different roundings)
    # must pass the bias test whose P term (B3) it exercises.
    for nsplit in (1, 4, 16):
        dst = os.path.join(work, "seedsim-%d.h5" % nsplit)
        shutil.copy(good, dst)
        o16 = seed_kernel_output(base, nsplit)
        with h5py.File(dst, "r+") as f:
            f["expected/o"][...] = o16
        rc, out = run(validate, "--backend", "captured", "--oracle-max-gflop", "0", dst)
        ok = rc == 0 and re.search(r"^PASS", out, re.M)
        m = re.search(r"bias ([0-9.]+)", out)
        print("%s simulated seed kernel (bf16 P, bf16 partials, %d prefix splits) passes "
              "(exit %d, largest |s-1|/threshold %s)"
              % ("ok  " if ok else "FAIL", nsplit, rc, m.group(1) if m else "?"))
        if not ok:
            print(out)
            failures += 1

    # (what, scale, selection, must_fail). A single row's threshold carries,
    # on this path (P in bf16 and bf16 partials), the P-rounding term (B3)
    # from the reference's softmax weights and the bf16 partials' term
    # u_b sqrt(sum A_c^2 r^2) / sum r^2 with A_c = sum_k P_k |v_kc| from the
    # reference's statistics (validate/judge.c (B2)). With the a-priori M_c
    # (largest visible |v_c|) in its place the prefix-4099 row passed at 0.91
    # of its tau; with A_c every row below is caught.
    seq0 = [b * L for b in range(len(PREFIXES))]
    cases = []
    for b in range(len(PREFIXES)):  # one row of each sequence, draft row 3, head 5
        cases.append(("row (token %d, head 5), prefix %d, x1.01" % (seq0[b] + 3, PREFIXES[b]),
                      1.01, (slice(seq0[b] + 3, seq0[b] + 4), slice(5, 6)), True))
    for h in (0, 7, 11):
        cases.append(("head %d x1.003" % h, 1.003, (slice(None), slice(h, h + 1)), True))
    for b in range(len(PREFIXES)):
        cases.append(("sequence %d (prefix %d) x1.003" % (b, PREFIXES[b]), 1.003,
                      (slice(seq0[b], seq0[b] + L), slice(None)), True))

    print("\n| group scaled | scale | verdict | judge's reason |\n|---|---|---|---|")
    for i, (what, scale, sel, must_fail) in enumerate(cases):
        dst = os.path.join(work, "scaled-%d.h5" % i)
        shutil.copy(good, dst)
        with h5py.File(dst, "r+") as f:
            o = to_f32(f["expected/o"][()])
            o[sel] *= np.float32(scale)
            f["expected/o"][...] = to_bf16(o)
        rc, out = run(validate, "--backend", "captured", "--oracle-max-gflop", "0", dst)
        line = next((l for l in out.splitlines() if l.startswith(("FAIL", "PASS"))), "")
        caught = rc == 1 and "biased" in line
        reason = line.split("captured", 1)[-1].strip()
        verdict = "FAIL (caught)" if caught else "PASS (exit %d)%s" % (
            rc, "" if must_fail else ": below the row's threshold, reported only")
        print("| %s | %g | %s | %s |" % (what, scale, verdict, reason))
        if must_fail and not caught:
            failures += 1
    # Issue 42 (docs/accuracy.md, B7): the shipped k3-splits row (token 0,
    # head 3), prefix 129, draft row 0, rests on two outlier channels; its
    # plain slope's threshold was 1.59e-2 and a 1% scale passed. The row is
    # judged on its column-weighted slope too: x1.01 must FAIL, the unscaled
    # oracle output PASS.
    data = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "fixtures",
                        "data", "k3-splits.h5")
    sdir = os.path.join(work, "splits")
    rc, out = run(validate, "--backend", "oracle", "--dump", sdir, data)
    split = os.path.join(sdir, "k3-splits.h5")
    for scale, must_fail in ((1.0, False), (1.01, True)):
        dst = os.path.join(work, "splits-row-%g.h5" % scale)
        shutil.copy(split, dst)
        with h5py.File(dst, "r+") as f:
            o = to_f32(f["expected/o"][()])
            o[0, 3] *= np.float32(scale)
            f["expected/o"][...] = to_bf16(o)
        rc, out = run(validate, "--backend", "captured", "--oracle-max-gflop", "0", dst)
        line = next((l for l in out.splitlines() if l.startswith(("FAIL", "PASS"))), "")
        ok = (rc == 1 and "biased row (token 0, head 3)" in line) if must_fail else rc == 0
        print("%s k3-splits row (token 0, head 3) x%g: %s" % ("ok  " if ok else "FAIL", scale,
                                                            line.split("captured", 1)[-1].strip()))
        if not ok:
            print(out)
            failures += 1
    print("\nbias_test: %d failures" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
