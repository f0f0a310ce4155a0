"""Engines: what turns each lane's previous byte into the model's prediction, and the rules that
say whether an archive's engine can be replayed here.

An archive's header names its engine by id and version. Two exist:

- int8 (id 1, the default) runs the integer-exact model (numerics.py). Its rows are the same
  integers on every machine, thread count, lane batch, kernel path and device, so its archives
  decode anywhere. It runs as `IntEngine` on the CPU (the native core: the block loop never
  leaves C++, and torch is not imported) or as `TwinEngine` on a torch device (twin.IntModel:
  a GPU, or the CPU for tests), whose rows go to the same stage and coders step by step.
- float32 (id 0, `FloatEngine`) is the float model's own step: exact only on the machine and
  thread count that made the archive, whose thread count the header records. It is kept for
  evaluation and as an explicit, non-portable option.
"""

from __future__ import annotations

import os
import threading
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, ContextManager

from .. import core
from ..errors import UnsupportedVersion, UsageError
from ..hardware import Hardware, available_cores, torch_threads
from ..model.file import LoadedModel, load_model
from ..model.numerics import ENGINE_VERSION

if TYPE_CHECKING:
    import numpy as np

    from ..model.twin import IntModel
    from ..model.gpu import LaneBatch, Member


class FloatEngine:
    """The model's own float32 `step`, softmax in float64 (torch)."""

    engine_id = 0
    engine_version = 1
    name = "float32"
    description = "float32 (reference, non-portable)"

    def __init__(self, loaded: LoadedModel, threads: int) -> None:
        self.model = loaded.model.eval()
        self.threads = threads

    def start(self, lanes: int) -> object:
        return self.model.init_ring(lanes)

    def probs(self, state, prev: np.ndarray):
        """prev: int64 [B] previous bytes -> (state, float64 [B, 256] probability rows)."""
        import torch
        with torch.no_grad():
            state, logits = self.model.step(state, torch.from_numpy(prev))
        return state, torch.softmax(logits.double(), dim=-1).numpy()


class IntEngine:
    """The integer-exact model on the native core (CPU): `model` and `pool` are the core's, which
    its block loop (`core.Job`) runs with. `threads`: a number, or what gives the engine's threads
    at each block (frames at once share the cores anew as they start and end: `frames.Shares`).
    `kernels` picks a kernel path (tests compare them)."""

    engine_id = 1
    engine_version = ENGINE_VERSION
    name = "int8"
    description = "int8 (integer-exact, portable)"
    threads = 0  # the output does not depend on it

    def __init__(self, loaded: LoadedModel, threads: int | Callable[[], int] = 1, kernels: str = "auto") -> None:
        self.model = core.model(loaded.int_weights(), kernels)
        self._threads = threads if callable(threads) else (lambda: threads)
        self._pool = None  # the last pool asked for (a job running on it holds it too)

    @property
    def pool(self):
        """The core's pool of the threads the engine has now."""
        n = self._threads()
        if self._pool is None or self._pool.threads != n:
            self._pool = core.load().ThreadPool(n)
        return self._pool


class TwinEngine:
    """The integer-exact model as torch code (twin.IntModel) on a torch device: the GPU engine.
    Same integers as `IntEngine`, so the same archives; the stage and coders stay on the CPU. Its
    lanes step in a `gpu.LaneBatch`: its own, or one shared with the other frames coded
    at once on a GPU (`LaneBatching`). On CUDA a batch's step is a CUDA graph (gpu.GraphedStep)
    of the compiled step, captured once for a layout of lanes and replayed for every block that
    fits it (`batch_for` says what the environment may change)."""

    engine_id = IntEngine.engine_id
    engine_version = IntEngine.engine_version
    name = IntEngine.name
    threads = 0

    def __init__(self, loaded: LoadedModel, device: str, batch: LaneBatch | None = None) -> None:
        if batch is None:
            from ..model.twin import IntModel
            batch = batch_for(IntModel(loaded.int_weights(), device))
        self.model, self._member = batch.model, batch.member()

    def start(self, lanes: int) -> Member:
        return self._member.join(lanes)

    def step(self, state: Member, prev: np.ndarray) -> tuple[Member, np.ndarray]:
        """prev: int64 [B] previous bytes -> (state, int64 [B, 256] frequencies, all >= 1, on the CPU)."""
        return state, state.step(prev)

    def finish(self, state: Member) -> None:
        """A block's end, also where it failed: its lanes leave their batch (none waits on them)."""
        state.leave()


def batch_for(model: IntModel) -> LaneBatch:
    """A batch of lanes for `model`. On CUDA its step is a CUDA graph (unless
    SHAZIP_CUDA_GRAPHS=0 asks for the eager step) of the compiled step (gpu.compiled_advance,
    where Triton is installed, unless SHAZIP_GPU_COMPILE=0 asks for the twin's own kernels); on
    the CPU, the twin's eager step. The benchmark compares them."""
    from importlib.util import find_spec

    from ..model.gpu import LaneBatch
    cuda = model.device.type == "cuda"
    compiled = cuda and os.environ.get("SHAZIP_GPU_COMPILE", "1") != "0" and find_spec("triton") is not None
    return LaneBatch(model, graphs=cuda and os.environ.get("SHAZIP_CUDA_GRAPHS", "1") != "0", compiled=compiled)


GPU_GROUPS = 2  # batches the frames coded at once on a GPU are split into (model/gpu.py says why)


