"""Builds shazip's native core (csrc/: the extension module shazip._core) at install time, and,
only where the tests run, shazip._testing (csrc/testing/: the core's parts alone, for tests).

Everything else is in pyproject.toml. The core is compiled for plain x86-64 (or the host's
baseline elsewhere); its SIMD paths are compiled in their own files with `#pragma GCC target`
and chosen at run time (csrc/kernels/dispatch.cpp), so one build runs on any CPU. libzstd (csrc/third_party/zstd, one C file) is built as a static
library and linked in, for the ZSTD block method."""

import os
import re
import sys
from glob import glob
from pathlib import Path


def _pybind11_checked() -> None:
    """The build's pybind11 is the one pyproject.toml asks for (its build requirements are the
    one source of the version): an older one (Debian's 2.10, taken with --no-build-isolation)
    fails deep in the core's templates, so it is refused in one line."""
    need = re.search(r'"pybind11>=([\d.]+)"', Path(__file__).with_name("pyproject.toml").read_text()).group(1)
    import pybind11

    def version(text: str) -> tuple[int, ...]:
        return tuple(int(part) for part in re.findall(r"\d+", text)[:3])

    if version(pybind11.__version__) < version(need):
        sys.exit(f"shazip's core needs pybind11 >= {need} to build; found {pybind11.__version__} "
                 f"({Path(pybind11.__file__).parent}): pip install 'pybind11>={need}'")


_pybind11_checked()

from pybind11.setup_helpers import ParallelCompile, Pybind11Extension, build_ext  # noqa: E402
from setuptools import setup  # noqa: E402
from setuptools.command.build_py import build_py  # noqa: E402

ParallelCompile("SHAZIP_BUILD_JOBS", default=0).install()  # 0: every core

HEADERS = sorted(glob("csrc/**/*.h", recursive=True) + glob("csrc/**/*.def", recursive=True))  # a changed one rebuilds
TESTING = sorted(glob("csrc/testing/*.cpp"))


def extension(name: str, sources: list[str]) -> Pybind11Extension:
    # Integer arithmetic only (see shazip/model/numerics.py): no flag here can change a result. -g0:
    # Python's own CFLAGS ask for debug information, which would make the module 5x larger.
    return Pybind11Extension(name, sources, include_dirs=["csrc"], depends=HEADERS, cxx_std=17,
                             extra_compile_args=["-O3", "-g0", "-fno-math-errno", "-fno-trapping-math", "-pthread"],
                             extra_link_args=["-pthread"])


core = extension("shazip._core", [f for f in sorted(glob("csrc/**/*.cpp", recursive=True)) if f not in TESTING])
# the categorical coder's quantized rows are a test's only (the coders compute the entries they need)
testing = extension("shazip._testing", TESTING + ["csrc/coder/categorical.cpp"])

# build_ext builds this first and links it into the core; its symbols stay hidden in the module.
# Its own name: as plain "zstd", -lzstd would link a system libzstd.so where libzstd-dev is
# installed (seen on a machine with libzstd 1.5.5), making the core depend on that library.
zstd = ("shazip_zstd", {"sources": ["csrc/third_party/zstd/zstd.c"],
                 "macros": [("ZSTDLIB_VISIBLE", ""), ("ZSTDLIB_HIDDEN", "")],
                 "cflags": ["-O3", "-g0", "-fvisibility=hidden", "-pthread"]})



class BuildExt(build_ext):
    """build_ext links libzstd but runs build_clib only under `build` (pip); this makes
    `python setup.py build_ext --inplace` work too.

    shazip._testing is built only where the tests import it: in place (`build_ext --inplace`, and
    the README's editable install) or with SHAZIP_TEST_HOOKS=1 (a build for tests elsewhere:
    benchmarks/aarch64.py). `pip install .` installs no test hook (tests/test_install.py)."""

    def run(self) -> None:
        if not (self.inplace or os.environ.get("SHAZIP_TEST_HOOKS") == "1"):
            self.extensions = [e for e in self.extensions if e is not testing]
            # one an earlier build left in the build folder would go into the wheel with the rest
            Path(self.get_ext_fullpath(testing.name)).unlink(missing_ok=True)
        self.run_command("build_clib")
        super().run()


class BuildPy(build_py):
    """The package's modules as they are now: a build folder keeps what earlier builds copied
    there (a module since moved, renamed or removed), and the wheel takes everything in it."""

    def run(self) -> None:
        super().run()
        now = {Path(p).resolve() for p in self.get_outputs(include_bytecode=False)}
        for stale in [p for p in Path(self.build_lib, "shazip").rglob("*.py") if p.resolve() not in now]:
            stale.unlink()


setup(ext_modules=[core, testing], libraries=[zstd], cmdclass={"build_ext": BuildExt, "build_py": BuildPy})
