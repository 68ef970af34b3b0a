#!/bin/bash
# The time budget of a bs 1 call (issue 13's <= 10 us bar), in one device
# command from the repo root: mla-bench graph medians (fast tier, 64-token
# pages) of K3 and DSV3 bs 1 at prefixes 64, 1024 and 4096 from six builds,
# interleaved in rounds: the tree as it is (full), and five copies patched
# here for timing only (their results are wrong; nothing is validated):
#   nos2    launch_fast returns before stage 2: stage 1 alone;
#   s1empty stage1_ws_kernel returns right after its PDL trigger: the
#           launches, and stage 2 on whatever the workspace holds;
#   both    both patches: the two launches alone;
#   loads   nos2, and stage1_ws_kernel returns once Q and its first tiles
#           have landed (the prologue's __syncthreads): its memory path;
#   nostore nos2 without stage 1's partial store (the O staging it reads
#           may go too).
# full - nos2 is stage 2's tail after stage 1; nos2 - both the stage-1 path,
# of which loads - both is the prologue's loads, nos2 - loads the tiles
# (chains, softmax, PV) and the partial store, and nos2 - nostore the store.
# The launch and memory floors of lab/bs1-budget/launch_floor.cu too.
#   OUT=DIR bash lab/bs1-budget/bs1_budget.sh [--rounds N]
help_end=19
. "$(dirname "$0")/../common/pilot_common.sh"
nvcc -O2 -std=c++17 -arch=sm_90a -o /tmp/lf lab/bs1-budget/launch_floor.cu && /tmp/lf | tee "$OUT/launch_floor.txt"
variants="nos2 s1empty both loads nostore"
# patch D FILE SED: applies SED to copy D's FILE; a patch that no longer
# matches the source (the file unchanged) stops the run, so that no variant
# silently times the unpatched tree.
patch() {
    sed -i "$3" "/tmp/d_$1/$2"
    if cmp -s "$2" "/tmp/d_$1/$2"; then echo "$1: the patch of $2 matched nothing"; exit 1; fi
}
for d in $variants; do
    rm -rf /tmp/d_$d && mkdir -p /tmp/d_$d
    tar --exclude='./build*' --exclude=./.tools --exclude=./.sglang --exclude=./.git -cf - . | tar -xf - -C /tmp/d_$d
    # launch_fast's last line only (the pair path's return is indented deeper).
    [ $d = s1empty ] || patch $d hip/api.hip 's/^    return launch_stage2<bf16_t>(p2, bs, a.stream, true);$/    return hipSuccess;/'
    case $d in
        s1empty|both) patch $d hip/kernels/stage1_ws.h 's/^    pdl_launch_dependents();$/&\n    return;/' ;;
        nostore) patch $d hip/kernels/stage1_ws.h '/^    store_partial<ROWS, NT>(p, y, part_row0, Os, OSP);$/d' ;;
        loads) patch $d hip/kernels/stage1_ws.h 's/^    constexpr int QR = TWO ? 0 : PVG ? 28 : 32;$/    return;\n&/' ;;
    esac
    (cd /tmp/d_$d && cmake --preset cuda > /dev/null && cmake --build --preset cuda --target mla-bench) \
        > "$OUT/build_$d.log" 2>&1 || { echo "build $d failed"; tail -20 "$OUT/build_$d.log"; exit 1; }
    echo "$d: built"
done
cases=12,8,1,64:12,8,1,1024:12,8,1,4096:16,4,1,64:16,4,1,1024:16,4,1,4096
mkdir -p /tmp/bb
for r in $(seq 1 "$rounds"); do
    for d in full $variants; do
        bin=build-cuda/hip/mla-bench; [ $d = full ] || bin=/tmp/d_$d/build-cuda/hip/mla-bench
        $bin --cases "$cases" --no-ceilings --backends fast --kv-layout pages64 --out /tmp/bb > "$OUT/bench_r${r}_$d.log" 2>&1
        echo "== round $r $d"
        grep -E '^fast' "$OUT/bench_r${r}_$d.log" | sed -E 's/ +GB.*\(R/ (R/'
    done
done
(cd "$OUT" && tar -czf logs.tar.gz --remove-files $(ls *.log *.txt 2>/dev/null))
echo "total $(( $(date +%s) - t0 )) s"
