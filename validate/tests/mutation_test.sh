#!/bin/sh
# Each planted bug in the CPU model must be caught (mla-validate exits 1) on
# the shipped catalogue, and the correct model must pass (exit 0).
# usage: mutation_test.sh MLA_VALIDATE DATA_DIR
v="$1"; data="$2"
fail=0
"$v" --quiet --backend model "$data" > /dev/null 2>&1
rc=$?
if [ $rc -ne 0 ]; then
    echo "correct model: FAILED (exit $rc) -- the validator rejects a correct kernel"
    "$v" --quiet --backend model "$data" | grep -v '^PASS\|^DECLINED' | head -20
    fail=1
else
    echo "correct model: passes the shipped catalogue"
fi
caught=0; planted=0
for m in drop-remainder no-causal fp16-partials lse-no-max-shift lse-base2 \
         partition-off-by-one skip-head-block empty-prefix-nan split-drop-first split-drop-last \
         split-dup-next split-shift next-seq-first kv-indices-off-by-one draft-off-by-one; do
    planted=$((planted + 1))
    out=$("$v" --quiet --backend "model:$m" "$data" 2>&1)
    rc=$?
    nfail=$(printf '%s\n' "$out" | grep -c '^FAIL')
    if [ $rc -eq 1 ]; then
        caught=$((caught + 1))
        first=$(printf '%s\n' "$out" | grep -m1 '^FAIL' | cut -c1-160)
        echo "caught  model:$m on $nfail case(s): $first"
    else
        echo "MISSED  model:$m (exit $rc)"
        fail=1
    fi
done
# Bias mutants (issue 18): output transforms of a correct output whose every
# element stays within the element bounds; the bias test must name them.
for m in trunc-bf16 head-scale seq-lse; do
    planted=$((planted + 1))
    out=$("$v" --quiet --backend "mutant:$m" "$data" 2>&1)
    rc=$?
    nbias=$(printf '%s\n' "$out" | grep -c '^FAIL.*biased')
    if [ $rc -eq 1 ] && [ "$nbias" -gt 0 ]; then
        caught=$((caught + 1))
        first=$(printf '%s\n' "$out" | grep -m1 '^FAIL.*biased' | cut -c1-200)
        echo "caught  mutant:$m as biased on $nbias case(s): $first"
    else
        echo "MISSED  mutant:$m (exit $rc, $nbias case(s) reported biased)"
        fail=1
    fi
done
echo "mutation score: $caught/$planted planted bugs caught"
exit $fail
