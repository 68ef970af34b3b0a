#!/bin/bash
# A kernel change against a base commit on the device, in one command, from
# the repo root: build the 'cuda' preset (the change) and the base's
# mla-bench from its source tree (.tools/base-src, made by
# `git archive <base> | tar -x -C .tools/base-src` and carried), validate the
# change's fast tier (fixtures/data, small and large catalogue cases,
# compute-sanitizer memcheck / racecheck / synccheck), then time base, change
# and FlashMLA interleaved in rounds on the K3 and DSV3 TP8 shapes, 64-token
# pages and random slots; with --ncu, a warp-state profile of the change's
# stage 1 at K3 bs 32 / 16k; with --variant FLAGS, a third build of the
# change's mla-bench with CMAKE_CUDA_FLAGS=FLAGS (an A/B switch compiled in,
# e.g. -DMLA_X=1), timed beside the other two (repeatable: variant1,
# variant2, ... in the order given). Logs under $OUT.
# --bench-only skips the validation and sanitizer runs. --kernel K times
# the change with --fast-kernel K (e.g. ws-pvg) and validates and
# sanitizes its backend (gpu:pvg for ws-pvg) beside gpu; --variant-kernel
# K times the variant build with --fast-kernel K (default: as the change).
# --check-backend B adds backend B (e.g. gpu:pvg) to the checks without
# changing what is timed. --self-base times this build at --fast-kernel
# auto as the base instead of building .tools/base-src: exact when the
# change only adds a kernel that auto does not pick, and it saves a build.
# --no-sanitize skips the three compute-sanitizer runs. --also ARGS times
# the change's own build once more with the extra mla-bench arguments ARGS
# (e.g. "--merge stage2"; repeatable: also1, also2, ...).
#   OUT=DIR bash lab/common/ab_base.sh [--rounds N] [--ncu] [--variant FLAGS] [--kernel K]
#       [--variant-kernel K] [--check-backend B] [--bench-only] [--self-base] [--no-sanitize]
#       [--also ARGS]
help_end=27
ncu_too=0 variants=() alsos=() bench_only=0 kernel=auto vkernel="" self_base=0 sanitize=1
args=() checks=()
while [ $# -gt 0 ]; do
    case "$1" in
        --ncu) ncu_too=1 ;;
        --bench-only) bench_only=1 ;;
        --self-base) self_base=1 ;;
        --no-sanitize) sanitize=0 ;;
        --variant)
            [ $# -ge 2 ] || { echo "ab_base.sh: --variant needs FLAGS (see --help)" >&2; exit 2; }
            variants+=("$2")
            shift ;;
        --also)
            [ $# -ge 2 ] || { echo "ab_base.sh: --also needs mla-bench arguments (see --help)" >&2; exit 2; }
            alsos+=("$2")
            shift ;;
        --kernel|--variant-kernel)
            [ $# -ge 2 ] || { echo "ab_base.sh: $1 needs a name (see --help)" >&2; exit 2; }
            if [ "$1" = --kernel ]; then kernel=$2; else vkernel=$2; fi
            shift ;;
        --check-backend)
            [ $# -ge 2 ] || { echo "ab_base.sh: --check-backend needs a backend name (see --help)" >&2; exit 2; }
            checks+=(--backend "$2")
            shift ;;
        *) args+=("$1") ;;
    esac
    shift
done
set -- "${args[@]}"
extra=()
case $kernel in
    auto|ws) ;;
    ws-pvg) extra=(--backend gpu:pvg) ;;
    *) echo "ab_base.sh: --kernel $kernel: no backend known for it (auto, ws, ws-pvg)" >&2; exit 2 ;;
esac
extra+=("${checks[@]}")
. "$(dirname "$0")/pilot_common.sh"
# A hung kernel (a barrier or setmaxnreg that never completes) stops here,
# not after the checks' time limits.
mkdir -p /tmp/ab_probe && timeout 60 build-cuda/hip/mla-bench --backends fast --no-ceilings --fast-kernel "$kernel" --only 12,8,1,1024 \
    --out /tmp/ab_probe > "$OUT/probe.log" 2>&1 || { echo "probe failed (rc $?)"; tail -5 "$OUT/probe.log"; exit 1; }
base=.tools/base-src bb=.tools/base-src/build-cuda/hip/mla-bench
if [ $self_base = 1 ]; then
    bb=build-cuda/hip/mla-bench
    echo "base: this build at --fast-kernel auto"
else
    [ -f "$base/CMakePresets.json" ] || { echo "ab_base: no base source tree in $base"; exit 2; }
    (cd "$base" && cmake --preset cuda && cmake --build --preset cuda --target mla-bench) > "$OUT/build_base.log" 2>&1 ||
        { echo "base build failed"; tail -20 "$OUT/build_base.log"; exit 1; }
    echo "base build done $(( $(date +%s) - t0 )) s"
