"""Reading an archive: its header, then its records streamed once, in order, each checked before
it is trusted (container.py's bounds, every crc) and before any length it declares is read; the
size of an archive's next unit for push-style decoders; the two ends of an archive said to lie
somewhere in a seekable file (a seek table's entries are checked by them)."""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import BinaryIO, Iterator

from ..errors import ArchiveError, CorruptArchive, NotAnArchive, Truncated, UnsupportedVersion
from .container import (
    BLOCK_HEADER_BYTES, BLOCK_RECORD, CRC, MAX_TABLE, METHOD_VALUES, OTHER_FORMATS, SKIP_LEN, SKIP_MAGIC, TABLE_TAG, TAG_BLOCK, TAG_MORE, TAG_TRAILER, TRAILER_BYTES, TRAILER_RECORD, BlockHeader, Method, Place, Trailer, block_problem, max_payload, solo_block,
)
from .header import FORMAT_VERSIONS, MAGIC, MAX_HEADER, Header, NeedMore, Parsed, chained, parse, take_from

_READ_CHUNK = 1 << 20  # memory grows with bytes actually received, not with declared lengths


def _scan(prefix: bytes) -> tuple[int, int | None] | None:
    """(header length, bytes after it that complete the first unit) of the archive `prefix`
    starts, None if more bytes are needed. The second is None when a record follows (a block or
    the trailer), a solo block's payload length, or 0 for a prefix that is already not a
    header: then the length is what the reader needs to refuse it."""
    if len(prefix) < len(MAGIC) + 1:
        return None if MAGIC.startswith(prefix[:len(MAGIC)]) else (len(MAGIC), 0)
    if prefix[:len(MAGIC)] != MAGIC or prefix[4] not in FORMAT_VERSIONS:
        return len(MAGIC) + 1, 0
    pos = [len(MAGIC) + 1]
    try:
        parsed = parse(take_from(prefix, pos), prefix[4])
        solo = solo_block(parsed)
    except NeedMore:
        return None
    except CorruptArchive:
        return pos[0], 0
    return parsed.length, solo.payload_len if solo else (0 if parsed.empty else None)


def first_unit(prefix: bytes) -> tuple[int, bool] | None:
    """The length of an archive's header and first record (a block with its payload, or the
    trailer), from its first bytes, and whether the archive ends there (a single-block format 3
    archive is one unit); None if more bytes are needed. For push-style decoders, which must
    know how many bytes to wait for: the reader given that many either yields the first block,
    ends, or refuses the archive."""
    scanned = _scan(prefix[:MAX_HEADER])
    if scanned is None:
        return None
    head, rest = scanned
    if rest is not None:
        return head + rest, True
    rec = record_length(prefix[head:head + BLOCK_HEADER_BYTES], not chained(prefix[4])) if head < len(prefix) else None
    return None if rec is None else (head + rec, False)


def record_length(prefix: bytes, check: bool = True) -> int | None:
    """The length of the record (block with its payload, or trailer) that starts `prefix`, or
    None if more bytes are needed. A block header that is damaged or out of bounds gives just
    its own length: the reader refuses it before any payload is read. `check`: its crc is
    checked too (not in format 4, where it starts from the crc of the record before it, which
    the reader, given the unit, checks)."""
    if not prefix:
        return None
    if prefix[0] in (TAG_TRAILER, TAG_MORE):
        return TRAILER_BYTES
    if prefix[0] != TAG_BLOCK:
        return 1
    if len(prefix) < BLOCK_HEADER_BYTES:
        return None
    body = prefix[:BLOCK_RECORD.size]
    _, _, method, _, orig_len, payload_len, _ = BLOCK_RECORD.unpack(body)
    if ((check and zlib.crc32(body) != CRC.unpack(prefix[BLOCK_RECORD.size:BLOCK_HEADER_BYTES])[0])
            or method not in METHOD_VALUES or payload_len > max_payload(method, orig_len)):
        return BLOCK_HEADER_BYTES
    return BLOCK_HEADER_BYTES + payload_len


def read_upto(src: BinaryIO, n: int) -> bytes:
    """Up to n bytes, fewer only at EOF; loops because pipes return short reads. Reads in
    chunks, so memory grows with the bytes that arrive, not with the n asked for."""
    chunks = []
    remaining = n
    while remaining:
        chunk = src.read(min(remaining, _READ_CHUNK))
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


@dataclass(frozen=True)
class Opened:
    """An archive's header as a reader read it, and the bytes it took (magic and version
    included): a reader given it (`ArchiveReader(opened=)`) starts after the header without
    reading or parsing it again."""

    parsed: Parsed
    length: int


