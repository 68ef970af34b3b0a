#!/bin/bash
# Shared by the mutant lists (scripts/merge_mutants.sh; sourced, after they set f,
# backend, cases and name): `run FROM TO` plants one bug in $f through
# gpu_mutant.sh and runs $backend on ${cases[@]}, logs under
# $OUT/${name}_N; `mutants_done` prints the count and fails unless every
# planted bug was caught.
caught=0 total=0
run() {
    total=$((total + 1))
    mkdir -p "$OUT/${name}_$total"
    if OUT="$OUT/${name}_$total" bash scripts/gpu_mutant.sh "$f" "$1" "$2" "$backend" "${cases[@]}"; then
        caught=$((caught + 1))
    fi
}
mutants_done() {
    echo "${name}s: $caught of $total planted bugs caught"
    [ $caught -eq $total ]
}
