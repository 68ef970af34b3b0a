#!/bin/bash
# Planted bugs in the fast tier's direct write (hip/api.hip: with one split
# a sequence and the draft block in stage 1, stage 1 writes o and lse and
# no merge kernel runs) that the validator must catch on gpu:pvsm, each
# through scripts/gpu_mutant.sh (a scratch copy with one substitution,
# rebuilt): lse left in the workspace (never written), and stage 2 run
# after the direct write (it merges workspace partials nobody wrote). On
# k3-bs40-one-split and k3-bs64-4k, the catalogue's one-split cases. Exit 0
# only when every mutant is caught. Runs on the device machine, from the
# repo root.
#   OUT=DIR bash scripts/merge_mutants.sh
set -u
case "${1:-}" in -h|--help) sed -n 2,11p "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
[ $# -eq 0 ] || { echo "merge_mutants.sh: no arguments (see --help)" >&2; exit 2; }
: "${OUT:?set OUT to the directory for logs}"
f=hip/api.hip
cases=(k3-bs40-one-split k3-bs64-4k)
backend=gpu:pvsm name=merge_mutant
. "$(dirname "$0")/lib/mutants_common.sh"
run 'p1.part_lse = g.lse;' '(void)0;'
run 'if (direct)
        return hipSuccess;' 'if (direct && false)
        return hipSuccess;'
mutants_done
