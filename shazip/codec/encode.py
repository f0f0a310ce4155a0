"""Compression: a `Compressor` (the model read once, the engine built once) and the incremental
`ShazipCompressor`, frames made one after the other or several at once, each an archive tied to
the one before (format/frames.py); the stage's parameters a level chooses for an input."""

from __future__ import annotations

import io
import itertools
import numbers
import threading
import zlib
from dataclasses import replace
from typing import TYPE_CHECKING, BinaryIO, Callable, Iterator

from ..format.frames import pack_table
from ..format.container import ALL_METHODS, Method, Place
from ..format.reader import read_upto
from ..format.writer import ArchiveWriter
from ..format.header import COMPACT, MAX_BLOCK_SIZE, Header, headed
from ..errors import UsageError
from ..model.file import LoadedModel, stored_name
from ..hardware import Hardware, available_cores
from ..options import (
    ADAPT_CHOICES, DEFAULT_BLOCK_SIZE, DEFAULT_LANES, DEFAULT_LEVEL, DEVICES, LANE_FLOOR, LEVELS, MAX_LANES, LanePolicy,
    Level, frame_size_for, lane_policy,
)
from .arguments import as_buffer, known_keywords
from .engines import ENGINES, FloatEngine, IntEngine, LaneBatching, Once, engine_threads, lazy_engine, resolve_model
from .frames import Shares, ordered_map

if TYPE_CHECKING:
    from ..stage.adaptive import AdaptiveParams, AdaptiveStage
    from .block import CodingStats, Progress


def stage_params(adapt: str | AdaptiveParams, level: Level, lanes: LanePolicy,
                  repetitive: bool = False) -> AdaptiveParams | None:
    """The adaptive stage's parameters for `adapt` at `level` with `lanes` (None: the model alone),
    for an input that starts with a `repetitive` block (the level's `repetitive_models`) or not."""
    from ..stage.adaptive import EXTRA_FLAGS, MODEL_FLAGS, AdaptiveParams  # the core's: stored archives decode without it
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
            if any(models(stage_params("cm", lv, LanePolicy(most, LANE_FLOOR, LANE_FLOOR), rep).for_kind(tabular))
                   == want for most in (1, DEFAULT_LANES) for tabular in (False, True) for rep in (False, True))]


def _new_stage(params: AdaptiveParams) -> AdaptiveStage:
    from ..stage.adaptive import AdaptiveStage
    return AdaptiveStage(params)


def level_model(level: int, model: str | LoadedModel | None) -> str | LoadedModel:
    """The model that compresses at `level`: `model`, or the level's own where it is None."""
    return LEVELS[level].model_name if model is None else model


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
    archive of its own tied to the frame before it (format/frames.py), so that `compress_stream` makes
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
        self.params = stage_params(adapt, lv, self.lane_policy)
        self._for_data = isinstance(adapt, str)  # a level's models follow the input's kind (not given parameters)
        self._repetitive_params = stage_params(adapt, lv, self.lane_policy, True) if self._for_data else None
        # a level's trial of the model on repetitive blocks (codec/kind.py), unless the lanes are the caller's
        self.model_pays = lv.model_pays if lanes is None else None
        if self.params is not None and engine != "int8":
            raise UsageError("the adaptive stage needs the int8 engine's integer rows: with engine 'float32', "
                             "adapt='none' (--adapt none)")
        self.threads, self.methods = hw.threads, methods
        self.loaded = loaded = resolve_model(level_model(level, model))
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
        self._engine = lazy_engine(kind, lambda: loaded, self.threads, hw.device)
        # frames made at once: each worker's engine (built on first use), of its share of the threads
        self._parallel = kind is IntEngine and self.threads > 1  # on a GPU too: each frame's stage on its own core
        self._batching = LaneBatching.of(hw) if kind is IntEngine else None  # on a GPU: their lanes stepped together
        self._device = hw.device
        self._frame_engines: dict[int, Once] = {}
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
        dst.write(pack_table(sizes))
        return sum(n for _, n in sizes)

    def _frame_engine(self, worker: int) -> Once:
        """Frame worker `worker`'s engine, kept across calls: at each block, of the threads the
        call's shares give the worker."""
        if worker not in self._frame_engines:
            self._frame_engines[worker] = lazy_engine(self.kind, lambda: self.loaded, lambda: self._shares.of(worker),
                                                  self._device, self._batching, worker)
        return self._frame_engines[worker]

    def compress_frame(self, frame: bytes, place: Place, progress: Progress | None = None,
                       stats: CodingStats | None = None, engine: Once | None = None) -> list[bytes]:
        """One frame of a larger output, made alone (frames at once, a Dask task), at `place`
        (`placed`): its archive, in parts. `engine`: one of this thread's, not the shared one."""
        obj = ShazipCompressor(self, progress=progress, stats=stats)._placed(place, engine)
        size, view = self.header.block_size, memoryview(frame)  # a block at a time: no copy of the frame
        return [obj.compress(view[i:i + size]) for i in range(0, len(frame), size)] + [obj.flush()]

    def compress(self, data: bytes) -> bytes:
        """`data`'s archive: as `compress_stream` makes it (frames at once where there are several)."""
        out = io.BytesIO()
        self.compress_stream(io.BytesIO(as_buffer(data)), out)
        return out.getvalue()

    def compressobj(self, progress: Progress | None = None, stats: CodingStats | None = None) -> ShazipCompressor:
        """An incremental compressor for one archive (`compress(data)`, then `flush()`)."""
        return ShazipCompressor(self, progress=progress, stats=stats)


