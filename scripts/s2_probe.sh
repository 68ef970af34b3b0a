#!/bin/bash
# Probe (perf-log step 29): how much of the timed call is stage 2, and how
# much of stage 2 the draft block. Three mla-bench builds: as is,
# -DMLA_AB_S2_NO_DRAFT (stage 2 skips the draft block: wrong output, timing
# only), -DMLA_AB_NO_S2 (stage 1 alone), timed interleaved over two rounds.
#   OUT=DIR bash scripts/s2_probe.sh
set -u
: "${OUT:?}"
t0=$(date +%s)
b() { { cmake --preset cuda -B "$1" "-DCMAKE_CUDA_FLAGS=$2" && cmake --build "$1" --target mla-bench -j 6; } > "$OUT/build_$1.log" 2>&1 || { echo "build $1 failed"; tail -20 "$OUT/build_$1.log"; }; }
b bv0 "" & b bv1 "-DMLA_AB_S2_NO_DRAFT=1" & b bv2 "-DMLA_AB_NO_S2=1" & wait
echo "builds $(( $(date +%s) - t0 )) s"
k3="12,8,1,1024:12,8,1,4096:12,8,8,16384:12,8,32,4096:12,8,32,16384:12,8,64,16384"
ds="16,4,1,4096:16,4,32,16384:16,4,64,16384"
for r in 1 2; do
  for v in bv0 bv1 bv2; do
    timeout 120 $v/hip/mla-bench --backends fast --no-ceilings --kv-layout pages64 --cases "$k3:$ds" --out /tmp/p_$v > "$OUT/$v.$r.log" 2>&1
    grep -E "^fast" "$OUT/$v.$r.log" | sed "s/^/$v r$r /"
  done
done
echo "total $(( $(date +%s) - t0 )) s"
