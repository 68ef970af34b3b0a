#!/bin/bash
# The fast tier's direct write (stage 1 writes o and lse, no merge kernel,
# where every sequence has one split and stage 1 takes the draft block) on
# the device, in one command from the repo root: build the 'cuda' preset,
# validate the one-split cases and the shipped fixtures (gpu, gpu:pvg, and
# gpu:pvg-s2 which always runs stage 2), memcheck on the one-split case,
# the planted bugs of scripts/merge_mutants.sh, then time K3 bs 64 at 4k,
# 16k and 64k (one split, ws-pvg) with and without the merge kernel
# (--merge stage2), interleaved in rounds, both slot layouts. Logs under
# $OUT.
#   OUT=DIR bash lab/direct-write/direct_ab.sh [--rounds N]
help_end=10
. "$(dirname "$0")/../common/pilot_common.sh"
be=(--backend gpu --backend gpu:pvg --backend gpu:pvg-s2)
pilot_validate one-split --catalogue "${be[@]}" k3-bs40-one-split k3-bs64-4k k3-4k dsv3-16k
pilot_validate fixtures "${be[@]}" fixtures/data
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
timeout 200 "$cs" --tool memcheck --padding 65536 --error-exitcode 3 build-cuda/validate/mla-validate --catalogue \
    --backend gpu:pvg k3-bs40-one-split > "$OUT/san_memcheck.log" 2>&1
echo "memcheck rc $? $(grep -E 'ERROR SUMMARY' "$OUT/san_memcheck.log" | tail -1)"
mkdir -p "$OUT/mut" && OUT="$OUT/mut" bash scripts/merge_mutants.sh 2>&1 | grep -E "gpu_mutant:|merge_mutants"
for r in $(seq 1 "$rounds"); do
    for lay in pages64 random; do
        for m in auto stage2; do
            build-cuda/hip/mla-bench --backends fast --no-ceilings --kv-layout $lay --merge $m \
                --cases 12,8,64,4096:12,8,64,16384:12,8,64,65536 --out "$OUT/b_${m}_${lay}_r$r" \
                > "$OUT/b_${m}_${lay}_r$r.log" 2>&1
            grep -E "^fast" "$OUT/b_${m}_${lay}_r$r.log" | sed "s/^/$m $lay r$r /"
        done
    done
done
echo "total $(( $(date +%s) - t0 )) s"
