"""Engines: what turns each lane's previous byte into a probability row, and the rules that
say whether an archive's engine can be replayed here.

An archive's header names its engine by id and version. Two exist:

- `IntEngine` (id 1, "int8", the default) runs the integer-exact model of `quant.py`. Its rows
  are the same integers on every machine, thread count, lane batch and backend, so its archives
  decode anywhere. On the CPU the step runs compiled (`native.py`) when that builds, else in
  plain torch; `backend()` says which, and both give the same integers.
- `FloatEngine` (id 0, "float32") is the float model's own step: exact only on the machine and
  thread count that made the archive, whose thread count the header records. It is kept for
  evaluation and as an explicit, non-portable option.
"""

from __future__ import annotations

import math
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Protocol

import numpy as np
import torch

from . import native
from .errors import UnsupportedVersion, UsageError
from .modelfile import LoadedModel
from .quant import ENGINE_VERSION, IntModel, probabilities

MAX_THREADS = 255  # the header's field is one byte


class Engine(Protocol):
    engine_id: int
    engine_version: int
    threads: int  # recorded in the header: 0 when the output does not depend on it

    def start(self, lanes: int) -> object: ...

    def probs(self, state: object, prev: np.ndarray) -> tuple[object, np.ndarray]:
        """prev: int64 [B] previous bytes -> (state, float64 [B, 256] probability rows)."""
        ...


class FloatEngine:
    """The model's own float32 `step`, softmax in float64."""

    engine_id = 0
    engine_version = 1
    name = "float32"
    description = "float32 (reference, non-portable)"

    def __init__(self, loaded: LoadedModel, threads: int) -> None:
        self.model = loaded.model.eval()
        self.threads = threads

    def start(self, lanes: int) -> object:
        return self.model.init_ring(lanes)

    @torch.no_grad()
    def probs(self, state, prev: np.ndarray):
        state, logits = self.model.step(state, torch.from_numpy(prev))
        return state, torch.softmax(logits.double(), dim=-1).numpy()


class IntEngine:
    """The integer-exact model (quant.py): the same rows on every machine. On the CPU it runs
    the compiled step (native.py) when that builds, else quant.py's torch code: same integers."""

    engine_id = 1
    engine_version = ENGINE_VERSION
    name = "int8"
    description = "int8 (integer-exact, portable)"
    threads = 0  # the output does not depend on it

    def __init__(self, loaded: LoadedModel, device: str = "cpu", use_native: bool = True) -> None:
        self.model = IntModel(loaded.model, device, loaded.int8_rows)
        if use_native and self.model.device.type == "cpu" and native.load() is not None:
            self.model = native.NativeModel(self.model)

    def start(self, lanes: int) -> object:
        return self.model.init_state(lanes)

    @torch.no_grad()
    def step(self, state, prev: np.ndarray):
        """prev: int64 [B] previous bytes -> (state, int64 [B, 256] frequencies, all >= 1)."""
        return self.model.step(state, torch.from_numpy(prev).to(self.model.device))

    def probs(self, state, prev: np.ndarray):
        state, freq = self.step(state, prev)
        return state, probabilities(freq)


ENGINES: dict[str, type[IntEngine] | type[FloatEngine]] = {kind.name: kind for kind in (IntEngine, FloatEngine)}
BY_ID = {kind.engine_id: kind for kind in ENGINES.values()}


def backend() -> str:
    """Which implementation runs the int8 step on the CPU: "native" (compiled C++) or "torch"
    with the reason the compiled one is not in use (like `zstandard.backend`). Builds the
    native step on first use."""
    return "native" if native.load() is not None else f"torch ({native.error()})"


def engine_for(engine_id: int, version: int) -> type[IntEngine] | type[FloatEngine]:
    """The engine class an archive's header names, if this shazip has that exact version."""
    kind = BY_ID.get(engine_id)
    if kind is None or kind.engine_version != version:
        raise UnsupportedVersion(f"archive needs engine {engine_id} version {version}, which this shazip does not have")
    return kind


def available_cores() -> int:
    """The cores this process may use: its CPU affinity (as taskset and cpusets set it), and no
    more than a cgroup CPU quota allows (as `docker --cpus` sets it), since threads beyond the
    quota are throttled and would stall the ones that wait for them."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1
    quota = cgroup_cpu_quota()
    return max(1, min(cores, math.ceil(quota))) if quota else cores


def cgroup_cpu_quota(root: Path = Path("/sys/fs/cgroup")) -> float | None:
    """CPUs' worth of time the cgroup quota grants (cgroup v2 `cpu.max`, or v1's cfs files);
    None without a quota."""
    try:
        quota, period = (root / "cpu.max").read_text().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        pass
    try:
        quota = int((root / "cpu" / "cpu.cfs_quota_us").read_text())
        period = int((root / "cpu" / "cpu.cfs_period_us").read_text())
        return quota / period if quota > 0 and period > 0 else None
    except (OSError, ValueError):
        return None


def resolve_threads(threads: int) -> int:
    """threads, with 0 meaning every available core (at most MAX_THREADS)."""
    if not 0 <= threads <= MAX_THREADS:
        raise UsageError(f"threads must be between 0 (all available cores) and {MAX_THREADS}")
    return threads or min(available_cores(), MAX_THREADS)


def check_replayable(kind: type[IntEngine] | type[FloatEngine], threads: int) -> None:
    """A float32 archive decodes exactly only with the thread count that made it; a header
    asking for more threads than this machine has (or a forged count) is refused."""
    if kind is FloatEngine and threads > (os.cpu_count() or 1):
        raise UsageError(f"this float32 archive decodes exactly only with the {threads} threads that made it; "
                         f"this machine has {os.cpu_count()} CPUs")


@contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """torch's thread count is process-wide: set it for one call, then put it back."""
    old = torch.get_num_threads()
    if n:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(old)
