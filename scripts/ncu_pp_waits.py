#!/usr/bin/env python3
"""Stall samples of ws-pp's stage 1 (stage1_pp_kernel) by what they wait on,
from `ncu --section SourceCounters --page source --csv --print-source sass`
output (a file, gzipped or not; several files side by side).

Each mbarrier wait is a SYNCS.PHASECHK try-wait whose retry branch lands on
a stub holding the barrier's shared-memory offset; the offset names the
barrier through the layout of stage1_pp.h (FULL_L/R, EMPTY_L/R, Q, SC0,
SC1, P0R, P1R, ATOM[2][9], 8 bytes apart). A wait addressed through a
register base (FULL / EMPTY indexed by buffer) is reported as 'reg NAME'
with the buffer-0 name; in the ping-pong kernel those are the gather
warpgroup's EMPTY waits (its idle time). HGMMA and WARPGROUP.DEPBAR lines
count as 'wgmma', the rest as 'other'. Why a script: the perf log's wait
figures must be reproducible from the committed ncu CSVs.
  python3 scripts/ncu_pp_waits.py SRC.csv[.gz] [SRC2.csv[.gz] ...]"""
import csv, gzip, re, sys
from collections import defaultdict

if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
    print(__doc__)
    sys.exit(0 if len(sys.argv) > 1 else 2)

NAMES = {0x40: "Q", 0x48: "SC0", 0x50: "SC1", 0x58: "P0R", 0x60: "P1R"}
for i, name in enumerate(("FULL_L", "FULL_R", "EMPTY_L", "EMPTY_R")):
    for b in range(2):
        NAMES[16 * i + 8 * b] = "%s[%d]" % (name, b)
for a in range(18):
    NAMES[0x68 + 8 * a] = "ATOM[%d][%d]" % (a // 9, a % 9)
WAIT = re.compile(r"TRYWAIT P\d+, \[(R\d+)?\+?(?:URZ|UR\d+)?\+?(0x[0-9a-f]+)?\]")


def group(key):
    if key.startswith("reg EMPTY"):
        return "gather idle (EMPTY, register-indexed)"
    if "EMPTY" in key:
        return "EMPTY waits (fixed index)"
    if "ATOM" in key or "FULL" in key:
        return "load waits (ATOM / FULL)"
    if any(x in key for x in ("SC0", "SC1", "P0R", "P1R")):
        return "softmax hand-over (SC / PR)"
    return key


def profile(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", newline="") as f:
        rows = [r for r in csv.reader(f) if r]
    try:
        h = next(i for i, r in enumerate(rows) if r[0] == "Address")
    except StopIteration:
        sys.exit(f"{path}: no SASS source table (ncu --page source --csv --print-source sass)")
    hdr = rows[h]
    body = [r for r in rows[h + 1:] if len(r) == len(hdr)]
    col_a, col_s = hdr.index("Address"), hdr.index("Source")
    col_n = next(j for j, c in enumerate(hdr) if c.startswith("Warp Stall Sampling (All"))
    num = lambda x: float(x.replace(",", "") or 0)
    at = {r[col_a]: k for k, r in enumerate(body)}
    out = defaultdict(float)
    for r in body:
        s, n = r[col_s], num(r[col_n])
        if not n:
            continue
        key = None
        if "BRA" in s and "@" in s:
            j = at.get("0x" + s.split("0x")[-1].strip())
            for q in range(3 if j is not None else 0):
                if j + q < len(body):
                    m = WAIT.search(body[j + q][col_s])
                    if m:
                        off = int(m.group(2) or "0", 16)
                        key = ("reg " if m.group(1) else "") + NAMES.get(off, hex(off))
                        break
        elif "SYNCS.PHASECHK" in s:
            m = WAIT.search(s)
            if m:
                key = NAMES.get(int(m.group(2) or "0", 16), "?")
        if key is None:
            key = "wgmma" if ("HGMMA" in s or "WARPGROUP.DEPBAR" in s) else "other"
        out[group(key)] += n
    return out


profs = [profile(p) for p in sys.argv[1:]]
keys = sorted(set().union(*profs), key=lambda k: -profs[0].get(k, 0))
print("%-40s" % "samples" + "".join("%22s" % p.split("/")[-1][:21] for p in sys.argv[1:]))
for k in keys + ["total"]:
    vals = [sum(p.values()) if k == "total" else p.get(k, 0) for p in profs]
    tots = [sum(p.values()) for p in profs]
    print("%-40s" % k + "".join("%12.0f (%5.1f%%)" % (v, 100 * v / max(t, 1)) for v, t in zip(vals, tots)))
