"""Model-coding of blocks: lanes, the step loop, and the choice of block method.

A block of n bytes is cut into `lanes` contiguous slices of L = ceil(n / lanes) bytes (the
last ones shorter, possibly empty). The lanes run in lockstep as one batch: at step t the
engine turns every lane's previous byte into a row, and the coder codes byte t of every lane
that still has one. Encoder and decoder run the same loop; only the coder differs, so both
sides see the same rows by construction.

Two ways to code a block with the model:
- MODEL: the engine's probability rows drive the categorical range coder, byte by byte.
- MIXED: the int8 engine's integer frequencies go to the adaptive stage (adaptive.py), which
  mixes them with what it has learnt of this input so far and codes 8 binary decisions a
  byte. Its tables outlive the block; a block finally stored another way is undone in them
  (snapshot and restore), since the decoder's stage never sees it.

On the CPU the int8 engine's loop is the native core's (`core.Job`: every lane and step in
C++, a chunk of steps per call so that progress and Ctrl-C go on); the torch engines (the GPU's
twin, float32) run `run_lanes` here, one step per iteration, through the same coders.
"""

from __future__ import annotations

import struct
import zlib
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Protocol

import numpy as np

from .. import core
from ..errors import CorruptArchive
from ..format.container import ALL_METHODS, CODED, STAGED, Method
from ..options import MIN_LANE  # noqa: F401 (the lane policy's, re-exported)
from ..options import LANE_FLOOR, MAX_LANES, SPLIT_LANES, LanePolicy
from . import kind
from .engines import FloatEngine, IntEngine, TwinEngine

if TYPE_CHECKING:
    from ..stage.adaptive import AdaptiveStage

Engine = IntEngine | TwinEngine | FloatEngine


class Progress(Protocol):
    """What coding reports as it goes: `n` more input bytes done and, compressing, about
    `bits` more output for them: the coder's ideal code length as a block is coded, then at
    the block's end the difference to its payload as stored (whatever method won). Their sum
    is the payloads' size, so a progress line's ratio is true within a block. Decoding
    reports `n` alone."""

    def __call__(self, n: int, bits: float = 0.0) -> None: ...


class _Metered:
    """`progress` told, with each count, how far `bits()` (a coder's measured code length)
    grew since the last."""

    def __init__(self, progress: Progress, bits: Callable[[], float]) -> None:
        self.progress, self.bits, self.last = progress, bits, 0.0

    def __call__(self, n: int) -> None:
        now = self.bits()
        self.progress(n, now - self.last)
        self.last = now


class _Tally:
    """`progress`, keeping the sum of the bits reported through it (a block's, to correct at its end)."""

    def __init__(self, progress: Progress) -> None:
        self.progress, self.bits = progress, 0.0

    def __call__(self, n: int, bits: float = 0.0) -> None:
        self.bits += bits
        self.progress(n, bits)
BOS = 0  # the "previous byte" fed to every lane at its start
ZSTD_LEVEL = 19
TRIVIAL = 1024  # a block zstd shrinks 1024-fold or more is left to zstd (unless only the model is allowed)
CHUNK_BYTES = 64  # bytes coded per call into the core between progress reports (about a millisecond)
# Format 5: a model-coded payload starts with the crc of the block's first bytes in coding order
# (`head_of`: about HEAD_BYTES, every lane's first), which the decoder checks once it has them, so
# that a payload that is not this block's (damaged, or forged to claim far more than it holds) is
# refused after a few KB of decoding, not after all the bytes its header claims.
HEAD_BYTES = 4096
_HEAD = struct.Struct("<I")


