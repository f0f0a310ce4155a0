"""The integer step compiled from C++ (native.cpp): the same integers as quant.py, faster.

It is built on first use with torch's extension loader (a C++ compiler and ninja are needed)
and cached per machine and torch version under $SHAZIP_CACHE or ~/.cache/shazip/native. When
it cannot be built, or with SHAZIP_NATIVE=0, the engine runs quant.py's torch code instead:
archives are identical either way (tests/test_native.py checks the two step for step).

The compiled step states its constants and tensor names (`contract()` in native.cpp); they are
compared with quant.py's at load, and any difference is refused (`ContractError`) rather than
allowed to make archives that only this build could read. The module never prints: a caller
that wants to say "building..." sets `on_build`, and `error()` says why the build failed.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import platform
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from typing import Callable

import torch

from .errors import ContractError
from .quant import CONTRACT, TABLES, IntModel

SOURCE = Path(__file__).with_name("native.cpp")
# -fopenmp: ATen's parallel_for is a header template that runs serially without it. None of these
# flags can change a result: the step is integer arithmetic (see native.cpp).
CFLAGS = ["-O3", "-march=native", "-fopenmp", "-fno-math-errno", "-fno-trapping-math"]
# GCC only: vector gathers for the table lookups (4x faster here than scalar loads; GCC's tuning
# leaves them off). Another compiler gets the plain flags.
GCC_EXTRA = ["-mtune-ctrl=use_gather"]
STALE_LOCK_SECONDS = 600  # a build takes about a minute
_module = None
_error: str | None = None
on_build: Callable[[str], None] | None = None  # told once, before a build that takes about a minute


def _cache_dir(flags: list[str]) -> Path:
    root = Path(os.environ.get("SHAZIP_CACHE") or Path.home() / ".cache" / "shazip")
    # -march=native binaries are per CPU: the key has the CPU's flags as well as the source, its
    # path (torch rebuilds when a build directory is reused from another path), torch and Python
    cpu = ""
    try:
        cpu = next((ln for ln in Path("/proc/cpuinfo").read_text().splitlines() if ln.startswith("flags")), "")
    except OSError:
        cpu = platform.processor()
    parts = [SOURCE.read_bytes(), str(SOURCE.resolve()).encode(), torch.__version__.encode(), cpu.encode(),
             sys.version.encode(), " ".join(flags).encode()]
    key = hashlib.sha256(b"\0".join(parts)).hexdigest()[:16]
    return root / "native" / key


def load():
    """The compiled module, or None (reason in `error()`)."""
    global _module, _error
    if _module is not None or _error is not None:
        return _module
    if os.environ.get("SHAZIP_NATIVE") == "0":
        _error = "disabled by SHAZIP_NATIVE=0"
        return None
    for flags in (CFLAGS + GCC_EXTRA, CFLAGS):
        try:
            module = _build(flags, announce=flags is not CFLAGS)  # said once, not for the fallback
        except Exception as e:  # no compiler, no ninja, no headers: the torch path gives the same results
            _error = f"{type(e).__name__}: {str(e).strip().splitlines()[-1] if str(e).strip() else ''}"
            continue
        check_contract(module.contract())
        _module, _error = module, None
        return _module
    return None


def check_contract(compiled: dict) -> None:
    """Refuses a compiled step whose constants or tables differ from quant.py's (its tensor
    names are compared with the model's in `NativeModel`)."""
    expected = dict(CONTRACT, TABLES=list(TABLES))
    compiled = {k: v for k, v in compiled.items() if not k.endswith("_TENSORS")}
    for key in sorted(set(expected) | set(compiled)):
        if expected.get(key) != compiled.get(key):
            raise ContractError(f"the compiled int8 step does not match quant.py ({key}: {compiled.get(key)!r} "
                                f"compiled, {expected.get(key)!r} expected); reinstall shazip or set SHAZIP_NATIVE=0")


