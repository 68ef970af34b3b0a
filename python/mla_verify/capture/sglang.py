#!/usr/bin/env python3
"""Capture SGLang's production target-verify kernels as trace fixtures.

Runs SGLang's Triton kernels `verify_shared_kv_fwd` (verify_mla.py, the
grouped-head split-KV kernel as shipped), `verify_splitkv_fwd`
(verify_splitkv.py, the per-head split-KV kernel) and `extend_attention_fwd`
(extend_attention.py, the generic fallback) on seeded random calls, with the
argument order and conventions of SGLang's TritonAttnBackend.forward_extend
(python/sglang/srt/layers/attention/triton_backend.py), each call passing
through `mla_capture.wrap(fn, kind=<name>)`. Every call that ran becomes one
schema-1.0.0 `source="trace"` fixture whose /expected/o (and /expected/lse for
extend_attention_fwd, which is asked for it) is what the kernel wrote; a call
that declined (returned False) is recorded as declined, not captured.

    python3 -m mla_verify.capture --sglang .sglang --out caps \
        [--long-out long] [--only k3-p113,...] [--budget-s 300] [--stub]

--sglang: a directory holding the `sglang` package, at least
  sglang/kernels/ops/attention/{verify_mla,verify_splitkv,extend_attention}.py
  (extracted from the wheel, see README "Validate a production kernel"; the
  modules they import, sglang.srt.utils and sglang.srt.environ, may be stubs).
--out: where the fixtures and manifest.draft.json go (files are renamed
  <case>--<kernel>.h5); --long-out: where cases marked long go (kept out of the
  shipped set: large files).
--stub: no torch/GPU; the numpy stand-ins of mla_verify.capture.standin take
  the kernels' places (checks the argument building, capture and manifest).

SGLang passes its target-verify custom_mask as a CUDA bool tensor, which
mla_capture 1.0.0 cannot read (np.asarray raises and capture switches itself
off); this driver copies the mask to the host for it in-process
(SGLANG_CAPTURE_NO_MASK_SHIM=1 turns that off, to show the failure).

Inputs follow the project's catalogue habits: a stored seed per case, prefix
slots drawn from shuffled 64-token pages, every pool slot no sequence
references (two spare pages, and the slots the graph-sized index padding
points at) NaN, output buffers NaN before the call (an element the kernel
never writes stays NaN and fails).
"""

import argparse
import datetime
import json
import os
import platform
import shutil
import sys
import time
import traceback
import warnings

import numpy as np

from mla_verify import capture as mla_capture

# The repository root when running from a checkout (python/mla_verify/capture/).
ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))

SGLANG_VERSION = "0.5.23"
KERNELS = ("verify_shared_kv_fwd", "verify_splitkv_fwd", "extend_attention_fwd")
SHORT = {"verify_shared_kv_fwd": "verify_mla", "verify_splitkv_fwd": "verify_splitkv",
         "extend_attention_fwd": "extend"}
PAGE = 64
NAN_BF16 = np.uint16(0x7FC0)

K3 = dict(model="kimi-k3-tp8", H=12, Hkv=1, D=576, Dv=512, sm=192 ** -0.5)
DSV3 = dict(model="deepseek-v3-tp8", H=16, Hkv=1, D=576, Dv=512, sm=192 ** -0.5)
# Tied-KV MQA at head_dim 256 (the width verify_splitkv.py is tuned for):
# verify_splitkv_fwd declines every MLA width (D != Dv), so this is the only
# shape on which it runs. V = K (the fixture format holds one latent pool).
MQA256 = dict(model="mqa256-tiedkv", H=16, Hkv=1, D=256, Dv=256, sm=256 ** -0.5)


def case(name, base, prefixes, L=None, drafts=None, seed=None, **kw):
    c = dict(base)
    c.update(name=name, prefixes=list(prefixes), L=L, drafts=drafts, seed=seed,
             k_scale=1.0, v_scale=1.0, causal=True, mask="chain", sinks=False,
             window=-1, logit_cap=0.0, q_gain=1.0, kernels=KERNELS, long=False,
             graph_pad=0, poison_scratch=False, xai=-1, trigger=None, shape_only=None)
    c.update(kw)
    if c["L"] is None and c["drafts"] is None:
        c["L"] = 8 if base is K3 else 4
    return c