fi
kinds="base new"
for v in "${!variants[@]}"; do
    vn=variant$((v + 1))
    { cmake --preset cuda -B build-$vn "-DCMAKE_CUDA_FLAGS=${variants[$v]}" &&
      cmake --build build-$vn --target mla-bench; } > "$OUT/build_$vn.log" 2>&1 ||
        { echo "$vn build failed"; tail -20 "$OUT/build_$vn.log"; exit 1; }
    echo "$vn: ${variants[$v]}"
    kinds="$kinds $vn"
done
for a in "${!alsos[@]}"; do
    echo "also$((a + 1)): this build with ${alsos[$a]}"
    kinds="$kinds also$((a + 1))"
done
if [ $bench_only = 0 ]; then
    # The shipped files on the fixed rows plus every checked backend not among them.
    fx=(--backend gpu --backend gpu:pvg --backend gpu:pvg-s2)
    for ((i = 1; i < ${#extra[@]}; i += 2)); do
        [[ " ${fx[*]} " = *" ${extra[i]} "* ]] || fx+=(--backend "${extra[i]}")
    done
    pilot_validate fixtures "${fx[@]}" fixtures/data
    pilot_validate small --catalogue --small --backend gpu "${extra[@]}"
    pilot_validate large --catalogue --backend gpu "${extra[@]}" k3-splits-wide k3-4k k3-16k dsv3-16k \
        k3-bs64-4k k3-bs40-one-split needle-k3-4k needle-dsv3-16k
    [ $sanitize = 0 ] || pilot_sanitize --catalogue --backend gpu "${extra[@]}" k3-edges dsv3-edges k3-splits k3-nan-draft k3-dv256 \
        ragged
    echo "checks done $(( $(date +%s) - t0 )) s"
fi
nb=build-cuda/hip/mla-bench
fm=.tools/flashmla_bench
k3="12,8,1,1024:12,8,1,4096:12,8,8,16384:12,8,32,4096:12,8,32,16384:12,8,64,16384"
ds="16,4,1,4096:16,4,32,16384:16,4,64,16384"
for r in $(seq 1 "$rounds"); do
    for lay in pages64 random; do
        for k in $kinds; do
            bin=$nb; [ $k = base ] && bin=$bb; [[ $k = variant* ]] && bin=build-$k/hip/mla-bench
            fk=auto; [ $k = base ] || fk=$kernel; [[ $k = variant* ]] && fk=${vkernel:-$kernel}
            more=(); [[ $k = also* ]] && read -r -a more <<< "${alsos[$((${k#also} - 1))]}"
            $bin --backends fast --no-ceilings --kv-layout $lay --fast-kernel $fk --cases "$k3:$ds" "${more[@]}" \
                --out "$OUT/b_${k}_${lay}_r$r" > "$OUT/b_${k}_${lay}_r$r.log" 2>&1
            grep -E "^fast" "$OUT/b_${k}_${lay}_r$r.log" | sed "s/^/$k $lay r$r /"
        done
    done
    if [ -x "$fm" ]; then
        H_Q=12 L=8 CASES=1:1024,1:4096,8:16384,32:4096,32:16384,64:16384 SKIP_CHECKS=1 $fm 2>/dev/null |
            sed "s/^/flashmla r$r /"
        H_Q=16 L=4 CASES=1:4096,32:16384,64:16384 SKIP_CHECKS=1 $fm 2>/dev/null | sed "s/^/flashmla r$r /"
    fi
done
echo "bench done $(( $(date +%s) - t0 )) s"
if [ $ncu_too = 1 ]; then
    ncu --clock-control none --cache-control none -k "regex:stage1_ws" -s 6 -c 1 \
        --section SpeedOfLight --section WarpStateStats --section ComputeWorkloadAnalysis \
        --section SourceCounters --page details \
        $nb --only 12,8,32,16384 --no-ceilings --backends fast --fast-kernel $kernel --out /tmp/ncu_b \
        > "$OUT/ncu.txt" 2>&1
    pilot_ncu_top k3bs32 "stage1_ws" 45 --only 12,8,32,16384 --no-ceilings --backends fast --fast-kernel $kernel \
        --out /tmp/ncu_b
    echo "ncu done $(( $(date +%s) - t0 )) s"
fi
(cd "$OUT" && tar -czf logs.tar.gz --remove-files $(ls *.log 2>/dev/null) && rm -rf b_*_r*/ 2>/dev/null)
echo "total $(( $(date +%s) - t0 )) s"
