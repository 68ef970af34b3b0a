#!/bin/bash
# Measured noise of the bias test (issue 18): the worst |s - 1| per group
# level (row, sequence-head, draft-head, head, sequence) of correct kernels
# against the fp64 oracle, on varied catalogue cases (outliers, scales,
# sinks, window, logit cap, ragged drafts, empty prefixes, split remainders,
# needles, 4k and ~16k prefixes), with the ratio to the judge's threshold.
# From the repo root, after a build (on the GPU machine: the 'cuda' preset):
#   OUT=<dir> bash scripts/bias_noise.sh [--validate PATH] [--backends "a b"]
#                                        [--seed N] [--cases "name ..."]
# writes $OUT/bias-noise.md (per backend and level, then per case) and
# $OUT/bias-noise.log (mla-validate's output); exit status is mla-validate's
# (0: every judged case passes, 1: a failure).
#   --validate  the mla-validate binary (default: $MLA_VALIDATE, else
#               build-cuda/validate/mla-validate, else the unpacked GPU
#               bundle /tmp/mla_suite/bin/mla-validate, else
#               build/default/validate/mla-validate)
#   --backends  default "gpu gpu-baseline gpu-fallback model reference"; on a
#               CPU build e.g. "reference model amd-gfx950-emu" (a GPU tier
#               that is not built reports N/A and adds no row)
#   --seed      the catalogue seed (default 1: reproducible)
#   --cases     catalogue case names (default: the set below)
# About 20 s of CPU work on 2 cores with the CPU backends (reference and
# oracle included); the GPU tiers add well under a minute.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"

validate=${MLA_VALIDATE:-}
backends="gpu gpu-baseline gpu-fallback model reference"
seed=1
# Outliers, scales beyond fp16, sinks / window / logit cap / ragged drafts
# (the fast tiers decline them: gpu-fallback and the CPU backends judge
# them), empty prefixes and single splits (edges), split remainders, the
# needles' boundary tokens, q_len 1, and the long prefixes: bs 2 at 4096 /
# 4133, 16461 (K3) and 16384 / 16400 (DeepSeek-V3).
cases="k3-outliers k3-scales decline-sinks decline-window decline-logitcap ragged k3-edges
       dsv3-edges k3-splits k3-splits-wide needle-k3-small k3-l1 k3-4k k3-16k dsv3-16k"
while [ $# -gt 0 ]; do
    case "$1" in
        -h|--help) sed -n 2,23p "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        --validate) validate=$2; shift 2 ;;
        --backends) backends=$2; shift 2 ;;
        --seed) seed=$2; shift 2 ;;
        --cases) cases=$2; shift 2 ;;
        *) echo "bias_noise: unknown argument '$1'" >&2; exit 2 ;;
    esac
done
if [ -z "$validate" ]; then
    for c in build-cuda/validate/mla-validate /tmp/mla_suite/bin/mla-validate \
             build/default/validate/mla-validate; do
        if [ -x "$c" ]; then validate=$c; break; fi
    done
fi
if [ -z "$validate" ] || [ ! -x "$validate" ]; then
    echo "bias_noise: no mla-validate binary (build first, or pass --validate)" >&2
    exit 2
fi
out=${OUT:-$here/out}
mkdir -p "$out"
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-$(nproc)}

args=()
for b in $backends; do args+=(--backend "$b"); done
t0=$(date +%s)
# The oracle judges every case here (dsv3-16k is ~4.6 GFLOP, over the
# default 4 GFLOP cap).
timeout "${BIAS_NOISE_TIMEOUT:-300}" "$validate" --quiet --oracle-max-gflop 64 --seed "$seed" \
    "${args[@]}" --bias-noise "$out/bias-noise.md" --catalogue $cases >"$out/bias-noise.log" 2>&1
rc=$?
{
    echo
    echo "Backends: $backends; catalogue seed $seed; cases: $(echo $cases)."
    echo "mla-validate exit $rc in $(( $(date +%s) - t0 )) s; $(grep -E '^mla-validate: [0-9]+ passed' "$out/bias-noise.log")"
    if grep -q '^FAIL\|^ERROR' "$out/bias-noise.log"; then
        echo
        echo "Failures:"
        echo
        grep '^FAIL\|^ERROR' "$out/bias-noise.log" | sed 's/^/    /'
    fi
} >>"$out/bias-noise.md"
sed -n '/^| backend | level/,/^$/p' "$out/bias-noise.md"
tail -n 4 "$out/bias-noise.md"
exit $rc
