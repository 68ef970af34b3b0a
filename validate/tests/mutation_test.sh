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
# probe BACKEND FAIL_RE WIDTH [KIND]: one planted bug, caught when mla-validate
# exits 1 (and, with KIND, some FAIL line matching FAIL_RE names it KIND);
# reports the number of FAIL_RE lines and the first, cut to WIDTH.
probe() {
    planted=$((planted + 1))
    out=$("$v" --quiet --backend "$1" "$data" 2>&1)
    rc=$?
    n=$(printf '%s\n' "$out" | grep -c "$2")
    if [ $rc -eq 1 ] && { [ -z "$4" ] || [ "$n" -gt 0 ]; }; then
        caught=$((caught + 1))
        first=$(printf '%s\n' "$out" | grep -m1 "$2" | cut -c1-"$3")
        echo "caught  $1${4:+ as $4} on $n case(s): $first"
    else
        echo "MISSED  $1 (exit $rc${4:+, $n case(s) reported $4})"
        fail=1
    fi
}
for m in drop-remainder no-causal fp16-partials lse-no-max-shift lse-base2 \
         partition-off-by-one skip-head-block empty-prefix-nan split-drop-first split-drop-last \
         split-dup-next split-shift next-seq-first kv-indices-off-by-one draft-off-by-one \
         masked-draft-zero-weight lazy-rescale-dropped; do
    probe "model:$m" '^FAIL' 160
done
# Bias mutants (issue 18): output transforms of a correct output whose every
# element stays within the element bounds; the bias test must name them.
for m in trunc-bf16 head-scale seq-lse; do
    probe "mutant:$m" '^FAIL.*biased' 200 biased
done
echo "mutation score: $caught/$planted planted bugs caught"
exit $fail
