#!/bin/bash
# The ws-pvg kernel (fast_kernel ws-pvg, the softmax in the PV warps) on the device in one
# command, from the repo root: build the 'cuda' preset, validate it
# (fixtures/data, the small and large catalogue cases, compute-sanitizer
# memcheck / racecheck / synccheck), then time it against ws on the K3 and
# DSV3 TP8 shapes, interleaved rounds, 64-token pages and random slots.
# Logs under $OUT.
#   OUT=DIR bash lab/ws-pvg-gather/pvg_ab.sh [--rounds N]
help_end=8
. "$(dirname "$0")/../common/pilot_common.sh"
pilot_validate fixtures --backend gpu:pvg --backend gpu fixtures/data
pilot_validate small --catalogue --small --backend gpu:pvg
pilot_validate large --catalogue --backend gpu:pvg k3-splits-wide k3-4k k3-16k dsv3-16k k3-bs64-4k \
    needle-k3-4k needle-dsv3-16k
pilot_sanitize --catalogue --backend gpu:pvg k3-edges dsv3-edges k3-splits ragged
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
