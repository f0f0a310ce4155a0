"""The GPU engine's steps: the twin's step graphed (one CUDA graph a step) or compiled (inductor's
Triton kernels), and the lanes of several frames stepped as one batch, for frames coded at once.

On a GPU a step of the integer model costs about the same from 64 lanes to thousands: it is
hundreds of small kernels, bound by their launches, not by their work (docs/gpu.md). Frames
coded at once (`-T N`), each stepping its own lanes, pay that cost once per frame and step; here
the frames of one `LaneBatch` deposit their lanes' previous bytes, and the last to arrive runs one
step for all of them (a CUDA graph over the whole batch, or the eager step) and hands each its
rows. Each frame's stage then codes its rows on its own core while the batch waits for the next
deposits, so the GPU's step and the stages alternate; two batches (frames split between them)
keep the GPU busy while the other batch's stages run.

Every lane's state is its own (its position too: `twin.IntState.pos` is per lane), so a lane's
integers do not depend on the batch it is in: the archives are those of the frames stepped alone.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np
import torch

from .twin import IntModel, IntState


def advance(model: IntModel, state: IntState, x: torch.Tensor) -> torch.Tensor:
    """One step that updates `state`'s own tensors in place (a CUDA graph's inputs and outputs
    are fixed tensors); returns the frequencies."""
    new, freq = model.step(state, x)
    for mine, theirs in zip(state.h + state.c, new.h + new.c):
        mine.copy_(theirs)
    state.pos.copy_(new.pos)
    return freq


_compiled: list = []  # `compiled_advance`'s function, made once a process
_compiling = threading.Lock()


def compiled_advance():
    """`advance` compiled by torch.compile (inductor: on CUDA, Triton kernels that fuse the
    step's chains of per-element integer operations, most of its ~550 kernels, into a few
    dozen; what is left, the int8 matmuls and the ring's float32 bmms, stays with the libraries).
    Integer operations have one answer in any fusion, and the bmms are exact in any order (rule
    2), so the integers are the eager step's (tested against it). Called with `lanes_dynamic`
    tensors, one compilation serves every number of lanes; nothing else may vary: where the
    sizes and integers turned symbolic (`dynamic=True`, or torch's automatic dynamic shapes
    after a second model) inductor's CPU code gave other integers than the eager step
    (2026-11-27), so another model gets a compilation of its own."""
    if not _compiled:
        compiled = torch.compile(advance)

        def step(model: IntModel, state: IntState, x: torch.Tensor) -> torch.Tensor:
            # what differs from a compilation's guards (another model's shapes and shifts) makes a
            # new static compilation, never a symbolic one (the patch is the process's: one call
            # at a time)
            with _compiling, torch._dynamo.config.patch(automatic_dynamic_shapes=False):
                return compiled(model, state, x)
        _compiled.append(step)
    return _compiled[0]


def lanes_dynamic(*tensors: torch.Tensor) -> None:
    """Marks the lanes' dimension (the first) of a compiled step's inputs as varying."""
    for t in tensors:
        torch._dynamo.maybe_mark_dynamic(t, 0)


def stepper(compiled: bool, *inputs: torch.Tensor):
    """`advance`, or with `compiled` the compiled step, `inputs` (the tensors it will be called
    with) marked `lanes_dynamic`."""
    if not compiled:
        return advance
    lanes_dynamic(*inputs)
    return compiled_advance()


class GraphedStep:
    """`IntModel.step` for one batch of lanes on CUDA, captured once as a CUDA graph and then
    replayed: a step is one launch instead of the ~550 small kernels the twin runs eagerly (or
    the few dozen of the compiled step, `compiled`). The same kernels run in the same order, so
    the integers are the step's. The lanes' state lives in the graph's own tensors (`state`,
    where given: a batch's, `LaneBatch`)."""

    _capturing = threading.Lock()  # frames coded at once capture one at a time

    def __init__(self, model: IntModel, lanes: int, state: IntState | None = None, compiled: bool = False) -> None:
        self.state = model.init_state(lanes) if state is None else state
        self.x = torch.zeros(lanes, dtype=torch.int64, device=model.device)
        spare, side = model.init_state(lanes), torch.cuda.Stream(model.device)
        step = stepper(compiled, self.x, *self.state.tensors(), *spare.tensors())
        with GraphedStep._capturing:
            side.wait_stream(torch.cuda.current_stream(model.device))
            # libraries' lazy set-up (cuBLASLt) and the compilation happen before a capture, not in it
            with torch.cuda.stream(side):
                for _ in range(2):
                    step(model, spare, self.x)
            torch.cuda.current_stream(model.device).wait_stream(side)
            self.graph = torch.cuda.CUDAGraph()
            # other threads (frames at once) go on launching their own steps meanwhile
            with torch.cuda.graph(self.graph, capture_error_mode="thread_local"):
                self.freq = step(model, self.state, self.x).to(torch.int32)  # in [1, 2**30]: half the bytes back

    def __call__(self, prev: np.ndarray) -> np.ndarray:
        """prev: int64 [lanes] previous bytes -> int32 [lanes, 256] frequencies, on the CPU."""
        self.x.copy_(torch.from_numpy(prev))
        self.graph.replay()
        return self.freq.cpu().numpy()


class LaneBatch:
    """The lanes of its members (one a frame's thread), side by side in one state: each member a
    region of lanes it keeps from block to block, grown when a block needs more. A step runs once
    every member in a block has deposited its previous bytes; members between blocks are not
    waited for (their lanes step too, unused). A failed step fails every member waiting on it
    (and only those: an interrupted call leaves the batch usable for the next)."""

    def __init__(self, model: IntModel, graphs: bool, compiled: bool = False) -> None:
        self.model, self.graphs, self.compiled = model, graphs, compiled
        self._cond = threading.Condition()
        self._members: list[Member] = []  # in the order of their regions
        self._state: IntState = model.init_state(0)
        self._step: Callable[[np.ndarray], np.ndarray] | None = None  # for the current layout, made on first use
        self._generation = 0  # steps run
        self._failed: tuple[int, BaseException] | None = None  # the last failed step and why

    def member(self) -> Member:
        with self._cond:
            self._members.append(Member(self))
            return self._members[-1]

    @property
    def lanes(self) -> int:
        """The lanes a step runs: every member's region."""
        return sum(m.size for m in self._members)

    def _join(self, member: Member, lanes: int) -> None:
        with self._cond:  # never during a step: the thread that runs it holds the lock
            if lanes > member.size:
                self._relayout(member, lanes)
            lo = member.offset
            with torch.no_grad():  # a fresh start for the member's lanes, in place (a graph reads these tensors)
                for t in self._state.tensors():
                    t[lo:lo + member.size] = 0
            member.lanes, member.active, member.deposited = lanes, True, False
            member.prev = np.zeros(member.size, dtype=np.int64)

    def _relayout(self, member: Member, lanes: int) -> None:
        """Grows `member`'s region to `lanes`: a new state, every other region's lanes copied
        over; the step (its graph) is made again for the new shape."""
        old, offsets = self._state, [m.offset for m in self._members]
        member.size = lanes
        self._state, offset = self.model.init_state(self.lanes), 0
        with torch.no_grad():
            for m, was in zip(self._members, offsets):
                m.offset = offset
                if m is not member and m.size:
                    for new_t, old_t in zip(self._state.tensors(), old.tensors()):
                        new_t[offset:offset + m.size] = old_t[was:was + m.size]
                offset += m.size
        self._step = None

    def _deposit(self, member: Member, prev: np.ndarray) -> np.ndarray:
        with self._cond:
            member.prev[:len(prev)] = prev
            member.deposited = True
            generation = self._generation
            while self._generation == generation:
                if self._ready():
                    self._run()
                else:
                    self._cond.wait()
            if self._failed is not None and self._failed[0] == generation:  # the step this member waited for
                raise self._failed[1]
            rows = member.rows
        return rows.astype(np.int64)  # (int32 from the device: half the bytes to copy back)

    def _ready(self) -> bool:
        active = [m for m in self._members if m.active]
        return bool(active) and all(m.deposited for m in active)

    def _run(self) -> None:
        """One step of every lane (holding the lock: every member in a block is waiting for it)."""
        try:
            prev = np.concatenate([m.prev if m.active else np.zeros(m.size, dtype=np.int64) for m in self._members])
            if self._step is None:
                self._step = self._make_step()
            rows = self._step(prev)
            for m in self._members:  # handed out now: a relayout may move the regions before a member wakes
                m.rows = rows[m.offset:m.offset + m.lanes]
        except BaseException as e:  # every member waiting on this step fails with it; later steps may run
            self._failed = (self._generation, e)
            raise
        finally:
            for m in self._members:
                m.deposited = False
            self._generation += 1
            self._cond.notify_all()

    def _make_step(self) -> Callable[[np.ndarray], np.ndarray]:
        if self.graphs:
            return GraphedStep(self.model, self.lanes, self._state, self.compiled)
        x = torch.zeros(self.lanes, dtype=torch.int64, device=self.model.device)
        step = stepper(self.compiled, x, *self._state.tensors())

        def eager(prev: np.ndarray) -> np.ndarray:
            x.copy_(torch.from_numpy(prev))
            with torch.no_grad():
                return step(self.model, self._state, x).to(torch.int32).cpu().numpy()
        return eager

    def _leave(self, member: Member) -> None:
        with self._cond:
            member.active = member.deposited = False
            self._cond.notify_all()  # the members left may all have deposited: one of them steps


class Member:
    """A frame's place in a `LaneBatch`: `join(lanes)` at a block's start, `step(prev)` once a
    step (-> its lanes' rows), `leave()` at the block's end (also when the block fails)."""

    def __init__(self, batch: LaneBatch) -> None:
        self.batch = batch
        self.offset = self.size = self.lanes = 0
        self.active = self.deposited = False
        self.prev = np.zeros(0, dtype=np.int64)
        self.rows = np.zeros((0, 256), dtype=np.int32)  # the last step's

    def join(self, lanes: int) -> Member:
        self.batch._join(self, lanes)
        return self

    def step(self, prev: np.ndarray) -> np.ndarray:
        """prev: int64 [lanes] -> int64 [lanes, 256] frequencies, on the CPU."""
        return self.batch._deposit(self, prev)

    def leave(self) -> None:
        self.batch._leave(self)
