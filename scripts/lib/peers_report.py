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

# The ragged grid of issue 43 (bench_peers.sh times it, this report judges
# it): five fixed batches of one or a few long sequences among short ones,
# then serving-like batches with log-normal prefixes (median 4096, sigma 1.2,
# clipped to 64..131072), one per bs, seeded.
RAGGED_LISTS = ["65536,1024x31", "16384x4,1024x28", "32768,16384x2,8192x4,4096x8,2048x8,1024x9",
                "65536,2048x7", "131072,4096x63"]
SERVING_BS = (8, 32, 64)
SERVING_MEDIAN, SERVING_SIGMA, SERVING_MIN, SERVING_MAX = 4096, 1.2, 64, 131072
DEFAULT_SERVING_SEED = 43


def parse_lens(text):
    """Per-sequence prefixes of a LENS list (N or NxM items, comma-separated,
    SPEC 8a); ValueError naming the bad item."""
    out = []
    for item in text.split(","):
        n, _, m = item.partition("x")
        if not n.isdigit() or (m and not m.isdigit()) or (_ and not m) or (m and int(m) < 1):
            raise ValueError(f"bad LENS item '{item}' (want N or NxM)")
        out += [int(n)] * (int(m) if m else 1)
    return out


def format_lens(prefixes):
    """The LENS spelling of a list: runs of equal prefixes as NxM."""
    items, i = [], 0
    while i < len(prefixes):
        j = i
        while j < len(prefixes) and prefixes[j] == prefixes[i]:
            j += 1
        items.append(str(prefixes[i]) + (f"x{j - i}" if j - i > 1 else ""))
        i = j
    return ",".join(items)


def serving_seed(base, bs):
    return base * 1000 + bs


def serving_lens(base_seed, bs):
    """A serving-like batch of bs prefixes, reproducible from its seed (the
    record carries it; the list itself is in the record too)."""
    import math
    import random
    rng = random.Random(serving_seed(base_seed, bs))
    mu = math.log(SERVING_MEDIAN)
    return [min(SERVING_MAX, max(SERVING_MIN, round(rng.lognormvariate(mu, SERVING_SIGMA)))) for _ in range(bs)]


def ragged_grid(base_seed=DEFAULT_SERVING_SEED):
    """[(lens, seed or None)] in the order of the table."""
    return [(l, None) for l in RAGGED_LISTS] + \
           [(format_lens(serving_lens(base_seed, bs)), serving_seed(base_seed, bs)) for bs in SERVING_BS]


def roofline_us(H, L, bs, P, copy_TBps, gemm_TFLOPs, kv="bf16", kv_tokens=None):
    # The prefix pool at 1 byte an element for fp8 pools; the drafts' bf16.
    # A ragged batch counts its real total (kv_tokens), not bs x the mean.
    tokens = bs * P if kv_tokens is None else kv_tokens
    bytes_ = (tokens * (1 if kv.startswith("fp8") else 2) + bs * L * 2) * D
    flop = 2.0 * H * L * (tokens + bs * L) * (D + DV)
    return max(bytes_ / (copy_TBps * 1e12), flop / (gemm_TFLOPs * 1e12)) * 1e6


SHAPE_NAMES = {(12, 8): "Kimi-K3 TP8", (16, 4): "DeepSeek-V3 TP8"}
# Issue 43's bars on the ragged batches: ours (pages64, bf16) within this
# factor of FlashMLA's time, per shape.
RAGGED_BAR = {(12, 8): 1.25, (16, 4): 1.1}


def abbrev_lens(lens, seed=None, width=48):
    """A table cell for a list: whole when short, else its head and count."""
    n = len(parse_lens(lens))
    head = lens if len(lens) <= width else lens[:lens.rfind(",", 0, width)] + ",..."
    return (f"serving, seed {seed}: " if seed is not None else "") + head + (f" ({n} seqs)" if head != lens else "")


