#!/bin/bash
# Lays out the git-excluded folders the device scripts carry, on this
# (networked) machine, before a device session:
#   .tools/flashmla_bench   FlashMLA's bench (SPEC section 8a), from ../shared/tools
#   .tools/base-src         the source tree of a base commit, for lab/common/ab_base.sh
#   .tools/before/          (with --before-build) that base's mla-bench, for final_h200.sh;
#                           built here with nvcc, so it needs the cuda preset's tools
#   .sglang/                SGLang 0.5.23's Triton verify / extend kernels (SPEC section 8b),
#                           from the PyPI wheel, with stubs for the two sglang.srt modules
#                           they import (no torch needed here)
#   bash scripts/prep_device_tools.sh [--base COMMIT] [--before-build] [--sglang]
# Then carry what the device command needs, e.g. run(carry=[".tools", ".sglang"]).
set -euo pipefail
cd "$(dirname "$0")/.."
base="" before=0 sglang=0
while [ $# -gt 0 ]; do
    case "$1" in
        -h|--help) sed -n 2,12p "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        --base)
            [ $# -ge 2 ] || { echo "prep_device_tools.sh: --base needs a commit" >&2; exit 2; }
            base=$2
            shift ;;
        --before-build) before=1 ;;
        --sglang) sglang=1 ;;
        *) echo "prep_device_tools.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done
mkdir -p .tools
fm=../shared/tools/flashmla_bench
if [ -x "$fm" ]; then
    cp "$fm" .tools/flashmla_bench
    echo "prep: .tools/flashmla_bench from $fm"
else
    echo "prep: $fm not found: the benches will run without FlashMLA" >&2
fi
if [ -n "$base" ]; then
    git rev-parse --verify -q "$base^{commit}" > /dev/null || { echo "prep: no commit '$base'" >&2; exit 2; }
    rm -rf .tools/base-src && mkdir -p .tools/base-src
    git archive "$base" | tar -x -C .tools/base-src
    echo "prep: .tools/base-src = $(git rev-parse --short "$base")"
    if [ $before = 1 ]; then
        nvcc_bin=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null || true)
        [ -n "$nvcc_bin" ] || { echo "prep: --before-build needs nvcc" >&2; exit 2; }
        (cd .tools/base-src && cmake --preset cuda -DCMAKE_CUDA_COMPILER="$nvcc_bin" > /dev/null &&
            cmake --build --preset cuda --target mla-bench > /dev/null)
        mkdir -p .tools/before && cp .tools/base-src/build-cuda/hip/mla-bench .tools/before/mla-bench
        echo "prep: .tools/before/mla-bench built from $(git rev-parse --short "$base")"
    fi
elif [ $before = 1 ]; then
    echo "prep: --before-build needs --base" >&2
    exit 2
fi
if [ $sglang = 1 ]; then
    tmp=$(mktemp -d)
    python3 -m pip download -q --no-deps sglang==0.5.23 -d "$tmp"
    whl=$(ls "$tmp"/sglang-0.5.23-*.whl)
    rm -rf .sglang && mkdir -p .sglang
    python3 - "$whl" .sglang <<'EOF'
import ast, sys, zipfile
whl, out = sys.argv[1], sys.argv[2]
att = "sglang/kernels/ops/attention/"
z = zipfile.ZipFile(whl)
def write(path, text):
    import os
    os.makedirs(os.path.join(out, os.path.dirname(path)), exist_ok=True)
    with open(os.path.join(out, path), "w") as f:
        f.write(text)
# The three kernels and score_mod (triton only) as shipped; empty package
# files (the real ones import the whole of SGLang).
for name in ("verify_mla.py", "verify_splitkv.py", "extend_attention.py", "score_mod.py"):
    write(att + name, z.read(att + name).decode())
for pkg in ("sglang/", "sglang/kernels/", "sglang/kernels/ops/", att, "sglang/srt/"):
    write(pkg + "__init__.py", "")
# decode_attention: only _extract_kv_strides, which extend_attention imports,
# taken from the wheel's own source.
src = z.read(att + "decode_attention.py").decode()
fn = next(n for n in ast.parse(src).body if isinstance(n, ast.FunctionDef) and n.name == "_extract_kv_strides")
write(att + "decode_attention.py", "\n".join(src.splitlines()[fn.lineno - 1:fn.end_lineno]) + "\n")
# Stubs: an NVIDIA machine, every optional environment switch off.
write("sglang/srt/utils.py",
      "def is_cuda():\n    return True\n\n\ndef is_hip():\n    return False\n\n\n"
      "def is_gfx95_supported():\n    return False\n\n\ndef is_gfx1250_supported():\n    return False\n")
write("sglang/srt/environ.py",
      "class _Off:\n    def get(self):\n        return False\n\n\nclass _Envs:\n"
      "    def __getattr__(self, name):\n        return _Off()\n\n\nenvs = _Envs()\n")
print("prep: .sglang from " + whl.rsplit("/", 1)[-1])
EOF
    rm -rf "$tmp"
fi
