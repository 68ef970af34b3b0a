#!/usr/bin/env python3
"""Top SASS lines by warp-stall samples from `ncu --page source --csv
--print-source sass` output (stdin), with the stall-reason columns that are
non-zero. Usage: ncu ... | python3 lab/common/ncu_top.py [N]"""
import csv, sys

if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help"):
    print(__doc__)
    sys.exit(0)
if len(sys.argv) > 1 and not sys.argv[1].isdigit():
    sys.exit("usage: ncu ... --page source --csv --print-source sass | ncu_top.py [N]")
n = int(sys.argv[1]) if len(sys.argv) > 1 else 40
rows = [r for r in csv.reader(sys.stdin) if r]
hdr = None
for i, r in enumerate(rows):
    if "Source" in r and any("Sampling" in c for c in r):
        hdr, body = r, rows[i + 1:]
        break
if hdr is None:
    sys.exit("no source table found")
samp = next(j for j, c in enumerate(hdr) if c.startswith("Warp Stall Sampling (All"))
src = hdr.index("Source")
addr = hdr.index("Address") if "Address" in hdr else 0
stall_cols = [j for j, c in enumerate(hdr) if c.startswith("stall_") or "Stall" in c and j != samp]
def num(x):
    try:
        return float(x.replace(",", ""))
    except ValueError:
        return 0.0
body = [r for r in body if len(r) == len(hdr)]
tot = sum(num(r[samp]) for r in body)
print(f"total samples {tot:.0f}")
for r in sorted(body, key=lambda r: -num(r[samp]))[:n]:
    extra = " ".join(f"{hdr[j]}={r[j]}" for j in stall_cols if num(r[j]) > 0.05 * num(r[samp]) and num(r[j]) > 0)[:160]
    print(f"{num(r[samp]):6.0f} {100*num(r[samp])/max(tot,1):5.1f}% {r[addr]:>6} {r[src][:70]:70} {extra}")
