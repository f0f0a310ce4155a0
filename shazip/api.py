"""Python API: compress/decompress bytes or streams, block by block in bounded memory.

    import shazip
    blob = shazip.compress(b"some text", model="default")
    assert shazip.decompress(blob) == b"some text"

Every failure is a `shazip.ShazipError` with a one-line message.
"""

from __future__ import annotations

import contextlib
import io
from dataclasses import replace
from typing import TYPE_CHECKING, BinaryIO, Callable, ContextManager, Iterator

from . import adaptive
from .adaptive import AdaptiveParams, AdaptiveStage
from .container import (
    ALL_METHODS, BLOCK_HEADER_BYTES, MAX_BLOCK_SIZE, MAX_HEADER, ArchiveReader, ArchiveWriter, Header, Method,
    first_unit, read_upto, record_length, verify_block,
)
from .engines import (
    BY_ID, DEVICES, ENGINES, FloatEngine, IntEngine, check_replayable, engine_for, int_engine, resolve_threads,
    torch_threads,
)
from .errors import CorruptArchive, ModelError, UnsupportedVersion, UsageError
from .modelfile import LoadedModel, find_model, load_model, model_from_bytes, model_label, stored_name
from .options import ADAPT_CHOICES, DEFAULT_BLOCK_SIZE, DEFAULT_LANES, LANE_FLOOR, MAX_LANES, MIN_LANE

if TYPE_CHECKING:
    from .codec import CodingStats

ADAPT: dict[str, AdaptiveParams | None] = dict(zip(ADAPT_CHOICES, (AdaptiveParams(), None)))

Progress = Callable[[int], None]


def _resolve(model: str | LoadedModel) -> LoadedModel:
    return model if isinstance(model, LoadedModel) else load_model(model)


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


def _engine(kind: type[IntEngine] | type[FloatEngine], loaded: Callable[[], LoadedModel], threads: int,
            device: str) -> _Once:
    return _Once(lambda: FloatEngine(loaded(), threads) if kind is FloatEngine else int_engine(loaded(), device, threads))


def _threads(kind: type[IntEngine] | type[FloatEngine] | None, n: int) -> ContextManager:
    """torch's thread count for the float engine's steps; the int8 engine's threads are its own."""
    return torch_threads(n) if kind is FloatEngine else contextlib.nullcontext()


class Compressor:
    """A reusable compressor: the model is read and checked, and the engine built, once; every
    archive it writes then reuses them (each archive gets its own adaptive stage).

    `lanes`: parallel lanes per block (more is faster; each starts the model cold). None, the
    default, chooses: at most 32, none shorter than 2 KB (options.MIN_LANE); a number asks for
    that many, down to lanes of 256 bytes.
    `block_size`: bytes per block. `threads`: CPU threads (0: every available core; the output
    does not depend on it, except with the float32 engine). `engine`: "int8" (integer-exact,
    decodes anywhere) or "float32" (decodes only on this machine with the same thread count).
    `adapt`: "cm" (the adaptive stage learns the input as it is coded; int8 only) or "none" (the
    model alone, as shazip 0.3 coded). `device`: where the int8 engine runs: "cpu" (the native
    core), "cuda" (the torch twin on a GPU; needs torch with CUDA) or "auto" (CUDA where there
    is one); archives are the same bytes on every device. `methods` restricts the block methods
    tried (e.g. {Method.MIXED} to measure the model)."""

    def __init__(self, model: str | LoadedModel = "default", *, lanes: int | None = None,
                 block_size: int = DEFAULT_BLOCK_SIZE, threads: int = 0, engine: str = "int8", adapt: str = "cm",
                 device: str = "cpu", methods: frozenset[Method] = ALL_METHODS) -> None:
        if lanes is not None and not 1 <= lanes <= MAX_LANES:
            raise UsageError(f"lanes must be between 1 and {MAX_LANES}")
        self.min_lane = MIN_LANE if lanes is None else LANE_FLOOR
        lanes = lanes or DEFAULT_LANES
        if not 1 <= block_size <= MAX_BLOCK_SIZE:
            raise UsageError(f"block size must be between 1 and {MAX_BLOCK_SIZE}")
        if not methods:
            raise UsageError("no block method allowed")
        if engine not in ENGINES:
            raise UsageError(f"unknown engine '{engine}' (choose {', '.join(ENGINES)})")
        if adapt not in ADAPT:
            raise UsageError(f"unknown adaptive stage '{adapt}' (choose {', '.join(ADAPT)})")
        if device not in DEVICES:
            raise UsageError(f"unknown device '{device}' (choose {', '.join(DEVICES)})")
        if device != "cpu" and engine != "int8":
            raise UsageError("only the int8 engine runs on another device than the CPU")
        self.params = ADAPT[adapt]
        if self.params is not None and engine != "int8":
            raise UsageError("the adaptive stage needs the int8 engine's integer rows (use adapt 'none' with float32)")
        self.threads, self.lanes, self.methods = resolve_threads(threads), lanes, methods
        self.loaded = loaded = _resolve(model)
        if len(loaded.name.encode()) > 255:
            raise UsageError(f"model name is longer than 255 bytes: {loaded.name[:40]}...")
        self.kind = kind = ENGINES[engine]
        self.header = Header(engine=kind.engine_id, engine_version=kind.engine_version,
                             threads=self.threads if kind is FloatEngine else 0,  # what a float32 decoder replays
                             model_id=loaded.model_id, model_name=loaded.name,
                             block_size=block_size, lanes=lanes,
                             adapt_version=adaptive.VERSION if self.params else 0,
                             adapt_params=self.params.pack() if self.params else b"")
        # the header settles its format; format 3 leaves a bundled model's name out
        self.header = replace(self.header, model_name=stored_name(loaded, self.header.format_version == 3))
        self._engine = _engine(kind, lambda: loaded, self.threads, device)

    def compress_stream(self, src: BinaryIO, dst: BinaryIO, progress: Progress | None = None,
                        stats: CodingStats | None = None) -> int:
        """src to dst one block at a time (bounded memory); returns the input bytes. `stats`
        collects the model's cross-entropy and the methods chosen."""
        obj = self.compressobj(progress, stats)
        total = 0
        while block := read_upto(src, self.header.block_size):
            dst.write(obj.compress(block))
            total += len(block)
        dst.write(obj.flush())
        return total

    def compress(self, data: bytes) -> bytes:
        obj = self.compressobj()
        return obj.compress(data) + obj.flush()

    def compressobj(self, progress: Progress | None = None, stats: CodingStats | None = None) -> ShazipCompressor:
        """An incremental compressor for one archive (`compress(data)`, then `flush()`)."""
        return ShazipCompressor(self, progress, stats)


