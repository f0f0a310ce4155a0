"""The frames of an output: the rules that tie them in one chain, the seek table that indexes
them, and where each lies in a seekable file, found without decoding a byte.

**The chain**: the rules every reader of a stream applies. An input longer than the frame size is written as frames, each a complete archive (codec/encode.py).
So that none can be lost, moved or taken from elsewhere unnoticed, every frame after an output's
first names the output (the crc of its first block's data), its own index and the crc of the
previous frame's data, and every frame but the last says that more follow (docs/format.md,
"Frames"). A reader passes each archive of a stream through one `Chain`: where an output starts
only a first frame may stand; after a frame that says more follow, only the next frame of the
same output; and the stream may not end while one is awaited. That is what zstd's and xz's
multi-frame streams cannot tell: a stream cut at a frame boundary, or a frame dropped, is an
error here, not a shorter output.

A seek table (below) is an index of the output it ends; a reader that meets one checks
it against the archives it has just read: a table that disagrees with them is an error.

Archives of formats 1-3, and of format 4 without frame fields (shazip 0.20's frames among them),
are each a whole output of one frame.

**The seek table**: where each frame of a framed output lies, read from the end of the file. A framed output is a stream of archives, and finding them otherwise means reading
every header, block header and trailer from the first byte to the last. After the last of two
or more frames, every shazip writer (sequential, frames at once, Dask) appends this table: each
frame's archive size and decoded size, found from the file's last bytes, as in zstd's seekable
format. A reader that seeks (`shazip.open`) or splits the work (`-T N`, Dask) reads it instead
of the whole structure. It travels in a skippable frame, which every stream reader passes over:
readers that know nothing of it lose nothing, and a table is only ever an index - each frame it
points to is checked at its two ends (`reader.frame_ends`) before it is trusted, and each
block is verified as it is decoded.

    skippable frame = "SHZ\\x8a" | length u32 | content                 (container.skippable)
    content         = entry* | n_frames u32 | crc u32 | "SHZ\\x8b"      (crc over entries and n_frames)
    entry           = archive_bytes u64 | decoded_bytes u64

**Where the frames lie** (`index`, `scan`): from the seek table, each entry confirmed by its frame's
two ends, or from the archives' structure, each frame proven (every checksum, its place in the
chain, its link to the frame before). A frame found keeps its header as read (`Opened`), so the
reader that decodes it does not parse it again.
"""

from __future__ import annotations

import io
import struct
import zlib
from collections import deque
from dataclasses import dataclass
from typing import BinaryIO, Iterator, Sequence

from ..errors import ArchiveError, CorruptArchive, Truncated
from . import crc
from .container import MAX_TABLE, SKIP_MAGIC, TABLE_TAG as TAG, Place, skippable
from .reader import ArchiveReader, Opened, frame_ends, read_upto

_ENTRY = struct.Struct("<QQ")  # archive_bytes, decoded_bytes
_FOOTER = struct.Struct("<II4s")  # n_frames, crc, TAG
_HEAD = len(SKIP_MAGIC) + 4  # the skippable frame's magic and length


def pack_table(frames: Sequence[tuple[int, int]]) -> bytes:
    """The seek table (as a skippable frame) of frames given as (archive bytes, decoded bytes);
    nothing for fewer than two: one archive needs no index (and a small file keeps its size)."""
    if len(frames) < 2:
        return b""
    body = b"".join(_ENTRY.pack(a, d) for a, d in frames) + struct.pack("<I", len(frames))
    return skippable(body + struct.pack("<I", zlib.crc32(body)) + TAG)


def parse_table(content: bytes) -> list[tuple[int, int]] | None:
    """The (archive bytes, decoded bytes) of each frame from a seek table's skippable frame
    `content`; None where it is not an intact table."""
    if len(content) < _FOOTER.size:
        return None
    n, crc, tag = _FOOTER.unpack_from(content, len(content) - _FOOTER.size)
    body = content[:-8]  # the entries and n_frames (crc and tag follow)
    if tag != TAG or len(content) != n * _ENTRY.size + _FOOTER.size or zlib.crc32(body) != crc:
        return None
    return [_ENTRY.unpack_from(body, i * _ENTRY.size) for i in range(n)]


