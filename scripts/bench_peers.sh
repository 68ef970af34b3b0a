#!/usr/bin/env bash
# Same-run peers benchmark (SPEC 8): our fast path (mla-bench), FlashMLA's
# dense bf16 decode (flashmla_bench, SPEC 8a) and, when their sources are
# given, SGLang's Triton verify and extend kernels (SPEC 8b), interleaved in
# rounds inside ONE device command, so every ratio compares timings taken
# minutes apart on the same GPU. Optionally a second build of mla-bench
# ("before") joins each round, for A/B of a change.
#
#   scripts/bench_peers.sh --ours build-cuda/hip/mla-bench --flashmla .tools/flashmla_bench \
#       [--before DIR/mla-bench] [--sglang .sglang] [--sglang-cases bs:P,...] [--rounds 2] [--grid full|quick] \
#       [--layouts pages64,random] [--no-ragged] [--serving-seed S] [--out DIR] [--commit HASH] \
#       [--json reports/h200/peers.json]
#
# Each round also times the ragged grid (issue 43; off with --no-ragged) at
# both shapes: five fixed per-sequence prefix lists and three serving-like
# batches (bs 8/32/64, log-normal prefixes drawn with seed S*1000+bs, S 43 by
# default), the identical list given to ours (mla-bench --lens, every list
# in one call per layout and pool dtype) and to FlashMLA (LENS=, one call a
# list); the before build too when its mla-bench knows --lens.
# Writes DIR/raw/*.jsonl (one line per timed case and round) and, through
# scripts/lib/peers_report.py, peers.json and peers.md (medians over rounds,
# ratios, % of the roofline measured in the same run).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)

usage() { sed -n 2,22p "$0" | sed 's/^# \{0,1\}//'; }

sglang_cases="1:1024,1:4096,1:65536,8:16384,32:4096,32:16384,64:16384"
ours="" before="" flashmla="" sglang="" rounds=2 grid=full layouts="pages64,random"
out="${OUT:-out/peers}" commit="${MLA_COMMIT:-unknown}" json="" ragged=1 serving_seed=43
while [ $# -gt 0 ]; do
    case "$1" in
        -h|--help) usage; exit 0 ;;
        --ours) ours=$2; shift 2 ;;
        --before) before=$2; shift 2 ;;
        --flashmla) flashmla=$2; shift 2 ;;
        --sglang) sglang=$2; shift 2 ;;
        --sglang-cases) sglang_cases=$2; shift 2 ;;
        --rounds) rounds=$2; shift 2 ;;
        --grid) grid=$2; shift 2 ;;
        --layouts) layouts=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        --commit) commit=$2; shift 2 ;;
        --json) json=$2; shift 2 ;;
        --no-ragged) ragged=0; shift ;;
        --serving-seed) serving_seed=$2; shift 2 ;;
        *) echo "bench_peers: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
    esac
done
[ -x "$ours" ] || { echo "bench_peers: --ours must name the mla-bench binary (got '$ours')" >&2; exit 2; }
[ -z "$before" ] || [ -x "$before" ] || { echo "bench_peers: --before '$before' is not executable" >&2; exit 2; }
[ -z "$flashmla" ] || [ -x "$flashmla" ] || { echo "bench_peers: --flashmla '$flashmla' is not executable" >&2; exit 2; }
case "$rounds" in ''|*[!0-9]*) echo "bench_peers: --rounds must be a positive integer" >&2; exit 2 ;; esac
[ "$rounds" -ge 1 ] || { echo "bench_peers: --rounds must be >= 1" >&2; exit 2; }
case "$grid" in
    full) bss="1 8 32 64"; prefixes="1024 4096 16384 65536" ;;
    quick) bss="1 32"; prefixes="4096 16384" ;;
    *) echo "bench_peers: --grid must be full or quick" >&2; exit 2 ;;
esac
mkdir -p "$out/raw"
raw="$out/raw"
: > "$raw/all.jsonl"

# Kimi-K3 TP8 (12 heads, 8 rows) and DeepSeek-V3 TP8 (16 heads, 4 rows), SPEC 5.
shapes="12,8 16,4"
cases_for() { # H L -> "H,L,bs,P:..." for mla-bench and "bs:P,..." for flashmla_bench
    local H=$1 L=$2 m="" f=""
    for bs in $bss; do for p in $prefixes; do
        m="$m${m:+:}$H,$L,$bs,$p"; f="$f${f:+,}$bs:$p"
    done; done
    echo "$m $f"
}

