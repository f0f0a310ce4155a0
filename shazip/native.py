"""The integer step compiled from C++ (native.cpp): the same integers as quant.py, faster.

It is built on first use (extension.py: a C++ compiler and ninja are needed) and cached per
machine under $SHAZIP_CACHE or ~/.cache/shazip/native. When it cannot be built, or with SHAZIP_NATIVE=0, the engine runs quant.py's torch code instead:
archives are identical either way (tests/test_native.py checks the two step for step).

The compiled step states its constants and tensor names (`contract()` in native.cpp); they are
compared with quant.py's at load, and any difference is refused (`ContractError`) rather than
allowed to make archives that only this build could read. The module never prints; `error()`
says why the build failed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


import torch

from . import extension
from .errors import ContractError
from .quant import CONTRACT, TABLES, IntModel

SOURCE = Path(__file__).with_name("native.cpp")
# -fopenmp: ATen's parallel_for is a header template that runs serially without it. None of these
# flags can change a result: the step is integer arithmetic (see native.cpp).
CFLAGS = ["-O3", "-march=native", "-fopenmp", "-fno-math-errno", "-fno-trapping-math"]
# GCC only: vector gathers for the table lookups (4x faster here than scalar loads; GCC's tuning
# leaves them off). Another compiler gets the plain flags.
GCC_EXTRA = ["-mtune-ctrl=use_gather"]
_module = None
_error: str | None = None


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
            module = extension.build(SOURCE, "native", flags, ["-fopenmp"],
                                     "the native int8 engine" if flags is not CFLAGS else "")  # said once
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