# In priority order (a time budget stops the list early). `trigger` names the
# feature a case exercises, for the manifest's decline records.
CASES = [
    case("k3-p113", K3, [113], seed=1001),
    case("k3-empty-in-batch", K3, [0, 77, 130], seed=1002, trigger="an empty prefix inside a batch"),
    case("k3-ragged", K3, [1, 2, 3, 63, 64, 65], seed=1003),
    case("k3-p1", K3, [1], seed=1004),
    case("k3-empty", K3, [0], seed=1005, trigger="empty prefix, kv_indices empty (numel 0)"),
    case("k3-empty-graphbuf", K3, [0], seed=1006, graph_pad=256,
         trigger="empty prefix, kv_indices a graph-sized buffer (numel > 0)"),
    case("k3-splits", K3, [1000], seed=1007),
    case("k3-scales", K3, [150, 40], seed=1008, k_scale=1.7, v_scale=0.6),
    case("k3-peaky", K3, [200, 90], seed=1009, q_gain=4.0),
    case("dsv3-p200", DSV3, [200, 65], seed=2001),
    case("dsv3-empty-in-batch", DSV3, [0, 90], seed=2002, trigger="an empty prefix inside a batch"),
    case("dsv3-p1", DSV3, [1], seed=2003),
    case("k3-l1", K3, [45], L=1, seed=1011),
    case("k3-l2", K3, [45], L=2, seed=1012),
    case("k3-l3", K3, [45], L=3, seed=1013),
    case("k3-l5", K3, [45], L=5, seed=1015),
    case("k3-l7", K3, [45], L=7, seed=1017),
    case("k3-noncausal", K3, [50, 70], seed=1020, causal=False, mask="none",
         trigger="not causal (is_causal False, no custom_mask)"),
    case("k3-noncausal-mask", K3, [50, 70], seed=1021, causal=False, mask="full",
         trigger="not causal (is_causal False with a custom_mask)"),
    case("k3-sinks", K3, [50, 70], seed=1022, sinks=True, trigger="sinks present"),
    case("k3-window", K3, [100, 30], seed=1023, window=40, mask="none",
         trigger="sliding_window_size 40"),
    case("k3-logitcap", K3, [50, 70], seed=1024, logit_cap=2.0, trigger="logit_cap 2.0"),
    case("k3-kvheads2", K3, [60, 33], seed=1025, Hkv=2,
         trigger="2 KV heads, group 6 (not a power of two)"),
    case("dsv3-kvheads2", DSV3, [60, 33], seed=2025, Hkv=2,
         trigger="2 KV heads, group 8 (a power of two)"),
    case("k3-ragged-drafts", K3, [40, 25], drafts=[8, 5], seed=1026,
         trigger="ragged draft counts (num_q_tokens != bs * max_len_extend)"),
    # Declines that no fixture can hold: only the verify kernels are called.
    case("k3-xai-temp", K3, [20], seed=1040, xai=16, mask="none",
         kernels=("verify_shared_kv_fwd", "verify_splitkv_fwd"), trigger="xai_temperature_len 16"),
    case("k3-bs0", K3, [], seed=1041, kernels=("verify_shared_kv_fwd", "verify_splitkv_fwd"),
         trigger="bs 0 (qo_indptr of length 1)"),
    case("k3-vwidth", K3, [20], seed=1042, shape_only="v_buffer 576 wide, v_extend 512",
         kernels=("verify_shared_kv_fwd", "verify_splitkv_fwd"), trigger="v dims disagree"),
    case("k3-dv-gt-d", K3, [20], seed=1043, shape_only="head_dim 512 < v_head_dim 576",
         kernels=("verify_shared_kv_fwd", "verify_splitkv_fwd"), trigger="head_dim < v_head_dim"),
    case("mqa256-p300", MQA256, [300, 57], seed=3001),
    case("mqa256-empty-in-batch", MQA256, [0, 40], seed=3002, trigger="an empty prefix inside a batch"),
    case("mqa256-empty", MQA256, [0], seed=3003, trigger="empty prefix, kv_indices empty (numel 0)"),
    case("mqa256-stale-scratch", MQA256, [5], seed=3004, poison_scratch=True,
         kernels=("verify_shared_kv_fwd", "verify_splitkv_fwd"),
         trigger="scratch buffers holding NaN from earlier use (splits that get no keys)"),
    case("k3-topk2", K3, [30], L=4, seed=1044, mask="tree",
         trigger="topk 2 tree custom_mask"),
    case("k3-long", K3, [12000], seed=1030, long=True),
]