class ShazipCompressor:
    """Incremental compression of one archive, as `zlib.compressobj`: `compress(data)` returns
    whatever archive bytes are ready (a block is coded once `block_size` bytes have come),
    `flush()` codes the rest and ends the archive. The bytes equal one-shot compression's."""

    def __init__(self, compressor: Compressor | None = None, progress: Progress | None = None,
                 stats: CodingStats | None = None) -> None:
        self._c = compressor or Compressor()
        self._progress, self._stats, self._pending, self._out = progress, stats, bytearray(), io.BytesIO()
        self._stage: _Once | None = None
        self._writer: ArchiveWriter | None = None  # made with the first block, which settles the stage's size
        self._done = False

    def _start(self, whole: int | None) -> None:
        """The archive's header and stage. An input that is one block, of `whole` bytes in all,
        gets tables sized for it (the header records them)."""
        c = self._c
        header, params = c.header, c.params
        if params is not None and whole is not None:
            params = params.fitted(whole)
            header = replace(header, adapt_params=params.pack())
        self._stage = _Once(lambda: AdaptiveStage(params)) if params else None
        self._writer = ArchiveWriter(self._out, header)

    def _block(self, block: bytes, last: bool = False) -> None:
        c = self._c
        if self._writer is None:
            self._start(len(block) if last else None)
        from .codec import encode_block  # numpy: imported by the first block, not by an empty input
        with _threads(c.kind, c.threads):
            method, k, payload = encode_block(c._engine, block, c.lanes, self._progress, c.methods, self._stats,
                                              self._stage, c.min_lane)
        self._writer.add_block(method, k, block, payload)

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
        if self._writer is None:  # nothing came
            self._start(0)
        self._writer.finish()
        return self._drain()


def compress_stream(src: BinaryIO, dst: BinaryIO, model: str | LoadedModel = "default",
                    lanes: int | None = None, block_size: int = DEFAULT_BLOCK_SIZE,
                    threads: int = 0, progress: Progress | None = None,
                    methods: frozenset[Method] = ALL_METHODS, engine: str = "int8",
                    stats: CodingStats | None = None, adapt: str = "cm", device: str = "cpu") -> int:
    """Compresses src to dst one block at a time; returns the number of input bytes. The
    options are `Compressor`'s; make one to compress many inputs with one model load."""
    c = Compressor(model, lanes=lanes, block_size=block_size, threads=threads, engine=engine, adapt=adapt,
                   device=device, methods=methods)
    return c.compress_stream(src, dst, progress, stats)


def iter_decompress(src: BinaryIO, model: str | LoadedModel | None = None, progress: Progress | None = None,
                    threads: int = 0, device: str = "cpu", concatenated: bool = True) -> Iterator[bytes]:
    """The blocks of the archive in src, each decoded and verified before it is yielded; then,
    as gzip, xz and zstd do, those of every archive that follows it (`concatenated`: False
    refuses anything after the first archive). `model` overrides the archives' model name; its
    id must still match each archive's. `threads` applies to int8 archives (float32 ones replay
    the encoder's thread count); 0, the default, uses every available core. `device` as
    `Compressor`'s (int8 archives)."""
    threads = resolve_threads(threads)
    if device not in DEVICES:
        raise UsageError(f"unknown device '{device}' (choose {', '.join(DEVICES)})")
    engines: dict[tuple, _Once] = {}  # archives of the same model and engine share one
    lead = b""
    while True:
        reader = ArchiveReader(src, lead, more=concatenated)
        yield from _archive_blocks(reader, model, progress, threads, device, engines)
        lead = reader.after
        if not lead:
            return


