#!/usr/bin/env python3
"""Time SGLang's Triton target-verify kernels (a speed peer, SPEC section 8b).

Times `verify_shared_kv_fwd` (verify_mla.py, grouped-head split-KV, the
kernel PR 33981 added) and `extend_attention_fwd` (the generic fallback
SGLang's Triton backend uses for target verify) on random bf16 inputs, each
call replayed from a CUDA graph (as the server runs it), median of ITERS
replays timed with CUDA events. One JSON line per case and kernel on stdout:

  {"impl": "sglang-verify"|"sglang-extend", "H", "L", "bs", "prefix",
   "median_us", "p10_us", "p90_us", "kv_layout", "iters", "calls_per_graph", ...}

Settings (argument, else environment variable, else default):
  --sglang DIR  SGLANG_DIR  directory holding the sglang package (<repo>/.sglang)
  --heads H     H           query heads (12: Kimi-K3 at TP8; 16: DeepSeek-V3 at TP8)
  --L L         L           draft rows per sequence (8)
  --cases S     CASES       "bs:prefix,..." ("1:4096,8:4096,32:8192")
  --iters N     ITERS       timed graph replays (50)
  --kv-layout K KV_LAYOUT   random (a random permutation of slots) or pages64
                            (slots from shuffled 64-token pages) (pages64)
  --impls LIST  IMPLS       verify,extend (both)
  --mask M      EXTEND_MASK chain (SGLang passes its verify mask to
                            extend_attention_fwd, as the server does) or none
Each graph holds CALLS_PER_GRAPH (default 10) back-to-back calls; the time
reported is per call. Absolute numbers depend on the clocks: compare ratios
measured in one run (SPEC section 8).
"""
import argparse
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def env(name, default):
    v = os.environ.get(name)
    return default if v in (None, "") else v


