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
#       [--layouts pages64,random] [--out DIR] [--commit HASH] [--json reports/h200/peers.json]
#
# Writes DIR/raw/*.jsonl (one line per timed case and round) and, through
# scripts/lib/peers_report.py, peers.json and peers.md (medians over rounds,
# ratios, % of the roofline measured in the same run).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)

usage() { sed -n 2,17p "$0" | sed 's/^# \{0,1\}//'; }

sglang_cases="1:1024,1:4096,1:65536,8:16384,32:4096,32:16384,64:16384"
ours="" before="" flashmla="" sglang="" rounds=2 grid=full layouts="pages64,random"
out="${OUT:-out/peers}" commit="${MLA_COMMIT:-unknown}" json=""
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
    print(json.dumps({"impl": impl, "H": r["heads"], "L": r["q_len"], "bs": r["bs"],
                      "prefix": r["prefix"], "median_us": r["median_us"], "kv_layout": layout,
                      "kv": d.get("kv", "bf16"),
                      "round": int(rnd), "copy_bw_TBps": d.get("copy_bw_TBps"),
                      "gemm_TFLOPs": d.get("gemm_TFLOPs")}))
PY
}

t0=$(date +%s)
ceil_flag=""   # the first run of ours measures the copy and GEMM ceilings
# A build from before --kv-layout existed times 64-token pages only.
ours_layout_flag() { # binary layout
    if "$1" --help 2>&1 | grep -q -- --kv-layout; then echo "--kv-layout $2"
    elif [ "$2" = pages64 ]; then echo ""
    else echo "unsupported"; fi
}
for r in $(seq 1 "$rounds"); do
    for sh in $shapes; do
        H=${sh%,*} L=${sh#*,}
        read -r mcases fcases <<<"$(cases_for "$H" "$L")"
        for lay in ${layouts//,/ }; do
            d="$raw/ours_r${r}_H${H}_${lay}"; mkdir -p "$d"
            lf=$(ours_layout_flag "$ours" "$lay")
            if [ "$lf" = unsupported ]; then
                echo "bench_peers: $ours has no --kv-layout: layout $lay skipped" >&2
            elif "$ours" --backends fast $ceil_flag $lf --cases "$mcases" --out "$d" \
                   > "$d.log" 2>&1; then
                ours_lines ours "$lay" "$r" "$d/bench.json" >> "$raw/all.jsonl"
            else
                echo "bench_peers: ours failed (H $H, $lay, round $r): $(tail -1 "$d.log")" >&2
            fi
            ceil_flag="--no-ceilings"
            if [ "$lay" = pages64 ] && "$ours" --help 2>&1 | grep -q -- "--kv T"; then
                # The fp8 pool (issue 16), same cases, same round.
                d="$raw/ours_fp8_r${r}_H${H}"; mkdir -p "$d"
                if "$ours" --backends fast --no-ceilings --kv fp8_e4m3fn --cases "$mcases" --out "$d" \
                       > "$d.log" 2>&1; then
                    ours_lines ours-fp8 pages64 "$r" "$d/bench.json" >> "$raw/all.jsonl"
                else
                    echo "bench_peers: ours fp8 failed (H $H, round $r): $(tail -1 "$d.log")" >&2
                fi
            fi
            if [ -n "$before" ] && [ "$lay" = pages64 ]; then
                # The earlier build knows only the 64-token-page layout.
                d="$raw/before_r${r}_H${H}"; mkdir -p "$d"
                if "$before" --backends fast --no-ceilings --cases "$mcases" --out "$d" > "$d.log" 2>&1; then
                    ours_lines before pages64 "$r" "$d/bench.json" >> "$raw/all.jsonl"
                else
                    echo "bench_peers: before failed (H $H, round $r): $(tail -1 "$d.log")" >&2
                fi
            fi
        done
        if [ -n "$flashmla" ]; then
            # FlashMLA reads 64-token pages (its own page table) in every run.
            H_Q=$H L=$L CASES="$fcases" SKIP_CHECKS=1 "$flashmla" 2> "$raw/flashmla_r${r}_H${H}.log" |
                python3 -c '
import json, sys
for line in sys.stdin:
    try: d = json.loads(line)
    except ValueError: continue
    if "median_us" in d:
        d["kv_layout"] = "pages64"; d["round"] = int(sys.argv[1]); print(json.dumps(d))
    elif "error" in d: print("flashmla:", d["error"], file=sys.stderr)
' "$r" >> "$raw/all.jsonl"
        fi
        if [ -n "$sglang" ]; then
            # SGLang's kernels run 5-80x longer than ours (extend takes 88 ms at
            # bs 64 / 64k), so they time the SPEC 8 table's shapes only, on
            # 64-token pages: their layout changed nothing in a full-grid run.
            SGLANG_DIR="$sglang" H=$H L=$L CASES="$sglang_cases" KV_LAYOUT=pages64 ITERS=20 ROUND=$r \
                python3 "$here/bench_sglang.py" 2> "$raw/sglang_r${r}_H${H}.log" |
                grep '^{' >> "$raw/all.jsonl"
        fi
        echo "bench_peers: round $r H $H done at $(( $(date +%s) - t0 )) s" >&2
    done
done

python3 "$here/lib/peers_report.py" --raw "$raw/all.jsonl" --out "$out" --commit "$commit" \
    --command "scripts/bench_peers.sh --rounds $rounds --grid $grid --layouts $layouts${before:+ --before}${sglang:+ --sglang}" \
    ${json:+--json "$json"}