def placed(frames: Iterator[bytes], block_size: int) -> Iterator[tuple[bytes, Place]]:
    """Each frame of an output with its place (format/frames.py): its index, the output's id (the crc
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
    tied to the one before (format/frames.py): a frame's end waits for the next input or `flush()`,
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
            known_keywords("ShazipCompressor", options, Compressor.__init__)
            self._c = Compressor(level=level, **options)
        self._engine = self._c._engine
        self._progress, self._stats, self._pending, self._out = progress, stats, bytearray(), io.BytesIO()
        self._stage: Once | None = None
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

    def _placed(self, place: Place, engine: Once | None) -> ShazipCompressor:
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
                from . import kind  # numpy: imported by the first block, not by an empty input
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
        self._stage = Once(lambda: _new_stage(params)) if params else None
        self._writer = ArchiveWriter(self._out, header)

    def _block(self, block: bytes, last: bool = False) -> None:
        c = self._c
        if self._whole:  # more input: the frame in hand is not the output's last
            self._end_frame(more=True)
        if self._writer is None:
            self._start(block, len(block) if last else None)
        from .block import encode_block  # numpy: imported by the first block, not by an empty input
        with engine_threads(c.kind, c.threads):
            method, k, payload = encode_block(self._engine, block, c.lane_policy, self._progress, c.methods,
                                              self._stats, self._stage, c.model_pays, head=headed(c.header.format_version))
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
        self._out.write(pack_table(self._frames))
        return self._drain()


def compress_stream(src: BinaryIO, dst: BinaryIO, model: str | LoadedModel | None = None, level: int | None = None,
                    *, progress: Progress | None = None, stats: CodingStats | None = None, **options) -> int:
    """Compresses src to dst one block at a time; returns the number of input bytes. The
    options are `Compressor`'s; make one to compress many inputs with one model load."""
    known_keywords("compress_stream", options, Compressor.__init__)
    return Compressor(model, level=level, **options).compress_stream(src, dst, progress, stats)


def compressobj(level: int | None = None, **options) -> ShazipCompressor:
    """An incremental compressor, as `zlib.compressobj`: `ShazipCompressor(level, **options)`."""
    return ShazipCompressor(level, **options)


def compress(data: bytes, level: int | None = None, **kw) -> bytes:
    """Compresses bytes in memory at `level` (the second argument, as zlib's and zstd's; or
    `preset=`, `compresslevel=`). Keyword arguments as `Compressor` (`model`, `lanes`, ...)."""
    if isinstance(level, (str, LoadedModel)):
        raise TypeError("the second argument is the level (1 .. 9, as zlib's); give a model as model=...")
    known_keywords("compress", kw, Compressor.__init__)
    data = as_buffer(data)
    return Compressor(level=level, **kw).compress(data)

