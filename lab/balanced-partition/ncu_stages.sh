#!/bin/bash
# Stage-1 and stage-2 durations (ncu gpu__time_duration) of the fast tier,
# this tree's mla-bench against the before build, at a few K3 / DSV3 shapes:
# where a change's time goes, kernel by kernel.
#   OUT=DIR bash lab/balanced-partition/ncu_stages.sh [H,L,bs,P ...]
set -u
: "${OUT:?set OUT}"
cases=("$@")
[ ${#cases[@]} -gt 0 ] || cases=(12,8,1,1024 12,8,8,16384 12,8,32,1024 16,4,32,16384)
mkdir -p "$OUT/ncu"
for bin in build-cuda/hip/mla-bench .tools/before/mla-bench; do
    [ -x "$bin" ] || continue
    tag=$(basename "$(dirname "$(dirname "$bin")")")
    for c in "${cases[@]}"; do
        ncu --csv --kernel-name regex:'stage' --launch-skip 40 --launch-count 6 \
            --metrics gpu__time_duration.sum,launch__grid_size "$bin" --only "$c" --no-ceilings \
            --backends fast --out "$OUT/ncu/tmp" > "$OUT/ncu/$tag-$c.csv" 2> /dev/null
        python3 - "$OUT/ncu/$tag-$c.csv" "$tag" "$c" <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
if not rows:
    print(sys.argv[2], sys.argv[3], "no ncu rows"); sys.exit()
h = rows[0]; k = h.index("Kernel Name"); m = h.index("Metric Name"); v = h.index("Metric Value")
d = collections.defaultdict(list)
for r in rows[1:]:
    d[(r[k].split("(")[0].split("<")[0], r[m])].append(float(r[v].replace(",", "")))
out = []
for (name, met), vals in sorted(d.items()):
    vals.sort()
    out.append("%s %s %.2f" % (name.split("::")[-1], met.split("__")[-1], vals[len(vals) // 2] / (1000.0 if "duration" in met else 1)))
print("%-8s %-14s %s" % (sys.argv[2], sys.argv[3], " | ".join(out)))
PY
    done
done