# mla-bench writes bench.json; flatten its records into our line format.
ours_lines() { # impl layout round file
    python3 - "$@" <<'PY'
import json, sys
impl, layout, rnd, path = sys.argv[1:5]
d = json.load(open(path))
for r in d["records"]:
    line = {"impl": impl, "H": r["heads"], "L": r["q_len"], "bs": r["bs"],
            "prefix": r["prefix"], "median_us": r["median_us"], "kv_layout": layout,
            "kv": d.get("kv", "bf16"),
            "round": int(rnd), "copy_bw_TBps": d.get("copy_bw_TBps"),
            "gemm_TFLOPs": d.get("gemm_TFLOPs")}
    if "lens" in r:  # a ragged batch (mla-bench --lens)
        line.update({k: r[k] for k in ("lens", "prefix_min", "prefix_max", "kv_tokens") if k in r})
    print(json.dumps(line))
PY
}

# flashmla_bench prints one JSON line a case; keep the timings, report errors.
flashmla_lines() { # round
    python3 -c '
import json, sys
for line in sys.stdin:
    try: d = json.loads(line)
    except ValueError: continue
    if "median_us" in d:
        d["kv_layout"] = "pages64"; d["round"] = int(sys.argv[1]); print(json.dumps(d))
    elif "error" in d: print("flashmla:", d["error"], file=sys.stderr)
' "$1"
}

# One mla-bench call: run_ours IMPL LAYOUT BINARY DIR ARGS...; its records
# join all.jsonl, a failure is reported with its log's last line.
run_ours() {
    local impl=$1 lay=$2 bin=$3 d=$4; shift 4
    mkdir -p "$d"
    if "$bin" --backends fast "$@" --out "$d" > "$d.log" 2>&1; then
        ours_lines "$impl" "$lay" "$r" "$d/bench.json" >> "$raw/all.jsonl"
    else
        echo "bench_peers: $impl failed ($lay, H $H, round $r): $(tail -1 "$d.log")" >&2
        return 1
    fi
}