class ArchiveReader:
    """Reads and validates the header at construction (or takes it as read: `opened`, src then
    standing just after it); blocks() streams the rest once, in order.

    Never seeks, and tolerates short reads, so src may be a pipe.

    `more`: other archives may follow this one in src (gzip's rule: a stream of archives holds
    the concatenation of their contents). The first bytes after the archive are then kept in
    `after` (b"" at the end of src) for the next reader, whose `lead` they are, instead of being
    refused as trailing data; a next archive that does not start with the magic is trailing data.
    Skippable frames after the archive (a seek table) are read past; `skipped` counts their bytes.
    """

    def __init__(self, src: BinaryIO, lead: bytes = b"", more: bool = False, opened: Opened | None = None) -> None:
        self.bytes_read = 0
        self.trailer: Trailer | None = None  # set once blocks() has been fully consumed
        self.after = b""
        self.skipped = 0
        self._src, self._lead, self._more = src, lead, more
        self._iterated = False
        self._solo: BlockHeader | None = None  # formats 3, 4: the one block, framed in the header
        self._empty = False  # format 4: the header is the whole archive
        self._chain = 0  # the crc the next record's starts from (format 4; formats 1-3: always 0)
        self._first_crc = 0  # the first block's data_crc: an output's id, for its first frame
        self.more: bool | None = None  # format 4: frames of this output follow (known at its end)
        self.table: bytes | None = None  # the skippable frame after it that holds a seek table (`_end`)
        if opened is None:
            opened = Opened(self._read_header(), self.bytes_read)
        else:
            self.bytes_read = opened.length
        self.opened = opened
        self.header = self._take(opened.parsed)

    def _read_upto(self, n: int) -> bytes:
        lead, self._lead = self._lead[:n], self._lead[n:]
        data = lead + read_upto(self._src, n - len(lead)) if n > len(lead) else lead
        self.bytes_read += len(data)
        return data

    def _end(self) -> None:
        """After the trailer: skippable frames, read past; then the end of src, or (`more`) the
        next archive's first bytes."""
        end = self.bytes_read
        while (after := self._read_upto(len(SKIP_MAGIC))) == SKIP_MAGIC:
            (n,) = SKIP_LEN.unpack(self._read(SKIP_LEN.size, "reading a skippable frame"))
            kept = bytearray() if n <= MAX_TABLE else None  # small enough to be a seek table: kept to be checked
            while n:  # in chunks, not held beyond MAX_TABLE: its length is the file's word
                chunk = self._read_upto(min(n, _READ_CHUNK))
                if not chunk:
                    raise Truncated("archive is truncated (reading a skippable frame)")
                if kept is not None:
                    kept += chunk
                n -= len(chunk)
            if kept is not None and kept.endswith(TABLE_TAG):
                if self.table is not None:  # (one ends an output; more would each hold up to MAX_TABLE)
                    raise CorruptArchive("a second seek table after one archive")
                self.table = bytes(kept)
        self.after = after
        self.skipped = self.bytes_read - len(after) - end
        if after and not self._more:
            raise CorruptArchive("trailing data after end of archive")

    def _read(self, n: int, what: str) -> bytes:
        data = self._read_upto(n)
        if len(data) < n:
            raise Truncated(f"archive is truncated ({what})")
        return data

    def _read_header(self) -> Parsed:
        follows = bool(self._lead)  # another archive came before this one
        magic = self._read_upto(len(MAGIC))
        if magic != MAGIC and follows:
            raise CorruptArchive("trailing data after end of archive (not another shazip archive)")
        if magic != MAGIC:
            if len(magic) < len(MAGIC) and MAGIC.startswith(magic):
                raise Truncated("archive is truncated (reading magic)")
            kind = next((name for sig, name in OTHER_FORMATS if magic.startswith(sig)), None)
            raise NotAnArchive("not a shazip archive" + (f" (this is a {kind} file)" if kind else " (bad magic)"))
        version = self._read(1, "reading header")[0]
        if version not in FORMAT_VERSIONS:
            raise UnsupportedVersion(
                f"archive format version {version} is not supported "
                f"(this shazip reads versions {', '.join(map(str, FORMAT_VERSIONS))})"
            )
        return parse(lambda n: self._read(n, "reading header"), version)

    def _take(self, parsed: Parsed) -> Header:
        """The reader's state from its archive's header."""
        version = parsed.header.format_version
        self._solo, self._empty = solo_block(parsed), parsed.empty
        self._chain = parsed.crc if chained(version) else 0
        if self._solo is not None:
            self.more, self._first_crc = parsed.more, self._solo.data_crc
        elif self._empty:
            self.more = False
        return parsed.header

    def place(self) -> "Place":
        """Where this archive stands in its output: what its header says, and once known (the
        first block read) the output's id for a first frame, and (its end read) `more`."""
        h = self.header
        return Place(h.frame_index, h.output_id if h.frame_index else self._first_crc, h.link, bool(self.more))

    def _misplaced(self) -> str:
        return " (damaged, or a record from another archive or place)" if chained(self.header.format_version) else ""

    def _read_block_header(self, tag: bytes, i: int) -> BlockHeader:
        what = f"reading block {i} header"
        body = tag + self._read(BLOCK_RECORD.size - 1, what)
        (crc,) = CRC.unpack(self._read(CRC.size, what))
        if zlib.crc32(body, self._chain) != crc:
            raise CorruptArchive(f"block {i}: header checksum mismatch" + self._misplaced())
        if chained(self.header.format_version):
            self._chain = crc
        _, index, method, lanes, orig_len, payload_len, data_crc = BLOCK_RECORD.unpack(body)
        if not i:
            self._first_crc = data_crc
        problem = block_problem(
            i, self.header, index, method, lanes, orig_len, payload_len,
        )
        if problem:
            raise CorruptArchive(problem)
        return BlockHeader(index, Method(method), lanes, orig_len, payload_len, data_crc)

    def _read_trailer(self, tag: bytes, n_blocks: int, total_len: int) -> Trailer:
        what = "reading end-of-archive trailer"
        body = tag + self._read(TRAILER_RECORD.size - 1, what)
        (crc,) = CRC.unpack(self._read(CRC.size, what))
        if zlib.crc32(body, self._chain) != crc:
            raise CorruptArchive("end-of-archive trailer checksum mismatch" + self._misplaced())
        tag, declared_blocks, declared_len = TRAILER_RECORD.unpack(body)
        if tag == TAG_MORE and not chained(self.header.format_version):
            raise CorruptArchive(f"unknown record tag 0x{tag:02x} (format {self.header.format_version} has no frames)")
        if declared_blocks != n_blocks:
            raise CorruptArchive(
                f"trailer declares {declared_blocks} blocks but the archive holds {n_blocks}"
            )
        if declared_len != total_len:
            raise CorruptArchive(
                f"trailer declares {declared_len} original bytes but the blocks hold {total_len}"
            )
        self.more = tag == TAG_MORE
        self._end()
        return Trailer(n_blocks=declared_blocks, total_len=declared_len, more=self.more)

    def blocks(self) -> Iterator[tuple[BlockHeader, bytes]]:
        """Yield (block header, payload) in order, then read and check the trailer.

        Payloads are not decoded, so their data_crc is the caller's to check (verify_block).
        The stream is consumed, hence only one pass is possible.
        """
        if self._iterated:
            raise RuntimeError("ArchiveReader.blocks() can only be iterated once")
        self._iterated = True
        if self._solo is not None:
            yield self._solo, self._read(self._solo.payload_len, "reading block 0 payload")
            self._end()
            self.trailer = Trailer(n_blocks=1, total_len=self._solo.orig_len, more=bool(self.more))
            return
        if self._empty:
            self._end()
            self.trailer = Trailer(n_blocks=0, total_len=0)
            return
        i = 0
        total_len = 0
        while True:
            offset = self.bytes_read
            tag = self._read_upto(1)
            if not tag:
                raise Truncated(
                    f"archive is truncated (expected block {i} or end-of-archive trailer)"
                )
            if tag[0] in (TAG_TRAILER, TAG_MORE):
                break
            if tag[0] != TAG_BLOCK:
                raise CorruptArchive(f"unknown record tag 0x{tag[0]:02x} at offset {offset}")
            bh = self._read_block_header(tag, i)
            payload = self._read(bh.payload_len, f"reading block {i} payload")
            yield bh, payload
            i += 1
            total_len += bh.orig_len
        self.trailer = self._read_trailer(tag, i, total_len)