def head_steps(n: int, lanes: int) -> int:
    """The steps of a block of n bytes in `lanes` lanes that format 5's head check covers."""
    return min(-(-n // lanes), max(1, HEAD_BYTES // lanes))


def head_of(data: bytes, lanes: int) -> bytes:
    """Each lane's first head_steps bytes (fewer where it is shorter), lane after lane: what the
    head check covers (the core's Job.head, from what it has decoded)."""
    span, h = -(-len(data) // lanes), head_steps(len(data), lanes)
    return b"".join(data[b * span:b * span + h] for b in range(lanes))  # a short lane is the data's end


def _headed(data: bytes, lanes: int, payload: bytes) -> bytes:
    return _HEAD.pack(zlib.crc32(head_of(data, lanes))) + payload


def _head_problem(head: bytes, want: int) -> None:
    if zlib.crc32(head) != want:
        raise CorruptArchive("its first bytes do not match their check (the payload is damaged, or not this block's)")


def lane_lengths(n: int, lanes: int) -> np.ndarray:
    span = -(-n // lanes)
    return np.clip(n - span * np.arange(lanes), 0, span)


def run_lanes(engine: TwinEngine | FloatEngine, code: Callable[[np.ndarray, np.ndarray | None], np.ndarray],
              n: int, lanes: int, data: bytes | None = None, progress: Callable[[int], None] | None = None,
              head: int | None = None) -> bytes:
    """The step loop of the torch engines, shared by encoder (`data` given) and decoder (`data`
    None): `code(rows[k], symbols[k] or None) -> symbols[k]` codes the k lanes still active at
    this step (always a prefix, since only the last lanes are shorter); rows are the twin's
    integer frequencies or the float engine's probabilities. `head`: the crc the block's first
    bytes must have (format 5), checked once they are decoded. Returns the block's bytes."""
    lengths = lane_lengths(n, lanes)
    span = int(lengths[0]) if n else 0
    # Lane i is bytes [i*span, (i+1)*span): the block, zero-padded to lanes*span, viewed as
    # [lanes, span]. The loop works on its transpose so each step's bytes are contiguous.
    flat = np.zeros(lanes * span, dtype=np.uint8)
    if data is not None:
        flat[:n] = np.frombuffer(data, dtype=np.uint8)
    steps = np.ascontiguousarray(flat.reshape(lanes, span).T)  # [span, lanes]
    prev = np.full(lanes, BOS, dtype=np.int64)
    head_at = head_steps(n, lanes) if head is not None else -1  # the steps after which the head is checked
    state = engine.start(lanes)
    active = lanes
    try:
        for t in range(span):
            while lengths[active - 1] <= t:
                active -= 1
            state, rows = engine.step(state, prev) if isinstance(engine, TwinEngine) else engine.probs(state, prev)
            sym = code(rows[:active], None if data is None else steps[t, :active])
            steps[t, :active] = sym
            prev[:active] = sym
            if t + 1 == head_at:
                _head_problem(b"".join(steps[:min(t + 1, int(k)), b].tobytes() for b, k in enumerate(lengths)), head)
            if progress is not None:
                progress(active)
    finally:
        if isinstance(engine, TwinEngine):
            engine.finish(state)
    return steps.T.reshape(-1)[:n].tobytes()


@dataclass
class CodingStats:
    """What compression measured along the way (for the benchmark)."""
    model_bytes: int = 0  # bytes the model coded (every block it was tried on)
    model_bits: float = 0.0  # their cross-entropy under the model's rows, in bits
    mixed_bits: float = 0.0  # with the adaptive stage: the cross-entropy of its mixed predictions
    chosen_bits: float = 0.0  # the cross-entropy of the blocks kept model-coded...
    chosen_payload: int = 0  # ...and their payload bytes: the coder's real cost
    payload: int = 0  # payload bytes of every block, whatever the method
    methods: Counter = field(default_factory=Counter)  # blocks per chosen method name
    _last_bits: float = 0.0

    def merge(self, other: CodingStats) -> None:
        """Adds what another frame's coding measured."""
        for name in ("model_bytes", "model_bits", "mixed_bits", "chosen_bits", "chosen_payload", "payload"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.methods.update(other.methods)


def _native(engine: IntEngine | None, n: int, lanes: int, stage: AdaptiveStage | None, progress,
            measure: bool = False, data: bytes | None = None, payload: bytes | None = None, overrun: int = -1,
            head: int | None = None):
    """A block through the core's loop, a chunk of steps per call; returns the finished job.
    `engine` None: the stage alone. `overrun`: the most bytes its decoder may read past the
    payload (-1: any number); `head`: the crc its first bytes must have (format 5). Encoding with
    `measure`, progress is told the code length as it grows."""
    job = core.load().Job(engine and engine.model, engine and engine.pool, n, lanes,
                          stage=stage.native if stage else None, data=data, payload=payload, measure=measure,
                          overrun=overrun)
    steps = max(1, CHUNK_BYTES // lanes)
    h = head_steps(n, lanes) if head is not None else 0
    if progress is not None and measure and data is not None:
        progress = _Metered(progress, lambda: job.coded_bits)
    try:
        while not job.done:
            coded = job.run(steps if job.steps_done >= h else min(steps, h - job.steps_done))
            if head is not None and job.steps_done == h:
                _head_problem(job.head(h), head)
                head = None
            if progress is not None:
                progress(coded)
    except core.load().DataError as e:
        raise CorruptArchive(f"model-coded data is damaged ({e})") from None
    return job


def _record(stats: CodingStats | None, n: int, model_bits: float, mixed_bits: float | None,
            modelled: bool = True) -> None:
    """Counts a block model-coded (`modelled` False: by a stage with the model's input whose model
    was not run, a `stage` block: its bits are the coder's only)."""
    if stats is not None and not modelled:
        stats._last_bits = mixed_bits
    elif stats is not None:
        stats.model_bytes += n
        stats.model_bits += model_bits
        if mixed_bits is not None:
            stats.mixed_bits += mixed_bits
        stats._last_bits = model_bits if mixed_bits is None else mixed_bits


def _row_probabilities(rows: np.ndarray) -> np.ndarray:
    """The twin's integer rows as the categorical coder takes them: each over the row's sum, one
    correctly rounded float64 division (exact operands), as the core does."""
    return rows / rows.sum(axis=1, keepdims=True).astype(np.float64)


def model_encode(engine: Engine, data: bytes, lanes: int, progress: Progress | None = None,
                 stats: CodingStats | None = None) -> bytes:
    """`data` coded by the model alone. The code length is measured for `stats` and for `progress`."""
    measure = stats is not None or progress is not None
    if isinstance(engine, IntEngine):
        job = _native(engine, len(data), lanes, None, progress, measure, data=data)
        _record(stats, len(data), job.coded_bits, None)
        return job.result()
    enc, bits = core.load().CategoricalEncoder(), 0.0

    def code(rows: np.ndarray, symbols: np.ndarray) -> np.ndarray:
        nonlocal bits
        probs = rows if isinstance(engine, FloatEngine) else _row_probabilities(rows)
        enc.encode(probs, symbols)
        if measure:
            bits -= float(np.log2(probs[np.arange(len(symbols)), symbols]).sum())
        return symbols

    run_lanes(engine, code, len(data), lanes, data, progress and _Metered(progress, lambda: bits))
    _record(stats, len(data), bits, None)
    return enc.finish()


def model_decode(engine: Engine, payload: bytes, n: int, lanes: int, progress=None, overrun: int = -1,
                 head: int | None = None) -> bytes:
    if isinstance(engine, IntEngine):
        return _native(engine, n, lanes, None, progress, payload=payload, overrun=overrun, head=head).result()
    dec = core.load().CategoricalDecoder(payload, overrun)

    def code(rows: np.ndarray, _) -> np.ndarray:
        try:
            return dec.decode(rows if isinstance(engine, FloatEngine) else _row_probabilities(rows))
        except core.load().DataError as e:
            raise CorruptArchive(f"model-coded data is damaged ({e})") from None

    return run_lanes(engine, code, n, lanes, None, progress, head)


def mixed_encode(engine: IntEngine | TwinEngine | None, stage: AdaptiveStage, data: bytes, lanes: int,
                 progress: Progress | None = None, stats: CodingStats | None = None) -> bytes:
    """`engine` None: the stage has no NN input (the model is never run). The code length is
    measured for `stats` and for `progress`."""
    n = len(data)
    measure = stats is not None or progress is not None
    if engine is None or isinstance(engine, IntEngine):
        job = _native(engine, n, lanes, stage, progress, measure, data=data)
        _record(stats, n, job.model_bits, job.coded_bits, engine is not None or not stage.params.nn)
        return job.result()
    enc = stage.encoder(lanes, -(-n // lanes), measure=measure)
    nn_bits = 0.0

    def code(freq: np.ndarray, symbols: np.ndarray) -> np.ndarray:
        nonlocal nn_bits
        if stats is not None:  # the model's own cross-entropy, beside the stage's
            f = freq.astype(np.float64)
            nn_bits -= float(np.log2(f[np.arange(len(symbols)), symbols] / f.sum(axis=1)).sum())
        return enc.code(freq, symbols)

    run_lanes(engine, code, n, lanes, data, progress and _Metered(progress, lambda: enc.bits))
    payload = enc.finish()
    _record(stats, n, nn_bits, enc.bits)
    return payload


def mixed_decode(engine: IntEngine | TwinEngine | None, stage: AdaptiveStage, payload: bytes, n: int, lanes: int,
                 progress=None, overrun: int = -1, head: int | None = None) -> bytes:
    if engine is None or isinstance(engine, IntEngine):
        return _native(engine, n, lanes, stage, progress, payload=payload, overrun=overrun, head=head).result()
    dec = stage.decoder(lanes, -(-n // lanes), payload, overrun)

    def code(freq: np.ndarray, _) -> np.ndarray:
        try:
            return dec.code(freq)
        except core.load().DataError as e:
            raise CorruptArchive(f"model-coded data is damaged ({e})") from None

    return run_lanes(engine, code, n, lanes, None, progress, head)


def effective_lanes(n: int, lanes: int, min_lane: int = LANE_FLOOR) -> int:
    """The lanes a block of n bytes is coded with: at most `lanes`, none shorter than `min_lane`."""
    return max(1, min(lanes, n // min_lane))


def order0_entropy(data: bytes) -> float:
    counts = np.bincount(np.frombuffer(data, dtype=np.uint8), minlength=256)
    p = counts[counts > 0] / len(data)
    return float(-(p * np.log2(p)).sum())


def encode_block(get_engine: Callable[[], Engine], data: bytes, lanes: LanePolicy, progress: Progress | None = None,
                 methods: frozenset[Method] = ALL_METHODS, stats: CodingStats | None = None,
                 get_stage: Callable[[], AdaptiveStage] | None = None,
                 model_pays: float | None = None, head: bool = True) -> tuple[Method, int, bytes]:
    """The smallest of the allowed methods (model-coded, zstd, raw; ties go to the cheaper
    decode). The model codes MIXED with an adaptive stage (`get_stage`), else MODEL; where both
    MIXED and STAGE are allowed and `model_pays` is given, a repetitive block on which the model
    saves less than that share of the stage's code length is coded STAGE, by the stage alone in
    one lane (kind.py). Unless
    the model is the only choice, it is skipped where it cannot pay for its time: data whose
    byte histogram is already near 8 bits/byte (compressed or random: it cannot win; such data
    also skips zstd's slow level when its fast level finds nothing), and data zstd already
    shrinks to at most 1/TRIVIAL of its size (zeros, padding, a repeated record: the model
    could save at most that little, at ~50 µs a byte). The model's lanes follow `lanes`
    (options.lane_policy says why). `get_engine` and `get_stage` are called only if the model is
    tried. `head`: a model-coded payload starts with its head check (format 5; `_headed`).
    `progress` is told the block's bytes as they are coded, and at the end its payload's size."""
    progress = progress and _Tally(progress)
    candidates = []
    dense, trivial = order0_entropy(data) >= 7.5, False
    if Method.RAW in methods:
        candidates.append((Method.RAW, 1, data))
    zstd = core.load().zstd_compress
    quick = zstd(data, 1) if Method.ZSTD in methods else None
    if Method.ZSTD in methods:
        # Dense data that zstd's fastest level cannot shrink by 1 % is left to it: level 19
        # runs at ~5 MB/s and would not do better on such data.
        level = 1 if dense and len(quick) > 0.99 * len(data) else ZSTD_LEVEL
        candidates.append((Method.ZSTD, 1, quick if level == 1 else zstd(data, level)))
        trivial = len(candidates[-1][2]) * TRIVIAL <= len(data)
    coded = methods & ({Method.MODEL} if get_stage is None else STAGED)
    stage, snapshot = None, None
    if coded and (methods <= CODED or not (dense or trivial)):
        repetitive = kind.repetitive(data, quick)
        k = effective_lanes(len(data), lanes.most, lanes.min_lane)
        if repetitive:
            k = max(effective_lanes(len(data), lanes.most, lanes.repetitive_min_lane), SPLIT_LANES if k >= SPLIT_LANES else 1)
        if get_stage is None:
            method, payload = Method.MODEL, model_encode(get_engine(), data, k, progress, stats)
        else:
            stage = get_stage()
            snapshot = stage.snapshot()
            if coded == STAGED and model_pays is not None and repetitive and stage.params.nn:
                method, k, payload = _stage_or_model(stage, snapshot, get_engine, data, k, model_pays, progress,
                                                     stats)
            else:
                method = Method.STAGE if coded == {Method.STAGE} else Method.MIXED
                k = 1 if method == Method.STAGE else k
                engine = _engine_for(stage, get_engine) if method == Method.MIXED else None
                payload = mixed_encode(engine, stage, data, k, progress, stats)
        candidates.append((method, k, _headed(data, k, payload) if head else payload))
    elif progress is not None:
        progress(len(data))
    if not candidates:
        raise ValueError("no block method allowed")
    best = min(candidates, key=lambda c: len(c[2]))
    if progress is not None:  # what was measured, made the payload's size
        progress(0, 8 * len(best[2]) - progress.bits)
    if stage is not None and best[0] not in STAGED:
        stage.restore(snapshot)  # the decoder's stage will not see this block
    if stats is not None:
        stats.methods[best[0].name.lower()] += 1
        stats.payload += len(best[2])
        if best[0] in CODED:
            stats.chosen_bits += stats._last_bits
            stats.chosen_payload += len(best[2])
    return best


def _stage_or_model(stage: AdaptiveStage, snapshot: object, get_engine: Callable[[], Engine], data: bytes,
                    lanes: int, least: float, progress: Progress | None,
                    stats: CodingStats | None) -> tuple[Method, int, bytes]:
    """A repetitive block coded MIXED (`lanes`) or, where the model stops half-way saving less
    than `least` (kind.py says why), STAGE (one lane), by `stage`, whose `snapshot` is its state
    before the block; the stage ends as the chosen coding leaves it. `progress` is told the
    block's bytes once."""
    referee = kind.Referee(len(data), lanes, least, max(1, CHUNK_BYTES // lanes), progress)
    if referee.armed:  # the stage alone on the whole block, then undone (no copy of its tables held)
        mixed_encode(None, stage, data, 1, referee.ledger)
        stage.restore(snapshot)
    try:
        return Method.MIXED, lanes, mixed_encode(_engine_for(stage, get_engine), stage, data, lanes, referee, stats)
    except kind.Losing:
        stage.restore(snapshot)
    payload = mixed_encode(None, stage, data, 1, None, stats)
    if progress is not None:
        progress(len(data) - referee.done)
    return Method.STAGE, 1, payload


def _engine_for(stage: AdaptiveStage, get_engine: Callable[[], Engine]) -> Engine | None:
    """The engine a stage needs: none (and no model loaded) for a stage without the NN input."""
    return get_engine() if stage.params.nn else None


def decode_block(get_engine: Callable[[], Engine], method: Method, lanes: int, payload: bytes, n: int,
                 progress=None, get_stage: Callable[[], AdaptiveStage] | None = None, overrun: int = -1, *,
                 head: bool) -> bytes:
    """`get_engine` (and `get_stage`) are called only for model-coded blocks, so archives of
    stored/zstd blocks decode without the model. `overrun`: the most bytes the decoder may read
    past a model-coded payload (formats 4, 5: container.OVERRUN; -1: any, as formats 1-3 allow).
    `head`: a model-coded payload starts with its head check (format 5)."""
    if method in CODED:
        if lanes > effective_lanes(n, MAX_LANES):  # the encoder never makes more; each lane costs memory
            raise CorruptArchive(f"{lanes} lanes for {n} bytes is more than the encoder makes")
        want = None
        if head:
            if len(payload) < _HEAD.size:
                raise CorruptArchive("the payload is shorter than its head check")
            (want,), payload = _HEAD.unpack(payload[:_HEAD.size]), payload[_HEAD.size:]
        if method == Method.MODEL:
            return model_decode(get_engine(), payload, n, lanes, progress, overrun, want)
        if get_stage is None:
            raise CorruptArchive(f"a {method.name.lower()} block in an archive without an adaptive stage")
        stage = get_stage()
        engine = _engine_for(stage, get_engine) if method == Method.MIXED else None
        return mixed_decode(engine, stage, payload, n, lanes, progress, overrun, want)
    if lanes != 1:
        raise CorruptArchive(f"{lanes} lanes on a block that is not model-coded")
    if method == Method.ZSTD:
        # One frame of exactly n bytes (the core checks the frame's claim before allocating)
        try:
            out = core.load().zstd_decompress(payload, n)
        except core.load().DataError as e:
            raise CorruptArchive(f"zstd data is damaged ({e})") from None
    else:
        out = payload
    if progress is not None:
        progress(n)
    return out
