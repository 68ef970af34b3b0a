#!/bin/bash
# The serial cost of a block at bs 1 (issue 13's <= 10 us bar), in one
# device command from the repo root: build the 'cuda' preset, then time K3
# and DSV3 bs 1 at prefixes 64 .. 4096 (64-token pages, mla-bench graph
# medians) under auto, ws-pvg with one active split per row block, and
# ws-pvg at its planned splits. One active split gives the serial cost of a
# block on one CTA (the slope over the prefixes) and the call's fixed cost.
# Stage 2 still runs: the direct write needs the plan's grid to hold one
# split, and a bs 1 plan holds 66 or more (docs/perf/2026-12-04-bs1-budget.md).
#   OUT=DIR bash lab/bs1-budget/bs1_floor.sh
help_end=10
. "$(dirname "$0")/../common/pilot_common.sh"
cases=12,8,1,64:12,8,1,128:12,8,1,256:12,8,1,512:12,8,1,1024:12,8,1,4096:16,4,1,64:16,4,1,256:16,4,1,1024:16,4,1,4096
mkdir -p /tmp/bs1f
for r in $(seq 1 "$rounds"); do
    for v in "" "--fast-kernel ws-pvg --min-split 65536" "--fast-kernel ws-pvg"; do
        name="r${r}_${v// /_}"
        build-cuda/hip/mla-bench --cases "$cases" --no-ceilings --backends fast --kv-layout pages64 --out /tmp/bs1f $v \
            > "$OUT/bench_$name.log" 2>&1
        echo "== round $r variant '${v:-auto}'"
        grep -E '^fast' "$OUT/bench_$name.log" | sed -E 's/ +GB.*\(R/ (R/' | head -12
    done
done
(cd "$OUT" && tar -czf logs.tar.gz --remove-files $(ls *.log 2>/dev/null))
echo "total $(( $(date +%s) - t0 )) s"
