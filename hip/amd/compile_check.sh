#!/bin/sh
# AMD device-only compile check of the HIP kernels (SPEC section 9).
# Usage: compile_check.sh CLANG ARCH OUTDIR SOURCE...
# Exit 0: every source compiled (and, where llvm-objdump is found, the
# stage-1 kernels contain MFMA instructions); 77: no suitable clang (skip);
# 1: a compile error or no MFMA.
set -u
clang=${1:-}; arch=${2:-gfx942}; out=${3:-.}; shift 3
here=$(cd "$(dirname "$0")/.." && pwd)
if [ -z "$clang" ] || ! command -v "$clang" >/dev/null 2>&1; then
    echo "SKIP: no clang able to compile HIP device code (set MLA_HIP_CLANG; Debian: apt-get install clang-19 lld-19)"
    exit 77
fi
mkdir -p "$out"
status=0
for src in "$@"; do
    base=$(basename "$src" .hip)
    obj="$out/$base.$arch.hsaco"
    log="$out/$base.$arch.log"
    if ! "$clang" -x hip --offload-arch="$arch" -nogpulib -nogpuinc -O3 --offload-device-only \
        --no-gpu-bundle-output -Rpass-analysis=kernel-resource-usage -DMLA_HIP_MINIMAL \
        -I"$here" -I"$here/../include" -c "$src" -o "$obj" >"$log" 2>&1; then
        echo "FAIL: $src does not compile for $arch"
        cat "$log"
        status=1
        continue
    fi
    echo "ok: $src -> $obj"
    # Kernel name, VGPR / AGPR / LDS / occupancy / spills, one line per kernel.
    awk '/Function Name:/ {n=$(NF-1)} /VGPRs:/ {v=$(NF-1)} /AGPRs:/ {a=$(NF-1)} /Occupancy/ {o=$(NF-1)}
         /VGPRs Spill:/ {s=$(NF-1)} /LDS Size/ {printf "  %-60s VGPR %4s AGPR %4s spill %s LDS(static) %s occupancy %s\n", n, v, a, s, $(NF-1), o}' "$log"
    objdump=""
    for c in llvm-objdump-19 llvm-objdump; do
        if command -v "$c" >/dev/null 2>&1; then objdump=$c; break; fi
    done
    if [ -n "$objdump" ] && grep -q stage1_kernel "$log"; then
        n=$("$objdump" -d "$obj" | grep -c "v_mfma_f32_32x32x8_\{0,1\}bf16")
        echo "  v_mfma_f32_32x32x8 bf16 instructions: $n"
        if [ "$n" -eq 0 ]; then
            echo "FAIL: no MFMA in $obj"
            status=1
        fi
    fi
done
exit $status
