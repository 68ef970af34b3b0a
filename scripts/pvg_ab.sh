#!/bin/bash
# The PV-warp gather variant (fast_kernel ws-pvg) on the device in one
# command, from the repo root: build the 'cuda' preset, validate it
# (fixtures/data, the small and large catalogue cases, compute-sanitizer
# memcheck / racecheck / synccheck), then time it against ws on the K3 and
# DSV3 TP8 shapes, interleaved rounds, 64-token pages and random slots.
# Logs under $OUT.
#   OUT=DIR bash scripts/pvg_ab.sh [--rounds N]
help_end=8
. "$(dirname "$0")/pilot_common.sh"
v=build-cuda/validate/mla-validate
$v --backend gpu:pvg --backend gpu fixtures/data > "$OUT/val_fixtures.log" 2>&1
echo "fixtures rc $?"; grep -E "FAIL|ERROR|passed" "$OUT/val_fixtures.log" | tail -6
OPENBLAS_NUM_THREADS=16 $v --catalogue --small --backend gpu:pvg > "$OUT/val_small.log" 2>&1
echo "catalogue small rc $?"; grep -E "FAIL|ERROR|passed" "$OUT/val_small.log" | tail -6
OPENBLAS_NUM_THREADS=16 timeout 200 $v --catalogue --backend gpu:pvg k3-splits-wide k3-4k k3-16k dsv3-16k \
    k3-bs64-4k needle-k3-4k needle-dsv3-16k > "$OUT/val_large.log" 2>&1
echo "catalogue large rc $?"; grep -E "FAIL|ERROR|passed" "$OUT/val_large.log" | tail -6
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in memcheck racecheck synccheck; do
    $cs --tool $tool --error-exitcode 3 $v --catalogue --backend gpu:pvg k3-edges dsv3-edges k3-splits ragged \
        > "$OUT/san_$tool.log" 2>&1
    echo "$tool rc $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/san_$tool.log" | tail -1)"
done
b=build-cuda/hip/mla-bench
cases=12,8,32,16384:12,8,64,16384:12,8,8,16384:12,8,32,4096:12,8,1,4096:16,4,32,16384:16,4,64,16384:16,4,8,16384:16,4,1,4096
for r in $(seq 1 "$rounds"); do
    for lay in pages64 random; do
        for k in ws ws-pvg; do
            $b --backends fast --no-ceilings --kv-layout $lay --fast-kernel $k --cases $cases \
                --out "$OUT/bench_${k}_${lay}_r$r" > "$OUT/bench_${k}_${lay}_r$r.log" 2>&1
            grep -E "^fast" "$OUT/bench_${k}_${lay}_r$r.log" | sed "s/^/$k $lay r$r /"
        done
    done
done
echo "total $(( $(date +%s) - t0 )) s"