# The ragged grid (issue 43), written once in peers_report.py: "LENS SEED" lines.
ragged_lists=()
if [ $ragged = 1 ]; then
    mapfile -t ragged_lists < <(python3 "$here/lib/peers_report.py" --ragged-grid --serving-seed "$serving_seed" | cut -d' ' -f1)
    [ ${#ragged_lists[@]} -gt 0 ] || { echo "bench_peers: no ragged grid from peers_report.py" >&2; exit 2; }
fi
# knows BINARY FLAG: does this build have it? (--help read whole first: grep
# -q on the pipe would stop it early, and pipefail report the SIGPIPE.)
knows() { local h; h=$("$1" --help 2>&1); grep -q -- "$2" <<<"$h"; }

# All ragged lists in one call of BIN at shape H,L (per list when that call
# fails, so one bad list loses only its own records): run_ragged IMPL LAYOUT BIN DIR ARGS...
run_ragged() {
    local impl=$1 lay=$2 bin=$3 d=$4; shift 4
    local l lens_args=() i=0
    for l in "${ragged_lists[@]}"; do lens_args+=(--lens "$l"); done
    run_ours "$impl" "$lay" "$bin" "$d" --no-ceilings --only "$H,$L" "${lens_args[@]}" "$@" && return 0
    for l in "${ragged_lists[@]}"; do
        i=$((i + 1))
        run_ours "$impl" "$lay" "$bin" "${d}_list$i" --no-ceilings --only "$H,$L" --lens "$l" "$@"
    done
}

t0=$(date +%s)
ceil_flag=""   # the first run of ours measures the copy and GEMM ceilings
# A build from before --kv-layout existed times 64-token pages only.
ours_layout_flag() { # binary layout
    if knows "$1" --kv-layout; then echo "--kv-layout $2"
    elif [ "$2" = pages64 ]; then echo ""
    else echo "unsupported"; fi
}
has_fp8=0; knows "$ours" "--kv T" && has_fp8=1
before_ragged=0; [ -n "$before" ] && knows "$before" --lens && before_ragged=1
for r in $(seq 1 "$rounds"); do
    for sh in $shapes; do
        H=${sh%,*} L=${sh#*,}
        read -r mcases fcases <<<"$(cases_for "$H" "$L")"
        for lay in ${layouts//,/ }; do
            lf=$(ours_layout_flag "$ours" "$lay")
            if [ "$lf" = unsupported ]; then
                echo "bench_peers: $ours has no --kv-layout: layout $lay skipped" >&2
                continue
            fi
            # shellcheck disable=SC2086  # $ceil_flag and $lf: zero or more words
            run_ours ours "$lay" "$ours" "$raw/ours_r${r}_H${H}_${lay}" $ceil_flag $lf --cases "$mcases"
            ceil_flag="--no-ceilings"
            if [ "$lay" = pages64 ] && [ $has_fp8 = 1 ]; then
                # The fp8 pool (issue 16), same cases, same round.
                run_ours ours-fp8 pages64 "$ours" "$raw/ours_fp8_r${r}_H${H}" --no-ceilings --kv fp8_e4m3fn --cases "$mcases"
            fi
            if [ -n "$before" ] && [ "$lay" = pages64 ]; then
                # The earlier build knows only the 64-token-page layout.
                run_ours before pages64 "$before" "$raw/before_r${r}_H${H}" --no-ceilings --cases "$mcases"
            fi
        done
        if [ -n "$flashmla" ]; then
            # FlashMLA reads 64-token pages (its own page table) in every run.
            H_Q=$H L=$L CASES="$fcases" SKIP_CHECKS=1 "$flashmla" 2> "$raw/flashmla_r${r}_H${H}.log" |
                flashmla_lines "$r" >> "$raw/all.jsonl"
        fi
        if [ -n "$sglang" ]; then
            # SGLang's kernels run 5-80x longer than ours (extend takes 88 ms at
            # bs 64 / 64k), so they time the SPEC 8 table's shapes only, on
            # 64-token pages: their layout changed nothing in a full-grid run.
            SGLANG_DIR="$sglang" H=$H L=$L CASES="$sglang_cases" KV_LAYOUT=pages64 ITERS=20 ROUND=$r \
                python3 "$here/bench_sglang.py" 2> "$raw/sglang_r${r}_H${H}.log" |
                grep '^{' >> "$raw/all.jsonl"
        fi
        if [ $ragged = 1 ]; then
            # The ragged grid in the same round: ours per layout (and the fp8
            # pool), the before build when it has --lens, FlashMLA per list.
            for lay in ${layouts//,/ }; do
                lf=$(ours_layout_flag "$ours" "$lay")
                [ "$lf" = unsupported ] && continue
                # shellcheck disable=SC2086
                run_ragged ours "$lay" "$ours" "$raw/ragged_ours_r${r}_H${H}_${lay}" $lf
            done
            [ $has_fp8 = 1 ] && run_ragged ours-fp8 pages64 "$ours" "$raw/ragged_ours_fp8_r${r}_H${H}" --kv fp8_e4m3fn
            [ $before_ragged = 1 ] && run_ragged before pages64 "$before" "$raw/ragged_before_r${r}_H${H}"
            if [ -n "$flashmla" ]; then
                i=0
                for l in "${ragged_lists[@]}"; do
                    i=$((i + 1))
                    H_Q=$H L=$L LENS="$l" SKIP_CHECKS=1 "$flashmla" 2> "$raw/flashmla_ragged_r${r}_H${H}_$i.log" |
                        flashmla_lines "$r" >> "$raw/all.jsonl"
                done
            fi
        fi
        echo "bench_peers: round $r H $H done at $(( $(date +%s) - t0 )) s" >&2
    done
done

python3 "$here/lib/peers_report.py" --raw "$raw/all.jsonl" --out "$out" --commit "$commit" \
    --serving-seed "$serving_seed" \
    --command "scripts/bench_peers.sh --rounds $rounds --grid $grid --layouts $layouts${before:+ --before}${sglang:+ --sglang}$([ $ragged = 1 ] && echo " --serving-seed $serving_seed" || echo " --no-ragged")" \
    ${json:+--json "$json"}
