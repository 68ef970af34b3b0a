#!/usr/bin/env python3
"""Turn the raw lines of scripts/bench_peers.sh into peers.json and peers.md.

Each raw line is one implementation timed at one case in one round (its own
median over CUDA-graph replays). Here the rounds are reduced to their median,
every implementation is put beside ours at the same case, and each time is
stated as a share of the roofline of SPEC 8, with the copy bandwidth and GEMM
rate that mla-bench measured in the same device command.
"""
import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys

D, DV = 576, 512


def roofline_us(H, L, bs, P, copy_TBps, gemm_TFLOPs, kv="bf16"):
    # The prefix pool at 1 byte an element for fp8 pools; the drafts' bf16.
    bytes_ = bs * (P * (1 if kv.startswith("fp8") else 2) + L * 2) * D
    flop = 2.0 * bs * H * L * (P + L) * (D + DV)
    return max(bytes_ / (copy_TBps * 1e12), flop / (gemm_TFLOPs * 1e12)) * 1e6


def device_name():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else "unknown"
    except (OSError, subprocess.SubprocessError, IndexError):
        return "unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--raw", required=True, help="all.jsonl written by bench_peers.sh")
    ap.add_argument("--out", required=True, help="directory for peers.json and peers.md")
    ap.add_argument("--commit", default="unknown")
    ap.add_argument("--command", default="scripts/bench_peers.sh")
    ap.add_argument("--json", help="also copy peers.json here (e.g. reports/h200/peers.json)")
    a = ap.parse_args()

    lines = []
    with open(a.raw) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                lines.append(json.loads(line))
            except ValueError:
                print(f"peers_report: {a.raw}:{n}: not JSON, skipped", file=sys.stderr)
    if not lines:
        print("peers_report: no timings in the raw file", file=sys.stderr)
        return 1
    # The first run of ours measured the ceilings; later ones were told not to.
    first = next((r for r in lines if r["impl"] == "ours" and r.get("copy_bw_TBps")), None)
    copy_bw = first["copy_bw_TBps"] if first else 4.27
    gemm = first["gemm_TFLOPs"] if first else 686.0

    groups = {}
    for r in lines:
        key = (r["impl"], r.get("kv_layout", "pages64"), r.get("kv", "bf16"), r["H"], r["L"], r["bs"], r["prefix"])
        groups.setdefault(key, []).append(float(r["median_us"]))
    records = []
    for (impl, lay, kv, H, L, bs, P), ts in sorted(groups.items()):
        med = statistics.median(ts)
        roof = roofline_us(H, L, bs, P, copy_bw, gemm, kv)
        records.append({"impl": impl, "kv_layout": lay, "kv": kv, "H": H, "L": L, "bs": bs, "prefix": P,
                        "median_us": round(med, 2), "rounds_us": [round(t, 2) for t in ts],
                        "roofline_us": round(roof, 2), "pct_roofline": round(100 * roof / med, 1)})
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    doc = {"commit": a.commit, "date": date, "device": device_name(), "command": a.command,
           "copy_bw_TBps": copy_bw, "gemm_TFLOPs": gemm,
           "note": "medians over interleaved rounds in one device command; CUDA graphs; "
                   "kv_layout pages64 = slot lists from shuffled 64-token pages, random = a random "
                   "token permutation; FlashMLA always reads 64-token pages; kv = the pool's dtype "
                   "(impl ours-fp8: fp8_e4m3fn codes, roofline with 1 byte a pool element)",
           "records": records}
    os.makedirs(a.out, exist_ok=True)
    js = json.dumps(doc, indent=1)
    with open(f"{a.out}/peers.json", "w") as f:
        f.write(js + "\n")
    if a.json:
        with open(a.json, "w") as f:
            f.write(js + "\n")

    idx = {(r["impl"], r["kv_layout"], r["H"], r["L"], r["bs"], r["prefix"]): r for r in records}
    impls = sorted({r["impl"] for r in records})
    md = [f"# Same-run peers benchmark on {doc['device']}", "",
          f"commit `{a.commit}`, {date}, `{a.command}`.",
          f"Ceilings measured in this run: copy {copy_bw:.3f} TB/s, cuBLAS bf16 GEMM {gemm:.1f} TFLOP/s. "
          "Roofline = max(KV bytes / copy bw, flop / GEMM rate) (SPEC 8). Times are medians over the "
          "rounds of each implementation's CUDA-graph median; ratios compare timings from this run only.",
          ""]
    shapes = sorted({(r["H"], r["L"]) for r in records}, key=lambda s: -s[0] * s[1])
    bars = []
    for H, L in shapes:
        name = {(12, 8): "Kimi-K3 TP8", (16, 4): "DeepSeek-V3 TP8"}.get((H, L), f"H {H} L {L}")
        md += [f"## {name} (H {H}, L {L})", ""]
        cols = ["bs", "prefix", "roofline us"]
        layouts = sorted({r["kv_layout"] for r in records if r["impl"] == "ours" and r["H"] == H})
        for lay in layouts:
            cols += [f"ours {lay} us", f"% roof"]
        cols += ["FlashMLA us", "% roof"]
        for lay in layouts:
            cols += [f"ours {lay} / FlashMLA"]
        others = [i for i in impls if i not in ("ours", "flashmla")]
        for i in others:
            cols += [f"{i} us"]
        md += ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
        cases = sorted({(r["bs"], r["prefix"]) for r in records if r["H"] == H and r["L"] == L})
        for bs, P in cases:
            roof = roofline_us(H, L, bs, P, copy_bw, gemm)
            row = [str(bs), str(P), f"{roof:.1f}"]
            fm = idx.get(("flashmla", "pages64", H, L, bs, P))
            for lay in layouts:
                o = idx.get(("ours", lay, H, L, bs, P))
                row += [f"{o['median_us']:.1f}" if o else "", f"{o['pct_roofline']:.0f}" if o else ""]
            row += [f"{fm['median_us']:.1f}" if fm else "", f"{fm['pct_roofline']:.0f}" if fm else ""]
            for lay in layouts:
                o = idx.get(("ours", lay, H, L, bs, P))
                if o and fm:
                    q = o["median_us"] / fm["median_us"]
                    row.append(f"{q:.2f} ({'faster' if q < 1 else 'slower'})")
                else:
                    row.append("")
            for i in others:
                if i == "ours-fp8":
                    f8 = idx.get((i, "pages64", H, L, bs, P))
                    o = idx.get(("ours", "pages64", H, L, bs, P))
                    row.append(f"{f8['median_us']:.1f} ({f8['pct_roofline']:.0f}% roof, "
                               f"{f8['median_us'] / o['median_us']:.2f}x ours bf16)" if f8 and o else "")
                    continue
                lay_pref = [x for x in ("pages64", "random") if (i, x, H, L, bs, P) in idx]
                row.append("; ".join(f"{idx[(i, x, H, L, bs, P)]['median_us']:.1f} ({x})" for x in lay_pref))
            md.append("| " + " | ".join(row) + " |")
            o = idx.get(("ours", "pages64", H, L, bs, P))
            if o and fm:
                # The speed bars of the performance issue, judged on this run.
                if (H, L) == (12, 8) and roof >= 35:
                    bars.append((f"K3 bs {bs} / {P}: ours <= FlashMLA", o["median_us"] <= fm["median_us"],
                                 f"{o['median_us']:.1f} vs {fm['median_us']:.1f}"))
                if (H, L) == (16, 4) and bs in (32, 64) and P == 16384:
                    bars.append((f"DSV3 bs {bs} / 16k: ours <= FlashMLA", o["median_us"] <= fm["median_us"],
                                 f"{o['median_us']:.1f} vs {fm['median_us']:.1f}"))
            if o and bs == 1 and P <= 4096:
                bars.append((f"{name} bs 1 / {P}: <= 10 us", o["median_us"] <= 10.0, f"{o['median_us']:.1f}"))
            f8 = idx.get(("ours-fp8", "pages64", H, L, bs, P))
            if o and f8 and (H, L) == (16, 4) and bs == 32 and P == 16384:
                bars.append((f"DSV3 bs 32 / 16k fp8: <= 0.6x ours bf16", f8["median_us"] <= 0.6 * o["median_us"],
                             f"{f8['median_us']:.1f} vs bf16 {o['median_us']:.1f} ({f8['median_us'] / o['median_us']:.2f}x)"))
            b = idx.get(("before", "pages64", H, L, bs, P))
            # 2%: about five times the median round-to-round spread of one
            # run's medians (0.36% over the 64 pages64 ours / before records
            # of the 33c0a76 run); the bs 64 cases swing by up to 13% between
            # rounds (docs/perf/2026-12-01-measurement.md, "The bs 64
            # swings"), which no fixed allowance covers: a NO there is read
            # against rounds_us before it is called a loss.
            if o and b:
                bars.append((f"{name} bs {bs} / {P}: not slower than before", o["median_us"] <= b["median_us"] * 1.02,
                             f"{o['median_us']:.1f} vs before {b['median_us']:.1f} ({100 * (o['median_us'] / b['median_us'] - 1):+.1f}%)"))
        md.append("")
    if bars:
        md += ["## Bars judged on this run", "", "| bar | met | figures |", "|---|---|---|"]
        md += [f"| {n} | {'yes' if ok else 'NO'} | {fig} |" for n, ok, fig in bars]
        md.append("")
    with open(f"{a.out}/peers.md", "w") as f:
        f.write("\n".join(md))
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
