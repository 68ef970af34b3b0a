#!/bin/bash
# SASS of the kept kernels in two builds (e.g. .tools/before/mla-bench and
# build-cuda/hip/libmla_gpu.a), addresses and encodings stripped: how many
# instruction lines differ per kernel (issue 39: every kept kernel's SASS
# byte-identical to the tag kernels-before-house2, or a same-run table).
# Each PAIR is BEFORE_PART[:NOW_PART], a part of the mangled kernel name in
# each build (NOW_PART defaults to BEFORE_PART); without PAIRs, the 64-row
# ws stage 1 and both stage-2 kernels. Needs cuobjdump (the device machine).
# usage: scripts/sass_compare.sh BEFORE_BINARY NOW_BINARY_OR_LIB [PAIR...]
case "${1:-}" in -h|--help) sed -n 2,9p "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
[ $# -ge 2 ] && [ -r "$1" ] && [ -r "$2" ] || { echo "sass_compare: need two readable builds (see --help)" >&2; exit 2; }
command -v cuobjdump > /dev/null || { echo "sass_compare: cuobjdump not found (CUDA toolkit)" >&2; exit 2; }
before=$1 now=$2
shift 2
[ $# -gt 0 ] || set -- "stage1_ws_kernelILi4ELi8EEE:stage1_ws_kernelILi4ELi8ELb0EEE" "stage2_kernelItEE" "stage2_kernelIfEE"
ext() { cuobjdump -sass "$1" 2>/dev/null | awk -v pat="$2" '/Function : /{f = index($0, pat) > 0} f' | grep -E '^\s+/\*[0-9a-f]{4}\*/' | sed -E 's#/\*[0-9a-f]+\*/##g; s#;.*##; s/ +/ /g'; }
for pair in "$@"; do
  a=${pair%%:*}; b=${pair#*:}
  ext "$before" "$a" > /tmp/a.s; ext "$now" "$b" > /tmp/b.s
  echo "$b: before $(wc -l < /tmp/a.s) now $(wc -l < /tmp/b.s) differing lines $(diff /tmp/a.s /tmp/b.s | grep -c '^[<>]')"
done
