#!/usr/bin/env python3
"""mla-validate's command line and its outputs (issue 14).

- --report into a directory that cannot be created fails (exit 2) and does
  not claim "report written";
- an empty directory argument is no crash (UBSan: qsort(NULL)) and, with no
  file at all, exit 2;
- --oracle-max-gflop "" is a usage error (was read as 0);
- a case_name that is not UTF-8 still gives valid JSON;
- --dump writes the reference's output even when its verdict is N/A (oracle
  skipped);
- --dump and --report create missing parent directories;
- no temporary file is left behind.

usage: cli_test.py MLA_VALIDATE DATA_DIR WORK_DIR
"""
import json
import os
import shutil
import subprocess
import sys

try:
    import h5py
    import numpy as np
except ImportError:
    print("h5py/numpy not available: skipped")
    sys.exit(77)

failures = 0


def run(*args):
    p = subprocess.run(list(args), capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def check(ok, what, out=""):
    global failures
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        print(out)
        failures += 1


def main():
    v, data, work = sys.argv[1:4]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    one = os.path.join(data, "k3-l1.h5")

    blocker = os.path.join(work, "afile")
    open(blocker, "w").close()
    rc, out = run(v, "--quiet", "--backend", "reference", "--report",
                  os.path.join(blocker, "sub"), one)
    check(rc == 2 and "report written" not in out,
          "--report under a regular file: exit %d, no 'report written'" % rc, out)

    empty = os.path.join(work, "empty")
    os.makedirs(empty)
    rc, out = run(v, "--quiet", empty)
    check(rc == 2, "an empty directory alone: exit %d (no files)" % rc, out)
    rc, out = run(v, "--quiet", "--backend", "reference", empty, one)
    check(rc == 0, "an empty directory beside a file: exit %d" % rc, out)

    rc, out = run(v, "--oracle-max-gflop", "", one)
    check(rc == 2, "--oracle-max-gflop '': usage error, exit %d" % rc, out)
    rc, out = run(v, "--oracle-max-gflop", "1x", one)
    check(rc == 2, "--oracle-max-gflop 1x: usage error, exit %d" % rc, out)
    rc, out = run(v, "--seed", "12", one)
    check(rc == 2, "--seed without --catalogue: usage error, exit %d" % rc, out)
    rc, out = run(v, "--catalogue", "no-such-case")
    check(rc == 2, "--catalogue with an unknown case: usage error, exit %d" % rc, out)

    bad = os.path.join(work, "nonutf8.h5")
    shutil.copy(one, bad)
    with h5py.File(bad, "r+") as f:
        del f.attrs["case_name"]
        f.attrs["case_name"] = np.bytes_(b"k3\xff\xfe-\xc3(\"quote\x01")
    jpath = os.path.join(work, "deep", "er", "r.json")
    rc, out = run(v, "--quiet", "--backend", "reference", "--json", jpath, bad)
    try:
        with open(jpath, encoding="utf-8") as f:
            doc = json.load(f)
        ok = rc == 0 and doc["results"][0]["case"].startswith("k3")
    except Exception as e:  # noqa: BLE001 - any failure to parse is the failure
        ok, out = False, out + "\n%r" % e
    check(ok, "non-UTF-8 case_name: valid UTF-8 JSON, parents created (exit %d)" % rc, out)

    dump = os.path.join(work, "d1", "d2")
    rc, out = run(v, "--quiet", "--backend", "reference", "--oracle-max-gflop", "0",
                  "--dump", dump, one)
    dumped = os.path.join(dump, "k3-l1.h5")
    # nothing judged (the only result N/A): exit 3 (issue 40), the dump written all the same
    ok = rc == 3 and "N/A" in out and os.path.exists(dumped)
    if ok:
        with h5py.File(dumped) as f:
            ok = "expected/o" in f and "backend=reference" in str(f["expected"].attrs["producer"])
    check(ok, "--dump writes the reference output when its verdict is N/A (exit %d)" % rc, out)

    rep = os.path.join(work, "r1", "r2")
    rc, out = run(v, "--backend", "reference", "--report", rep, one)
    ok = rc == 0 and all(os.path.exists(os.path.join(rep, "report." + x))
                         for x in ("md", "json", "html"))
    check(ok, "--report creates missing parents (exit %d)" % rc, out)
    leftovers = [os.path.join(d, n) for d, _, ns in os.walk(work) for n in ns if ".tmp." in n]
    check(not leftovers, "no temporary files left: %s" % leftovers)

    rc, out = run(v, "--help")
    check(rc == 0 and "--catalogue" in out, "--help exits 0 and documents --catalogue")
    print("cli: %d failures" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
