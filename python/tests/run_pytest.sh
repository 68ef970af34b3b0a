#!/bin/sh
# The mla_verify package's pytest suite in a fresh venv (ctest python.pytest):
#   run_pytest.sh PYTHON SRC WORK MLA_VALIDATE MLA_FIXTURE
# PYTHON: Debian's python3 (numpy, h5py, pytest, setuptools and wheel from
# run.sh's packages, seen through --system-site-packages); the package is
# built with `pip install --no-build-isolation --no-index`: no index at all.
# Exit 77 (skipped) when PYTHON lacks what the suite needs.
set -eu
py=$1 src=$2 work=$3
export MLA_VALIDATE="$4" MLA_FIXTURE="$5"
for m in numpy pytest venv ensurepip setuptools wheel; do
    "$py" -c "import $m" 2>/dev/null || { echo "$py cannot import $m: skipped"; exit 77; }
done
rm -rf "$work"
mkdir -p "$work"
# setuptools' build and egg-info directories go under WORK, not into SRC.
printf '[build]\nbuild_base = %s/build\n[egg_info]\negg_base = %s\n' "$work" "$work" \
    > "$work/dist.cfg"
t0=$(date +%s)
"$py" -m venv --system-site-packages "$work/venv"
DIST_EXTRA_CONFIG="$work/dist.cfg" MLA_VERIFY_CMAKE_BUILD_DIR="$work/cmake" \
    "$work/venv/bin/python" -m pip install --no-build-isolation --no-index --no-deps -q "$src"
t1=$(date +%s)
echo "python.pytest: venv + pip install: $((t1 - t0)) s"
# From WORK, so that `import mla_verify` is the installed package.
cd "$work"
"$work/venv/bin/python" -c "import mla_verify, sys; print('python.pytest: mla_verify from', mla_verify.__file__, 'on', sys.version.split()[0])"
"$work/venv/bin/python" -m pytest -p no:cacheprovider -q -rs "$src/python/tests"
echo "python.pytest: pytest: $(( $(date +%s) - t1 )) s"
