#!/usr/bin/env python3
"""Replay every shipped trace capture (fixtures/data/trace/manifest.json)
with `mla-validate --backend captured` and hold each to its recorded verdict:
expect "pass" must PASS (exit 0), expect "fail" must FAIL (exit 1, a known-bad
production output: the reason is in the manifest and in reports/). An
optional "fail_match" (a substring) must appear in the FAIL output, so a
known-bad file cannot start failing for a different reason unnoticed. Every
*.h5 in the manifest's directory must be listed, and every listed file must
exist.

usage: trace_replay_test.py MLA_VALIDATE MANIFEST_JSON
Exit 0 pass, 1 fail, 77 skipped (no manifest).
"""
import json
import os
import subprocess
import sys


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    validate, manifest = sys.argv[1], sys.argv[2]
    if not os.path.exists(manifest):
        print("skipped: no %s" % manifest)
        return 77
    with open(manifest) as f:
        m = json.load(f)
    root = os.path.dirname(os.path.abspath(manifest))
    entries = m.get("files", [])
    failures = []
    passed = 0
    listed = set()
    for e in entries:
        name, expect = e["file"], e["expect"]
        listed.add(name)
        path = os.path.join(root, name)
        if expect not in ("pass", "fail"):
            failures.append("%s: expect %r is neither pass nor fail" % (name, expect))
            continue
        if not os.path.exists(path):
            failures.append("%s: listed but missing" % name)
            continue
        r = subprocess.run([validate, "--backend", "captured", "--quiet", path],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           universal_newlines=True)
        out = r.stdout
        verdicts = [ln.split()[0] for ln in out.splitlines()
                    if ln.split() and ln.split()[0] in ("PASS", "FAIL", "ERROR", "N/A",
                                                         "DECLINED")]
        if expect == "pass":
            ok = r.returncode == 0 and verdicts == ["PASS"]
        else:
            ok = r.returncode == 1 and verdicts == ["FAIL"] and \
                e.get("fail_match", "") in out
        print("%-4s %-48s expect %-4s exit %d %s" % ("ok" if ok else "BAD", name, expect,
                                                    r.returncode, ",".join(verdicts)))
        passed += ok
        if not ok:
            failures.append("%s: expected %s%s, got exit %d:\n%s" % (
                name, expect.upper(),
                " matching %r" % e["fail_match"] if expect == "fail" and e.get("fail_match")
                else "", r.returncode, out[-1500:]))
    unlisted = sorted(f for f in os.listdir(root) if f.endswith(".h5") and f not in listed)
    for f in unlisted:
        failures.append("%s: in %s but not in the manifest" % (f, root))
    for f in failures:
        print("FAIL " + f)
    n_fail = sum(e["expect"] == "fail" for e in entries)
    print("%d files: %d expected to pass, %d known-bad" % (len(entries), len(entries) - n_fail,
                                                          n_fail))
    print("trace-replay: %d passed, %d failed" % (passed, len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