# mla_capture 1.0.0 reads custom_mask with np.asarray(), which raises on a
# CUDA tensor (and capture then switches itself off): SGLang passes its
# target-verify mask as a CUDA bool tensor. Until mla_capture._mask_causality
# copies torch tensors to the host itself, do it here (same semantics).
_mask_causality_orig = mla_capture._mask_causality


def _mask_causality_host(mask, mask_indptr, qo, kvp, skip_prefix_mask):
    if mla_capture._is_torch(mask):
        mask = mask.detach().cpu().numpy()
    return _mask_causality_orig(mask, mask_indptr, qo, kvp, skip_prefix_mask)


if os.environ.get("SGLANG_CAPTURE_NO_MASK_SHIM", "") in ("", "0"):
    mla_capture._mask_causality = _mask_causality_host


# ------------------------------------------------------------- inputs ----

def bf16(rng, shape, scale=1.0):
    return mla_capture.f32_to_bf16((scale * rng.standard_normal(shape)).astype(np.float32))


def tree_mask(L):
    """A topk=2 draft tree: token 0 is the root, token t's parent (t-1)//2."""
    m = np.zeros((L, L), dtype=bool)
    for t in range(L):
        u = t
        while True:
            m[t, u] = True
            if u == 0:
                break
            u = (u - 1) // 2
    return m


