"""Building the C++ parts of the decoder (native.cpp, adaptive.cpp) on first use.

Each is compiled with torch's extension loader (a C++ compiler and ninja are needed) and cached
per machine under $SHAZIP_CACHE or ~/.cache/shazip/KIND/KEY. The key covers what can change the
binary: the source and its path (torch rebuilds when a build folder is reused from elsewhere),
the CPU's flags (-march=native binaries are per CPU), torch, Python and the compiler flags. The
library never prints: a caller that wants to say "building..." sets `on_build`.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import platform
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Callable

import torch

from . import cache

STALE_LOCK_SECONDS = 600  # a build takes about a minute
on_build: Callable[[str], None] | None = None  # told once, before a build that takes a while


def cache_dir(source: Path, kind: str, flags: list[str]) -> Path:
    cpu = ""
    try:
        cpu = next((ln for ln in Path("/proc/cpuinfo").read_text().splitlines() if ln.startswith("flags")), "")
    except OSError:
        cpu = platform.processor()
    parts = [source.read_bytes(), str(source.resolve()).encode(), torch.__version__.encode(), cpu.encode(),
             sys.version.encode(), " ".join(flags).encode()]
    return cache.root() / kind / hashlib.sha256(b"\0".join(parts)).hexdigest()[:16]


def build(source: Path, kind: str, flags: list[str], ldflags: list[str] = (), what: str = "") -> ModuleType:
    """The compiled module of `source` (imported directly when already built: torch's loader
    costs seconds even when nothing changed). Raises whatever the build raises."""
    out = cache_dir(source, kind, flags)
    name = f"shazip_{kind}_{out.name}"
    built = out / f"{name}.so"
    if built.exists():
        try:
            spec = importlib.util.spec_from_file_location(name, built)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module
        except ImportError:
            pass  # damaged (e.g. a killed link): let torch's loader rebuild it
    try:  # the `ninja` package's binary, which torch's loader looks for on PATH
        import ninja
        if ninja.BIN_DIR not in os.environ.get("PATH", "").split(os.pathsep):
            os.environ["PATH"] = ninja.BIN_DIR + os.pathsep + os.environ.get("PATH", "")
    except ImportError:
        pass  # a system ninja may still be there
    from torch.utils.cpp_extension import load
    out.mkdir(parents=True, exist_ok=True)
    lock = out / "lock"  # torch's build lock; one left by a killed build would block forever
    if lock.exists() and time.time() - lock.stat().st_mtime > STALE_LOCK_SECONDS:
        lock.unlink(missing_ok=True)
    if what and on_build is not None and not any(out.glob("*.so")):
        on_build(f"building {what} (once per machine)...")
    return load(name=name, sources=[str(source)], build_directory=str(out), extra_cflags=flags,
                extra_ldflags=list(ldflags), verbose=False)
