#!/bin/bash
# Where a bs 1 call's time goes (issue 13's <= 10 us bar), in one device
# command from the repo root: build the 'cuda' preset; time the fast tier at
# K3 and DSV3 bs 1 / 1k and 4k (64-token pages, mla-bench graph medians)
# under each smallest split and stage-1 kernel (the 96-row and mma
# variants it also timed were deleted: tag kernels-before-house2); ncu durations
# of stage 1 and stage 2 of one call; the SASS stall profiles of stage 1 at
# K3 bs 1 / 1k and of stage 2 at K3 bs 1 / 4k. Logs under $OUT.
#   OUT=DIR bash lab/bs1-knobs/bs1_probe.sh
help_end=9
. "$(dirname "$0")/../common/pilot_common.sh"
cases=12,8,1,1024:12,8,1,4096:16,4,1,1024:16,4,1,4096
bench() { build-cuda/hip/mla-bench --cases "$cases" --no-ceilings --backends fast --kv-layout pages64 --out /tmp/bs1 "$@"; }
mkdir -p /tmp/bs1
for v in "" "--min-split 32" "--min-split 128" "--min-split 256" "--fast-kernel ws-pvg"; do
    echo "== variant '${v:-default}'"
    bench $v > "$OUT/bench_${v// /_}.log" 2>&1
    grep -E 'fast' "$OUT/bench_${v// /_}.log" | head -8
done
ncu0=(ncu --clock-control none --cache-control none)
for c in 12,8,1,1024 12,8,1,4096 16,4,1,1024 16,4,1,4096; do
    "${ncu0[@]}" -k regex:"stage1|stage2" -s 20 -c 4 --section SpeedOfLight --section LaunchStats --page details \
        build-cuda/hip/mla-bench --only $c --no-ceilings --backends fast --kv-layout pages64 --out /tmp/bs1 \
        > "$OUT/ncu_${c//,/_}.txt" 2>&1
    echo "== ncu $c"
    grep -E "stage1_|stage2_|Duration|Grid Size|Block Size" "$OUT/ncu_${c//,/_}.txt" | cut -c1-110 | head -16
done
pilot_ncu_top bs1 stage1 50 --only 12,8,1,1024 --no-ceilings --backends fast --kv-layout pages64 --out /tmp/bs1
head -60 "$OUT/ncu_top_bs1.txt"
# Stage 2's stall profile where it is longest (K3 bs 1 / 4k: the most
# active splits per row).
pilot_ncu_top bs1s2 stage2 50 --only 12,8,1,4096 --no-ceilings --backends fast --kv-layout pages64 --out /tmp/bs1
head -60 "$OUT/ncu_top_bs1s2.txt"
# One archive: the device returns at most 8 files.
(cd "$OUT" && tar -czf logs.tar.gz --remove-files $(ls *.log *.txt *.csv.gz 2>/dev/null))
echo "total $(( $(date +%s) - t0 )) s"
