"""Decompression: whole streams (frames decoded several at once where src can seek), the
incremental `ShazipDecompressor`, one frame alone (frames at once, a Dask task); every block
verified before it is given, every frame checked in its place in its output (format/frames.py)."""

from __future__ import annotations

import functools
import io
import threading
import traceback
import zlib
from typing import TYPE_CHECKING, BinaryIO, Callable, Iterable, Iterator, TypeVar

from ..errors import ArchiveError, ChecksumMismatch, CorruptArchive, ModelError, ShazipError, UnsupportedVersion
from ..format import crc
from ..format.container import (
    BLOCK_HEADER_BYTES, MAX_TABLE, OVERRUN, SKIP_MAGIC, STAGED, TABLE_TAG, Place, bound_hint, verify_block,
)
from ..format.frames import Chain, Frame, index, parse_table
from ..format.header import MAX_HEADER, chained, headed
from ..format.reader import ArchiveReader, Opened, first_unit, read_upto, record_length
from ..hardware import Hardware, available_cores
from ..model.file import LoadedModel, find_model, model_label
from ..options import MAX_FRAME_IN_MEMORY
from .arguments import as_buffer, known_keywords
from .engines import (
    BY_ID, Engines, FloatEngine, IntEngine, LaneBatching, Once, check_replayable, engine_for, engine_threads,
    resolve_model,
)
from .frames import Shares, hand_back, ordered_map

R = TypeVar("R")

if TYPE_CHECKING:
    from ..stage.adaptive import AdaptiveStage
    from .block import Progress


def decompressobj(model: str | LoadedModel | None = None, **options) -> ShazipDecompressor:
    """An incremental decompressor, as `zlib.decompressobj`: `ShazipDecompressor(model, **options)`."""
    return ShazipDecompressor(model, **options)


def iter_decompress(src: BinaryIO, model: str | LoadedModel | None = None, progress: Progress | None = None,
                    threads: int = 0, device: str = "cpu", concatenated: bool = True,
                    resume: Place | None = None) -> Iterator[bytes]:
    """The blocks of the output in src (its frames, each an archive, in order), each decoded and
    verified before it is yielded; then, as gzip, xz and zstd do, those of every output that
    follows it (`concatenated`: False refuses anything after the first output). The frames are
    checked as one chain (format/frames.py): a frame missing, repeated or from another output, or a
    stream that ends while a frame is awaited, is an error, as is a seek table that does not
    match the frames. `model` overrides the archives' model name; its id must still match each
    archive's. `threads` applies to int8 archives (float32 ones replay the encoder's thread
    count); 0, the default, uses every available core. `device` as `Compressor`'s (int8
    archives). `resume`: src stands at this frame of an output, not at an output's start."""
    yield from _decompressed(src, model, progress, Hardware.of(threads, device), concatenated, resume)


def _decompressed(src: BinaryIO, model: str | LoadedModel | None, progress: Progress | None, hw: Hardware,
                  concatenated: bool = True, resume: Place | None = None,
                  frames: list[Frame] | None = None) -> Iterator[bytes]:
    """`iter_decompress` on what it resolved; `frames`: src's, as `index` found them (their
    headers are not read again)."""
    engines = Engines()  # archives of the same model and engine share one
    chain = Chain(resume)
    for reader in _readers(src, frames):
        yield from _frame_blocks(reader, chain, model, progress, hw, engines)
        if not reader.after:
            chain.close()
            return
        if not concatenated and chain.between_outputs:
            raise CorruptArchive("trailing data after end of archive")
    raise CorruptArchive("the archive changed while it was read (it holds more than the frames found at its start)")


def _readers(src: BinaryIO, frames: list[Frame] | None) -> Iterator[ArchiveReader]:
    """A reader for each archive of src in turn: each opened where the one before ended (its
    first bytes, read past its end, are the next one's lead), or each at its place in `frames`
    with its header as the index read it."""
    if frames is not None:
        for frame in frames:
            src.seek(frame.start + frame.opened.length)
            yield ArchiveReader(src, more=True, opened=frame.opened)
        return
    lead = b""
    while True:
        reader = ArchiveReader(src, lead, more=True)
        yield reader
        lead = reader.after


def _frame_blocks(reader: ArchiveReader, chain: Chain, model: str | LoadedModel | None, progress: Progress | None,
                  hw: Hardware, engines: Engines) -> Iterator[bytes]:
    """The blocks of the archive `reader` has opened, a frame taken through `chain`: checked
    in its place before any block is decoded, and its data's crc kept for the next frame's
    link; then the seek table after it, checked against the frames."""
    chain.begin(reader.place())
    data_crc = 0
    for block in archive_blocks(reader, model, progress, hw, engines):
        data_crc = zlib.crc32(block, data_crc)
        yield block
    chain.end(reader.place(), reader.bytes_read - len(reader.after) - reader.skipped, reader.trailer.total_len,
              data_crc, reader.skipped)
    if reader.table is not None:
        chain.table(reader.table)


