#!/bin/bash
# fp8 pools on the device in one command (issue 16), from the repo root:
# build the 'cuda' preset, the decode test over every code, the GPU tiers on
# the shipped and catalogue fp8 cases, compute-sanitizer on the small fp8
# cases, and a same-run bf16 / fp8 timing of the K3 and DSV3 TP8 shapes
# (interleaved rounds). Logs under $OUT.
#   OUT=DIR bash lab/fp8-pools/fp8_pilot.sh [--rounds N]
help_end=7
. "$(dirname "$0")/../common/pilot_common.sh"
build-cuda/hip/test_gpu_fp8; echo "fp8 decode rc $?"
pilot_validate fixtures --backend gpu --backend gpu-baseline --backend gpu-fallback \
    fixtures/data/k3-fp8-e4m3fn.h5 fixtures/data/k3-fp8-e4m3fnuz.h5
pilot_validate catalogue --catalogue --backend gpu --backend gpu-baseline --backend gpu-fallback \
    k3-fp8-e4m3fn-4k dsv3-fp8-e4m3fnuz-16k k3-edges dsv3-edges
pilot_sanitize --catalogue --backend gpu --backend gpu-baseline --backend gpu-fallback k3-fp8-e4m3fn \
    k3-fp8-e4m3fnuz
b=build-cuda/hip/mla-bench
for r in $(seq 1 "$rounds"); do
    for kv in bf16 fp8_e4m3fn; do
        $b --backends fast --no-ceilings --kv $kv --cases 12,8,32,16384:12,8,8,16384:12,8,32,4096:16,4,32,16384:16,4,64,16384:16,4,1,4096 \
            --out "$OUT/bench_${kv}_r$r" > "$OUT/bench_${kv}_r$r.log" 2>&1
        grep -E "^fast" "$OUT/bench_${kv}_r$r.log" | sed "s/^/$kv r$r /"
    done
done
echo "total $(( $(date +%s) - t0 )) s"