class LaneBatching:
    """The frames coded at once on a GPU, their lanes stepped together (model/gpu.py): per
    model one integer model on the device and `groups` batches; frame worker w steps in batch
    w % groups. One per call (a Compressor, a decompression), so unrelated callers never wait on
    each other."""

    def __init__(self, device: str, groups: int) -> None:
        self.device, self.groups = device, groups
        self._lock = threading.Lock()
        self._batches: dict[bytes, list[LaneBatch]] = {}

    @classmethod
    def of(cls, hw: Hardware) -> LaneBatching | None:
        """For frames coded at once on a GPU: SHAZIP_GPU_GROUPS batches (default GPU_GROUPS; 0:
        each frame steps its own lanes, what the benchmark compares it with)."""
        groups = int(os.environ.get("SHAZIP_GPU_GROUPS", GPU_GROUPS))
        return cls(hw.device, groups) if hw.device != "cpu" and hw.threads > 1 and groups > 0 else None

    def engine(self, loaded: LoadedModel, worker: int) -> TwinEngine:
        from ..model.twin import IntModel
        with self._lock:
            if loaded.model_id not in self._batches:
                model = IntModel(loaded.int_weights(), self.device)
                self._batches[loaded.model_id] = [batch_for(model) for _ in range(self.groups)]
            return TwinEngine(loaded, self.device, self._batches[loaded.model_id][worker % self.groups])


ENGINES = {kind.name: kind for kind in (IntEngine, FloatEngine)}
BY_ID = {kind.engine_id: kind for kind in ENGINES.values()}


def int_engine(loaded: LoadedModel, device: str, threads: int | Callable[[], int]) -> IntEngine | TwinEngine:
    """The int8 engine on `device`, "cpu" or "cuda" (resolved: `Hardware.of`). On the CPU its
    threads are at most the cores this process may use: a frame's threads wait on each other
    (the model's ahead of the stage, csrc/block/job.h), and beyond the cores they waited for
    turns (one frame at -T 8 on 2 cores took 1.5x the time of -T 2; `frames.Shares` keeps to
    them too). The bytes do not change."""
    if device != "cpu":
        return TwinEngine(loaded, device)
    return IntEngine(loaded, threads if callable(threads) else min(threads, available_cores()))


def engine_for(engine_id: int, version: int) -> type[IntEngine] | type[FloatEngine]:
    """The engine class an archive's header names, if this shazip has that exact version."""
    kind = BY_ID.get(engine_id)
    if kind is None or kind.engine_version != version:
        raise UnsupportedVersion(f"archive needs engine {engine_id} version {version}, which this shazip does not have")
    return kind


def check_replayable(kind: type[IntEngine] | type[FloatEngine], threads: int) -> None:
    """A float32 archive decodes exactly only with the thread count that made it; a header
    asking for more threads than this machine has (or a forged count) is refused."""
    if kind is FloatEngine and threads > (os.cpu_count() or 1):
        raise UsageError(f"this float32 archive decodes exactly only with the {threads} threads that made it; "
                         f"this machine has {os.cpu_count()} CPUs")


# ---- engines made on first use, for the coding calls (codec/encode.py, decode.py)

def resolve_model(model: str | LoadedModel) -> LoadedModel:
    """A model given by name or file, loaded; a loaded one as it is."""
    return model if isinstance(model, LoadedModel) else load_model(model)


class Once:
    """Builds a thing at its first use and keeps it: the engine and the adaptive stage are made
    at the first model-coded block (archives of stored/zstd blocks never need the model), and
    the stage then lives on through every later block of the input."""

    def __init__(self, make: Callable[[], object]) -> None:
        self.make, self.made = make, None

    def __call__(self):
        if self.made is None:
            self.made = self.make()
        return self.made


def lazy_engine(kind: type[IntEngine] | type[FloatEngine], loaded: Callable[[], LoadedModel],
            threads: int | Callable[[], int], device: str, batching: LaneBatching | None = None,
            worker: int = 0) -> Once:
    """The engine, built on first use; `device` resolved (`Hardware`); `threads` a number or, for
    a frame worker's int8 engine, its share at each block (`Shares.of`). With `batching` (frames
    at once on a GPU), frame worker `worker`'s, whose lanes step in a batch shared with others."""
    def make() -> IntEngine | TwinEngine | FloatEngine:
        if kind is FloatEngine:
            return FloatEngine(loaded(), threads)
        return int_engine(loaded(), device, threads) if batching is None else batching.engine(loaded(), worker)
    return Once(make)


@dataclass
class Engines:
    """A worker's engines by archive kind (engine, model), each built on first use and kept for
    the next archive of that kind; with `batching`, frame worker `worker`'s; with `share`, its
    int8 engines' threads at each block (`Shares.of`)."""
    batching: LaneBatching | None = None
    worker: int = 0
    share: Callable[[], int] | None = None
    made: dict[tuple, Once] = field(default_factory=dict)

    def of(self, key: tuple, kind: type[IntEngine] | type[FloatEngine], loaded: Callable[[], LoadedModel],
           threads: int, device: str) -> Once:
        if key not in self.made:
            given = self.share if self.share is not None and kind is IntEngine else threads
            self.made[key] = lazy_engine(kind, loaded, given, device, self.batching, self.worker)
        return self.made[key]


def engine_threads(kind: type[IntEngine] | type[FloatEngine] | None, n: int) -> ContextManager:
    """torch's thread count for the float engine's steps; the int8 engine's threads are its own."""
    return torch_threads(n) if kind is FloatEngine else nullcontext()