def archive_blocks(reader: ArchiveReader, model: str | LoadedModel | None, progress: Progress | None,
                    hw: Hardware, engines: Engines) -> Iterator[bytes]:
    """The blocks of the archive `reader` has opened, decoded and verified."""
    h = reader.header
    kind = BY_ID.get(h.engine)

    def loaded() -> LoadedModel:
        check_replayable(engine_for(h.engine, h.engine_version), h.threads)
        found = find_model(h.model_name, h.model_id) if model is None else resolve_model(model)
        if not found.model_id.startswith(h.model_id):  # format 3 records the id's first 8 bytes
            raise ModelError(f"wrong model: the archive needs {model_label(h.model_name, h.model_id)}, "
                             f"given '{found.name}' (id {found.id_hex[:16]})")
        return found

    def stage() -> AdaptiveStage:
        from ..stage import adaptive
        if kind is not IntEngine:  # the encoder never writes this: the stage reads integer rows
            raise CorruptArchive(f"engine {h.engine} cannot drive the adaptive stage (damaged header?)")
        if h.adapt_version not in adaptive.VERSIONS:
            raise UnsupportedVersion(f"archive needs adaptive stage version {h.adapt_version}, which this shazip "
                                     f"does not have")
        return adaptive.AdaptiveStage(adaptive.AdaptiveParams.unpack(h.adapt_params, h.adapt_version))

    key = (h.engine, h.engine_version, h.threads, h.model_id, h.model_name)
    threads = h.threads if kind is FloatEngine else hw.threads
    get_engine = engines.of(key, kind, loaded, threads, hw.device)
    get_stage = Once(stage) if h.adapt_version else None
    for bh, payload in reader.blocks():
        from .block import decode_block  # numpy: imported by the first block, not by an empty archive
        coder_bytes = payload[4:] if headed(h.format_version) else payload  # after format 5's head check
        if bh.method in STAGED and not coder_bytes.strip(b"\0") and crc.repeated(0xFF, bh.orig_len) != bh.data_crc:
            # The stage's decoder reads a zero payload (and the zeros past its end) as a code value of
            # 0, under every decision's split: every bit a 1, whatever the stage predicts. So it can
            # only give bytes 0xFF, and the block's crc says they are not its data: refused at once,
            # where decoding would take the model's time for every byte claimed (a forged header of a
            # few hundred bytes claiming 16 MiB: minutes).
            raise ChecksumMismatch(f"block {bh.index}: checksum mismatch (data corrupted: a payload of zeros, "
                                   "which decodes only to bytes 0xFF)")
        with engine_threads(kind, h.threads):
            try:
                block = decode_block(get_engine, bh.method, bh.lanes, payload, bh.orig_len, progress, get_stage,
                                     OVERRUN, head=headed(h.format_version))
            except CorruptArchive as e:
                hint = bound_hint(h.format_version) if "past its end" in str(e) else ""
                raise CorruptArchive(f"block {bh.index}: {e}{hint}") from None
        verify_block(bh, block)
        yield block


class ShazipDecompressor:
    """Incremental decompression of one output, as `lzma.LZMADecompressor`: `decompress(data)`
    takes archive bytes in any pieces and returns the original bytes of every block completed
    so far, each verified; an output of several frames (archives) is taken whole, its frames
    checked as one chain (format/frames.py). `max_length` (>= 0) bounds the bytes one call returns; the
    rest waits for the next call (`needs_input` is then false: call again, with b"" if need be).
    `eof` is true once the output's end was read and all of it returned; whatever came after it
    is `unused_data` (in a concatenation, the next output: give it to a new decompressor), and a
    further `decompress` raises EOFError. Options as `iter_decompress`. Given a skippable frame
    instead of an archive (the seek table that ends a framed output), it reads past it and ends
    there with no output, as a zstd skippable frame does: a loop over `unused_data` decodes a
    stream whole."""

    def __init__(self, model: str | LoadedModel | None = None, threads: int = 0, device: str = "cpu") -> None:
        self._model, self._hw = model, Hardware.of(threads, device)
        self._engines = Engines()
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
        except ShazipError as e:  # the frame in hand's stage freed, and its memory handed back (`memory_back`)
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
            if self._kept is not None and self._kept.endswith(TABLE_TAG) and parse_table(bytes(self._kept)) is None:
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


def memory_back(call: Callable[..., R]) -> Callable[..., R]:
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


