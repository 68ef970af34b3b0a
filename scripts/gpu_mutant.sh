#!/bin/bash
# A planted GPU bug must be caught: copy the tree (sources only) to a scratch
# directory, apply one literal substitution to one file there, build the
# 'cuda' preset's mla-validate, and run it on the named catalogue cases with
# the named backend (under compute-sanitizer TOOL with --sanitize TOOL).
# Exit 0 only when the substitution applied and the run FAILED (a FAIL or
# ERROR verdict, or sanitizer errors: a caught mutant); 1 when the mutant passed;
# 2 on a usage, copy or build error. Runs on the device machine, from the
# repo root.
#   OUT=DIR bash scripts/gpu_mutant.sh [--sanitize TOOL] FILE FROM TO BACKEND CASE...
# e.g. the draft fold's 0 x NaN (docs/perf/2026-12-02-draft-fold.md):
#   OUT=... bash scripts/gpu_mutant.sh hip/kernels/stage1_ws.h \
#       'if (ws_draft_values_nonfinite(' 'if (false && ws_draft_values_nonfinite(' gpu:pvsm k3-nan-draft
set -u
case "${1:-}" in -h|--help) sed -n 2,15p "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
san=()
if [ "${1:-}" = --sanitize ]; then
    [ $# -ge 2 ] || { echo "gpu_mutant.sh: --sanitize needs a tool (memcheck, racecheck, synccheck)" >&2; exit 2; }
    san=(compute-sanitizer --tool "$2" --error-exitcode 3)
    # As the memcheck ctest: a gap after each allocation, so that an
    # over-read does not land in the next one unseen.
    [ "$2" = memcheck ] && san+=(--padding 65536)
    shift 2
fi
[ $# -ge 5 ] || { echo "gpu_mutant.sh: needs FILE FROM TO BACKEND CASE... (see --help)" >&2; exit 2; }
file=$1 from=$2 to=$3 backend=$4
shift 4
: "${OUT:?set OUT to the directory for logs}"
# The scratch copy has no .git: name what was built.
export MLA_COMMIT="${MLA_COMMIT:-unknown}+mutant"
name=$(basename "$file" | tr -c 'A-Za-z0-9_\n' _)
tool=""; [ ${#san[@]} -gt 0 ] && tool="_${san[2]}"
log="$OUT/mutant_$name$tool.log"
scratch=$(mktemp -d /tmp/gpu_mutant.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
# The tracked tree without build outputs (the device copy has no .git).
tar --exclude='./build*' --exclude='./.tools' --exclude='./.sglang' -cf - . | tar -xf - -C "$scratch" ||
    { echo "gpu_mutant: copy failed" >&2; exit 2; }
python3 - "$scratch/$file" "$from" "$to" <<'EOF' || { echo "gpu_mutant: '$2' not found once in $file" >&2; exit 2; }
import sys
path, a, b = sys.argv[1:4]
text = open(path).read()
if text.count(a) != 1:
    sys.exit(1)
open(path, "w").write(text.replace(a, b))
EOF
(cd "$scratch" && cmake --preset cuda && cmake --build --preset cuda --target mla-validate) > "$log" 2>&1 ||
    { echo "gpu_mutant: build failed (log $log)" >&2; tail -20 "$log" >&2; exit 2; }
"${san[@]}" "$scratch/build-cuda/validate/mla-validate" --catalogue --backend "$backend" "$@" >> "$log" 2>&1
rc=$?
grep -E '^(PASS|FAIL|ERROR)|non-finite|mla-validate:|SUMMARY|Invalid' "$log" | tail -12
if [ $rc -ne 0 ] && grep -qE '^(FAIL|ERROR) |(ERROR|RACECHECK) SUMMARY: [1-9]' "$log"; then
    echo "gpu_mutant: caught ($file: '$from' -> '$to'; $backend on $*)"
    exit 0
fi
echo "gpu_mutant: NOT caught (mla-validate rc $rc; $file: '$from' -> '$to'; $backend on $*)"
exit 1
