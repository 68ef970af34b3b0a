#!/bin/bash
# Where the fixed cost of a short-split call goes, in one device command from
# the repo root: build the 'cuda' preset, then ncu (durations of every kernel
# of one call, stage 1 and stage 2) at K3 bs 8 / 16k and bs 32 / 16k with
# 64-token pages, and the SASS stall profiles of stage 1 and stage 2 at
# bs 8 / 16k.
# Logs under $OUT.
#   OUT=DIR bash lab/ncu-overhead/ncu_overhead.sh
help_end=8
. "$(dirname "$0")/../common/pilot_common.sh"
mkdir -p /tmp/ncu_o
# bench CASE: mla-bench's arguments for one fast-tier call at CASE (H,L,bs,prefix).
bench() { echo --only "$1" --no-ceilings --backends fast --kv-layout pages64 --out /tmp/ncu_o; }
ncu0=(ncu --clock-control none --cache-control none)
for c in 12,8,8,16384 12,8,32,16384; do
    # -s skips the warm-up calls; -c: stage 1 and stage 2 of a few calls.
    "${ncu0[@]}" -k regex:"stage1|stage2" -s 20 -c 6 --section SpeedOfLight --page details \
        build-cuda/hip/mla-bench $(bench $c) \
        > "$OUT/ncu_${c//,/_}.txt" 2>&1
    echo "== $c"
    grep -E "stage1_|stage2_|Duration" "$OUT/ncu_${c//,/_}.txt" | cut -c1-110 | head -24
done
pilot_ncu_top bs8 stage1_ws 40 $(bench 12,8,8,16384)
"${ncu0[@]}" -k regex:stage2 -s 6 -c 1 --section LaunchStats --section Occupancy --section WarpStateStats \
    --section SchedulerStats --section MemoryWorkloadAnalysis --page details build-cuda/hip/mla-bench $(bench 12,8,8,16384) \
    > "$OUT/ncu_s2_details.txt" 2>&1
grep -E "Waves|Achieved|Theoretical Occ|Block Limit|Warp Cycles Per Issued|Registers Per|Duration|No Eligible|Active Warps" \
    "$OUT/ncu_s2_details.txt" | head -30
pilot_ncu_top s2 stage2 40 $(bench 12,8,8,16384)
echo "total $(( $(date +%s) - t0 )) s"
