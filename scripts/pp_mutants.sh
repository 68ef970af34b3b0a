#!/bin/bash
# Planted bugs in the ping-pong stage 1 (hip/kernels/stage1_pp.h) that the
# validator must catch on gpu:pp, each through scripts/gpu_mutant.sh (a
# scratch copy with one substitution, rebuilt): the other warpgroup's last
# block dropped from one half of O (the loop stops at i < nb), the hand-over
# without its rescale, and P read from the warpgroup's own buffer instead of
# the other's. Cases with several 64-token blocks per split, and the needle
# cases (one key far above the rest). Exit 0 only when every mutant is
# caught. Runs on the device machine, from the repo root.
#   OUT=DIR bash scripts/pp_mutants.sh
set -u
case "${1:-}" in -h|--help) sed -n 2,10p "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
[ $# -eq 0 ] || { echo "pp_mutants.sh: no arguments (see --help)" >&2; exit 2; }
: "${OUT:?set OUT to the directory for logs}"
f=hip/kernels/stage1_pp.h
cases=(k3-4k k3-16k dsv3-16k needle-k3-4k needle-dsv3-16k)
backend=gpu:pp name=pp_mutant
. "$(dirname "$0")/mutants_common.sh"
run 'for (int i = x; i <= nb; i += 2) {' 'for (int i = x; i < nb; i += 2) {'
run 'ws_rescale_o(o, sc0, sc1);' ';'
run 'wg_desc_sw128(by + 8u * PP_ATOM)' 'wg_desc_sw128(bx + 8u * PP_ATOM)'
mutants_done
