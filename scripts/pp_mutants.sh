#!/bin/bash
# Planted bugs in the ping-pong stage 1 (hip/kernels/stage1_pp.h) that the
# validator must catch on gpu:pp, each through scripts/gpu_mutant.sh (a
# scratch copy with one substitution, rebuilt): warpgroup 1's rescale by the
# pair's two factors skipped, P of the even block handed to warpgroup 1
# without the odd block's factor, and the odd block of the last pair
# dropped from warpgroup 0's half of O; two in its box copies (a block's
# atoms landed one column atom off; the contiguity test blind to the
# block's second 32 slots, as where a split starts mid-page); and an odd
# block's chain, right half first, adding to the previous block's scores
# instead of starting them. Cases with several 64-token blocks per split, the needle cases (one key far above the rest) and k3-ramp
# (every tile moves the max). Exit 0 only when every mutant is
# caught. Runs on the device machine, from the repo root.
#   OUT=DIR bash scripts/pp_mutants.sh
set -u
case "${1:-}" in -h|--help) sed -n 2,14p "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
[ $# -eq 0 ] || { echo "pp_mutants.sh: no arguments (see --help)" >&2; exit 2; }
: "${OUT:?set OUT to the directory for logs}"
f=hip/kernels/stage1_pp.h
cases=(k3-4k k3-16k dsv3-16k needle-k3-4k needle-dsv3-16k k3-ramp)
backend=gpu:pp name=pp_mutant
. "$(dirname "$0")/mutants_common.sh"
run 'ws_rescale_o(o, s0[0] * sc[0], s0[1] * sc[1]);' ';'
run 'pack_p(pa, s1);' 'pack_p(pa, one);'
run 'const bool has1 = i0 + 1 < nb, next' 'const bool has1 = i0 + 1 < nb - 1, next'
run 'TMA_BOX_COLS * a, s0, atom_mb' 'TMA_BOX_COLS * (a ^ 1), s0, atom_mb'
run '&& b == base + 32 + lane' '&& (b == base + 32 + lane || true)'
run 'chain_r(i, std::true_type{});' 'chain_r(i, std::false_type{});'
mutants_done
