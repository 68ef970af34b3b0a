#!/bin/bash
# Prebuilt mla-bench variants timed side by side (interleaved rounds, CUDA
# graph medians): the uniform shapes where the balanced-partition build lost
# to db06158, and two ragged lists.
#   OUT=DIR BINS="A=path B=path ..." [ROUNDS=2] [FP8=cases] bash lab/uniform-gap/ab.sh
set -u
: "${OUT:?set OUT}" "${BINS:?set BINS}"
cases=${CASES:-12,8,1,1024:12,8,8,16384:12,8,64,4096:16,4,32,16384:12,8,32,16384}
mkdir -p "$OUT/ab"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader
for r in $(seq 1 "${ROUNDS:-2}"); do
    for kv in $BINS; do
        tag=${kv%%=*} bin=${kv#*=}
        "$bin" --cases "$cases" --no-ceilings --backends fast --out "$OUT/ab/$tag-u$r" > "$OUT/ab/$tag-u$r.log" 2>&1
        [ -n "${FP8:-}" ] && "$bin" --cases "$FP8" --kv fp8_e4m3fn --no-ceilings --backends fast \
            --out "$OUT/ab/$tag-f$r" > "$OUT/ab/$tag-f$r.log" 2>&1
        "$bin" --lens 65536,1024x31 --lens 131072,4096x63 --only 12,8 --no-ceilings --backends fast \
            --out "$OUT/ab/$tag-r$r" > "$OUT/ab/$tag-r$r.log" 2>&1
    done
done
python3 - "$OUT/ab" $BINS <<'PY'
import sys, re, glob, statistics, collections
d = sys.argv[1]; tags = [b.split("=")[0] for b in sys.argv[2:]]
t = collections.defaultdict(list)
for tag in tags:
    for f in glob.glob("%s/%s-*.log" % (d, tag)):
        for line in open(f):
            m = re.match(r"fast\s+(.*?):\s+([\d.]+) us", line)
            if m:
                kv = " fp8" if re.search(r"-f\d+\.log$", f) else ""
                t[(re.sub(r"\s+", " ", m.group(1)) + kv, tag)].append(float(m.group(2)))
keys = sorted({k for k, _ in t}, key=str)
print("%-52s" % "case" + "".join("%10s" % x for x in tags))
for k in keys:
    print("%-52s" % k[:52] + "".join("%10s" % ("%.1f" % statistics.median(t[(k, x)]) if t[(k, x)] else "-") for x in tags))
PY