def parse_cases(s):
    out = []
    for part in s.replace(" ", "").split(","):
        if part:
            bs, _, p = part.partition(":")
            out.append((int(bs), int(p)))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sglang", default=env("SGLANG_DIR", os.path.join(HERE, "..", ".sglang")))
    ap.add_argument("--heads", type=int, default=int(env("H", "12")))
    ap.add_argument("--L", type=int, default=int(env("L", "8")))
    ap.add_argument("--cases", default=env("CASES", "1:4096,8:4096,32:8192"))
    ap.add_argument("--iters", type=int, default=int(env("ITERS", "50")))
    ap.add_argument("--kv-layout", default=env("KV_LAYOUT", "pages64"),
                    choices=("random", "pages64"))
    ap.add_argument("--impls", default=env("IMPLS", "verify,extend"))
    ap.add_argument("--mask", default=env("EXTEND_MASK", "chain"), choices=("chain", "none"))
    ap.add_argument("--calls-per-graph", type=int, default=int(env("CALLS_PER_GRAPH", "10")))
    ap.add_argument("--seed", type=int, default=int(env("SEED", "0")))
    a = ap.parse_args()

    import torch
    sys.path.insert(0, os.path.abspath(a.sglang))
    from sglang.kernels.ops.attention.extend_attention import extend_attention_fwd
    from sglang.kernels.ops.attention.verify_mla import verify_shared_kv_fwd

    dev = torch.device("cuda")
    H, L, D, DV = a.heads, a.L, 576, 512
    sm = 192 ** -0.5
    g = torch.Generator(device=dev)
    g.manual_seed(a.seed)
    impls = [s for s in a.impls.split(",") if s]
    name = {"verify": "sglang-verify", "extend": "sglang-extend"}

    for bs, prefix in parse_cases(a.cases):
        n_kv = bs * prefix
        if a.kv_layout == "pages64":
            pages = (prefix + 63) // 64
            npages = bs * pages + 2
            perm = torch.randperm(npages, device=dev, generator=g)
            t = torch.arange(prefix, device=dev)
            idx = []
            for b in range(bs):
                pg = perm[b * pages + t // 64]
                idx.append(pg * 64 + t % 64)
            kv_indices = torch.cat(idx).to(torch.int64) if idx else \
                torch.zeros(0, dtype=torch.int64, device=dev)
            slots = npages * 64
        else:
            slots = n_kv + 128
            kv_indices = torch.randperm(slots, device=dev, generator=g)[:n_kv].to(torch.int64)
        ntok = bs * L
        kbuf = torch.randn((slots, 1, D), device=dev, generator=g).to(torch.bfloat16)
        vbuf = kbuf[:, :, :DV]
        q = torch.randn((ntok, H, D), device=dev, generator=g).to(torch.bfloat16)
        k = torch.randn((ntok, 1, D), device=dev, generator=g).to(torch.bfloat16)
        v = k[:, :, :DV].contiguous()
        o = torch.empty((ntok, H, DV), device=dev, dtype=torch.bfloat16)
        qo = torch.arange(0, ntok + 1, L, device=dev, dtype=torch.int32)
        kvp = torch.arange(0, n_kv + 1, prefix, device=dev, dtype=torch.int32) if prefix \
            else torch.zeros(bs + 1, device=dev, dtype=torch.int32)
        blk = torch.cat([torch.ones((L, prefix), dtype=torch.bool),
                         torch.tril(torch.ones((L, L), dtype=torch.bool))], 1).reshape(-1)
        mask = blk.repeat(bs).to(dev) if a.mask == "chain" else None
        mask_indptr = torch.arange(0, bs + 1, device=dev, dtype=torch.int64) * blk.numel()

        def verify():
            ok = verify_shared_kv_fwd(q, k, v, o, kbuf, vbuf, qo, kvp, kv_indices, mask, True,
                                      mask_indptr, L, 1.0, 1.0, sm, logit_cap=0.0,
                                      sliding_window_size=-1, sinks=None,
                                      window_kv_offsets=None, xai_temperature_len=-1,
                                      max_bs=bs)
            if not ok:
                raise RuntimeError("verify_shared_kv_fwd declined")

        def extend():
            extend_attention_fwd(q, k, v, o, kbuf, vbuf, qo, kvp, kv_indices, mask, True,
                                 mask_indptr, L, 1.0, 1.0, sm, logit_cap=0.0,
                                 sliding_window_size=-1, sinks=None, window_kv_offsets=None,
                                 xai_temperature_len=-1)

        for impl in impls:
            fn = {"verify": verify, "extend": extend}[impl]
            rec = {"impl": name[impl], "H": H, "L": L, "bs": bs, "prefix": prefix,
                   "kv_layout": a.kv_layout}
            try:
                s = torch.cuda.Stream()
                s.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(s):
                    for _ in range(3):  # compile, allocate scratch
                        fn()
                torch.cuda.current_stream().wait_stream(s)
                torch.cuda.synchronize()
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    for _ in range(a.calls_per_graph):
                        fn()
                for _ in range(3):
                    graph.replay()
                torch.cuda.synchronize()
                times = []
                for _ in range(a.iters):
                    e0 = torch.cuda.Event(enable_timing=True)
                    e1 = torch.cuda.Event(enable_timing=True)
                    e0.record()
                    graph.replay()
                    e1.record()
                    e1.synchronize()
                    times.append(e0.elapsed_time(e1) * 1000.0 / a.calls_per_graph)
                times.sort()
                rec.update(median_us=round(statistics.median(times), 2),
                           p10_us=round(times[len(times) // 10], 2),
                           p90_us=round(times[(len(times) * 9) // 10], 2),
                           iters=a.iters, calls_per_graph=a.calls_per_graph,
                           extend_mask=a.mask if impl == "extend" else None,
                           kv_bytes=n_kv * D * 2)
                del graph
            except Exception as e:
                rec["error"] = "%s: %s" % (type(e).__name__, str(e)[:300])
            print(json.dumps(rec), flush=True)
        del kbuf, vbuf, q, k, v, o
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
