#!/bin/bash
# Where the uniform batches' 10-29% against db06158 goes (issue 43's "no
# uniform case slower" bar): both prebuilt mla-bench binaries (this tree's
# and .tools/before's, carried), timed interleaved, then ncu on each: stage
# durations, grid, warp-state stalls, and the SASS source page of stage 1
# with stall samples (to diff the two kernels' hot spots off the device).
#   OUT=DIR NEW=path/to/mla-bench bash lab/uniform-gap/probe.sh
set -u
: "${OUT:?set OUT}" "${NEW:?set NEW}"
OLD=${OLD:-.tools/before/mla-bench}
cases=${CASES:-12,8,1,1024:12,8,8,16384:12,8,64,4096:16,4,32,16384}
mkdir -p "$OUT/t" "$OUT/ncu"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
for r in $(seq 1 "${ROUNDS:-2}"); do
    for tag in new old; do
        bin=$NEW; [ $tag = old ] && bin=$OLD
        "$bin" --cases "$cases" --no-ceilings --backends fast --out "$OUT/t/$tag-$r" > "$OUT/t/$tag-$r.log" 2>&1
        echo "== $tag round $r rc $?"; grep -E ' us ' "$OUT/t/$tag-$r.log" | cut -c1-90
    done
done
IFS=: read -r -a cl <<< "${NCU_CASES:-12,8,8,16384:12,8,1,1024}"
for c in "${cl[@]}"; do
    for tag in new old; do
        bin=$NEW; [ $tag = old ] && bin=$OLD
        f="$OUT/ncu/$tag-${c//,/_}"
        ncu --kernel-name regex:'stage' --launch-skip 40 --launch-count 2 \
            --section SpeedOfLight --section LaunchStats --section WarpStateStats --section SourceCounters \
            --import-source no -o "$f" -f "$bin" --only "$c" --no-ceilings --backends fast --out "$OUT/ncu/tmp" > "$f.log" 2>&1
        ncu --import "$f.ncu-rep" --csv --page details > "$f.details.csv" 2>/dev/null
        ncu --import "$f.ncu-rep" --csv --page source --print-source sass --kernel-name regex:stage1 > "$f.sass.csv" 2>/dev/null
        rm -f "$f.ncu-rep"
        python3 - "$f.details.csv" "$tag $c" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
if len(rows) < 2: print(sys.argv[2], "no rows"); sys.exit()
h = rows[0]; k = h.index("Kernel Name"); m = h.index("Metric Name"); v = h.index("Metric Value"); u = h.index("Metric Unit")
want = ("Duration", "Grid Size", "Registers Per Thread", "Executed Instructions", "Warp Cycles Per Issued Instruction", "Compute (SM) Throughput", "Memory Throughput")
for r in rows[1:]:
    if r[m] in want:
        print("%-22s %-28s %-36s %s %s" % (sys.argv[2], r[k].split("(")[0][-28:], r[m], r[v], r[u]))
PY
    done
done
