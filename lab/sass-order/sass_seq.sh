#!/bin/bash
# The order of the wgmma, exponential, shuffle and barrier instructions in
# one kernel's SASS, one character each (W m64n32 S-chain wgmma, P m64n256
# PV wgmma, E MUFU.EX2, S SHFL.BFLY, B BAR.SYNC, w WARPGROUP.DEPBAR, | a
# branch): shows where ptxas placed the producer's softmax against its S
# chain (docs/perf/2026-12-01-ws-pvg.md, "Tried and not kept").
# Needs cuobjdump (the device machine).
# usage: lab/sass-order/sass_seq.sh BINARY_OR_LIB KERNEL_NAME_PART
case "${1:-}" in -h|--help) sed -n 2,8p "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
[ $# -eq 2 ] && [ -r "$1" ] || { echo "sass_seq: need a readable build and a kernel name part (see --help)" >&2; exit 2; }
command -v cuobjdump > /dev/null || { echo "sass_seq: cuobjdump not found (CUDA toolkit)" >&2; exit 2; }
cuobjdump -sass "$1" 2>/dev/null | awk -v pat="$2" '/Function : /{f = index($0, pat) > 0} f' |
    awk '/HGMMA.64x32/{printf "W"; next} /HGMMA.64x256/{printf "P"; next} /MUFU.EX2/{printf "E"; next}
         /SHFL.BFLY/{printf "S"; next} /BAR.SYNC/{printf "B"; next} /WARPGROUP.DEPBAR/{printf "w"; next}
         / BRA /{printf "|"; next} END{print ""}'
