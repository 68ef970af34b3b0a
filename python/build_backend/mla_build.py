"""The PEP 517 backend of the mla_verify package: setuptools' own
(setuptools.build_meta), with a build_py step that builds the package's C
library with this repository's CMake project.

Why setuptools driving CMake, and not scikit-build-core: Debian 12 ships
setuptools and wheel (python3-setuptools, python3-wheel) but no
scikit-build-core, and CI installs Debian packages only; so the same
backend builds from PyPI (`pip install .`, isolated) and from Debian
(`pip install --no-build-isolation .`). The CMake side is one target,
mla_verify_native (python/CMakeLists.txt), configured with the GPU, the
AMD compile checks and the emulator off, so a build compiles the ~20 C files
that library needs and nothing else.

BLAS: the library links the system OpenBLAS (libopenblas-dev, as every
program of the project does) and libhdf5 dynamically. The wheel is built
for the machine it is installed on, not for redistribution; bundling a
second OpenBLAS would give the reference other threads and other rounding
than mla-validate's on the same machine.

Environment: MLA_VERIFY_CMAKE_BUILD_DIR, a CMake build directory to reuse
(default: setuptools' build_temp); MLA_VERIFY_JOBS, parallel jobs (default:
the CPU count).
"""
import glob
import os
import shutil
import subprocess
import sys
import sysconfig

from setuptools.build_meta import *  # noqa: F401,F403  (the PEP 517 hooks)
from setuptools.command.build_py import build_py as _build_py

try:
    from wheel.bdist_wheel import bdist_wheel as _bdist_wheel
except ImportError:  # setuptools >= 70 carries its own
    from setuptools.command.bdist_wheel import bdist_wheel as _bdist_wheel

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
LIB_NAME = "libmla_verify.so"


def _run(cmd):
    print("mla_build: " + " ".join(cmd), flush=True)
    subprocess.check_call(cmd)


class BuildPy(_build_py):
    """The Python files, then libmla_verify.so and the shipped fixtures
    into the package."""

    def run(self):
        super().run()
        bdir = os.environ.get("MLA_VERIFY_CMAKE_BUILD_DIR") or os.path.join(
            os.path.abspath(self.get_finalized_command("build").build_temp), "cmake")
        cmake = shutil.which("cmake")
        if not cmake:
            raise RuntimeError("mla_build: cmake not found (run.sh installs it: bash run.sh deps)")
        cfg = [cmake, "-S", ROOT, "-B", bdir, "-DCMAKE_BUILD_TYPE=Release",
               "-DMLA_PYTHON_LIB=ON", "-DCMAKE_POSITION_INDEPENDENT_CODE=ON",
               "-DMLA_ENABLE_CUDA=OFF", "-DMLA_ENABLE_HIP_COMPILE_TEST=OFF",
               "-DMLA_ENABLE_EMU=OFF"]
        if shutil.which("ninja") and not os.path.exists(os.path.join(bdir, "CMakeCache.txt")):
            cfg += ["-G", "Ninja"]
        _run(cfg)
        jobs = os.environ.get("MLA_VERIFY_JOBS") or str(os.cpu_count() or 2)
        _run([cmake, "--build", bdir, "--target", "mla_verify_native", "-j", jobs])
        libs = glob.glob(os.path.join(bdir, "**", LIB_NAME), recursive=True)
        if len(libs) != 1:
            raise RuntimeError("mla_build: expected one %s under %s, found %s"
                               % (LIB_NAME, bdir, libs))
        pkg = os.path.join(self.build_lib, "mla_verify")
        self.copy_file(libs[0], os.path.join(pkg, LIB_NAME))
        # The shipped fixtures (mla_verify.shipped_fixtures()): the files of
        # fixtures/data, the SGLang captures in trace/ with their manifest.
        for src in sorted(glob.glob(os.path.join(ROOT, "fixtures", "data", "*.h5")) +
                          glob.glob(os.path.join(ROOT, "fixtures", "data", "trace", "*"))):
            rel = os.path.relpath(src, os.path.join(ROOT, "fixtures", "data"))
            dst = os.path.join(pkg, "data", rel)
            self.mkpath(os.path.dirname(dst))
            self.copy_file(src, dst)


class BdistWheel(_bdist_wheel):
    """A platform wheel (it holds a shared library), for any CPython 3:
    the library is loaded with ctypes and has no Python ABI."""

    def finalize_options(self):
        super().finalize_options()
        self.root_is_pure = False

    def get_tag(self):
        plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
        return "py3", "none", plat


if sys.version_info < (3, 10):
    raise RuntimeError("mla_verify needs Python >= 3.10")
