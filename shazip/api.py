"""Python API: compress/decompress bytes or streams, block by block in bounded memory.

    import shazip
    blob = shazip.compress(b"some text", 9, model="default")
    assert shazip.decompress(blob) == b"some text"

Every failure is a `shazip.ShazipError` with a one-line message.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import io
import itertools
import numbers
import threading
import traceback
import zlib
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, BinaryIO, Callable, ContextManager, Iterable, Iterator, TypeVar

from .codec.engines import (
    BY_ID, DEVICES, ENGINES, FloatEngine, Hardware, IntEngine, LaneBatching, TwinEngine, available_cores,
    check_replayable, engine_for, int_engine, torch_threads,
)
from .codec.frames import Frame, Shares, hand_back, index, ordered_map
from .errors import (ArchiveError, ChecksumMismatch, CorruptArchive, ModelError, ShazipError, UnsupportedVersion,
                     UsageError)
from .format import crc, seektable
from .format.chain import Chain
from .format.container import (
    ALL_METHODS, BLOCK_HEADER_BYTES, BOUND_HINT, MAX_TABLE, OVERRUN, SKIP_MAGIC, STAGED, TABLE_TAG, ArchiveReader,
    ArchiveWriter, Method, Place,
    first_unit, read_upto, record_length, verify_block,
)
from .format.header import COMPACT, MAGIC, MAX_BLOCK_SIZE, MAX_HEADER, Header, chained
from .modelfile import LoadedModel, find_model, load_model, model_from_bytes, model_label, stored_name
from .options import (
    ADAPT_CHOICES, DEFAULT_BLOCK_SIZE, DEFAULT_LANES, LANE_FLOOR, MAX_FRAME_IN_MEMORY, MAX_LANES,
    DEFAULT_LEVEL, LEVELS, LanePolicy, Level, frame_size_for, lane_policy,
)

R = TypeVar("R")

if TYPE_CHECKING:
    from .codec.block import CodingStats, Progress
    from .stage.adaptive import AdaptiveParams, AdaptiveStage



def _stage_params(adapt: str | AdaptiveParams, level: Level, lanes: LanePolicy,
                  repetitive: bool = False) -> AdaptiveParams | None:
    """The adaptive stage's parameters for `adapt` at `level` with `lanes` (None: the model alone),
    for an input that starts with a `repetitive` block (the level's `repetitive_models`) or not."""
    from .stage.adaptive import EXTRA_FLAGS, MODEL_FLAGS, AdaptiveParams  # the core's: stored archives decode without it
    if isinstance(adapt, AdaptiveParams):
        return adapt
    if adapt not in ADAPT_CHOICES:
        raise UsageError(f"unknown adaptive stage '{adapt}' (choose {', '.join(ADAPT_CHOICES)})")
    if adapt == "none":
        if not level.model:
            raise UsageError("levels 1 and 2 code with the adaptive stage alone: it cannot be off (adapt 'none')")
        return None
    lane_own = ("local_match", "local_ctx") if lanes.one_lane else ()  # with one lane they repeat the shared ones
    chosen = set(level.repetitive_models if repetitive and level.repetitive_models else level.models) - set(lane_own)
    return AdaptiveParams(**{name: name in chosen for name in MODEL_FLAGS + EXTRA_FLAGS})


def levels_of(params: AdaptiveParams) -> list[int]:
    """The levels whose stage has these models (for an input of either kind, in one lane or
    several, of any size): what `-l` names an archive's stage by."""
    def models(p: AdaptiveParams) -> AdaptiveParams:
        return replace(p, table_bits=0, history_bits=0, match_bits=0)  # sized to the input
    want = models(params)
    return [n for n, lv in LEVELS.items()
            if any(models(_stage_params("cm", lv, LanePolicy(most, LANE_FLOOR, LANE_FLOOR), rep).for_kind(tabular))
                   == want for most in (1, DEFAULT_LANES) for tabular in (False, True) for rep in (False, True))]


def _new_stage(params: AdaptiveParams) -> AdaptiveStage:
    from .stage.adaptive import AdaptiveStage
    return AdaptiveStage(params)


def _resolve(model: str | LoadedModel) -> LoadedModel:
    return model if isinstance(model, LoadedModel) else load_model(model)


def level_model(level: int, model: str | LoadedModel | None) -> str | LoadedModel:
    """The model that compresses at `level`: `model`, or the level's own where it is None."""
    return LEVELS[level].model_name if model is None else model


class _Once:
    """Builds a thing at its first use and keeps it: the engine and the adaptive stage are made
    at the first model-coded block (archives of stored/zstd blocks never need the model), and
    the stage then lives on through every later block of the input."""

    def __init__(self, make: Callable[[], object]) -> None:
        self.make, self.made = make, None

    def __call__(self):
        if self.made is None:
            self.made = self.make()
        return self.made


def _engine(kind: type[IntEngine] | type[FloatEngine], loaded: Callable[[], LoadedModel],
            threads: int | Callable[[], int], device: str, batching: LaneBatching | None = None,
            worker: int = 0) -> _Once:
    """The engine, built on first use; `device` resolved (`Hardware`); `threads` a number or, for
    a frame worker's int8 engine, its share at each block (`Shares.of`). With `batching` (frames
    at once on a GPU), frame worker `worker`'s, whose lanes step in a batch shared with others."""
    def make() -> IntEngine | TwinEngine | FloatEngine:
        if kind is FloatEngine:
            return FloatEngine(loaded(), threads)
        return int_engine(loaded(), device, threads) if batching is None else batching.engine(loaded(), worker)
    return _Once(make)


@dataclass
class _Engines:
    """A worker's engines by archive kind (engine, model), each built on first use and kept for
    the next archive of that kind; with `batching`, frame worker `worker`'s; with `share`, its
    int8 engines' threads at each block (`Shares.of`)."""
    batching: LaneBatching | None = None
    worker: int = 0
    share: Callable[[], int] | None = None
    made: dict[tuple, _Once] = field(default_factory=dict)

    def of(self, key: tuple, kind: type[IntEngine] | type[FloatEngine], loaded: Callable[[], LoadedModel],
           threads: int, device: str) -> _Once:
        if key not in self.made:
            given = self.share if self.share is not None and kind is IntEngine else threads
            self.made[key] = _engine(kind, loaded, given, device, self.batching, self.worker)
        return self.made[key]


def _threads(kind: type[IntEngine] | type[FloatEngine] | None, n: int) -> ContextManager:
    """torch's thread count for the float engine's steps; the int8 engine's threads are its own."""
    return torch_threads(n) if kind is FloatEngine else contextlib.nullcontext()


def _the_level(first: str | LoadedModel | int | None, model: str | LoadedModel | None, level: int | None,
               preset: int | None, compresslevel: int | None) -> tuple[str | LoadedModel | None, tuple[str, int]]:
    """(the model, (the level's name as the caller gave it, the level)). The first argument is
    the model, or a number: the level (`Compressor(9)`, as `zlib.compressobj(9)`); else the
    level by whichever name the standard library taught the caller, `level` (zlib's, zstd's),
    `preset` (lzma's), `compresslevel` (bz2's, gzip's); the default level if none is given, a
    TypeError if two are."""
    given = [(n, v) for n, v in (("level", level), ("preset", preset), ("compresslevel", compresslevel))
             if v is not None]
    if isinstance(first, numbers.Integral) and not isinstance(first, bool):
        given = [("the first argument", first), *given]
    elif first is not None:
        if model is not None:
            raise TypeError("the model is given twice (the first argument and model)")
        model = first
    if len(given) > 1:
        raise TypeError(f"the level is given twice ({' and '.join(n for n, _ in given)}): give it once")
    name, value = given[0] if given else ("level", DEFAULT_LEVEL)
    return model, ("level" if name == "the first argument" else name, value)


class Compressor:
    """A reusable compressor: the model is read and checked, and the engine built, once; every
    archive it writes then reuses them (each archive gets its own adaptive stage).

    `model` (or the first argument): a bundled model's name, a model file or a `LoadedModel`;
    None, the default, takes the level's (`Level.model_name`). A number as the first argument is
    the level (`Compressor(9)`).
    `level` (or `preset`, lzma's name, or `compresslevel`, bz2's and gzip's): 1 .. 9
    (options.LEVELS): 1 and 2 code with the adaptive stage alone (no neural model; 1 with its
    version 1 models), 3 .. 9 add the model in ever longer lanes; 6 is the default.
    `lanes`: parallel lanes per block (more is faster on a GPU; each starts the model cold). None,
    the default, chooses (options.lane_policy): at most 32, none shorter than the level's (16 KB
    at level 6, eight times that for a block zstd's fastest level shrinks more than 3-fold; on a
    GPU up to 1,024, none shorter than the level's or 16 KB, whichever is less); a number asks
    for that many, down to lanes of 256 bytes.
    `block_size`: bytes per block. `threads`: CPU threads (0: every available core; the output
    does not depend on it, except with the float32 engine). `engine`: "int8" (integer-exact,
    decodes anywhere) or "float32" (decodes only on this machine with the same thread count).
    `adapt` (None, the default: "cm" with the int8 engine, "none" with float32): "cm" (the
    adaptive stage learns the input as it is coded, with the level's models,
    its table models only where the input looks like a table; int8 only), "none" (the
    model alone, as shazip 0.3 coded), or an `AdaptiveParams` (the stage with exactly these
    parameters, recorded in the archive: `AdaptiveParams().at_version(1)` writes what shazip 0.5
    wrote). `device`: where the int8 engine runs: "cpu" (the native
    core), "cuda" (the torch twin on a GPU; needs torch with CUDA) or "auto" (CUDA where there
    is one); archives are the same bytes on every device. `methods` restricts the block methods
    tried (e.g. {Method.MIXED} to measure the model). `frame_size`: input bytes per frame (a
    whole number of blocks, rounded up; 0: one archive however long the input; None: 16 MiB on
    the CPU, 2 MiB on a GPU, options.GPU_FRAME_SIZE says why), each an
    archive of its own tied to the frame before it (chain.py), so that `compress_stream` makes
    `threads` frames at once with the int8 engine on the CPU; the bytes do not depend on
    `threads`. The float32 engine writes one archive (its format has no frame fields)."""

    def __init__(self, first: str | LoadedModel | int | None = None, /, *, model: str | LoadedModel | None = None,
                 level: int | None = None, lanes: int | None = None, block_size: int = DEFAULT_BLOCK_SIZE,
                 threads: int = 0, engine: str = "int8",
                 adapt: str | AdaptiveParams | None = None, device: str = "cpu", methods: frozenset[Method] = ALL_METHODS,
                 frame_size: int | None = None, preset: int | None = None, compresslevel: int | None = None) -> None:
        model, (level_name, level) = _the_level(first, model, level, preset, compresslevel)
        if adapt is None:  # the float32 engine's rows are not the integers the stage takes
            adapt = "none" if engine == "float32" else "cm"
        for name, value in ((level_name, level), ("lanes", lanes), ("block_size", block_size), ("threads", threads),
                            ("frame_size", frame_size)):
            if not (isinstance(value, numbers.Integral) and not isinstance(value, bool)) and not (
                    name in ("lanes", "frame_size") and value is None):
                raise TypeError(f"{name} must be an int, not {type(value).__name__!r}")
        if lanes is not None and not 1 <= lanes <= MAX_LANES:
            raise UsageError(f"lanes must be between 1 and {MAX_LANES}")
        if not 1 <= block_size <= MAX_BLOCK_SIZE:
            raise UsageError(f"block size must be between 1 and {MAX_BLOCK_SIZE}")
        if not methods:
            raise UsageError("no block method allowed")
        if frame_size is not None and frame_size < 0:
            raise UsageError("frame size must be 0 (one frame) or positive")
        if engine not in ENGINES:
            raise UsageError(f"unknown engine '{engine}' (choose {', '.join(ENGINES)})")
        if level not in LEVELS:
            raise UsageError(f"{level_name} must be between 1 and 9, not {level}")
        if device not in DEVICES:
            raise UsageError(f"unknown device '{device}' (choose {', '.join(DEVICES)})")
        if device != "cpu" and engine != "int8":
            raise UsageError("only the int8 engine runs on another device than the CPU")
        hw = Hardware.of(threads, device)
        # 0: unframed, as the float32 engine's format 1 archives always are (frames are tied in format 4)
        self.frame_blocks = -(-frame_size_for(hw.device, frame_size) // block_size) if engine == "int8" else 0
        lv = LEVELS[level]
        self.lane_policy = lane_policy(lv, lanes, lv.model and hw.device != "cpu")
        self.params = _stage_params(adapt, lv, self.lane_policy)
        self._for_data = isinstance(adapt, str)  # a level's models follow the input's kind (not given parameters)
        self._repetitive_params = _stage_params(adapt, lv, self.lane_policy, True) if self._for_data else None
        # a level's trial of the model on repetitive blocks (codec/kind.py), unless the lanes are the caller's
        self.model_pays = lv.model_pays if lanes is None else None
        if self.params is not None and engine != "int8":
            raise UsageError("the adaptive stage needs the int8 engine's integer rows: with engine 'float32', "
                             "adapt='none' (--adapt none)")
        self.threads, self.methods = hw.threads, methods
        self.loaded = loaded = _resolve(level_model(level, model))
        if len(loaded.name.encode()) > 255:
            raise UsageError(f"model name is longer than 255 bytes: {loaded.name[:40]}...")
        self.kind = kind = ENGINES[engine]
        self.header = Header(engine=kind.engine_id, engine_version=kind.engine_version,
                             threads=self.threads if kind is FloatEngine else 0,  # what a float32 decoder replays
                             model_id=loaded.model_id, model_name=loaded.name,
                             block_size=block_size, lanes=self.lane_policy.most,
                             adapt_version=self.params.version if self.params else 0,
                             adapt_params=self.params.pack() if self.params else b"")
        # the header settles its format; format 3 leaves a bundled model's name out
        self.header = replace(self.header, model_name=stored_name(loaded, self.header.format_version in COMPACT))
        self._engine = _engine(kind, lambda: loaded, self.threads, hw.device)
        # frames made at once: each worker's engine (built on first use), of its share of the threads
        self._parallel = kind is IntEngine and self.threads > 1  # on a GPU too: each frame's stage on its own core
        self._batching = LaneBatching.of(hw) if kind is IntEngine else None  # on a GPU: their lanes stepped together
        self._device = hw.device
        self._frame_engines: dict[int, _Once] = {}
        self._shares = Shares(self.threads, available_cores())  # the call's (`_frames_at_once`)

    def compress_stream(self, src: BinaryIO, dst: BinaryIO, progress: Progress | None = None,
                        stats: CodingStats | None = None) -> int:
        """src to dst one block at a time (bounded memory: with frames made at once, `threads` + 1
        frames); returns the input bytes. `stats` collects the model's cross-entropy and the
        methods chosen."""
        frame = self.frame_blocks * self.header.block_size
        usable = Shares(self.threads, available_cores()).usable  # frames at once: no more
        ahead: list[bytes] = []  # up to usable + 1 frames: are there more frames than threads?
        while self._parallel and frame and len(ahead) <= usable and (part := read_upto(src, frame)):
            ahead.append(part)
        if len(ahead) > 1:  # more than one frame: several at once
            known = len(ahead) if len(ahead) <= usable else None  # None: more than the threads
            rest = iter(lambda: read_upto(src, frame), b"") if known is None else iter(())
            return self._frames_at_once(itertools.chain(ahead, rest), known, dst, progress, stats)
        obj = self.compressobj(progress, stats)
        first = ahead[0] if ahead else b""
        total = len(first)
        dst.write(obj.compress(first))
        while block := read_upto(src, self.header.block_size):
            dst.write(obj.compress(block))
            total += len(block)
        dst.write(obj.flush())
        return total

    def _frames_at_once(self, frames: Iterator[bytes], count: int | None, dst: BinaryIO, progress: Progress | None,
                        stats: CodingStats | None) -> int:
        """`frames` (`count` of them; None: more than the threads) made at once, each on its
        share of the threads (`Shares`), written in order with the seek table."""
        lock = threading.Lock()
        self._shares = shares = Shares(self.threads, available_cores(), count)

        def one(worker: int, item: tuple[bytes, Place],
                check: Callable[[], None]) -> tuple[list[bytes], int, CodingStats | None]:
            def report(n: int, bits: float = 0.0) -> None:  # after every chunk of steps: where a stopped frame ends
                check()
                if progress is not None:
                    with lock:
                        progress(n, bits)

            frame, place = item
            own = type(stats)() if stats is not None else None
            with shares.frame(worker):
                return self.compress_frame(frame, place, report, own, self._frame_engine(worker)), len(frame), own

        sizes = []
        for parts, n, own in ordered_map(one, placed(shares.counted(frames), self.header.block_size), shares.workers):
            for part in parts:
                dst.write(part)
            sizes.append((sum(map(len, parts)), n))
            if own is not None:
                stats.merge(own)
        dst.write(seektable.pack(sizes))
        return sum(n for _, n in sizes)

    def _frame_engine(self, worker: int) -> _Once:
        """Frame worker `worker`'s engine, kept across calls: at each block, of the threads the
        call's shares give the worker."""
        if worker not in self._frame_engines:
            self._frame_engines[worker] = _engine(self.kind, lambda: self.loaded, lambda: self._shares.of(worker),
                                                  self._device, self._batching, worker)
        return self._frame_engines[worker]

    def compress_frame(self, frame: bytes, place: Place, progress: Progress | None = None,
                       stats: CodingStats | None = None, engine: _Once | None = None) -> list[bytes]:
        """One frame of a larger output, made alone (frames at once, a Dask task), at `place`
        (`placed`): its archive, in parts. `engine`: one of this thread's, not the shared one."""
        obj = ShazipCompressor(self, progress=progress, stats=stats)._placed(place, engine)
        size, view = self.header.block_size, memoryview(frame)  # a block at a time: no copy of the frame
        return [obj.compress(view[i:i + size]) for i in range(0, len(frame), size)] + [obj.flush()]

    def compress(self, data: bytes) -> bytes:
        """`data`'s archive: as `compress_stream` makes it (frames at once where there are several)."""
        out = io.BytesIO()
        self.compress_stream(io.BytesIO(_bytes(data)), out)
        return out.getvalue()

    def compressobj(self, progress: Progress | None = None, stats: CodingStats | None = None) -> ShazipCompressor:
        """An incremental compressor for one archive (`compress(data)`, then `flush()`)."""
        return ShazipCompressor(self, progress=progress, stats=stats)


def placed(frames: Iterator[bytes], block_size: int) -> Iterator[tuple[bytes, Place]]:
    """Each frame of an output with its place (chain.py): its index, the output's id (the crc
    of its first block), the crc of the frame before it, and whether more follow (known by
    reading one frame ahead)."""
    output_id = link = 0
    frame = next(frames, None)
    for index in itertools.count():
        if frame is None:
            return
        if not index:
            output_id = zlib.crc32(memoryview(frame)[:block_size])
        after = next(frames, None)
        yield frame, Place(index, output_id, link, after is not None)
        frame, link = after, zlib.crc32(frame)


class ShazipCompressor:
    """Incremental compression, as `zlib.compressobj`: `compress(data)` returns whatever
    archive bytes are ready (a block is coded once `block_size` bytes have come), `flush()`
    codes the rest and ends the archive. The bytes equal one-shot compression's. An input longer
    than the compressor's frame size becomes one archive per frame, one after the other, each
    tied to the one before (chain.py): a frame's end waits for the next input or `flush()`,
    which tell whether more frames follow.

    `level`: a level (`ShazipCompressor(9)`, as `zlib.compressobj(9)`) with `options` as
    `Compressor`'s (`model=`, `preset=`, `lanes=`, ...), or a ready `Compressor` (its model
    loaded once for many archives), alone."""

    def __init__(self, level: int | Compressor | None = None, *, progress: Progress | None = None,
                 stats: CodingStats | None = None, **options) -> None:
        if isinstance(level, Compressor):
            if options:
                raise TypeError(f"options beside a ready Compressor ({', '.join(sorted(options))}): give them to it")
            self._c = level
        else:
            _known_keywords("ShazipCompressor", options, Compressor.__init__)
            self._c = Compressor(level=level, **options)
        self._engine = self._c._engine
        self._progress, self._stats, self._pending, self._out = progress, stats, bytearray(), io.BytesIO()
        self._stage: _Once | None = None
        self._writer: ArchiveWriter | None = None  # made with a frame's first block, which settles the stage's size
        self._in_frame = 0  # blocks written to the frame in hand
        self._whole = False  # the frame in hand is whole: it ends once more input (or `flush`) comes
        self._frames: list[tuple[int, int]] = []  # (archive bytes, input bytes) of each frame ended: the seek table
        self._last_more = False  # whether frames follow the last one made here
        self._index = 0  # the frame in hand's place in the output
        self._id: int | None = None  # the output's id, from its first block
        self._link = 0  # the crc of the data of the frame before the one in hand
        self._crc = 0  # the crc of the frame in hand's data so far
        self._done = False

    def _placed(self, place: Place, engine: _Once | None) -> ShazipCompressor:
        """This makes one frame of a larger output alone, at `place`, with `engine` (one of the
        calling thread's; None: the compressor's): `Compressor.compress_frame`."""
        self._engine = engine or self._engine
        self._last_more, self._index, self._id, self._link = place.more, place.index, place.output_id, place.link
        return self

    def _start(self, first: bytes, whole: int | None) -> None:
        """The archive's header and stage, from its first block: a level's stage gets its models
        for repetitive text where that block is repetitive, its table models only where it looks
        like a table, and an input that is one block, of `whole` bytes in all, tables sized for
        it (the header records all three)."""
        c = self._c
        header, params = c.header, c.params
        if params is not None:
            if c._for_data and first:
                from .codec import kind  # numpy: imported by the first block, not by an empty input
                params = c._repetitive_params if kind.repetitive(first) else params
            if c._for_data:
                params = params.for_data(first)
            if whole is not None:
                params = params.fitted(whole)
            header = replace(header, adapt_version=params.version, adapt_params=params.pack())
        if self._id is None:
            self._id = zlib.crc32(first)
        if self._index:
            header = replace(header, frame_index=self._index, output_id=self._id, link=self._link)
        self._stage = _Once(lambda: _new_stage(params)) if params else None
        self._writer = ArchiveWriter(self._out, header)

    def _block(self, block: bytes, last: bool = False) -> None:
        c = self._c
        if self._whole:  # more input: the frame in hand is not the output's last
            self._end_frame(more=True)
        if self._writer is None:
            self._start(block, len(block) if last else None)
        from .codec.block import encode_block  # numpy: imported by the first block, not by an empty input
        with _threads(c.kind, c.threads):
            method, k, payload = encode_block(self._engine, block, c.lane_policy, self._progress, c.methods,
                                              self._stats, self._stage, c.model_pays, head=c.header.format_version >= 5)
        self._writer.add_block(method, k, block, payload)
        self._crc = zlib.crc32(block, self._crc)
        self._in_frame += 1
        self._whole = self._in_frame == c.frame_blocks  # the next block starts another frame

    def _end_frame(self, more: bool) -> None:
        trailer = self._writer.finish(more)
        self._frames.append((self._writer.bytes_written, trailer.total_len))
        self._writer, self._in_frame, self._whole = None, 0, False
        self._index, self._link, self._crc = self._index + 1, self._crc, 0

    def _drain(self) -> bytes:
        out = self._out.getvalue()
        self._out.seek(0)
        self._out.truncate()
        return out

    def compress(self, data: bytes) -> bytes:
        if self._done:
            raise ValueError("compress() after flush()")
        self._pending += data
        size = self._c.header.block_size
        while len(self._pending) >= size:
            self._block(bytes(self._pending[:size]))
            del self._pending[:size]
        return self._drain()

    def flush(self) -> bytes:
        if self._done:
            return b""
        self._done = True
        if self._pending:
            self._block(bytes(self._pending), last=True)
            self._pending.clear()
        if self._writer is None and not self._frames:  # nothing came
            self._start(b"", 0)
        if self._writer is not None:
            self._end_frame(self._last_more)
        self._out.write(seektable.pack(self._frames))
        return self._drain()


def compress_stream(src: BinaryIO, dst: BinaryIO, model: str | LoadedModel | None = None, level: int | None = None,
                    *, progress: Progress | None = None, stats: CodingStats | None = None, **options) -> int:
    """Compresses src to dst one block at a time; returns the number of input bytes. The
    options are `Compressor`'s; make one to compress many inputs with one model load."""
    _known_keywords("compress_stream", options, Compressor.__init__)
    return Compressor(model, level=level, **options).compress_stream(src, dst, progress, stats)


def compressobj(level: int | None = None, **options) -> ShazipCompressor:
    """An incremental compressor, as `zlib.compressobj`: `ShazipCompressor(level, **options)`."""
    return ShazipCompressor(level, **options)


def decompressobj(model: str | LoadedModel | None = None, **options) -> ShazipDecompressor:
    """An incremental decompressor, as `zlib.decompressobj`: `ShazipDecompressor(model, **options)`."""
    return ShazipDecompressor(model, **options)


def iter_decompress(src: BinaryIO, model: str | LoadedModel | None = None, progress: Progress | None = None,
                    threads: int = 0, device: str = "cpu", concatenated: bool = True,
                    resume: Place | None = None) -> Iterator[bytes]:
    """The blocks of the output in src (its frames, each an archive, in order), each decoded and
    verified before it is yielded; then, as gzip, xz and zstd do, those of every output that
    follows it (`concatenated`: False refuses anything after the first output). The frames are
    checked as one chain (chain.py): a frame missing, repeated or from another output, or a
    stream that ends while a frame is awaited, is an error, as is a seek table that does not
    match the frames. `model` overrides the archives' model name; its id must still match each
    archive's. `threads` applies to int8 archives (float32 ones replay the encoder's thread
    count); 0, the default, uses every available core. `device` as `Compressor`'s (int8
    archives). `resume`: src stands at this frame of an output, not at an output's start."""
    yield from _decompressed(src, model, progress, Hardware.of(threads, device), concatenated, resume)


def _decompressed(src: BinaryIO, model: str | LoadedModel | None, progress: Progress | None, hw: Hardware,
                  concatenated: bool = True, resume: Place | None = None) -> Iterator[bytes]:
    """`iter_decompress` on what it resolved."""
    engines = _Engines()  # archives of the same model and engine share one
    chain = Chain(resume)
    lead = b""
    while True:
        reader = ArchiveReader(src, lead, more=True)
        yield from _frame_blocks(reader, chain, model, progress, hw, engines)
        lead = reader.after
        if not lead:
            chain.close()
            return
        if not concatenated and chain.between_outputs:
            raise CorruptArchive("trailing data after end of archive")


def _frame_blocks(reader: ArchiveReader, chain: Chain, model: str | LoadedModel | None, progress: Progress | None,
                  hw: Hardware, engines: _Engines) -> Iterator[bytes]:
    """The blocks of the archive `reader` has opened, a frame taken through `chain`: checked
    in its place before any block is decoded, and its data's crc kept for the next frame's
    link; then the seek table after it, checked against the frames."""
    chain.begin(reader.place())
    data_crc = 0
    for block in _archive_blocks(reader, model, progress, hw, engines):
        data_crc = zlib.crc32(block, data_crc)
        yield block
    chain.end(reader.place(), reader.bytes_read - len(reader.after) - reader.skipped, reader.trailer.total_len,
              data_crc, reader.skipped)
    if reader.table is not None:
        chain.table(reader.table)


def _archive_blocks(reader: ArchiveReader, model: str | LoadedModel | None, progress: Progress | None,
                    hw: Hardware, engines: _Engines) -> Iterator[bytes]:
    """The blocks of the archive `reader` has opened, decoded and verified."""
    h = reader.header
    kind = BY_ID.get(h.engine)

    def loaded() -> LoadedModel:
        check_replayable(engine_for(h.engine, h.engine_version), h.threads)
        found = find_model(h.model_name, h.model_id) if model is None else _resolve(model)
        if not found.model_id.startswith(h.model_id):  # format 3 records the id's first 8 bytes
            raise ModelError(f"wrong model: the archive needs {model_label(h.model_name, h.model_id)}, "
                             f"given '{found.name}' (id {found.id_hex[:16]})")
        return found

    def stage() -> AdaptiveStage:
        from .stage import adaptive
        if kind is not IntEngine:  # the encoder never writes this: the stage reads integer rows
            raise CorruptArchive(f"engine {h.engine} cannot drive the adaptive stage (damaged header?)")
        if h.adapt_version not in adaptive.VERSIONS:
            raise UnsupportedVersion(f"archive needs adaptive stage version {h.adapt_version}, which this shazip "
                                     f"does not have")
        return adaptive.AdaptiveStage(adaptive.AdaptiveParams.unpack(h.adapt_params, h.adapt_version))

    key = (h.engine, h.engine_version, h.threads, h.model_id, h.model_name)
    threads = h.threads if kind is FloatEngine else hw.threads
    get_engine = engines.of(key, kind, loaded, threads, hw.device)
    get_stage = _Once(stage) if h.adapt_version else None
    for bh, payload in reader.blocks():
        from .codec.block import decode_block  # numpy: imported by the first block, not by an empty archive
        coder_bytes = payload[4:] if h.format_version >= 5 else payload  # after format 5's head check
        if bh.method in STAGED and not coder_bytes.strip(b"\0") and crc.repeated(0xFF, bh.orig_len) != bh.data_crc:
            # The stage's decoder reads a zero payload (and the zeros past its end) as a code value of
            # 0, under every decision's split: every bit a 1, whatever the stage predicts. So it can
            # only give bytes 0xFF, and the block's crc says they are not its data: refused at once,
            # where decoding would take the model's time for every byte claimed (a forged header of a
            # few hundred bytes claiming 16 MiB: minutes).
            raise ChecksumMismatch(f"block {bh.index}: checksum mismatch (data corrupted: a payload of zeros, "
                                   "which decodes only to bytes 0xFF)")
        with _threads(kind, h.threads):
            try:
                block = decode_block(get_engine, bh.method, bh.lanes, payload, bh.orig_len, progress, get_stage,
                                     OVERRUN, head=h.format_version >= 5)
            except CorruptArchive as e:
                hint = BOUND_HINT if h.format_version in (2, 3) and "past its end" in str(e) else ""
                raise CorruptArchive(f"block {bh.index}: {e}{hint}") from None
        verify_block(bh, block)
        yield block


class ShazipDecompressor:
    """Incremental decompression of one output, as `lzma.LZMADecompressor`: `decompress(data)`
    takes archive bytes in any pieces and returns the original bytes of every block completed
    so far, each verified; an output of several frames (archives) is taken whole, its frames
    checked as one chain (chain.py). `max_length` (>= 0) bounds the bytes one call returns; the
    rest waits for the next call (`needs_input` is then false: call again, with b"" if need be).
    `eof` is true once the output's end was read and all of it returned; whatever came after it
    is `unused_data` (in a concatenation, the next output: give it to a new decompressor), and a
    further `decompress` raises EOFError. Options as `iter_decompress`. Given a skippable frame
    instead of an archive (the seek table that ends a framed output), it reads past it and ends
    there with no output, as a zstd skippable frame does: a loop over `unused_data` decodes a
    stream whole."""

    def __init__(self, model: str | LoadedModel | None = None, threads: int = 0, device: str = "cpu") -> None:
        self._model, self._hw = model, Hardware.of(threads, device)
        self._engines = _Engines()
        self._chain = Chain()
        self._fed = io.BytesIO()
        self._blocks: Iterator[bytes] | None = None  # the frame in hand's blocks
        self._buf = bytearray()  # input not yet decoded
        self._out = bytearray()  # output decoded, not yet returned (max_length)
        self._began = False  # a unit was decoded: the input is an archive, not a skippable frame
        self._started = False  # the frame in hand's header was fed
        self._ended = False  # the units so far hold the whole frame in hand
        self._done = False  # the output's end was read
        self._skip: int | None = None  # a skippable frame's bytes still to drop
        self._kept: bytearray | None = None  # its content so far, where it may be a seek table (to be checked)
        self._error: ShazipError | None = None
        self._check = True
        self.eof = False
        self.unused_data = b""

    @property
    def needs_input(self) -> bool:
        """False where a call (with b"" if need be) can return more without more input. A
        skippable frame takes every byte as it comes: it needs more until its end."""
        if self.eof or self._out or self._done:
            return False
        return self._skip is not None or bytes(self._buf[:len(SKIP_MAGIC)]) == SKIP_MAGIC or self._unit() is None

    def decompress(self, data: bytes, max_length: int = -1) -> bytes:
        if self._error is not None:  # a damaged archive stays damaged: never a clean end after it
            raise self._error
        if self.eof:
            raise EOFError("already at the end of the archive")
        limit = max_length if max_length >= 0 else None
        try:
            self._decompress(data, limit)
        except ShazipError as e:  # the frame in hand's stage freed, and its memory handed back (`_memory_back`)
            self._error, self._blocks = e, None
            clear_frames(e)
            hand_back()
            raise
        n = len(self._out) if limit is None else min(limit, len(self._out))
        out = bytes(self._out[:n])
        del self._out[:n]
        if self._done and not self._out:
            self.eof = True
        return out

    def _decompress(self, data: bytes, limit: int | None) -> None:
        self._buf += data
        if not self._began and self._skipping():
            return
        while not self._done and (limit is None or len(self._out) < limit) and (unit := self._unit()) is not None:
            # the decoder reads exactly this unit: a frame's header (with its first record), or one record
            n, ends = unit
            if not self._started:  # record crcs checkable alone (formats 1-3; format 4 chains them)
                self._check = len(self._buf) < 5 or not chained(self._buf[4])
                self._started, self._ended, self._blocks = True, ends, self._frame()
            self._fed.seek(0)
            self._fed.truncate()
            self._fed.write(self._buf[:n])
            self._fed.seek(0)
            del self._buf[:n]
            self._began = True
            try:
                self._out += next(self._blocks)
            except StopIteration:
                self._started = self._ended = False  # the next frame of the output, if any, comes next
                if self._chain.between_outputs:
                    self._done = True
                    self.unused_data = bytes(self._buf)
                    self._buf.clear()

    def _frame(self) -> Iterator[bytes]:
        reader = ArchiveReader(self._fed)
        yield from _frame_blocks(reader, self._chain, self._model, None, self._hw, self._engines)

    def _skipping(self) -> bool:
        """Whether the input is a skippable frame: its bytes are dropped as they come (only one
        small enough to be a seek table is held, to be checked: a damaged table is an error, as
        every reader makes it), and its end is this decompressor's end."""
        if self._skip is None:
            if bytes(self._buf[:len(SKIP_MAGIC)]) != SKIP_MAGIC:
                return False  # an archive (or a prefix both magics share: `_unit` waits on it)
            head = len(SKIP_MAGIC) + 4  # the magic and the length, u32
            if len(self._buf) < head:
                return True
            n = int.from_bytes(self._buf[len(SKIP_MAGIC):head], "little")
            self._skip, self._kept = n, bytearray() if n <= MAX_TABLE else None
            del self._buf[:head]
        n = min(self._skip, len(self._buf))
        if self._kept is not None:
            self._kept += self._buf[:n]
        del self._buf[:n]
        self._skip -= n
        if not self._skip:
            if self._kept is not None and self._kept.endswith(TABLE_TAG) and seektable.parse(bytes(self._kept)) is None:
                raise CorruptArchive("the seek table is damaged")
            self._done, self._kept, self.unused_data = True, None, bytes(self._buf)
            self._buf.clear()
        return True

    def _unit(self) -> tuple[int, bool] | None:
        """The bytes of the next unit the decoder can take whole, and whether the frame ends
        there (None: wait for more): a frame's header with its first record, then one record at
        a time, and an empty unit once the frame is complete (the decoder then ends it). A unit
        whose start is already wrong is handed over as it is, for the decoder to refuse."""
        if self._ended:
            return 0, True
        if self._started:
            n = record_length(bytes(self._buf[:BLOCK_HEADER_BYTES]), self._check)
            return None if n is None or n > len(self._buf) else (n, False)
        first = first_unit(bytes(self._buf[:MAX_HEADER + BLOCK_HEADER_BYTES]))
        return None if first is None or first[0] > len(self._buf) else first


def _memory_back(call: Callable[..., R]) -> Callable[..., R]:
    """A decoding call that hands its tables' memory back to the system before it returns or
    raises. A failure's traceback holds the frames of the calls it passed through, and their
    locals the stages (hundreds of MB of tables at -9): they are cleared first, so that a
    process decoding damaged archives call after call (a server) keeps what an intact decode
    leaves, not its worst case (`hand_back` says why the heap needs the trim)."""
    @functools.wraps(call)
    def returning(*args, **kw) -> R:
        try:
            return call(*args, **kw)
        except BaseException as e:
            clear_frames(e)
            raise
        finally:
            hand_back()
    return returning


def clear_frames(e: BaseException) -> None:
    """The locals of the finished frames of `e`'s traceback and of the exceptions it was raised
    from or during (`raise ... from None` still keeps the one it replaces as __context__): an
    error kept (a damaged archive's, raised again by every later read) must not keep the stages
    of the calls it passed through."""
    seen: set[int] = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        traceback.clear_frames(e.__traceback__)
        e = e.__cause__ or e.__context__


@_memory_back
def decompress_stream(src: BinaryIO, dst: BinaryIO, model: str | LoadedModel | None = None,
                      progress: Progress | None = None, threads: int = 0, device: str = "cpu",
                      concatenated: bool = True) -> int:
    """Decompresses src (an archive, or several one after the other) to dst, verifying each
    block before writing it; returns bytes written. Options as `iter_decompress`. A seekable src
    of several archives (frames) is decoded up to `threads` archives at once, the threads shared
    out among them (`frames.Shares`; on a GPU: each with its engine there, its stage on a
    core); its structure is checked first, so a damaged one fails before anything is written."""
    hw = Hardware.of(threads, device)
    if concatenated and hw.threads > 1:
        frames = index(src, MAX_FRAME_IN_MEMORY)
        if frames is not None and len(frames) > 1:
            return _decoded_at_once(src, frames, dst, model, progress, hw)
    total = 0
    for block in _decompressed(src, model, progress, hw, concatenated):
        dst.write(block)
        total += len(block)
    return total


def compress(data: bytes, level: int | None = None, **kw) -> bytes:
    """Compresses bytes in memory at `level` (the second argument, as zlib's and zstd's; or
    `preset=`, `compresslevel=`). Keyword arguments as `Compressor` (`model`, `lanes`, ...)."""
    if isinstance(level, (str, LoadedModel)):
        raise TypeError("the second argument is the level (1 .. 9, as zlib's); give a model as model=...")
    _known_keywords("compress", kw, Compressor.__init__)
    data = _bytes(data)
    return Compressor(level=level, **kw).compress(data)


def _known_keywords(caller: str, kw: dict, options: Callable) -> None:
    """A keyword `options` does not take, named as the caller's own (not an inner function's)."""
    unknown = set(kw) - set(inspect.signature(options).parameters)
    if unknown:
        raise TypeError(f"{caller}() got an unexpected keyword argument {sorted(unknown)[0]!r}")


def _bytes(data) -> memoryview:
    """data as a buffer, or TypeError (io.BytesIO(None) would be an empty input)."""
    try:
        return memoryview(data)
    except TypeError:
        raise TypeError(f"a bytes-like object is required, not {type(data).__name__!r}") from None


def _decoded_at_once(src: BinaryIO, frames: list[Frame], dst: BinaryIO, model: str | LoadedModel | None,
                     progress: Progress | None, hw: Hardware) -> int:
    """The archives `frames` of src, up to `hw.threads` at a time (each on its share of the
    threads, `Shares`), written in order; each worker's engines serve every frame it decodes."""
    lock, reading = threading.Lock(), threading.Lock()
    model = _resolve(model) if model is not None else None  # read once, not once a frame
    batching = LaneBatching.of(hw)  # on a GPU: the frames' lanes stepped together
    shares = Shares(hw.threads, available_cores(), len(frames))
    engines = [_Engines(batching, w, lambda w=w: shares.of(w)) for w in range(shares.workers)]

    def one(worker: int, frame: Frame, check: Callable[[], None]) -> list[bytes]:
        def report(n: int) -> None:  # after every chunk of steps: where a stopped frame ends
            check()
            if progress is not None:
                with lock:
                    progress(n)

        with reading:
            src.seek(frame.start)
            archive = read_upto(src, frame.end - frame.start)
        with shares.frame(worker):
            return _frame_decoded(archive, frame.place, model, report, hw, engines[worker])

    total = 0
    for block in linked(frames, ordered_map(one, frames, shares.workers)):
        dst.write(block)
        total += len(block)
    return total


def decode_frame(archive: bytes, place: Place, model: str | LoadedModel | None, progress: Progress | None = None,
                 device: str = "cpu") -> list[bytes]:
    """The blocks of one frame decoded alone (frames at once, a Dask task), each verified; the
    frame must stand at `place`, where `frames.index` found it. Its link to the frame before is
    the caller's to check, in order (`linked`)."""
    return _frame_decoded(archive, place, model, progress, Hardware.of(1, device), _Engines())


def _frame_decoded(archive: bytes, place: Place, model: str | LoadedModel | None, progress: Progress | None,
                   hw: Hardware, engines: _Engines) -> list[bytes]:
    """`decode_frame` on what it resolved, with `engines` (by archive kind) to use or keep."""
    reader = ArchiveReader(io.BytesIO(archive))
    blocks = list(_archive_blocks(reader, model, progress, hw, engines))
    if reader.place() != place:
        raise CorruptArchive(f"frame {place.index} changed while it was read")
    return blocks


def linked(frames: list[Frame], decoded: Iterable[list[bytes]]) -> Iterator[bytes]:
    """The blocks of `frames` (from `frames.index`, their places checked), decoded apart and
    given in order, each frame's only once its link to the one before holds."""
    chain = Chain()
    for frame, blocks in zip(frames, decoded):
        chain.begin(frame.place)
        data_crc = 0
        for block in blocks:
            data_crc = zlib.crc32(block, data_crc)
        chain.end(frame.place, frame.end - frame.start, frame.decoded, data_crc)
        yield from blocks
    chain.close()


@dataclass(frozen=True)
class Lost:
    """What `recover_stream` could not decode: archive bytes [start, end) of src, whose data
    belonged in the output from byte `output_at` on."""

    start: int
    end: int
    output_at: int
    reason: str


@_memory_back
def recover_stream(src: BinaryIO, dst: BinaryIO, model: str | LoadedModel | None = None,
                   progress: Progress | None = None, threads: int = 0, device: str = "cpu") -> list[Lost]:
    """Writes every intact block of a damaged stream of archives (frames) to dst, in order, and
    returns what was lost, from the first byte not written for. Where an archive fails, the
    rest of it is skipped and decoding goes on at the next archive's magic (found by search: the
    damaged one's structure cannot be trusted), so damage stays inside its frame; an archive
    found so is taken only if its whole structure holds and what follows it is the stream's
    end, a skippable frame or another archive (an archive stored inside a damaged one's block is
    followed by that block's bytes: its data was never this output's). A frame that does not
    belong where it stands is named: a repeated one is skipped; after frames missing, or where
    another output's frames begin, the frames that follow are written from there, the loss
    named at that point. A stream that ends while a frame is awaited is reported at its end.
    Every block written was verified. src must be seekable (a file)."""
    hw = Hardware.of(threads, device)
    engines = _Engines()
    lost: list[Lost] = []
    at, written = src.tell(), 0
    end = src.seek(0, io.SEEK_END)
    chain, resync = Chain(), False
    while at < end:
        src.seek(at)
        good = at  # the end of what was written for
        try:
            if resync and not _stands_alone(src, at):  # not an archive of this stream: search on
                after = _next_magic(src, at + 1)
                lost[-1] = replace(lost[-1], end=after if after is not None else end)
                at = after if after is not None else end
                continue
            src.seek(at)
            reader = ArchiveReader(src, more=True)
            if resync:  # after a loss: the next archive is taken where it says it stands
                chain, resync = Chain(reader.place()), False
            if chain.between_outputs and chain.partial and not reader.place().index:  # not a plain concatenation
                lost.append(Lost(at, at, written, "an output starts here, after frames of one whose first frames are "
                                                  "missing; the frames from here on are written"))
            try:
                chain.begin(reader.place())
            except ArchiveError as e:  # an intact frame out of place
                if chain.repeats(reader.place()):
                    raise
                lost.append(Lost(at, at, written, f"{e}; the frames from here on are written"))
                chain = Chain(reader.place())
                chain.begin(reader.place())
            data_crc = 0
            for block in _archive_blocks(reader, model, progress, hw, engines):
                dst.write(block)
                written += len(block)
                data_crc = zlib.crc32(block, data_crc)
                good = at + reader.bytes_read
            size = reader.bytes_read - len(reader.after) - reader.skipped
            chain.end(reader.place(), size, reader.trailer.total_len, data_crc, reader.skipped)
            good = at + size
            if reader.table is not None:
                chain.table(reader.table)
            at += reader.bytes_read - len(reader.after)
        except ArchiveError as e:
            after = _next_magic(src, max(good, at + 1))
            lost.append(Lost(good, after if after is not None else end, written, str(e)))
            at, resync = after if after is not None else end, True
    try:
        if not resync:  # (a loss just before the end runs to it already)
            chain.close()
    except ArchiveError as e:
        lost.append(Lost(end, end, written, str(e)))
    return lost


def _stands_alone(src: BinaryIO, at: int) -> bool:
    """Whether the archive at `at` of src (found by searching for a magic) is one of the stream:
    its structure whole (every header, block header and trailer and their checksums; nothing
    decoded), followed by the stream's end, skippable frames, or another archive's magic."""
    src.seek(at)
    try:
        reader = ArchiveReader(src, more=True)
        for _ in reader.blocks():
            pass
    except ArchiveError:
        return False
    return MAGIC.startswith(reader.after) if reader.after else True


def _next_magic(src: BinaryIO, start: int, chunk: int = 1 << 20) -> int | None:
    """The offset of the next archive magic in src at or after `start` (None: there is none)."""
    src.seek(start)
    tail = b""
    while block := src.read(chunk):
        found = (tail + block).find(MAGIC)
        if found >= 0:
            return start - len(tail) + found
        start += len(block)
        tail = block[-(len(MAGIC) - 1):]
    return None


def decompress(data: bytes, model: str | LoadedModel | None = None, **kw) -> bytes:
    """Decompresses whole archives (one, or several one after the other) in memory. Keyword
    arguments as `iter_decompress`."""
    _known_keywords("decompress", kw, decompress_stream)
    out = io.BytesIO()
    decompress_stream(io.BytesIO(_bytes(data)), out, model, **kw)
    return out.getvalue()


def load(path_or_bytes: str | bytes) -> LoadedModel:
    """Loads a model from a path, a bundled name, or the bytes of a model file."""
    if isinstance(path_or_bytes, bytes):
        return model_from_bytes(path_or_bytes, "model bytes")
    return load_model(path_or_bytes)
