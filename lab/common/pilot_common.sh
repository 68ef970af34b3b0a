# Sourced by the one-command device pilots of lab/ (ab_base.sh and the
# drivers in lab/*/) from the repo root: reads --rounds N (sets rounds, default 2)
# and --help (prints the caller's header, comment lines 2 .. $help_end),
# requires $OUT, builds the 'cuda' preset into $OUT/build.log and prints the
# stage-1 ws kernels' ptxas lines. Sets t0 to the start time, and defines
# pilot_validate and pilot_sanitize (below) for the pilots' checks and
# pilot_ncu_top for their stall profiles.
set -u
rounds=2
if [ "${1:-}" = --rounds ]; then
    rounds=${2:-}
    case "$rounds" in
        ''|*[!0-9]*|0) echo "$(basename "$0"): --rounds needs a positive integer (got '$rounds')" >&2; exit 2 ;;
    esac
elif [ -n "${1:-}" ] && [ "$1" != -h ] && [ "$1" != --help ]; then
    echo "$(basename "$0"): unknown argument '$1' (see --help)" >&2
    exit 2
fi
if [ "${1:-}" = -h ] || [ "${1:-}" = --help ]; then
    sed -n "2,${help_end:-7}p" "$0" | sed 's/^# \{0,1\}//'
    exit 0
fi
: "${OUT:?set OUT}"
mkdir -p "$OUT"
t0=$(date +%s)
{ cmake --preset cuda && cmake --build --preset cuda; } > "$OUT/build.log" 2>&1 || { echo "build failed"; tail -30 "$OUT/build.log"; exit 1; }
echo "build $(( $(date +%s) - t0 )) s"
grep -E 'Compiling entry|spill|Used' "$OUT/build.log" | sed 's/ptxas info    : //' | paste - - - | sort -u | grep stage1_ws

# pilot_validate NAME ARGS...: build-cuda's mla-validate ARGS (16 BLAS
# threads, at most 150 s: a hung kernel must not eat the device call) into
# $OUT/val_NAME.log; prints its exit status and its FAIL / ERROR / summary
# lines.
pilot_validate() {
    local name=$1
    shift
    OPENBLAS_NUM_THREADS=16 timeout 150 build-cuda/validate/mla-validate "$@" > "$OUT/val_$name.log" 2>&1
    echo "$name rc $?"
    grep -E "FAIL|ERROR|passed" "$OUT/val_$name.log" | tail -6
}
# pilot_sanitize ARGS...: mla-validate ARGS under compute-sanitizer memcheck,
# racecheck and synccheck (exit 3 on a finding, at most 200 s each) into
# $OUT/san_TOOL.log; prints each tool's exit status and summary line.
pilot_sanitize() {
    local cs tool pad
    cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
    for tool in memcheck racecheck synccheck; do
        pad=(); [ $tool = memcheck ] && pad=(--padding 65536) # as the memcheck ctest
        timeout 200 "$cs" --tool $tool "${pad[@]}" --error-exitcode 3 build-cuda/validate/mla-validate "$@" > "$OUT/san_$tool.log" 2>&1
        echo "$tool rc $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/san_$tool.log" | tail -1)"
    done
}
# pilot_ncu_top NAME KERNEL_RE N BENCH_ARGS...: ncu's SASS source counters of
# one launch of the kernels matching KERNEL_RE (after 6 skipped), run by
# build-cuda's mla-bench BENCH_ARGS: gzipped into $OUT/ncu_src_NAME.csv.gz,
# and the N lines with the most stall samples into $OUT/ncu_top_NAME.txt.
pilot_ncu_top() {
    local name=$1 kre=$2 n=$3
    shift 3
    ncu --clock-control none --cache-control none -k regex:"$kre" -s 6 -c 1 --section SourceCounters \
        --page source --csv --print-source sass build-cuda/hip/mla-bench "$@" 2>/dev/null |
        tee "$OUT/ncu_src_$name.csv" | python3 lab/common/ncu_top.py "$n" > "$OUT/ncu_top_$name.txt" 2>&1
    gzip -f "$OUT/ncu_src_$name.csv"
}
