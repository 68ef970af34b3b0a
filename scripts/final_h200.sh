#!/bin/bash
# The H200 report run (reports/h200/gpu-suite.md), on the device machine from
# the repo root: the GPU suite (run.sh gpu), mla-validate on the three GPU
# backends, mla-bench, and the register / SASS census, all logs under $OUT.
#   MLA_COMMIT=<hash> OUT=<dir> bash scripts/final_h200.sh
# (the device copy of the tree has no .git, so the commit is passed in).
set -u
case "${1:-}" in -h|--help) sed -n 2,6p "$0"; exit 0 ;; esac
export MLA_COMMIT=${MLA_COMMIT:?set MLA_COMMIT to the commit being run}
: "${OUT:?set OUT to the directory for logs and reports}"
t0=$(date +%s)
bash run.sh gpu > $OUT/run_gpu.log 2>&1; echo "run.sh gpu rc $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/run_gpu.log
tail -15 $OUT/run_gpu.log
grep -E 'tier runs|ERROR SUMMARY|RACECHECK SUMMARY|passed|failed' build-cuda/Testing/Temporary/LastTest.log | head -20 > $OUT/ctest_summary.txt
mkdir -p $OUT/val $OUT/bench
OPENBLAS_NUM_THREADS=16 timeout 200 build-cuda/validate/mla-validate --backend gpu --backend gpu-baseline --backend gpu-fallback --report $OUT/val fixtures/data > $OUT/validate.log 2>&1; echo "validate rc $?" | tee -a $OUT/validate.log; tail -3 $OUT/validate.log
timeout 200 build-cuda/hip/mla-bench --out $OUT/bench > $OUT/bench.log 2>&1; echo "bench rc $?"; tail -2 $OUT/bench.log
{ cuobjdump -res-usage build-cuda/hip/libmla_gpu.a 2>&1 | grep -E "Function|REG|SHARED" | grep -A1 ws_kernel;
  cuobjdump -sass build-cuda/hip/libmla_gpu.a 2>/dev/null | awk '/Function :/ { f = $3 } f ~ /stage1/ && /HGMMA/ { g[f]++ } f ~ /stage1/ && /HMMA/ { h[f]++ } f ~ /stage1/ && /STL/ { l[f]++ } END { for (k in g) printf "per-kernel %s HMMA %d HGMMA %d STL %d\n", k, h[k], g[k], l[k]; for (k in h) if (!(k in g)) printf "per-kernel %s HMMA %d HGMMA 0 STL %d\n", k, h[k], l[k] }' | sort -u; } > $OUT/sass.txt 2>&1
grep -E 'ws_kernel|stage1_kernel' -A3 $OUT/run_gpu.log | grep -E 'Compiling entry|spill|Used' | sed 's/ptxas info    : //' | paste - - - | sort -u > $OUT/ptxas.txt
(cd $OUT && tar czf logs.tar.gz run_gpu.log validate.log bench.log && rm run_gpu.log validate.log bench.log)
