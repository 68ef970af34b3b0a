#!/bin/sh
# ctest hip.amd-static (label amd-static; issue 41): recompiles our AMD
# kernels for gfx942 and gfx950 through compile_check.sh and fails on any
# VGPR spill or scratch use on either arch, any SGPR spill on gfx950 (the
# target), or a stage-1 LDS plan over the arch's LDS. The seed's side of
# the comparison (scripts/amd_static.py without --check-ours) needs triton
# and is not part of this test.
# Usage: static_check.sh CLANG OBJDUMP OUTDIR
set -u
if [ $# -ne 3 ]; then
    echo "usage: static_check.sh CLANG OBJDUMP OUTDIR" >&2
    exit 2
fi
here=$(cd "$(dirname "$0")/../.." && pwd)
if ! command -v python3 >/dev/null 2>&1; then
    echo "FAIL: python3 not found: install Debian package python3"
    exit 1
fi
MLA_HIP_CLANG=$1 MLA_LLVM_OBJDUMP=$2 exec python3 "$here/scripts/amd_static.py" --check-ours "$3"
