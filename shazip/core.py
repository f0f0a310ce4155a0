"""The native core, `shazip._core`: the int8 engine, the adaptive stage, both coders and the block
loop in one C++ module (csrc/), compiled when shazip is installed. Nothing is built at run time.

This module imports it once, checks that it is the build this Python code expects (its ABI number
and the numerics constants it was compiled with, `contract()`, against numerics.py), and turns a
model's integer constants into the core's model. A missing or damaged module is a one-line
`CoreUnavailable`, never a crash: reinstalling shazip builds it again.

exact.py (and with it numpy, a tenth of a second) is imported only to build a model: an empty
input or an archive of stored blocks needs neither."""

from __future__ import annotations

import importlib.util
import os
import struct
from types import ModuleType
from typing import TYPE_CHECKING

from .errors import ContractError, CoreUnavailable, UsageError, raise_interruption
from .model.numerics import CONTRACT, TABLES

if TYPE_CHECKING:
    from .model.exact import IntWeights, Linear

ABI = 4  # csrc/module.cpp's ABI attribute: bumped with any change to the bindings' shapes
_module: ModuleType | None = None


def load() -> ModuleType:
    """The checked core module (CoreUnavailable, ContractError if it cannot be used)."""
    global _module
    if _module is None:
        try:
            check_file(importlib.util.find_spec(f"{__package__}._core"))
            from . import _core
        except ImportError as e:
            raise_interruption(e)
            raise CoreUnavailable(f"shazip's native core is missing or damaged ({str(e).splitlines()[0]}); "
                                  f"reinstall shazip to build it (a C++ compiler is needed)") from None
        if getattr(_core, "ABI", None) != ABI:
            raise CoreUnavailable(f"shazip's native core is from another version (ABI {getattr(_core, 'ABI', None)}, "
                                  f"expected {ABI}); reinstall shazip")
        check_contract(_core.contract())
        _module = _core
    check_kernels_env(_module)
    return _module


def check_kernels_env(core: ModuleType) -> None:
    """SHAZIP_KERNELS, where set, names a kernel path this CPU runs (or "auto"): a one-line
    error before anything is built, not the core's exception from deep in a constructor."""
    name = os.environ.get("SHAZIP_KERNELS")
    if name and name != "auto" and name not in core.available_kernels():
        raise UsageError(f"SHAZIP_KERNELS={name}: no such kernel path on this machine (it runs "
                         f"{', '.join(core.available_kernels())}; or auto)")


def check_file(spec) -> None:
    """Refuses a core file that is cut short before importing it: the loader maps a truncated
    shared object and dies of SIGBUS when it touches the missing pages. An ELF file ends no
    sooner than its section headers (offset and count in its first 64 bytes)."""
    if spec is None or not spec.origin:
        raise ImportError("no module named shazip._core")
    try:
        with open(spec.origin, "rb") as f:
            head = f.read(64)
            size = os.fstat(f.fileno()).st_size
    except OSError as e:
        raise ImportError(f"{spec.origin}: {e.strerror}") from None
    if len(head) < 64:
        raise ImportError(f"{spec.origin}: file is truncated ({size} bytes)")
    if head[:4] != b"\x7fELF" or head[4] != 2:
        return  # not a 64-bit ELF file (another platform's format): the loader checks it
    order = "<" if head[5] == 1 else ">"
    (shoff,) = struct.unpack_from(order + "Q", head, 0x28)
    shentsize, shnum = struct.unpack_from(order + "HH", head, 0x3A)
    if shoff + shentsize * shnum > size:
        raise ImportError(f"{spec.origin}: file is truncated ({size} bytes)")


def check_contract(compiled: dict) -> None:
    """Refuses a core whose constants or tables differ from numerics.py's."""
    expected = dict(CONTRACT, TABLES=list(TABLES))
    compiled = {k: v for k, v in compiled.items() if not k.endswith("_TENSORS")}
    for key in sorted(set(expected) | set(compiled)):
        if expected.get(key) != compiled.get(key):
            raise ContractError(f"shazip's native core does not match numerics.py ({key}: {compiled.get(key)!r} "
                                f"compiled, {expected.get(key)!r} expected); reinstall shazip")


def _linear(name: str, lin: Linear) -> dict:
    return ({f"{name}.w{p}": w for p, w in enumerate(lin.weights)} | {f"{name}.m{p}": m for p, m in enumerate(lin.mults)}
            | {f"{name}.bias": lin.bias})


def _block(b: dict) -> tuple[dict, dict]:
    """A block's constants as the core's named arrays, and its shifts."""
    from .model.exact import Linear, Norm
    arrays, shifts = {}, {}
    for name, v in b.items():
        if isinstance(v, Linear):
            arrays |= _linear(name, v)
            shifts[name] = v.shift
        elif isinstance(v, Norm):
            arrays |= {f"{name}.gain": v.gain, f"{name}.bias": v.bias}
        else:
            arrays[name] = v
    return arrays, shifts


def model(weights: IntWeights, kernels: str = "auto"):
    """The core's int8 model of these constants, on the kernel path `kernels` ("auto": the best
    this CPU has; SHAZIP_KERNELS overrides it)."""
    c = weights.cfg
    blocks = [_block(b) for b in weights.blocks]
    return load().Model(c.d_model, c.d_boom, c.mem_len, weights.embed, [a for a, _ in blocks], [s for _, s in blocks],
                        _linear("out", weights.out), weights.out.shift, weights.tables, kernels)


def kernels() -> str:
    """The kernel path "auto" runs here: SHAZIP_KERNELS if set, else the fastest this CPU has."""
    return os.environ.get("SHAZIP_KERNELS") or load().available_kernels()[-1]