def read_table(src: BinaryIO, start: int) -> list[tuple[int, int]] | None:
    """The (archive bytes, decoded bytes) of each frame of a seekable src from `start` on, from
    the seek table that ends it; None where src does not end with an intact table that covers
    exactly [start, the table): no table (one archive, an append after the table, a
    concatenation of framed files), or a damaged one. The caller scans the structure instead."""
    end = src.seek(0, io.SEEK_END)
    if end - start < _HEAD + _FOOTER.size:
        return None
    src.seek(end - _FOOTER.size)
    n, _, tag = _FOOTER.unpack(read_upto(src, _FOOTER.size))
    size = _HEAD + n * _ENTRY.size + _FOOTER.size
    if tag != TAG or size > end - start:
        return None
    src.seek(end - size)
    raw = read_upto(src, size)
    frames = parse_table(raw[_HEAD:])
    if (frames is None or raw[:len(SKIP_MAGIC)] != SKIP_MAGIC
            or struct.unpack_from("<I", raw, len(SKIP_MAGIC))[0] != size - _HEAD
            or sum(a for a, _ in frames) != end - size - start):
        return None
    return frames


_TABLE_ENTRIES = MAX_TABLE // 16  # the most archives a seek table can list


class Chain:
    """The frames of a stream's outputs, checked one archive at a time: `begin` with an archive's
    place as its header gives it, `end` once it is read, `table` for a seek table after it,
    `close` at the end of the stream. `resume`: the reader starts at this frame (a seek into
    the middle of an output, or past a loss), whose link to the frame before cannot be checked,
    nor the seek table that ends its output (the frames before it were not read)."""

    def __init__(self, resume: Place | None = None) -> None:
        self._next = resume.index if resume else 0  # the index awaited; 0: an output's start
        self._id = resume.output_id if resume else 0
        self._link: int | None = None  # the crc of the data of the frame before, where it was decoded
        self._sizes: deque[tuple[int, int, int]] = deque(maxlen=_TABLE_ENTRIES)  # (index, archive, decoded bytes)
        self._partial = resume is not None  # the output in hand was not read from its start

    @property
    def partial(self) -> bool:
        """The output in hand, or the one just ended, was not read from its first frame."""
        return self._partial

    @property
    def between_outputs(self) -> bool:
        """No frame is awaited: the last archive ended its output (or none was read)."""
        return self._next == 0

    def begin(self, place: Place) -> None:
        """An archive starts, at `place` (as its header says; a first frame's id is not known
        yet). Raises where it cannot stand here, naming the first frame missing, repeated or
        foreign."""
        k, i = self._next, place.index
        if k == 0:
            self._partial = False
            if i:
                raise CorruptArchive(f"frame {i} of an output where an output starts (its frame"
                                     f"{'s 0-' + str(i - 1) if i > 1 else ' 0'} missing)")
            return
        if i == 0:
            raise CorruptArchive(f"frame {k} of the output is missing (another output starts where it belongs)")
        if i > k:
            raise CorruptArchive(f"frame{'s' if i > k + 1 else ''} {k}{'-' + str(i - 1) if i > k + 1 else ''} of the "
                                 f"output missing (found frame {i})")
        if i < k:
            raise CorruptArchive(f"frame {i} of the output is repeated (frame {k} belongs here)")
        if place.output_id != self._id:
            raise CorruptArchive(f"frame {k} is from another output (its id {place.output_id:08x}, this output's "
                                 f"{self._id:08x})")
        if self._link is not None and place.link != self._link:
            raise CorruptArchive(f"frame {k} does not follow frame {k - 1} (it belongs after other data: a frame "
                                 "of another output)")

    def repeats(self, place: Place) -> bool:
        """Whether an archive at `place` is a frame of the output in hand already read (one that
        `begin` refuses as repeated)."""
        return 0 < place.index < self._next and place.output_id == self._id

    def end(self, place: Place, archive_bytes: int, decoded: int, data_crc: int | None = None,
            skipped: int = 0) -> None:
        """The archive that `begin` took is read, `place` now whole (its id, `more`); `data_crc`:
        the crc of its decoded data (None: not decoded, so the next frame's link goes unchecked);
        `skipped`: the bytes of skippable frames after it, which may only stand between outputs."""
        if place.index == 0:
            self._id = place.output_id
        self._next = place.index + 1 if place.more else 0
        if skipped and self._next:
            raise CorruptArchive(f"a skippable frame where frame {self._next} of the output belongs")
        self._link = data_crc
        self._sizes.append((place.index, archive_bytes, decoded))

    def table(self, content: bytes) -> None:
        """A seek table follows the archive just ended: it must be intact, end an output, and
        list the archives just read (archive and decoded bytes), starting at an output's first."""
        entries = parse_table(content)
        if entries is None:
            raise CorruptArchive("the seek table after the archive is damaged")
        if not self.between_outputs:
            raise CorruptArchive(f"a seek table where frame {self._next} of the output belongs")
        if self._partial:  # (its first entries are of frames this reader did not read)
            self._sizes.clear()
            return
        n = len(entries)
        listed = list(self._sizes)[-n:] if n <= len(self._sizes) else None
        if listed is None or listed[0][0] != 0 or [(a, d) for _, a, d in listed] != entries:
            raise CorruptArchive(f"the seek table does not match the archives before it ({n} frames listed)")
        self._sizes.clear()

    def close(self) -> None:
        """The stream ends: no frame may be awaited."""
        if self._next:
            raise Truncated(f"archive is truncated: frame {self._next} of the output is missing (the file ends after "
                            f"frame {self._next - 1}, at a frame boundary)")


