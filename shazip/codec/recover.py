"""Recovery: every intact block of a damaged stream of archives written, in order, and what was
lost named (`recover_stream`, `shazip -d --recover`)."""

from __future__ import annotations

import io
import zlib
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, BinaryIO

from ..errors import ArchiveError
from ..format.frames import Chain
from ..format.reader import ArchiveReader
from ..format.header import MAGIC
from ..model.file import LoadedModel
from .decode import archive_blocks, indexed, memory_back
from ..hardware import Hardware
from .engines import Engines

if TYPE_CHECKING:
    from .block import Progress


@dataclass(frozen=True)
class Lost:
    """What `recover_stream` could not decode: archive bytes [start, end) of src, whose data
    belonged in the output from byte `output_at` on."""

    start: int
    end: int
    output_at: int
    reason: str


@memory_back
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
    indexed(src, progress, 1)  # a bar's total, where the structure holds
    engines = Engines()
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
            for block in archive_blocks(reader, model, progress, hw, engines):
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