def _archive_blocks(reader: ArchiveReader, model: str | LoadedModel | None, progress: Progress | None,
                    threads: int, device: str, engines: dict[tuple, _Once]) -> Iterator[bytes]:
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
        if kind is not IntEngine:  # the encoder never writes this: the stage reads integer rows
            raise CorruptArchive(f"engine {h.engine} cannot drive the adaptive stage (damaged header?)")
        if h.adapt_version != adaptive.VERSION:
            raise UnsupportedVersion(f"archive needs adaptive stage version {h.adapt_version}, which this shazip "
                                     f"does not have")
        return AdaptiveStage(AdaptiveParams.unpack(h.adapt_params))

    key = (h.engine, h.engine_version, h.threads, h.model_id, h.model_name)
    get_engine = engines.setdefault(key, _engine(kind, loaded, h.threads if kind is FloatEngine else threads, device))
    get_stage = _Once(stage) if h.adapt_version else None
    for bh, payload in reader.blocks():
        from .codec import decode_block  # numpy: imported by the first block, not by an empty archive
        with _threads(kind, h.threads):
            try:
                block = decode_block(get_engine, bh.method, bh.lanes, payload, bh.orig_len, progress, get_stage)
            except CorruptArchive as e:
                raise CorruptArchive(f"block {bh.index}: {e}") from None
        verify_block(bh, block)
        yield block


class ShazipDecompressor:
    """Incremental decompression of one archive, as `lzma.LZMADecompressor`: `decompress(data)`
    takes archive bytes in any pieces and returns the original bytes of every block completed
    so far, each verified. `eof` is true once the archive's end was read; whatever came after
    it is `unused_data` (in a concatenation, the next archive: give it to a new decompressor),
    and a further `decompress` raises EOFError. `needs_input` is true until `eof`. Options as
    `iter_decompress`."""

    def __init__(self, model: str | LoadedModel | None = None, threads: int = 0, device: str = "cpu") -> None:
        self._fed = io.BytesIO()
        self._blocks = iter_decompress(self._fed, model, None, threads, device, concatenated=False)
        self._buf = bytearray()
        self._started = False
        self._ended = False  # the units so far hold the whole archive
        self.eof = False
        self.unused_data = b""

    @property
    def needs_input(self) -> bool:
        return not self.eof

    def decompress(self, data: bytes) -> bytes:
        if self.eof:
            raise EOFError("already at the end of the archive")
        self._buf += data
        out = []
        while (n := self._unit()) is not None:
            # the decoder reads exactly this unit: the header (first time) and one record
            self._fed.seek(0)
            self._fed.truncate()
            self._fed.write(self._buf[:n])
            self._fed.seek(0)
            del self._buf[:n]
            self._started = True
            try:
                out.append(next(self._blocks))
            except StopIteration:
                self.eof = True
                self.unused_data = bytes(self._buf)
                self._buf.clear()
                break
        return b"".join(out)

    def _unit(self) -> int | None:
        """Bytes of the next unit the decoder can take whole (None: wait for more): the header
        with the first record, then one record at a time, and an empty unit once the archive is
        complete (the decoder then ends it). A unit whose start is already wrong is handed over
        as it is, for the decoder to refuse."""
        if self._ended:
            return 0
        if self._started:
            n = record_length(bytes(self._buf[:BLOCK_HEADER_BYTES]))
            return None if n is None or n > len(self._buf) else n
        first = first_unit(bytes(self._buf[:MAX_HEADER + BLOCK_HEADER_BYTES]))
        if first is None or first[0] > len(self._buf):
            return None
        self._ended = first[1]
        return first[0]


def decompress_stream(src: BinaryIO, dst: BinaryIO, model: str | LoadedModel | None = None,
                      progress: Progress | None = None, threads: int = 0, device: str = "cpu",
                      concatenated: bool = True) -> int:
    """Decompresses src (an archive, or several one after the other) to dst, verifying each
    block before writing it; returns bytes written. Options as `iter_decompress`."""
    total = 0
    for block in iter_decompress(src, model, progress, threads, device, concatenated):
        dst.write(block)
        total += len(block)
    return total


def compress(data: bytes, model: str | LoadedModel = "default", **kw) -> bytes:
    """Compresses bytes in memory. Keyword arguments as `Compressor`."""
    out = io.BytesIO()
    compress_stream(io.BytesIO(data), out, model, **kw)
    return out.getvalue()


def decompress(data: bytes, model: str | LoadedModel | None = None, **kw) -> bytes:
    """Decompresses whole archives (one, or several one after the other) in memory. Keyword
    arguments as `iter_decompress`."""
    out = io.BytesIO()
    decompress_stream(io.BytesIO(data), out, model, **kw)
    return out.getvalue()


def load(path_or_bytes: str | bytes) -> LoadedModel:
    """Loads a model from a path, a bundled name, or the bytes of a model file."""
    if isinstance(path_or_bytes, bytes):
        return model_from_bytes(path_or_bytes, "model bytes")
    return load_model(path_or_bytes)