@dataclass(frozen=True)
class Frame:
    """Where one archive (frame) lies: bytes [start, end) of the file, `decoded` bytes of data,
    and its place in its output."""

    start: int
    end: int
    decoded: int
    place: Place
    opened: Opened  # its header as read


def index(src: BinaryIO, limit: int | None = None) -> list[Frame] | None:
    """The archives (frames) of a seekable src from where it stands, then back there. From the
    seek table at its end when there is one that covers them and that every frame confirms
    (its two ends read: its size, index, output and whether more follow, in one chain); else
    from the archives' structure (`scan`), where a damaged archive, a frame missing, repeated
    or foreign, or a seek table that disagrees with the frames raises, as the streaming decoder
    would, before anything is written. For a reader that decodes the frames it finds, each
    proving itself; one that decodes a frame alone (a seek) takes `scan`'s. None where the
    frames cannot be had cheaply: src cannot seek, or an archive is larger than `limit` bytes
    (one old unframed archive: it streams instead of being held in memory)."""
    try:
        if not src.seekable():
            return None
        start = src.tell()
    except (AttributeError, OSError, ValueError):
        return None
    try:
        frames = _from_table(src, start)
        if frames is None:
            src.seek(start)
            frames = _scanned(src, start, limit)
        if frames is not None and limit is not None and any(f.end - f.start > limit for f in frames):
            return None
        return frames
    finally:
        src.seek(start)


def _from_table(src: BinaryIO, start: int) -> list[Frame] | None:
    """The frames the seek table lists, each confirmed by its own ends; None (scan them
    instead) where one does not."""
    table = read_table(src, start)
    if not table:
        return None
    frames, at, chain = [], start, Chain()
    try:
        for size, decoded in table:
            ends = frame_ends(src, at, at + size)
            if ends is None or ends.decoded != decoded:
                return None
            chain.begin(ends.place)
            chain.end(ends.place, size, decoded)
            frames.append(Frame(at, at + size, decoded, ends.place, ends.opened))
            at += size
        chain.close()
    except ArchiveError:
        return None  # the table does not lead to one chain of frames
    return frames


def _scanned(src: BinaryIO, start: int, limit: int | None) -> list[Frame] | None:
    try:
        return list(scan(src, start, limit))
    except _TooLarge:
        return None


class _TooLarge(Exception):
    """An archive longer than the scan's limit."""


def scan(src: BinaryIO, start: int, limit: int | None = None) -> Iterator[Frame]:
    """The frames of src, which stands at `start`, each proven before it is given: its
    structure and every checksum (chained in format 4: its trailer's too), its place in one
    chain of frames, and its link to the frame before (the crc of that frame's data, worked out
    from its blocks' crcs); the seek table at the end checked against them. Nothing is decoded.
    A reader that decodes a frame alone (a seek) has nothing else to prove it by, so it takes
    its frames from here, as far as it needs; the file position is the scan's between frames."""
    lead, at, chain = b"", start, Chain()
    while True:
        reader = ArchiveReader(src, lead, more=True)
        chain.begin(reader.place())
        data_crc = 0  # the crc of the frame's data, from its blocks' (the next frame's link)
        for bh, _ in reader.blocks():
            if limit is not None and reader.bytes_read > limit:
                raise _TooLarge
            data_crc = crc.combine(data_crc, bh.data_crc, bh.orig_len)
        end = at + reader.bytes_read - len(reader.after) - reader.skipped  # the seek table is no frame's
        chain.end(reader.place(), end - at, reader.trailer.total_len, data_crc, reader.skipped)
        if reader.table is not None:
            chain.table(reader.table)
        if not reader.after:
            chain.close()
        yield Frame(at, end, reader.trailer.total_len, reader.place(), reader.opened)
        if not reader.after:
            return
        at, lead = end + reader.skipped, reader.after