@memory_back
def decompress_stream(src: BinaryIO, dst: BinaryIO, model: str | LoadedModel | None = None,
                      progress: Progress | None = None, threads: int = 0, device: str = "cpu",
                      concatenated: bool = True) -> int:
    """Decompresses src (an archive, or several one after the other) to dst, verifying each
    block before writing it; returns bytes written. Options as `iter_decompress`. A seekable src
    of several archives (frames) is decoded up to `threads` archives at once, the threads shared
    out among them (`frames.Shares`; on a GPU: each with its engine there, its stage on a
    core); its structure is checked first, so a damaged one fails before anything is written."""
    hw = Hardware.of(threads, device)
    frames = indexed(src, progress, hw.threads) if concatenated else None
    if (frames is not None and len(frames) > 1 and hw.threads > 1
            and all(f.end - f.start <= MAX_FRAME_IN_MEMORY for f in frames)):
        return _decoded_at_once(src, frames, dst, model, progress, hw)
    total = 0
    for block in _decompressed(src, model, progress, hw, concatenated, frames=frames):
        dst.write(block)
        total += len(block)
    return total


def indexed(src: BinaryIO, progress: Progress | None, threads: int) -> list[Frame] | None:
    """The frames of src (`index`: nothing decoded) where they serve: to be decoded several at
    once (`threads` > 1: a damaged structure then fails here, before anything is written), or to
    tell a progress that takes it (`expect`, a bar's) the total; None where src cannot seek, or
    neither wants them. For the total alone, an index that fails is no error here: the decoder
    reports the damage where it meets it, as without a bar."""
    expect = getattr(progress, "expect", None)
    if threads <= 1 and expect is None:
        return None
    try:  # (for the total, every frame however long; else frames that can be held in memory)
        frames = index(src, None if expect is not None else MAX_FRAME_IN_MEMORY)
    except (ArchiveError, OSError, ValueError):  # a device may say it seeks and then fail
        if threads > 1:
            raise
        return None
    if frames is not None and expect is not None:
        expect(sum(f.decoded for f in frames))
    return frames


def _decoded_at_once(src: BinaryIO, frames: list[Frame], dst: BinaryIO, model: str | LoadedModel | None,
                     progress: Progress | None, hw: Hardware) -> int:
    """The archives `frames` of src, up to `hw.threads` at a time (each on its share of the
    threads, `Shares`), written in order; each worker's engines serve every frame it decodes."""
    lock, reading = threading.Lock(), threading.Lock()
    model = resolve_model(model) if model is not None else None  # read once, not once a frame
    batching = LaneBatching.of(hw)  # on a GPU: the frames' lanes stepped together
    shares = Shares(hw.threads, available_cores(), len(frames))
    engines = [Engines(batching, w, lambda w=w: shares.of(w)) for w in range(shares.workers)]

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
            return _frame_decoded(archive, frame.place, model, report, hw, engines[worker], frame.opened)

    total = 0
    for block in linked(frames, ordered_map(one, frames, shares.workers)):
        dst.write(block)
        total += len(block)
    return total


def decode_frame(archive: bytes, place: Place, model: str | LoadedModel | None, progress: Progress | None = None,
                 device: str = "cpu", opened: Opened | None = None) -> list[bytes]:
    """The blocks of one frame decoded alone (frames at once, a Dask task), each verified; the
    frame must stand at `place`, where `format.frames.index` found it (`opened`: its header as
    the index read it, not parsed again). Its link to the frame before is the caller's to check,
    in order (`linked`)."""
    return _frame_decoded(archive, place, model, progress, Hardware.of(1, device), Engines(), opened)


def _frame_decoded(archive: bytes, place: Place, model: str | LoadedModel | None, progress: Progress | None,
                   hw: Hardware, engines: Engines, opened: Opened | None = None) -> list[bytes]:
    """`decode_frame` on what it resolved, with `engines` (by archive kind) to use or keep;
    `opened`: its header as the index read it (not parsed again)."""
    src = io.BytesIO(archive)
    src.seek(0 if opened is None else opened.length)
    reader = ArchiveReader(src, opened=opened)
    blocks = list(archive_blocks(reader, model, progress, hw, engines))
    if reader.place() != place:
        raise CorruptArchive(f"frame {place.index} changed while it was read")
    return blocks


def linked(frames: list[Frame], decoded: Iterable[list[bytes]]) -> Iterator[bytes]:
    """The blocks of `frames` (from `format.frames.index`, their places checked), decoded apart and
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


def decompress(data: bytes, model: str | LoadedModel | None = None, **kw) -> bytes:
    """Decompresses whole archives (one, or several one after the other) in memory. Keyword
    arguments as `iter_decompress`."""
    known_keywords("decompress", kw, decompress_stream)
    out = io.BytesIO()
    decompress_stream(io.BytesIO(as_buffer(data)), out, model, **kw)
    return out.getvalue()

