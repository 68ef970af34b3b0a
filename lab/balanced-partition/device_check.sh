#!/bin/bash
# One device command for the balanced partition (issue 43): build the cuda
# preset, run the GPU suite (ctest label gpu: every tier on the catalogue,
# the variants, compute-sanitizer), show where the ws kernels touch local
# memory, and time the uniform grid against the db06158 build and FlashMLA.
#   OUT=DIR bash lab/balanced-partition/device_check.sh [--no-suite] [--grid quick|full] [--rounds N] [-- bench_peers args]
set -u
: "${OUT:?set OUT}"
suite=1 grid=quick rounds=1
while [ $# -gt 0 ]; do
    case "$1" in
        --no-suite) suite=0; shift ;;
        --grid) grid=$2; shift 2 ;;
        --rounds) rounds=$2; shift 2 ;;
        --) shift; break ;;
        *) echo "device_check: unknown argument '$1'" >&2; exit 2 ;;
    esac
done
mkdir -p "$OUT/logs"
t0=$(date +%s)
touch hip/launch_*.hip
{ cmake --preset cuda && cmake --build --preset cuda -j 16; } > "$OUT/logs/build.log" 2>&1
echo "build rc $? in $(( $(date +%s) - t0 )) s"
grep -E 'error' "$OUT/logs/build.log" | head -20
grep -E 'Compiling entry|spill|Used' "$OUT/logs/build.log" | sed 's/ptxas info    : //' | paste - - - | sort -u |
    grep -E 'ws_kernel|stage1_kernel|stage2' | sed 's/Compiling entry function//' | cut -c1-200
obj=$(find build-cuda -name 'launch_stage1_ws.hip.o' | head -1)
if [ -n "$obj" ] && command -v cuobjdump > /dev/null; then
    cuobjdump -sass "$obj" > "$OUT/logs/ws.sass" 2>&1
    awk '/Function :/ {f=$3} /STL|LDL/ {n[f]++} END {for (k in n) print "local-memory instructions", n[k], k}' "$OUT/logs/ws.sass"
fi
if [ $suite = 1 ]; then
    t1=$(date +%s)
    ctest --test-dir build-cuda -L gpu --output-on-failure --timeout 400 > "$OUT/logs/ctest_gpu.log" 2>&1
    echo "ctest -L gpu rc $? in $(( $(date +%s) - t1 )) s"
    grep -E 'tests passed|tests failed|Failed|\*\*\*|Passed' "$OUT/logs/ctest_gpu.log" | tail -25
    grep -E 'FAIL|mismatch|ERROR' "$OUT/logs/ctest_gpu.log" | head -30
fi
t2=$(date +%s)
fm=""; [ -x .tools/flashmla_bench ] && fm="--flashmla .tools/flashmla_bench"
before=""; [ -x .tools/before/mla-bench ] && before="--before .tools/before/mla-bench"
# ws-pvsm against plain ws on the shapes where auto picks ws-pvsm, two
# interleaved rounds (graph medians, no ceilings).
ab="12,8,8,16384:12,8,32,4096:12,8,32,16384:16,4,32,16384:16,4,64,16384"
for r in 1 2; do
    for k in auto ws; do
        build-cuda/hip/mla-bench --fast-kernel $k --cases "$ab" --no-ceilings --out "$OUT/ab/$k-$r" \
            > "$OUT/logs/ab-$k-$r.log" 2>&1
    done
done
for f in "$OUT"/logs/ab-*.log; do echo "$f"; grep -E 'us .*GB/s' "$f" | cut -c1-75; done
bash scripts/bench_peers.sh --ours build-cuda/hip/mla-bench $fm $before --rounds "$rounds" --grid "$grid" \
    --layouts pages64 --out "$OUT/peers" --commit "${MLA_COMMIT:-unknown}" "$@" > "$OUT/logs/peers.log" 2>&1
echo "bench_peers rc $? in $(( $(date +%s) - t2 )) s"
[ -f "$OUT/peers/peers.md" ] && sed -n 1,60p "$OUT/peers/peers.md"
