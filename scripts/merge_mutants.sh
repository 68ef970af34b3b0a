#!/bin/bash
# Planted bugs in ws-pvg's in-kernel split merge (hip/kernels/split_merge.h,
# its call in stage1_ws.h) that the validator must catch on gpu:pvg, each
# through scripts/gpu_mutant.sh (a scratch copy with one substitution,
# rebuilt): the CTA's own split taken for split 0, the counter not put back
# to zero (the next call on the workspace never merges: mla-validate runs
# every GPU case twice on one workspace and fails a second call that
# differs), the merge dropping the last split, and the two row blocks of a
# sequence sharing one counter. Cases with several splits per sequence.
# Exit 0 only when every mutant is caught. Runs on the device machine,
# from the repo root.
#   OUT=DIR bash scripts/merge_mutants.sh
set -u
case "${1:-}" in -h|--help) sed -n 2,13p "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
[ $# -eq 0 ] || { echo "merge_mutants.sh: no arguments (see --help)" >&2; exit 2; }
: "${OUT:?set OUT to the directory for logs}"
f=hip/kernels/split_merge.h
cases=(k3-splits k3-16k dsv3-16k needle-dsv3-16k)
backend=gpu:pvg name=merge_mutant
. "$(dirname "$0")/mutants_common.sh"
run 'v[g] = s == s_own ?' 'v[g] = s == 0 ?'
run 'atomicExch(counter, 0);' 'atomicAdd(counter, 0);'
run 'for (int s = 0; s < act; ++s) {' 'for (int s = 0; s < act - 1; ++s) {'
f=hip/kernels/stage1_ws.h
run 'mg.counter + (long long)b * gridDim.y + y,' 'mg.counter + (long long)b * gridDim.y,'
mutants_done
