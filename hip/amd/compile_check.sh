#!/bin/sh
# AMD device-only compile check of the HIP kernels for one arch (SPEC section 9).
# Usage: compile_check.sh CLANG OBJDUMP ARCH OUTDIR SOURCE...
#   CLANG    clang-22 (or a path); OBJDUMP llvm-objdump-22 (or a path)
#   ARCH     gfx942 | gfx950
# Per kernel it prints VGPR / AGPR / spills / scratch / static LDS / occupancy
# (-Rpass-analysis=kernel-resource-usage) and the number of MFMA instructions
# of the arch's bf16 32x32 variant (llvm-objdump -d). Exit 0: every source
# compiled and every stage-1 kernel contains that MFMA; 1: a compile error,
# a stage-1 kernel without it, or a missing tool (named with the Debian
# package that provides it: never reported as a wrong diagnosis).
set -u
if [ $# -lt 5 ]; then
    echo "usage: compile_check.sh CLANG OBJDUMP ARCH OUTDIR SOURCE..." >&2
    exit 2
fi
clang=$1; objdump=$2; arch=$3; out=$4; shift 4
here=$(cd "$(dirname "$0")/.." && pwd)

# Debian 12's versioned tools only: the unversioned llvm-objdump of a fresh
# machine is LLVM 14, which cannot read gfx942/gfx950 code objects.
need() { # tool package
    if [ -z "$1" ] || ! command -v "$1" >/dev/null 2>&1; then
        echo "FAIL: '$1' not found: install Debian package $2 (apt-get install $2; Debian 12 security archive)"
        exit 1
    fi
}
need "$clang" clang-22
need "$objdump" llvm-22

case "$arch" in
    gfx942) mfma=v_mfma_f32_32x32x8_bf16 ;;   # v_mfma_f32_32x32x8bf16_1k in the ISA guide
    gfx950) mfma=v_mfma_f32_32x32x16_bf16 ;;
    *) echo "FAIL: unknown arch $arch (gfx942 or gfx950)"; exit 1 ;;
esac

mkdir -p "$out" || exit 1
status=0
for src in "$@"; do
    base=$(basename "$src" .hip)
    obj="$out/$base.$arch.hsaco"
    log="$out/$base.$arch.log"
    dis="$out/$base.$arch.dis"
    if ! "$clang" -x hip --offload-arch="$arch" -nogpulib -nogpuinc -O3 --offload-device-only \
        --no-gpu-bundle-output -Rpass-analysis=kernel-resource-usage -DMLA_HIP_MINIMAL \
        -I"$here" -I"$here/../include" -c "$src" -o "$obj" >"$log" 2>&1; then
        echo "FAIL: $src does not compile for $arch"
        cat "$log"
        status=1
        continue
    fi
    if ! "$objdump" -d "$obj" >"$dis" 2>"$dis.err"; then
        echo "FAIL: $objdump cannot disassemble $obj:"
        cat "$dis.err"
        status=1
        continue
    fi
    echo "ok: $src -> $obj ($arch)"
    # MFMA count per kernel symbol of the disassembly: "<addr> <name>:" opens one.
    awk -v m="$mfma" '/^[0-9a-f]+ <.*>:$/ { n = $2; gsub(/[<>:]/, "", n); cnt[n] += 0; order[++k] = n }
                      index($0, m) && n != "" { cnt[n]++ }
                      END { for (i = 1; i <= k; i++) print order[i], cnt[order[i]] }' "$dis" >"$out/$base.$arch.mfma"
    # Demangled names when llvm-22's c++filt is there (optional).
    demangle=cat
    if command -v llvm-cxxfilt-22 >/dev/null 2>&1; then demangle=llvm-cxxfilt-22; fi
    printf '  %5s %5s %5s %7s %6s %9s %6s  %s\n' VGPR AGPR spill scratch LDS occupancy MFMA kernel
    awk -v mf="$out/$base.$arch.mfma" '
        BEGIN { while ((getline line < mf) > 0) { split(line, f, " "); c[f[1]] = f[2] } }
        /Function Name:/ {n=$(NF-1)} /VGPRs:/ {v=$(NF-1)} /AGPRs:/ {a=$(NF-1)} /Occupancy/ {o=$(NF-1)}
        /ScratchSize/ {sc=$(NF-1)} /VGPRs Spill:/ {s=$(NF-1)}
        /LDS Size/ { printf "  %5s %5s %5s %7s %6s %9s %6s  %s\n", v, a, s, sc, $(NF-1), o, (n in c) ? c[n] : "?", n }' "$log" |
        $demangle
    # Every stage-1 kernel must use the arch's MFMA (the tensor-core path).
    bad=$(awk '$1 ~ /stage1_kernel/ && $2 == 0 { print $1 }' "$out/$base.$arch.mfma")
    if [ -n "$bad" ]; then
        echo "FAIL: no $mfma in stage-1 kernel(s) of $obj: $bad"
        status=1
    fi
    if ! grep -q stage1_kernel "$out/$base.$arch.mfma"; then
        echo "FAIL: no stage-1 kernel found in $obj (expected at least one)"
        status=1
    fi
done
echo "(MFMA: static count of $mfma instructions per kernel; LDS: the static size, the kernels take"
echo " theirs as dynamic shared memory at launch; stage 1's, from the arch's plan in hip/config.h:)"
# The stage-1 LDS plan of this arch (host-compiled probe: the device pass
# cannot print a constexpr).
probe="$out/lds_plan.$arch"
if "$clang" -x c++ -std=c++17 -w -O1 -D__${arch}__ -DMLA_HIP_MINIMAL -I"$here" -I"$here/../include" \
    "$here/amd/lds_plan.cpp" -o "$probe" >"$probe.log" 2>&1; then
    "$probe" || { echo "FAIL: a stage-1 LDS plan exceeds $arch's LDS"; status=1; }
else
    echo "FAIL: the LDS plan probe does not compile for $arch:"
    cat "$probe.log"
    status=1
fi
exit $status
