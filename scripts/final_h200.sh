#!/bin/bash
# The H200 report run, on the device machine from the repo root, all logs
# under $OUT:
#   1. bash run.sh gpu: build the 'cuda' preset there and run every ctest
#      labelled gpu (every tier on the catalogue, the kept variants,
#      compute-sanitizer memcheck / racecheck / synccheck, GPU validation of
#      fixtures/data, the capture replay through libmla_gpu);
#   2. mla-validate on the GPU backends with a report (validate-gpu.*);
#   3. scripts/bench_peers.sh: ours (both kv layouts), FlashMLA, SGLang's
#      Triton kernels when .sglang is carried, and a 'before' build when
#      .tools/before/mla-bench is carried, interleaved rounds, one command;
#   4. scripts/bias_noise.sh: the bias test's measured noise (bias-noise.md);
#   5. the ptxas register / spill lines of the build.
#   MLA_COMMIT=<hash> OUT=<dir> bash scripts/final_h200.sh [--skip-suite] [--rounds N]
# (the device copy of the tree has no .git, so the commit is passed in).
set -u
skip_suite=0 rounds=2
while [ $# -gt 0 ]; do
    case "$1" in
        -h|--help) sed -n 2,15p "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        --skip-suite) skip_suite=1; shift ;;
        --rounds) rounds=$2; shift 2 ;;
        *) echo "final_h200: unknown argument '$1'" >&2; exit 2 ;;
    esac
done
export MLA_COMMIT=${MLA_COMMIT:?set MLA_COMMIT to the commit being run}
: "${OUT:?set OUT to the directory for logs and reports}"
mkdir -p "$OUT/logs"
t0=$(date +%s)
# The kernel sources rebuild every time, so the build log holds their ptxas
# lines (item 5): on a machine an earlier command had built, an incremental
# build printed none.
touch hip/launch_*.hip
if [ $skip_suite -eq 0 ]; then
    bash run.sh gpu > "$OUT/logs/run_gpu.log" 2>&1
    echo "run.sh gpu rc $? in $(( $(date +%s) - t0 )) s" | tee -a "$OUT/logs/run_gpu.log"
    grep -E 'tests passed|tests failed|Failed|\*\*\*' "$OUT/logs/run_gpu.log" | tail -15
    cp build-cuda/Testing/Temporary/LastTest.log "$OUT/logs/ctest_gpu_LastTest.log" 2>/dev/null
else
    cmake --preset cuda > "$OUT/logs/run_gpu.log" 2>&1 && cmake --build --preset cuda >> "$OUT/logs/run_gpu.log" 2>&1
    echo "cuda build rc $? in $(( $(date +%s) - t0 )) s"
fi
mkdir -p "$OUT/val"
OPENBLAS_NUM_THREADS=16 timeout 300 build-cuda/validate/mla-validate --backend gpu --backend gpu-baseline \
    --backend gpu-fallback --report "$OUT/val" fixtures/data > "$OUT/logs/validate.log" 2>&1
echo "validate rc $?"; tail -3 "$OUT/logs/validate.log"
before=""; [ -x .tools/before/mla-bench ] && before="--before .tools/before/mla-bench"
sgl=""; [ -d .sglang ] && sgl="--sglang .sglang"
fm=""; [ -x .tools/flashmla_bench ] && fm="--flashmla .tools/flashmla_bench"
t1=$(date +%s)
bash scripts/bench_peers.sh --ours build-cuda/hip/mla-bench $fm $before $sgl --rounds "$rounds" \
    --out "$OUT/peers" --commit "$MLA_COMMIT" > "$OUT/logs/peers.log" 2>&1
echo "bench_peers rc $? in $(( $(date +%s) - t1 )) s"
if [ -f scripts/bias_noise.sh ]; then
    # Measured noise of the bias test: the GPU tiers against the fp64 oracle.
    OPENBLAS_NUM_THREADS=16 OUT="$OUT" timeout 300 bash scripts/bias_noise.sh --validate build-cuda/validate/mla-validate \
        > "$OUT/logs/bias_noise.log" 2>&1
    echo "bias_noise rc $?"
fi
grep -E 'Compiling entry|spill|Used' "$OUT/logs/run_gpu.log" | sed 's/ptxas info    : //' | paste - - - | sort -u > "$OUT/logs/ptxas.txt"
# The device hands back at most eight files: the reports (bias-noise.md,
# peers.{json,md}, val/report.{md,json,html}) and one archive of the rest,
# which leaves one slot for a caller's own file.
[ -f "$OUT/bias-noise.log" ] && mv "$OUT/bias-noise.log" "$OUT/logs/"
(cd "$OUT" && tar czf logs.tar.gz logs peers/raw && rm -rf logs peers/raw)
echo "total $(( $(date +%s) - t0 )) s"
