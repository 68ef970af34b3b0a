#!/bin/bash
# Planted bugs in ws-pvg's in-kernel split merge (hip/kernels/split_merge.h)
# that the validator must catch on gpu:pvg, each through
# scripts/gpu_mutant.sh (a scratch copy with one substitution, rebuilt): the
# first CTA to arrive merges instead of the last (it reads partials the
# other splits have not written), the counter is not put back to zero (the
# next call on the workspace never merges: mla-validate runs every GPU case
# twice on one workspace), and the merge drops the last split. Cases with
# several splits per sequence. Exit 0 only when every mutant is caught.
# Runs on the device machine, from the repo root.
#   OUT=DIR bash scripts/merge_mutants.sh
set -u
case "${1:-}" in -h|--help) sed -n 2,12p "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
[ $# -eq 0 ] || { echo "merge_mutants.sh: no arguments (see --help)" >&2; exit 2; }
: "${OUT:?set OUT to the directory for logs}"
f=hip/kernels/split_merge.h
cases=(k3-splits k3-16k dsv3-16k needle-dsv3-16k)
backend=gpu:pvg name=merge_mutant
. "$(dirname "$0")/mutants_common.sh"
run 'atomicAdd(counter, 1) == act - 1' 'atomicAdd(counter, 1) == 0'
run 'atomicExch(counter, 0);' 'atomicAdd(counter, 0);'
run 'for (int s = 0; s < act; ++s) {' 'for (int s = 0; s < act - 1; ++s) {'
mutants_done