def _build(flags: list[str], announce: bool):
    out = _cache_dir(flags)
    name = f"shazip_native_{out.name}"
    built = out / f"{name}.so"
    if built.exists():  # import it directly: torch's loader costs seconds even when nothing changed
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
    from torch.utils.cpp_extension import load as build
    out.mkdir(parents=True, exist_ok=True)
    lock = out / "lock"  # torch's build lock; one left by a killed build would block forever
    if lock.exists() and time.time() - lock.stat().st_mtime > STALE_LOCK_SECONDS:
        lock.unlink(missing_ok=True)
    if announce and on_build is not None and not any(out.glob("*.so")):
        on_build("building the native int8 engine (once per machine)...")
    return build(name=name, sources=[str(SOURCE)], build_directory=str(out),
                 extra_cflags=flags, extra_ldflags=["-fopenmp"], verbose=False)


def error() -> str | None:
    return _error


@dataclass
class NativeState:
    """h: int8 [B, d] and c: int64 [B, d] per block; keys: the int8 ring [B, M, d];
    mem_e: int64 [B, M]; pos: bytes consumed. Updated in place by `step`."""

    h: list[torch.Tensor]
    c: list[torch.Tensor]
    keys: torch.Tensor
    mem_e: torch.Tensor
    pos: int = 0


def _linear(name: str, lin) -> dict[str, torch.Tensor]:
    t = {f"{name}.w{p}": w for p, w in enumerate(lin.weights)} | {f"{name}.m{p}": m for p, m in enumerate(lin.mults)}
    return t | {f"{name}.bias": lin.bias}


def _norm(name: str, norm) -> dict[str, torch.Tensor]:
    return {f"{name}.gain": norm.gain, f"{name}.bias": norm.bias}


def block_tensors(b: dict) -> tuple[dict[str, torch.Tensor], dict[str, int]]:
    """A block of quant.IntModel as native.cpp's named tensors and shifts."""
    t = _norm("ln_start", b["ln_start"]) | _linear("lstm", b["lstm"]) | _norm("ln_ff", b["ln_ff"]) \
        | _norm("ln_xff", b["ln_xff"]) | _linear("boom", b["boom"])
    shifts = {"lstm": b["lstm"].shift, "boom": b["boom"].shift}
    if "q" in b:
        t |= _norm("ln_mem", b["ln_mem"]) | _norm("ln_mid", b["ln_mid"]) | _linear("q", b["q"]) \
            | _norm("q_ln", b["q_ln"]) | {"vs": b["vs"]}
        shifts["q"] = b["q"].shift
    return {k: v.contiguous() for k, v in t.items()}, shifts


class NativeModel:
    """`IntModel`'s step in C++ (CPU only); same interface, same frequencies."""

    def __init__(self, im: IntModel) -> None:
        mod = load()
        if mod is None:
            raise RuntimeError(f"native engine unavailable ({_error})")
        if im.device.type != "cpu":
            raise RuntimeError("the native engine runs on the CPU")
        self.cfg, self.device = im.cfg, im.device
        blocks = [block_tensors(b) for b in im.blocks]
        out = {k: v.contiguous() for k, v in _linear("out", im.out).items()}
        layout = mod.contract()
        for i, (t, _) in enumerate(blocks):
            names = layout["BLOCK_TENSORS"] + (layout["ATTN_TENSORS"] if "vs" in t else [])
            if sorted(t) != sorted(names):
                raise ContractError(f"block {i}: quant.py's tensors {sorted(set(t) ^ set(names))} are not the "
                                    f"compiled step's; reinstall shazip or set SHAZIP_NATIVE=0")
        self._m = mod.Model(im.cfg.d_model, im.cfg.d_boom, im.cfg.mem_len, im.embed.contiguous(),
                            [t for t, _ in blocks], [s for _, s in blocks], out, im.out.shift,
                            {k: v.contiguous() for k, v in im.tables.items()})

    def init_state(self, batch: int) -> NativeState:
        c = self.cfg
        n = c.n_layers
        return NativeState([torch.zeros(batch, c.d_model, dtype=torch.int8) for _ in range(n)],
                           [torch.zeros(batch, c.d_model, dtype=torch.int64) for _ in range(n)],
                           torch.zeros(batch, c.mem_len, c.d_model, dtype=torch.int8),
                           torch.zeros(batch, c.mem_len, dtype=torch.int64))

    def step(self, state: NativeState, x: torch.Tensor) -> tuple[NativeState, torch.Tensor]:
        freq = self._m.step(x.contiguous(), state.h, state.c, state.keys, state.mem_e, state.pos)
        state.pos += 1
        return state, freq
