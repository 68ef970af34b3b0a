#!/bin/bash
# SASS of the kept kernels in two builds (e.g. .tools/before/mla-bench and
# build-cuda/hip/libmla_gpu.a), addresses and encodings stripped: how many
# instruction lines differ per kernel (the kernels whose bf16 code the fp8
# work must leave alone). Needs cuobjdump (the device machine).
# usage: scripts/sass_compare.sh BEFORE_BINARY NOW_BINARY_OR_LIB
case "${1:-}" in -h|--help) sed -n 2,6p "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
[ $# -eq 2 ] && [ -r "$1" ] && [ -r "$2" ] || { echo "sass_compare: need two readable builds (see --help)" >&2; exit 2; }
command -v cuobjdump > /dev/null || { echo "sass_compare: cuobjdump not found (CUDA toolkit)" >&2; exit 2; }
ext() { cuobjdump -sass "$1" 2>/dev/null | awk -v pat="$2" '/Function : /{f = index($0, pat) > 0} f' | grep -E '^\s+/\*[0-9a-f]{4}\*/' | sed -E 's#/\*[0-9a-f]+\*/##g; s#;.*##; s/ +/ /g'; }
for pair in "stage1_ws_kernelILi4ELi8EEE:stage1_ws_kernelILi4ELi8ELb0EEE" "stage1_ws_kernelILi6ELi8EEE:stage1_ws_kernelILi6ELi8ELb0EEE" "stage2_kernelItEE:stage2_kernelItEE" "stage2_kernelIfEE:stage2_kernelIfEE"; do
  a=${pair%%:*}; b=${pair##*:}
  ext "$1" "$a" > /tmp/a.s; ext "$2" "$b" > /tmp/b.s
  echo "$b: before $(wc -l < /tmp/a.s) now $(wc -l < /tmp/b.s) differing lines $(diff /tmp/a.s /tmp/b.s | grep -c '^[<>]')"
done
