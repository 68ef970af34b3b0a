#!/bin/bash
# GPU suite for the lent H200 (issue 5): validation of every tier on every
# catalogue case, compute-sanitizer memcheck + racecheck, mla-bench, SASS
# instruction census. Two halves so that device time is spent running only:
#   scripts/gpu_suite.sh pack [BUILD_DIR]   here: bundle the binaries built by
#       the "cuda" preset and the shared libraries they need into
#       .devbundle/bundle.tar.xz (carry .devbundle to the device)
#   scripts/gpu_suite.sh run [what...]      there: unpack, run, logs to $OUT
#       what: any of tests validate large sanitize ncu ab bench sass wssass
#       (default: all but ncu, ab and wssass; "none" only unpacks; ab times
#       variants side by side: AB_VARIANTS (default "ws mma"; also rows96,
#       ms32, or mla-bench variant flags with '+' for spaces, e.g.
#       --fast-rows+96+--split-rule+fixed), AB_CASES, AB_BACKENDS, AB_REPS interleaved
#       rounds; wssass dumps the warp-specialized kernels' SASS; NCU_EXTRA
#       adds ncu options)
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
mode=${1:-run}
shift || true

if [ "$mode" = pack ]; then
    build=${1:-$here/build-cuda}
    stage=$(mktemp -d)
    mkdir -p "$stage/bin" "$stage/lib" "$here/.devbundle"
    for b in mla-bench; do
        f=$(find "$build" -maxdepth 3 -type f -name "$b" | head -1)
        [ -n "$f" ] && cp "$f" "$stage/bin/" || echo "pack: $b not found under $build"
    done
    for f in $(find "$build" -maxdepth 3 -type f \( -name 'libmla_gpu.a' -o -name 'mla-validate' \)); do
        cp "$f" "$stage/bin/"
    done
    # Every shared library outside glibc/libstdc++ that the binaries need.
    for b in "$stage"/bin/*; do
        ldd "$b" 2>/dev/null | awk '$3 ~ /^\// {print $3}'
    done | sort -u | grep -v -E '/(libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so' |
        while read -r l; do cp -L "$l" "$stage/lib/"; done
    tar -C "$stage" -cJf "$here/.devbundle/bundle.tar.xz" bin lib
    rm -rf "$stage"
    grep -qx '/.devbundle/' "$here/.git/info/exclude" 2>/dev/null || echo '/.devbundle/' >>"$here/.git/info/exclude"
    ls -l "$here/.devbundle/bundle.tar.xz"
    exit 0
fi

out=${OUT:-$here/out}
mkdir -p "$out"
log="$out/suite.log"
what=${*:-tests validate large sanitize bench sass}
want() { case " $what " in *" $1 "*) return 0 ;; esac; return 1; }
say() { echo "== $*" | tee -a "$log"; }

work=/tmp/mla_suite
rm -rf "$work" && mkdir -p "$work"
tar -C "$work" -xJf "$here/.devbundle/bundle.tar.xz"
export LD_LIBRARY_PATH="$work/lib:${LD_LIBRARY_PATH:-}"
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-16}
cd "$here"
{
    echo "date $(date -u +%FT%TZ)"
    echo "commit $(git describe --always --dirty --abbrev=12 2>/dev/null || echo unknown)"
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.total --format=csv
    nvcc --version 2>/dev/null | tail -1
    command -v compute-sanitizer cuobjdump
} >>"$log" 2>&1

rc_all=0
step() { # name timeout cmd...
    local name=$1 to=$2; shift 2
    say "$name: $*"
    local t0=$(date +%s)
    timeout "$to" "$@" >"$out/$name.txt" 2>&1
    local rc=$?
    tail -n 60 "$out/$name.txt" >>"$log"
    say "$name: rc $rc, $(( $(date +%s) - t0 )) s"
    [ $rc -ne 0 ] && rc_all=1
    return $rc
}

if want tests; then
    step tests 150 "$work/bin/mla-validate" --catalogue --small --backend gpu --backend gpu-baseline --backend gpu-fallback
fi
if want validate && [ -x "$work/bin/mla-validate" ]; then
    mkdir -p "$out/val"
    step validate 200 "$work/bin/mla-validate" --backend gpu --backend gpu-baseline --backend gpu-fallback \
        --report "$out/val" fixtures/data
    cp "$out/val/report.md" "$out/validation.md" 2>/dev/null
    cp "$out/val/report.html" "$out/validation.html" 2>/dev/null
    rm -rf "$out/val"
fi
if want large; then
    step large ${LARGE_TIMEOUT:-420} "$work/bin/mla-validate" --catalogue --backend gpu --backend gpu-baseline --backend gpu-fallback k3-splits-wide k3-4k k3-16k k3-64k k3-128k dsv3-16k k3-bs64-4k k3-bs8-128k
fi
if want ab; then
    # A/B of fast-tier variants (mla-bench's variant flags, which fill
    # mla_gpu_options), fast tier only, one process per variant;
    # AB_REPS rounds over the variants, interleaved, so that clock drift
    # does not favour one. A variant --flag+VALUE+--flag2+VALUE2 sets several.
    cases=${AB_CASES:-12,8,32,4096:12,8,32,16384:12,8,64,16384:16,4,32,16384:16,4,64,16384:12,8,1,1024:12,8,1,4096:12,8,1,16384:12,8,8,1024:16,4,1,4096}
    for rep in $(seq 1 ${AB_REPS:-1}); do
        for v in ${AB_VARIANTS:-ws mma}; do
            case $v in
                ws) ev="--fast-kernel ws" ;;
                mma) ev="--fast-kernel mma" ;;
                rows96) ev="--fast-rows 96" ;;
                ms32) ev="--min-split 32" ;;
                *) ev=${v//+/ } ;; # --flag+VALUE[+--flag+VALUE...]
            esac
            n=ab${rep}_$(echo "$v" | tr -c 'A-Za-z0-9_\n' _)
            mkdir -p /tmp/$n
            step $n ${AB_TIMEOUT:-90} "$work/bin/mla-bench" $ev --no-ceilings --backends ${AB_BACKENDS:-fast} --cases "$cases" --out /tmp/$n
            grep -E "^(fast|perhead) " "$out/$n.txt" | sed "s/^/$rep $v /" >>"$out/ab.txt"
            rm -f "$out/$n.txt"
        done
    done
    cat "$out/ab.txt" >>"$log"
fi
if want bench; then
    mkdir -p "$out/bench"
    step bench ${BENCH_TIMEOUT:-180} "$work/bin/mla-bench" --out "$out/bench" ${BENCH_ARGS:-}
    cp "$out/bench/bench.json" "$out/bench/bench.md" "$out/" 2>/dev/null
    rm -rf "$out/bench"
fi
if want sass; then
    {
        cuobjdump -res-usage "$work/bin/libmla_gpu.a" 2>&1 | grep -E "Function|REG|SHARED" | head -40
        for k in stage1 stage2 generic; do
            cuobjdump -sass "$work/bin/libmla_gpu.a" 2>/dev/null | awk -v k="$k" '/Function :/ {f=$0} f ~ k' |
                grep -o -E '\b(HMMA|HGMMA|LDSM|LDGSTS|FFMA|MUFU|STL|LDL)[.A-Z0-9]*' | sort | uniq -c | sed "s/^/$k /"
        done
        # Per stage-1 instantiation (stage1_kernel<MT, NW, RG, PT, PADK>,
        # stage1_ws_kernel<MT, NPW>; hip/instances.h): which
        # tensor-core instruction each one issues.
        cuobjdump -sass "$work/bin/libmla_gpu.a" 2>/dev/null | awk '
            /Function :/ { f = $3 }
            f ~ /stage1/ && /HGMMA/ { g[f]++ } f ~ /stage1/ && /HMMA/ { h[f]++ }
            f ~ /stage1/ && /STL/ { l[f]++ }
            END { for (k in h) printf "per-kernel %s HMMA %d HGMMA %d STL %d\n", k, h[k], g[k], l[k];
                  for (k in g) if (!(k in h)) printf "per-kernel %s HMMA 0 HGMMA %d STL %d\n", k, g[k], l[k] }' | sort -u
    } >"$out/sass.txt" 2>&1
    tail -n 40 "$out/sass.txt" >>"$log"
fi
if want wssass; then
    # SASS of the warp-specialized stage-1 kernels (HGMMA chain, fences, spills).
    cuobjdump -sass "$work/bin/libmla_gpu.a" 2>/dev/null | awk '/Function :/ { f = ($0 ~ /ws_kernel/) } f' >"$out/wssass.txt"
fi
if want sanitize; then
    cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
    step memcheck 120 "$cs" --tool memcheck --padding 65536 --error-exitcode 3 "$work/bin/mla-validate" --catalogue --backend gpu --backend gpu-baseline --backend gpu-fallback k3-edges dsv3-edges k3-splits ragged decline-window decline-kvheads2 decline-sinks k3-l1
    step racecheck 120 "$cs" --tool racecheck --error-exitcode 3 "$work/bin/mla-validate" --catalogue --backend gpu --backend gpu-baseline --backend gpu-fallback k3-edges dsv3-edges k3-splits ragged
fi
if want ncu; then
    for c in ${NCU_CASES:-12,8,32,16384 12,8,1,4096}; do
        # Warm, steady-state launches (graph replays after the eager call),
        # caches not flushed: what a serving loop sees.
        step ncu_${c//,/_} 150 ncu --clock-control none --cache-control none -k regex:stage -s ${NCU_SKIP:-12} -c 2 \
            --section SpeedOfLight \
            --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section WarpStateStats \
            --section Occupancy --section LaunchStats ${NCU_EXTRA:-} \
            "$work/bin/mla-bench" --only "$c" --no-ceilings --backends fast --out /tmp
    done
fi
# At most 8 files come back: step logs travel as one archive.
(cd "$out" && tar -czf logs.tar.gz --remove-files $(ls *.txt 2>/dev/null | grep -v -x -E 'sass.txt|bench.txt|ab.txt|ncu.txt') 2>/dev/null)
say "suite done, rc $rc_all"
exit $rc_all