def ragged_section(records, grid):
    """The ragged table (issue 43) and its bars: one row per (shape, batch),
    the batches in grid order, then any other lists found in the records."""
    rag = [r for r in records if "lens" in r]
    if not rag:
        return [], []
    idx = {(r["impl"], r["kv_layout"], r["kv"], r["H"], r["L"], r["lens"]): r for r in rag}
    order = [l for l, _ in grid] + sorted({r["lens"] for r in rag} - {l for l, _ in grid})
    seeds = {l: sd for l, sd in grid}
    extra = [(i, lay, kv) for i, lay, kv in sorted({(r["impl"], r["kv_layout"], r["kv"]) for r in rag})
             if (i, lay, kv) not in (("ours", "pages64", "bf16"), ("flashmla", "pages64", "bf16"))]
    cols = ["shape", "per-sequence prefixes", "bs", "mean prefix", "roofline us", "FlashMLA us", "% roof",
            "ours us", "% roof", "ours / FlashMLA"] + [f"{i} {lay} {kv} us" for i, lay, kv in extra]
    md = ["## Ragged batches (issue 43)", "",
          "Per-sequence prefixes in flashmla_bench's LENS syntax (SPEC 8a), the identical list given to "
          "both tools (`mla-bench --lens`, `LENS=`); bs is the count, the mean prefix their mean, the "
          "roofline over the batch's real total. \"ours\" is the fast tier on 64-token pages, bf16 pool. "
          "Serving batches: log-normal prefixes (median 4096, sigma 1.2, clipped to 64..131072) drawn "
          "with the seed shown; the full lists are in peers.json.", "",
          "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    bars, aim_total, aim_missed = [], 0, []
    shapes = sorted({(r["H"], r["L"]) for r in rag}, key=lambda s: -s[0] * s[1])
    for H, L in shapes:
        name = SHAPE_NAMES.get((H, L), f"H {H} L {L}")
        for lens in order:
            o = idx.get(("ours", "pages64", "bf16", H, L, lens))
            fm = idx.get(("flashmla", "pages64", "bf16", H, L, lens))
            any_r = o or fm or next((r for r in rag if (r["H"], r["L"], r["lens"]) == (H, L, lens)), None)
            if not any_r:
                continue
            cell = lambda r, k, f: format(r[k], f) if r else ""
            row = [name, abbrev_lens(lens, seeds.get(lens)), str(any_r["bs"]), f"{float(any_r['prefix']):.0f}",
                   cell(o or fm, "roofline_us", ".1f"), cell(fm, "median_us", ".1f"), cell(fm, "pct_roofline", ".0f"),
                   cell(o, "median_us", ".1f"), cell(o, "pct_roofline", ".0f")]
            q = o["median_us"] / fm["median_us"] if o and fm else None
            row.append(f"{q:.2f} ({'faster' if q < 1 else 'slower'})" if q is not None else "")
            for i, lay, kv in extra:
                e = idx.get((i, lay, kv, H, L, lens))
                row.append(f"{e['median_us']:.1f} ({e['pct_roofline']:.0f}% roof)" if e else "")
            md.append("| " + " | ".join(row) + " |")
            if q is None:
                continue
            aim_total += 1
            if q >= 1:
                aim_missed.append(f"{name} {abbrev_lens(lens, seeds.get(lens), 24)} {q:.2f}x")
            limit = RAGGED_BAR.get((H, L))
            if limit is not None and lens in seeds:
                bars.append((f"{name} {abbrev_lens(lens, seeds[lens], 24)}: ours <= {limit}x FlashMLA",
                             q <= limit, f"{o['median_us']:.1f} vs {fm['median_us']:.1f} ({q:.2f}x)"))
    md.append("")
    if aim_total:
        bars.append(("aim: ours faster than FlashMLA on every ragged case", not aim_missed,
                     f"faster on {aim_total - len(aim_missed)} of {aim_total}" +
                     (f"; not on: {'; '.join(aim_missed)}" if aim_missed else "")))
    return md, bars


def device_name():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else "unknown"
    except (OSError, subprocess.SubprocessError, IndexError):
        return "unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--raw", help="all.jsonl written by bench_peers.sh")
    ap.add_argument("--out", help="directory for peers.json and peers.md")
    ap.add_argument("--serving-seed", type=int, default=DEFAULT_SERVING_SEED,
                    help="base seed of the serving-like ragged batches (bs b draws with seed*1000+b)")
    ap.add_argument("--ragged-grid", action="store_true",
                    help="print the ragged grid (one 'LENS SEED' line a batch, seed '-' for the fixed "
                         "lists) for bench_peers.sh and exit")
    ap.add_argument("--commit", default="unknown")
    ap.add_argument("--command", default="scripts/bench_peers.sh")
    ap.add_argument("--json", help="also copy peers.json here (e.g. reports/h200/peers.json)")
    a = ap.parse_args()
    if a.ragged_grid:
        for lens, seed in ragged_grid(a.serving_seed):
            print(lens, "-" if seed is None else seed)
        return 0
    if not a.raw or not a.out:
        ap.error("--raw and --out are required")

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
        # A ragged batch (issue 43) is keyed by its list; prefix is its mean.
        key = (r["impl"], r.get("kv_layout", "pages64"), r.get("kv", "bf16"), r["H"], r["L"], r["bs"],
               r["prefix"], r.get("lens") or "")
        groups.setdefault(key, []).append(float(r["median_us"]))
    seeds = {lens: seed for lens, seed in ragged_grid(a.serving_seed) if seed is not None}
    records = []
    for (impl, lay, kv, H, L, bs, P, lens), ts in sorted(groups.items()):
        med = statistics.median(ts)
        kv_tokens = sum(parse_lens(lens)) if lens else None
        roof = roofline_us(H, L, bs, P, copy_bw, gemm, kv, kv_tokens)
        rec = {"impl": impl, "kv_layout": lay, "kv": kv, "H": H, "L": L, "bs": bs, "prefix": P}
        if lens:
            rec.update({"lens": lens, "kv_tokens": kv_tokens})
            if lens in seeds:
                rec["seed"] = seeds[lens]
        rec.update({"median_us": round(med, 2), "rounds_us": [round(t, 2) for t in ts],
                    "roofline_us": round(roof, 2), "pct_roofline": round(100 * roof / med, 1)})
        records.append(rec)
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    doc = {"commit": a.commit, "date": date, "device": device_name(), "command": a.command,
           "copy_bw_TBps": copy_bw, "gemm_TFLOPs": gemm,
           "note": "medians over interleaved rounds in one device command; CUDA graphs; "
                   "kv_layout pages64 = slot lists from shuffled 64-token pages, random = a random "
                   "token permutation; FlashMLA always reads 64-token pages; kv = the pool's dtype "
                   "(impl ours-fp8: fp8_e4m3fn codes, roofline with 1 byte a pool element); records "
                   "with lens: a ragged batch, the per-sequence prefixes as given to both tools "
                   "(LENS syntax), prefix = the mean, roofline over the real total, seed = the "
                   "serving-like batch's draw (log-normal, median 4096, sigma 1.2, clipped to "
                   "64..131072)",
           "records": records}
    os.makedirs(a.out, exist_ok=True)
    js = json.dumps(doc, indent=1)
    with open(f"{a.out}/peers.json", "w") as f:
        f.write(js + "\n")
    if a.json:
        with open(a.json, "w") as f:
            f.write(js + "\n")

    idx = {(r["impl"], r["kv_layout"], r["H"], r["L"], r["bs"], r["prefix"]): r for r in records if "lens" not in r}
    impls = sorted({r["impl"] for r in records if "lens" not in r})
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
        layouts = sorted({r["kv_layout"] for r in records if r["impl"] == "ours" and r["H"] == H and "lens" not in r})
        for lay in layouts:
            cols += [f"ours {lay} us", f"% roof"]
        cols += ["FlashMLA us", "% roof"]
        for lay in layouts:
            cols += [f"ours {lay} / FlashMLA"]
        others = [i for i in impls if i not in ("ours", "flashmla")]
        for i in others:
            cols += [f"{i} us"]
        md += ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
        cases = sorted({(r["bs"], r["prefix"]) for r in records if r["H"] == H and r["L"] == L and "lens" not in r})
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
    rmd, rbars = ragged_section(records, ragged_grid(a.serving_seed))
    md += rmd
    bars += rbars
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