@dataclass(frozen=True)
class Ends:
    """What an archive's ends say of it (`frame_ends`): its decoded size and its place, and its
    header as read."""

    decoded: int
    place: Place
    opened: Opened


def frame_ends(src: BinaryIO, start: int, end: int) -> Ends | None:
    """The decoded size and place recorded by the archive said to lie at [start, end) of a
    seekable src, read from its header, its first block header (a first frame's output id) and
    its last bytes (the trailer; a one-block archive's header holds its size and payload
    length); None where those are not an archive's ends. A cheap check of an index (the seek
    table) that decodes nothing and reads no block in between."""
    src.seek(start)
    try:
        reader = ArchiveReader(src)  # reads the header only
        if reader._solo is not None:
            ok = reader.bytes_read + reader._solo.payload_len == end - start
            return Ends(reader._solo.orig_len, reader.place(), reader.opened) if ok else None
        if reader._empty:
            return Ends(0, reader.place(), reader.opened) if reader.bytes_read == end - start else None
        if end - start - reader.bytes_read < BLOCK_HEADER_BYTES + TRAILER_BYTES:
            return None
        tag = reader._read(1, "reading block 0 header")
        if tag[0] != TAG_BLOCK:
            return None
        reader._read_block_header(tag, 0)  # its crc (chained in format 4) and bounds; its data_crc: the output id
    except ArchiveError:
        return None
    src.seek(end - TRAILER_BYTES)
    raw = read_upto(src, TRAILER_BYTES)
    body = raw[:TRAILER_RECORD.size]
    if len(raw) < TRAILER_BYTES or raw[0] not in (TAG_TRAILER, TAG_MORE):
        return None
    if not chained(reader.header.format_version) and (zlib.crc32(body) != CRC.unpack(raw[TRAILER_RECORD.size:])[0]
                                                       or raw[0] == TAG_MORE):
        return None  # (format 4's crc needs the chain of every record before it: the decoder checks it)
    reader.more = raw[0] == TAG_MORE
    return Ends(TRAILER_RECORD.unpack(body)[2], reader.place(), reader.opened)
