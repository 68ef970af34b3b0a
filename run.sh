#!/usr/bin/env bash
# The two commands of the README:
#   bash run.sh main   set up, build, validate the shipped fixtures, write the report
#   bash run.sh test   set up, build, run the CPU test suite through ctest
# Set-up installs only what is missing (Debian 12, as root), so a second run
# goes straight to the build, which is incremental.
set -euo pipefail
cd "$(dirname "$0")"

usage() {
    cat <<'USAGE'
usage: bash run.sh main|test|asan|gpu|deps

  main   install what is missing, build (preset 'default'), validate every shipped
         fixture in fixtures/data with every available backend and write the report
         to build/default/report/ (report.md, report.json, report.html)
  test   install what is missing, build and run the CPU test suite (ctest preset 'default')
  asan   the same suite under AddressSanitizer + UndefinedBehaviorSanitizer
  gpu    the whole GPU suite on a machine with an NVIDIA GPU and the CUDA toolkit
         (no installs: nvcc, cmake, OpenBLAS and HDF5 must be there): build with the
         'cuda' preset (sm_90a) and run ctest label 'gpu' (every tier on every catalogue
         case up to 128k prefixes and bs 64, the validator's GPU backends on fixtures/data,
         compute-sanitizer memcheck and racecheck, the capture replay through libmla_gpu)
  long   build, then the long CPU tests (ctest label 'long': boundary needles at 64k and
         128k prefixes, the mutants caught there; about 6 minutes on 2 cores)
  deps   only install what is missing
USAGE
}

PKGS=(cmake ninja-build gcc libc6-dev git libopenblas-dev libhdf5-dev python3-h5py python3-numpy
      python3-venv python3-pytest python3-setuptools python3-wheel clang-22 lld-22 llvm-22)

install_deps() {
    local missing=()
    for p in "${PKGS[@]}"; do
        if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
            missing+=("$p")
        fi
    done
    if [ ${#missing[@]} -eq 0 ]; then
        echo "run.sh: all packages present"
        return
    fi
    echo "run.sh: installing ${missing[*]}"
    local sudo=""
    if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

case "${1:-}" in
    main) install_deps; cmake --workflow --preset main ;;
    test) install_deps; cmake --workflow --preset test ;;
    asan) install_deps; cmake --workflow --preset asan ;;
    gpu) cmake --workflow --preset gpu ;;
    long) install_deps; cmake --preset default && cmake --build --preset default &&
          ctest --test-dir build/default -L long --output-on-failure ;;
    deps) install_deps ;;
    -h|--help|help) usage ;;
    *) usage >&2; exit 2 ;;
esac