def build_inputs(c):
    """numpy inputs of one case (bf16 as uint16 bits); draw order: pool, q,
    k_extend, sinks."""
    rng = np.random.default_rng(c["seed"])
    prefixes = c["prefixes"]
    bs = len(prefixes)
    drafts = c["drafts"] if c["drafts"] is not None else [c["L"]] * bs
    H, Hkv, D, Dv = c["H"], c["Hkv"], c["D"], c["Dv"]
    qo = np.zeros(bs + 1, np.int32)
    qo[1:] = np.cumsum(drafts)
    kvp = np.zeros(bs + 1, np.int32)
    kvp[1:] = np.cumsum(prefixes)
    ntok, nkv = int(qo[-1]), int(kvp[-1])
    pages_needed = sum((p + PAGE - 1) // PAGE for p in prefixes)
    npages = pages_needed + 2  # two spare pages nobody references
    slots_total = npages * PAGE
    perm = rng.permutation(npages)
    kvi = np.zeros(nkv, np.int64)
    used = np.zeros(slots_total, bool)
    nxt = 0
    for b, p in enumerate(prefixes):
        for t in range(p):
            s = perm[nxt + t // PAGE] * PAGE + t % PAGE
            kvi[kvp[b] + t] = s
            used[s] = True
        nxt += (p + PAGE - 1) // PAGE
    pool = bf16(rng, (slots_total, Hkv, D))
    pool[~used] = NAN_BF16
    q = bf16(rng, (ntok, H, D), c["q_gain"])
    k_ext = bf16(rng, (ntok, Hkv, D))
    v_ext = np.ascontiguousarray(k_ext[:, :, :Dv])  # MLA: V is the latent's first Dv columns
    sinks = (rng.standard_normal(H) * 1.5 + 1.0).astype(np.float32) if c["sinks"] else None
    if c["graph_pad"]:
        # A graph-sized index buffer: entries past kv_indptr[-1] point at a
        # poisoned slot, so reading them shows up as NaN.
        spare = np.flatnonzero(~used)[0]
        kvi = np.concatenate([kvi, np.full(c["graph_pad"], spare, np.int64)])
    mask = mask_indptr = None
    if c["mask"] in ("chain", "full", "tree"):
        rows, mi = [], [0]
        for b in range(bs):
            L, P = drafts[b], prefixes[b]
            ext = {"chain": np.tril(np.ones((L, L), bool)), "full": np.ones((L, L), bool),
                   "tree": tree_mask(L)}[c["mask"]]
            blk = np.concatenate([np.ones((L, P), bool), ext], axis=1)
            rows.append(blk.reshape(-1))
            mi.append(mi[-1] + blk.size)
        mask = np.concatenate(rows) if rows else np.zeros(0, bool)
        mask_indptr = np.asarray(mi, np.int64)
    return dict(q=q, k_ext=k_ext, v_ext=v_ext, pool=pool, qo=qo, kvp=kvp, kvi=kvi,
                mask=mask, mask_indptr=mask_indptr, sinks=sinks, ntok=ntok, bs=bs,
                max_len=int(max(drafts)) if drafts else 0, drafts=list(drafts))


# ------------------------------------------------------------ backends ----

class TorchBackend:
    def __init__(self, sglang_dir):
        import torch
        sys.path.insert(0, os.path.abspath(sglang_dir))
        from sglang.kernels.ops.attention import extend_attention as ea
        from sglang.kernels.ops.attention import verify_mla as vm
        from sglang.kernels.ops.attention import verify_splitkv as vs
        self.torch, self.vm, self.vs = torch, vm, vs
        self.fns = {"verify_shared_kv_fwd": vm.verify_shared_kv_fwd,
                    "verify_splitkv_fwd": vs.verify_splitkv_fwd,
                    "extend_attention_fwd": ea.extend_attention_fwd}
        self.dev = torch.device("cuda", torch.cuda.current_device())
        self.device_name = torch.cuda.get_device_name(self.dev)
        self.versions = {"torch": torch.__version__,
                         "triton": __import__("triton").__version__}

    def bf16(self, a):
        t = self.torch.from_numpy(np.ascontiguousarray(a).view(np.int16))
        return t.view(self.torch.bfloat16).to(self.dev)

    def ints(self, a, dt):
        return self.torch.from_numpy(np.ascontiguousarray(a).astype(dt)).to(self.dev)

    def tensors(self, x, c):
        t = self.torch
        kb = self.bf16(x["pool"])
        d = dict(q=self.bf16(x["q"]), k=self.bf16(x["k_ext"]), v=self.bf16(x["v_ext"]),
                 k_buffer=kb, v_buffer=kb[:, :, :c["Dv"]],
                 qo=self.ints(x["qo"], np.int32), kvp=self.ints(x["kvp"], np.int32),
                 kvi=self.ints(x["kvi"], np.int64),
                 mask=None if x["mask"] is None else self.torch.from_numpy(x["mask"]).to(self.dev),
                 mask_indptr=None if x["mask_indptr"] is None else self.ints(x["mask_indptr"], np.int64),
                 sinks=None if x["sinks"] is None else self.torch.from_numpy(x["sinks"]).to(self.dev))
        if d["mask_indptr"] is None:
            d["mask_indptr"] = t.zeros(x["bs"] + 1, dtype=t.int64, device=self.dev)
        return d

    def out(self, ntok, H, Dv):
        return self.torch.full((ntok, H, Dv), float("nan"), dtype=self.torch.bfloat16,
                               device=self.dev)

    def lse(self, ntok, H):
        return self.torch.full((ntok, H), float("nan"), dtype=self.torch.float32,
                               device=self.dev)

    def shape_only(self, c, what):
        """Tensors for the shape-level declines (never launched)."""
        t = self.torch
        n = c["L"]
        if what.startswith("v_buffer"):
            q = t.zeros((n, c["H"], 576), dtype=t.bfloat16, device=self.dev)
            k = t.zeros((n, 1, 576), dtype=t.bfloat16, device=self.dev)
            v = t.zeros((n, 1, 512), dtype=t.bfloat16, device=self.dev)
            kb = t.zeros((64, 1, 576), dtype=t.bfloat16, device=self.dev)
            vb = t.zeros((64, 1, 576), dtype=t.bfloat16, device=self.dev)
        else:
            q = t.zeros((n, c["H"], 512), dtype=t.bfloat16, device=self.dev)
            k = t.zeros((n, 1, 512), dtype=t.bfloat16, device=self.dev)
            v = t.zeros((n, 1, 576), dtype=t.bfloat16, device=self.dev)
            kb = t.zeros((64, 1, 512), dtype=t.bfloat16, device=self.dev)
            vb = t.zeros((64, 1, 576), dtype=t.bfloat16, device=self.dev)
        o = t.zeros((n, c["H"], v.shape[2]), dtype=t.bfloat16, device=self.dev)
        return q, k, v, o, kb, vb

    def poison_scratch(self, c, d, x, kernel):
        """Fill the cached scratch the kernel will use with NaN (memory that
        held something else before: torch.empty does not clear it)."""
        t = self.torch
        bs, H, Hkv, D, Dv, L = x["bs"], c["H"], c["Hkv"], c["D"], c["Dv"], x["max_len"]
        if kernel == "verify_splitkv_fwd":
            n = self.vs.choose_n_splits(d["kvi"].shape[0] / max(1, bs))
            vk = self.vs._get_vk(bs, H, Hkv, D, Dv, L, d["q"].device, n_splits=n)
        elif kernel == "verify_shared_kv_fwd":
            vk = self.vm._get_vmla(bs, H, D, Dv, L, d["q"].device, H // Hkv)
        else:
            return False
        vk.att_out.fill_(float("nan"))
        vk.att_lse.fill_(float("nan"))
        return True

    def clear_caches(self):
        self.vm._VMLA_CACHE.clear()
        self.vs._VK_CACHE.clear()

    def sync(self):
        self.torch.cuda.synchronize()

    def nan_count(self, o):
        return int(self.torch.isnan(o.float()).sum().item())

    def host(self, o):
        return o.float().cpu().numpy()


class StubBackend:
    """numpy stand-ins (mla_verify.capture.standin) in the kernels' places."""

    def __init__(self, sglang_dir):
        from mla_verify.capture import standin
        ver = standin.verify_mla_fwd

        def verify_shared_kv_fwd(q_extend, k_extend, v_extend, o_extend, k_buffer, v_buffer,
                                 qo_indptr, kv_indptr, kv_indices, custom_mask, is_causal,
                                 mask_indptr, max_len_extend, k_scale, v_scale, sm_scale=None,
                                 logit_cap=0.0, skip_prefix_custom_mask=True,
                                 sliding_window_size=-1, sinks=None, window_kv_offsets=None,
                                 xai_temperature_len=-1, max_bs=None):
            if (xai_temperature_len or -1) > 0 or q_extend.shape[2] != k_buffer.shape[2] \
                    or v_extend.shape[2] != v_buffer.shape[2] \
                    or q_extend.shape[2] < v_extend.shape[2]:
                return False
            return ver(q_extend, k_extend, v_extend, o_extend, k_buffer, v_buffer, qo_indptr,
                       kv_indptr, kv_indices, custom_mask, is_causal, mask_indptr,
                       max_len_extend, k_scale, v_scale, sm_scale, logit_cap,
                       skip_prefix_custom_mask, sliding_window_size, sinks)

        def verify_splitkv_fwd(*a, **k):
            if a[0].shape[2] != a[2].shape[2]:
                return False
            return verify_shared_kv_fwd(*a, **k)

        self.fns = {"verify_shared_kv_fwd": verify_shared_kv_fwd,
                    "verify_splitkv_fwd": verify_splitkv_fwd,
                    "extend_attention_fwd": standin.extend_attention_fwd}
        self.device_name = "cpu (numpy stand-in)"
        self.versions = {"numpy": np.__version__}

    def tensors(self, x, c):
        return dict(q=x["q"], k=x["k_ext"], v=x["v_ext"], k_buffer=x["pool"],
                    v_buffer=x["pool"][:, :, :c["Dv"]], qo=x["qo"], kvp=x["kvp"], kvi=x["kvi"],
                    mask=x["mask"], mask_indptr=x["mask_indptr"] if x["mask_indptr"] is not None
                    else np.zeros(x["bs"] + 1, np.int64), sinks=x["sinks"])

    def out(self, ntok, H, Dv):
        return np.full((ntok, H, Dv), NAN_BF16, np.uint16)

    def lse(self, ntok, H):
        return np.full((ntok, H), np.nan, np.float32)

    def shape_only(self, c, what):
        n = c["L"]
        z = lambda *s: np.zeros(s, np.uint16)  # noqa: E731
        if what.startswith("v_buffer"):
            return (z(n, c["H"], 576), z(n, 1, 576), z(n, 1, 512), z(n, c["H"], 512),
                    z(64, 1, 576), z(64, 1, 576))
        return (z(n, c["H"], 512), z(n, 1, 512), z(n, 1, 576), z(n, c["H"], 576),
                z(64, 1, 512), z(64, 1, 576))

    def poison_scratch(self, c, d, x, kernel):
        return False

    def clear_caches(self):
        pass

    def sync(self):
        pass

    def nan_count(self, o):
        return int(np.isnan(mla_capture.bf16_to_f32(o)).sum())

    def host(self, o):
        return mla_capture.bf16_to_f32(o)


# ------------------------------------------------------------- driving ----

def call_kernel(fn, kernel, d, c, x, o, lse):
    """One call with SGLang's argument order (TritonAttnBackend.forward_extend)."""
    args = (d["q"], d["k"], d["v"], o, d["k_buffer"], d["v_buffer"], d["qo"], d["kvp"],
            d["kvi"], d["mask"], c["causal"], d["mask_indptr"], x["max_len"],
            c["k_scale"], c["v_scale"], c["sm"])
    kw = dict(logit_cap=c["logit_cap"], sliding_window_size=c["window"], sinks=d["sinks"],
              window_kv_offsets=None, xai_temperature_len=c["xai"])
    if kernel == "extend_attention_fwd":
        kw["lse_extend"] = lse
    else:
        kw["max_bs"] = None
    return fn(*args, **kw)


def shape_str(c, x):
    pre = c["prefixes"]
    return ("H=%d Hkv=%d D=%d Dv=%d bs=%d L=%s prefixes=%s%s" % (
        c["H"], c["Hkv"], c["D"], c["Dv"], len(pre),
        c["L"] if c["drafts"] is None else c["drafts"],
        pre if len(pre) <= 8 else "%d..%d" % (min(pre), max(pre)),
        "".join(s for s in (
            " k_scale=%g v_scale=%g" % (c["k_scale"], c["v_scale"])
            if (c["k_scale"], c["v_scale"]) != (1.0, 1.0) else "",
            " noncausal" if not c["causal"] else "",
            " mask=%s" % c["mask"],
            " sinks" if c["sinks"] else "",
            " window=%d" % c["window"] if c["window"] > 0 else "",
            " logit_cap=%g" % c["logit_cap"] if c["logit_cap"] > 0 else "",
            " q_gain=%g" % c["q_gain"] if c["q_gain"] != 1.0 else "",
            " graph_pad=%d" % c["graph_pad"] if c["graph_pad"] else "",
            " scratch=NaN" if c["poison_scratch"] else ""))))


def compare_outputs(outs, say):
    """Diagnostic only (the validator judges): each verify kernel's output
    against extend_attention_fwd's on the same call, per token row."""
    if "extend_attention_fwd" not in outs:
        return
    ref = outs["extend_attention_fwd"][1]
    for kernel, (rec, o) in outs.items():
        if kernel == "extend_attention_fwd" or o.shape != ref.shape:
            continue
        with np.errstate(invalid="ignore"):
            d = np.abs(o - ref).reshape(o.shape[0], -1)
        bad = np.isnan(d).any(axis=1)
        row = np.where(bad, np.inf, np.nanmax(np.where(np.isnan(d), 0, d), axis=1))
        rec["vs_extend_max_abs_per_row"] = [None if not np.isfinite(v) else float(v) for v in row]
        rec["vs_extend_nan_rows"] = np.flatnonzero(bad).tolist()
        say("    %s vs extend: max|diff| %.3g over finite rows, NaN rows %s"
            % (kernel, float(np.max(row[~bad])) if (~bad).any() else float("nan"),
               rec["vs_extend_nan_rows"]))


def finish_file(path, dest, c, kernel, shape):
    """Rename a capture and add what the kernel's arguments cannot say."""
    import h5py
    os.replace(path, dest)
    name = os.path.basename(dest)[:-3]
    with h5py.File(dest, "r+") as f:
        f.attrs["case_name"] = name
        f.attrs["seed"] = np.int64(c["seed"])
        f.attrs["sglang_version"] = SGLANG_VERSION
        f.attrs["description"] = ("SGLang %s %s on seeded random inputs (seed %d; "
                                  "python3 -m mla_verify.capture case %s: %s). %s"
                                  % (SGLANG_VERSION, kernel, c["seed"], c["name"], shape,
                                     f.attrs.get("description", "")))


def run(args):
    be = StubBackend(args.sglang) if args.stub else TorchBackend(args.sglang)
    os.makedirs(args.out, exist_ok=True)
    if args.long_out:
        os.makedirs(args.long_out, exist_ok=True)
    tmp = os.path.join(args.out, ".tmp-capture")
    shutil.rmtree(tmp, ignore_errors=True)
    only = set(args.only.split(",")) if args.only else None
    records, declined, skipped = [], [], []
    t0 = time.time()
    log = open(args.log, "a") if args.log else None

    def say(msg):
        print(msg, flush=True)
        if log:
            log.write(msg + "\n")
            log.flush()

    def dump():
        manifest = {
            "sglang_version": SGLANG_VERSION,
            "device": be.device_name,
            "versions": be.versions,
            "host": platform.node(),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "command": " ".join(["python3", "-m", "mla_verify.capture"] + sys.argv[1:]),
            "calls": records, "declined": declined, "skipped_for_time": skipped,
            "seconds": round(time.time() - t0, 1),
        }
        with open(os.path.join(args.out, "manifest.draft.json"), "w") as f:
            json.dump(manifest, f, indent=1)

    say("sglang_capture: device %s, %s" % (be.device_name, be.versions))
    for c in CASES:
        if only is not None and c["name"] not in only:
            continue
        if c["long"] and not args.long_out:
            continue
        if time.time() - t0 > args.budget_s:
            skipped.append(c["name"])
            say("budget: skipped %s" % c["name"])
            continue
        out_dir = args.long_out if c["long"] else args.out
        if c["shape_only"]:
            x = None
            shape = "%s (shape-level decline, never launched)" % c["shape_only"]
        else:
            x = build_inputs(c)
            shape = shape_str(c, x)
        outs = {}
        for kernel in c["kernels"]:
            tc = time.time()
            rec = {"case": c["name"], "kernel": kernel, "sglang_version": SGLANG_VERSION,
                   "shape": shape, "seed": c["seed"], "model": c["model"]}
            fn = be.fns[kernel]
            try:
                if c["shape_only"]:
                    q, k, v, o, kb, vb = be.shape_only(c, c["shape_only"])
                    dz = be.tensors(build_inputs(dict(c, shape_only=None, prefixes=[20],
                                                      Hkv=1, D=576, Dv=512)), c)
                    res = fn(q, k, v, o, kb, vb, dz["qo"], dz["kvp"], dz["kvi"], None, True,
                             dz["mask_indptr"], c["L"], 1.0, 1.0, c["sm"])
                    rec["status"] = "declined" if res is False else "accepted"
                    rec["reason"] = "returned %r on %s" % (res, c["trigger"])
                    (declined if res is False else records).append(rec)
                    say("%-22s %-22s %s" % (c["name"], kernel, rec["status"]))
                    continue
                if c["name"] == "k3-bs0":
                    d = be.tensors(build_inputs(dict(c, prefixes=[])), c)
                    o = be.out(0, c["H"], c["Dv"])
                    res = call_kernel(fn, kernel, d, c, dict(max_len=8, bs=0), o, None)
                    rec["status"] = "declined" if res is False else "accepted"
                    rec["reason"] = "returned %r on %s" % (res, c["trigger"])
                    (declined if res is False else records).append(rec)
                    say("%-22s %-22s %s" % (c["name"], kernel, rec["status"]))
                    continue
                d = be.tensors(x, c)
                if c["poison_scratch"]:
                    rec["scratch_poisoned"] = be.poison_scratch(c, d, x, kernel)
                o = be.out(x["ntok"], c["H"], c["Dv"])
                lse = be.lse(x["ntok"], c["H"]) if kernel == "extend_attention_fwd" else None
                w = mla_capture.wrap(fn, kind=kernel, out_dir=tmp, model=c["model"],
                                     max_files=10, tag="x", min_free_bytes=16 << 20,
                                     compression="gzip")
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    res = call_kernel(w, kernel, d, c, x, o, lse)
                    be.sync()
                st = w.capture.stats
                rec["returned"] = repr(res)
                if res is not False:
                    outs[kernel] = (rec, be.host(o))
                if kernel != "extend_attention_fwd" and res is False:
                    rec["status"] = "declined"
                    rec["reason"] = "returned False on %s" % (c["trigger"] or "this shape")
                    declined.append(rec)
                elif st["written"] == 1:
                    dest = os.path.join(out_dir, "%s--%s.h5" % (c["name"], SHORT[kernel]))
                    finish_file(st["files"][0], dest, c, kernel, shape)
                    rec.update(status="captured", file=os.path.basename(dest),
                               long=c["long"], nan_out=be.nan_count(o),
                               bytes=os.path.getsize(dest))
                    if c["trigger"]:
                        rec["trigger"] = c["trigger"]
                    records.append(rec)
                else:
                    rec["status"] = "not captured"
                    rec["reason"] = "%s; kernel returned %r" % (
                        "; ".join("%s (%d)" % kv for kv in st["skipped"].items())
                        or st["disabled"] or "nothing written", res)
                    rec["nan_out"] = be.nan_count(o)
                    rec["trigger"] = c["trigger"]
                    rec["warnings"] = [str(m.message) for m in caught][:4]
                    records.append(rec)
                if c["poison_scratch"]:
                    be.clear_caches()
            except Exception as e:  # a kernel that raises is a finding too
                rec["status"] = "error"
                rec["reason"] = "%s: %s" % (type(e).__name__, e)
                rec["traceback"] = traceback.format_exc()[-2000:]
                records.append(rec)
            rec["seconds"] = round(time.time() - tc, 2)
            say("%-22s %-22s %-12s %s%s" % (
                c["name"], kernel, rec["status"], rec.get("file", rec.get("reason", "")),
                "" if "nan_out" not in rec else "  nan_out=%d" % rec["nan_out"]))
        compare_outputs(outs, say)
        dump()
    shutil.rmtree(tmp, ignore_errors=True)
    dump()
    say("sglang_capture: %d captured, %d declined, %d other, %d cases skipped, %.0f s"
        % (sum(r["status"] == "captured" for r in records), len(declined),
           sum(r["status"] != "captured" for r in records), len(skipped), time.time() - t0))
    return 0


def main():
    ap = argparse.ArgumentParser(prog="python3 -m mla_verify.capture",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--sglang", default=os.path.join(ROOT, ".sglang"),
                    help="directory holding the sglang package (default: <repo>/.sglang)")
    ap.add_argument("--out", help="where the fixtures go (required unless --list)")
    ap.add_argument("--long-out", default=None, help="where long cases go (default: not run)")
    ap.add_argument("--only", default=None, help="comma-separated case names")
    ap.add_argument("--budget-s", type=float, default=1e9,
                    help="start no new case after this many seconds")
    ap.add_argument("--log", default=None)
    ap.add_argument("--stub", action="store_true", help="numpy stand-ins, no torch/GPU")
    ap.add_argument("--list", action="store_true", help="print the cases and exit")
    args = ap.parse_args()
    if args.list:
        for c in CASES:
            print("%-24s seed %-5d %s" % (c["name"], c["seed"], ",".join(SHORT[k] for k in c["kernels"])))
        return 0
    if not args.out:
        ap.error("--out is required")
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
