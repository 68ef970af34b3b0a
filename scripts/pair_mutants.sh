#!/bin/bash
# Planted bugs in the pair stage 1 (hip/kernels/stage1_pair.h) that the
# validator must catch on gpu:pair, each through scripts/gpu_mutant.sh (a
# scratch copy with one substitution, rebuilt): one of every four scores
# without the partner CTA's partial (its half of the head dimension), the
# PV warpgroups' rescale of O^T skipped when the running max moves, and the
# zero-filled tokens past a split's end left unmasked. Cases with several
# 64-token blocks per split, ragged split ends, a running max that moves in
# every tile (k3-ramp) and the needle cases. Exit 0 only when every mutant
# is caught. Runs on the device machine, from the repo root.
#   OUT=DIR bash scripts/pair_mutants.sh
set -u
case "${1:-}" in -h|--help) sed -n 2,11p "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
[ $# -eq 0 ] || { echo "pair_mutants.sh: no arguments (see --help)" >&2; exit 2; }
: "${OUT:?set OUT to the directory for logs}"
f=hip/kernels/stage1_pair.h
cases=(k3-4k k3-16k dsv3-16k k3-edges k3-ramp needle-k3-4k needle-dsv3-16k)
backend=gpu:pair name=pair_mutant
. "$(dirname "$0")/mutants_common.sh"
run '{acc[4 * jj] + v4.x, acc' '{acc[4 * jj], acc'
run 'if (__any_sync(0xffffffffu, moved)) {' 'if (false && __any_sync(0xffffffffu, moved)) {'
run 'tk0 + 8 * h < valid ?' 'tk0 + 8 * h < PR_BN ?'
mutants_done
