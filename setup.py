"""Builds shazip's native core (csrc/, one extension module: shazip._core) at install time.

Everything else is in pyproject.toml. The core is compiled for plain x86-64 (or the host's
baseline elsewhere); its SIMD paths are compiled in their own files with `#pragma GCC target`
and chosen at run time (csrc/kernels/dispatch.cpp), so one build runs on any CPU."""

from glob import glob

from pybind11.setup_helpers import ParallelCompile, Pybind11Extension, build_ext
from setuptools import setup

ParallelCompile("SHAZIP_BUILD_JOBS", default=0).install()  # 0: every core

core = Pybind11Extension(
    "shazip._core",
    sorted(glob("csrc/**/*.cpp", recursive=True)),
    include_dirs=["csrc"],
    cxx_std=17,
    # Integer arithmetic only (see shazip/numerics.py): no flag here can change a result.
    extra_compile_args=["-O3", "-fno-math-errno", "-fno-trapping-math", "-pthread"],
    extra_link_args=["-pthread"],
)

setup(ext_modules=[core], cmdclass={"build_ext": build_ext})
