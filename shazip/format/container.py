"""The `.shz` archive container: an archive's records, written and read; byte layout only, no
compression. The header (its two layouts) is header.py's.

    archive = header, block*, trailer                     (formats 1, 2; format 3 with several blocks)
            | header with the one block's fields, payload (format 3 "solo": a single block)
    block   = 0xB1 | index u32 | method u8 | lanes u16 | orig_len u32 | payload_len u32 |
              data_crc u32 | bh_crc u32 | payload
    trailer = 0xE0 (format 4: 0xE1, more frames of the output follow) | n_blocks u32 | total_len u64 |
              tr_crc u32

All fixed-width integers are little-endian, every crc is zlib.crc32. The block count and total
length live in a trailer (not an up-front table) so an archive can be written to a pipe with
bounded memory. The codec chooses each block's method and payload; this module only frames,
checks and unframes them. Every length read from an archive is checked against limits before
that many bytes are read, so a hostile archive can neither force a huge allocation nor make the
reader hang. See docs/format.md for the full specification.
"""

import enum
import struct
import zlib
from dataclasses import dataclass, replace
from typing import BinaryIO, Iterator

from shazip.errors import (
    ArchiveError,
    ChecksumMismatch,
    CorruptArchive,
    NotAnArchive,
    Truncated,
    UnsupportedVersion,
)

from .header import (
    COMPACT, FORMAT_VERSIONS, MAGIC, MAX_HEADER, Header, NeedMore, Parsed, Solo, chained, parse, take_from, with_crc,
)

# A skippable frame ("SHZ\x8a" | length u32 | content) may follow any archive of a stream; every
# reader passes over it unread. shazip writes one, the seek table (frames.py), after the last
# frame of a framed output; whatever else one holds is for other tools.
SKIP_MAGIC: bytes = b"SHZ\x8a"
# Every format bounds the work a block may ask for (formats 1-3 since shazip 0.21, so that no header
# version lets a small file claim hours of decoding). Mixed payloads' coder drops at most 5 trailing
# zero bytes (csrc/coder/binary.h, MAX_TRIM) and the categorical coder's seal leaves its decoder
# at most a word or two to read past the end, so a decoder reading more than OVERRUN bytes (two
# words) past a payload is decoding a damaged one and stops. And every binary decision costs at
# least -log2(1 - 255/2**24) bits (p16 <= 65535, floor of range * p / 65536 with range >= 2**24),
# as every byte of a model block does (each of its 256 frequencies is at least 1 in 2**24), so a
# payload of n bytes is at least n * 8 * 2.19e-5 / 8 (mixed) or n * 2.19e-5 / 8 (model) bytes
# less the coder's last ones: FLOOR_RATIO (1 byte per 64 KiB, model per 512 KiB) and
# FLOOR_SLACK keep a margin under that. The coders of shazip 0.4-0.7 (formats 2, 3) dropped every
# trailing zero, which only a block ending in a long run of 0xFF bytes (each bit a 1, which keeps the
# coder's low end) leaves beyond these bounds: such a block is refused (`BOUND_HINT`), never decoded
# wrong.
OVERRUN = 8
BOUND_HINT = ("; an archive of shazip 0.4-0.7 (format 2 or 3) whose block ends in a long run of 0xFF bytes can "
              "meet this bound: shazip 0.20 decodes it")
FLOOR_RATIO, FLOOR_SLACK = 1 << 16, 16


def bound_hint(format_version: int) -> str:
    """BOUND_HINT where an archive of this format may hold such a block (formats 2 and 3), else ""."""
    return BOUND_HINT if format_version in (2, 3) else ""


# What a file that is not ours may be, by its first bytes: named in the error, as a hint.
OTHER_FORMATS = ((b"\x1f\x8b", "gzip"), (b"\xfd7zX", "xz"), (b"\x28\xb5\x2f\xfd", "zstd"), (b"BZh", "bzip2"),
                 (b"PK\x03\x04", "zip"), (b"7z\xbc\xaf", "7-Zip"), (b"7kSt", "zpaq"), (b"zPQ", "zpaq"))

_TAG_BLOCK = 0xB1
_TAG_TRAILER = 0xE0
_TAG_MORE = 0xE1  # format 4: the trailer of a frame that more frames of its output follow
# The seek table's tag (its skippable frame's last bytes, frames.py); a skippable frame of at most
# MAX_TABLE bytes (a table of 4 Mi frames) that ends with it is kept by readers, to be checked.
TABLE_TAG = b"SHZ\x8b"
MAX_TABLE = 1 << 26
_U16_MAX = 0xFFFF
_U32_MAX = 0xFFFFFFFF
_READ_CHUNK = 1 << 20  # memory grows with bytes actually received, not with declared lengths

# tag, index, method, lanes, orig_len, payload_len, data_crc (bh_crc follows)
_BLOCK_HEADER = struct.Struct("<BIBHIII")
_TRAILER = struct.Struct("<BIQ")  # tag, n_blocks, total_len (tr_crc follows)
_CRC = struct.Struct("<I")
_SKIP_LEN = struct.Struct("<I")


class Method(enum.IntEnum):
    """How a block's payload encodes its original bytes."""

    RAW = 0
    ZSTD = 1
    MODEL = 2  # range-coded bytes under the model's rows
    MIXED = 3  # binary decisions under the model mixed with the adaptive stage (format 2)
    # binary decisions under the adaptive stage alone, the model not run (its input uniform) in a block
    # it does not pay for (format 5)
    STAGE = 4


ALL_METHODS = frozenset(Method)
STAGED = frozenset({Method.MIXED, Method.STAGE})  # coded by the adaptive stage's binary decisions
CODED = STAGED | {Method.MODEL}  # coded under predictions (the rest: stored bytes, zstd frames)
_METHOD_VALUES = frozenset(m.value for m in Method)



def skippable(content: bytes) -> bytes:
    """A skippable frame holding `content`, which readers of archives pass over."""
    if len(content) > _U32_MAX:
        raise ValueError("a skippable frame holds at most 4 GiB")
    return SKIP_MAGIC + _SKIP_LEN.pack(len(content)) + content


@dataclass(frozen=True)
class Place:
    """Where an archive stands among the frames of its output (frames.py states the rules).
    Every archive of formats 1-3, and every one-frame output, is frame 0 with nothing after."""

    index: int  # 0: an output's first frame
    output_id: int  # the crc of the output's first block's data (for frame 0, its own first block's)
    link: int  # frames 1, 2, ...: the crc of the previous frame's data (0 for frame 0)
    more: bool  # frames of this output follow this one


@dataclass(frozen=True)
class BlockHeader:
    """Framing of one block.

    data_crc covers the ORIGINAL bytes, not the payload, so decoding is checked end to end.
    """

    index: int
    method: Method
    lanes: int
    orig_len: int
    payload_len: int
    data_crc: int

    def pack(self, seed: int = 0) -> bytes:
        return with_crc(_BLOCK_HEADER.pack(
            _TAG_BLOCK, self.index, self.method, self.lanes,
            self.orig_len, self.payload_len, self.data_crc,
        ), seed)


def _solo_of(bh: BlockHeader) -> Solo:
    """The fields of an archive's only block, as its header holds them."""
    return Solo(bh.method, bh.lanes, bh.orig_len, bh.payload_len, bh.data_crc)


def _solo_block(parsed: Parsed) -> BlockHeader | None:
    """The only block that a header holds, checked as every block header is (CorruptArchive)."""
    s = parsed.solo
    if s is None:
        return None
    problem = _block_problem(0, parsed.header, 0, s.method, s.lanes, s.orig_len, s.payload_len)
    if problem:
        raise CorruptArchive(problem)
    return BlockHeader(0, Method(s.method), s.lanes, s.orig_len, s.payload_len, s.data_crc)


@dataclass(frozen=True)
class Trailer:
    """End-of-archive record: lets the reader detect dropped blocks and a cut-off stream.
    `more` (format 4, its tag): frames of the archive's output follow it."""

    n_blocks: int
    total_len: int
    more: bool = False

    def pack(self, seed: int = 0) -> bytes:
        return with_crc(_TRAILER.pack(_TAG_MORE if self.more else _TAG_TRAILER, self.n_blocks, self.total_len), seed)


def max_payload(method: int, orig_len: int) -> int:
    """The largest payload a block of orig_len bytes can have; checked before reading it.

    Automatic method choice never exceeds orig_len (raw is always a candidate), but a caller
    may force one method: zstd never exceeds its compressBound (about n + n/256 + 64; we allow n + n/128 + 128), and a
    model-coded byte costs at most 24 bits (constriction's smallest probability is 2^-24),
    plus the coder's final words."""
    if method == Method.RAW:
        return orig_len
    if method == Method.ZSTD:
        return orig_len + (orig_len >> 7) + 128
    if method in STAGED:  # at most 16 bits a decision (probabilities are >= 2**-16)
        return 16 * orig_len + 16
    return 3 * orig_len + 16


def _block_problem(
    expected_index: int, header: Header,
    index: int, method: int, lanes: int, orig_len: int, payload_len: int,
) -> str | None:
    """What is impossible about a block header, or None.

    Shared by writer and reader so the writer can never emit an archive the reader rejects.
    """
    i, block_size = expected_index, header.block_size
    if index != expected_index:
        return f"block {i}: out of order (found index {index})"
    if (method not in _METHOD_VALUES or (method in STAGED and not header.adapt_version)
            or (method == Method.STAGE and header.format_version < 5)):
        return f"block {i}: unknown method {method}"
    if method == Method.MODEL and chained(header.format_version) and header.adapt_version:
        return f"block {i}: method model in an archive with the adaptive stage (the stage codes every model block)"
    if not 1 <= orig_len <= block_size:
        return f"block {i}: original length {orig_len} is outside 1..{block_size}"
    max_lanes = min(orig_len, _U16_MAX)  # more lanes than bytes would be meaningless
    if not 1 <= lanes <= max_lanes:
        return f"block {i}: {lanes} lanes for {orig_len} bytes (must be 1..{max_lanes})"
    limit = max_payload(method, orig_len)
    if payload_len > limit:
        return f"block {i}: payload length {payload_len} exceeds the limit {limit} for {orig_len} bytes"
    if method == Method.RAW and payload_len != orig_len:
        return (
            f"block {i}: raw payload length {payload_len} differs from original length {orig_len}"
        )
    if method == Method.MODEL and payload_len % 4:
        return f"block {i}: model payload length {payload_len} is not a multiple of 4"
    floor = orig_len // (FLOOR_RATIO if method in STAGED else 8 * FLOOR_RATIO) - FLOOR_SLACK
    if method in CODED and payload_len < floor:
        return (f"block {i}: payload of {payload_len} bytes is too short to code {orig_len} bytes (at least {floor})"
                + (bound_hint(header.format_version) if method == Method.MIXED else ""))
    return None


class ArchiveWriter:
    """Writes the header, then add_block(...) appends, and finish() writes the trailer.

    Never seeks or buffers whole archives, so dst may be a pipe. dst.write must write everything
    it is given (true of buffered binary streams such as sys.stdout.buffer and open(..., "wb")).
    In formats 3 and 4 the header and the first block wait until a second block or finish()
    shows whether the archive has one block (then framed in the header) or several.
    """

    def __init__(self, dst: BinaryIO, header: Header) -> None:
        self.header = header
        self.bytes_written = 0
        self._dst = dst
        self._n_blocks = 0
        self._total_len = 0
        self._finished = False
        self._held: tuple[BlockHeader, bytes] | None = None  # formats 3, 4: the first block, not yet written
        self._compact, self._chained = header.format_version in COMPACT, chained(header.format_version)
        self._chain = 0  # format 4: the crc the next record's starts from
        if not self._compact:
            self._write(header.pack())

    def _write(self, data: bytes) -> None:
        self._dst.write(data)
        self.bytes_written += len(data)

    def _unstaged(self) -> None:
        """Format 4, an archive whose only block is stored (raw, zstd) or that has none: no
        stage codes anything, so the header records none (a small file pays 8 bytes less)."""
        if self._chained:
            self.header = replace(self.header, adapt_version=0, adapt_params=b"")

    def _record(self, packed: bytes) -> None:
        """Writes a header, block header or trailer; in format 4 its crc seeds the next one's."""
        self._write(packed)
        if self._chained:
            self._chain = _CRC.unpack(packed[-_CRC.size:])[0]

    def add_block(self, method: Method, lanes: int, original: bytes, payload: bytes) -> None:
        """Append one block; index and data_crc are derived here, never trusted from callers."""
        if self._finished:
            raise ValueError("cannot add a block after finish()")
        if self._n_blocks > _U32_MAX:
            raise ValueError("too many blocks for a u32 index")
        method = Method(method)
        problem = _block_problem(
            self._n_blocks, self.header,
            self._n_blocks, method, lanes, len(original), len(payload),
        )
        if problem:
            raise ValueError(problem)
        if method is Method.RAW and payload != original:
            raise ValueError(f"block {self._n_blocks}: raw payload differs from original")
        bh = BlockHeader(
            index=self._n_blocks, method=method, lanes=lanes, orig_len=len(original),
            payload_len=len(payload), data_crc=zlib.crc32(original),
        )
        if self._compact and self._n_blocks == 0:
            self._held = bh, payload
        else:
            self._release()
            self._record(bh.pack(self._chain))
            self._write(payload)
        self._n_blocks += 1
        self._total_len += len(original)

    def _release(self, solo: bool = False, more: bool = False) -> None:
        """Formats 3, 4: the held first block, after the header that now can be written: holding
        that block (`solo`, the archive's only block, and `more`) or followed by it (several
        blocks)."""
        if self._held is not None:
            bh, payload = self._held
            self._held = None
            if solo and bh.method in (Method.RAW, Method.ZSTD):
                self._unstaged()
            self._record(self.header.pack(solo=_solo_of(bh) if solo else None, more=more))
            if not solo:
                self._record(bh.pack(self._chain))
            self._write(payload)

    def finish(self, more: bool = False) -> Trailer:
        """Write the trailer (or, for a format 3/4 archive of one block, the header holding it);
        until then the archive is incomplete (and reads as Truncated). `more` (format 4, an
        archive of one or more blocks): it is a frame that more frames of its output follow."""
        if self._finished:
            raise ValueError("finish() called twice")
        if more and not (self._chained and self._n_blocks):
            raise ValueError("only a format 4 archive of one or more blocks is followed by more frames")
        self._finished = True
        trailer = Trailer(n_blocks=self._n_blocks, total_len=self._total_len, more=more)
        if self._compact and self._n_blocks == 1:
            self._release(solo=True, more=more)
            return trailer
        if self._n_blocks == 0 and self._chained:
            self._unstaged()
            self._record(self.header.pack(empty=True))
            return trailer
        if self._compact and self._n_blocks == 0:
            self._record(self.header.pack())
        self._release()
        self._record(trailer.pack(self._chain))
        return trailer


BLOCK_HEADER_BYTES = _BLOCK_HEADER.size + _CRC.size
TRAILER_BYTES = _TRAILER.size + _CRC.size


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
        solo = _solo_block(parsed)
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
    if prefix[0] in (_TAG_TRAILER, _TAG_MORE):
        return TRAILER_BYTES
    if prefix[0] != _TAG_BLOCK:
        return 1
    if len(prefix) < BLOCK_HEADER_BYTES:
        return None
    body = prefix[:_BLOCK_HEADER.size]
    _, _, method, _, orig_len, payload_len, _ = _BLOCK_HEADER.unpack(body)
    if ((check and zlib.crc32(body) != _CRC.unpack(prefix[_BLOCK_HEADER.size:BLOCK_HEADER_BYTES])[0])
            or method not in _METHOD_VALUES or payload_len > max_payload(method, orig_len)):
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
            (n,) = _SKIP_LEN.unpack(self._read(_SKIP_LEN.size, "reading a skippable frame"))
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
        self._solo, self._empty = _solo_block(parsed), parsed.empty
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
        body = tag + self._read(_BLOCK_HEADER.size - 1, what)
        (crc,) = _CRC.unpack(self._read(_CRC.size, what))
        if zlib.crc32(body, self._chain) != crc:
            raise CorruptArchive(f"block {i}: header checksum mismatch" + self._misplaced())
        if chained(self.header.format_version):
            self._chain = crc
        _, index, method, lanes, orig_len, payload_len, data_crc = _BLOCK_HEADER.unpack(body)
        if not i:
            self._first_crc = data_crc
        problem = _block_problem(
            i, self.header, index, method, lanes, orig_len, payload_len,
        )
        if problem:
            raise CorruptArchive(problem)
        return BlockHeader(index, Method(method), lanes, orig_len, payload_len, data_crc)

    def _read_trailer(self, tag: bytes, n_blocks: int, total_len: int) -> Trailer:
        what = "reading end-of-archive trailer"
        body = tag + self._read(_TRAILER.size - 1, what)
        (crc,) = _CRC.unpack(self._read(_CRC.size, what))
        if zlib.crc32(body, self._chain) != crc:
            raise CorruptArchive("end-of-archive trailer checksum mismatch" + self._misplaced())
        tag, declared_blocks, declared_len = _TRAILER.unpack(body)
        if tag == _TAG_MORE and not chained(self.header.format_version):
            raise CorruptArchive(f"unknown record tag 0x{tag:02x} (format {self.header.format_version} has no frames)")
        if declared_blocks != n_blocks:
            raise CorruptArchive(
                f"trailer declares {declared_blocks} blocks but the archive holds {n_blocks}"
            )
        if declared_len != total_len:
            raise CorruptArchive(
                f"trailer declares {declared_len} original bytes but the blocks hold {total_len}"
            )
        self.more = tag == _TAG_MORE
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
            if tag[0] in (_TAG_TRAILER, _TAG_MORE):
                break
            if tag[0] != _TAG_BLOCK:
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
        if tag[0] != _TAG_BLOCK:
            return None
        reader._read_block_header(tag, 0)  # its crc (chained in format 4) and bounds; its data_crc: the output id
    except ArchiveError:
        return None
    src.seek(end - TRAILER_BYTES)
    raw = read_upto(src, TRAILER_BYTES)
    body = raw[:_TRAILER.size]
    if len(raw) < TRAILER_BYTES or raw[0] not in (_TAG_TRAILER, _TAG_MORE):
        return None
    if not chained(reader.header.format_version) and (zlib.crc32(body) != _CRC.unpack(raw[_TRAILER.size:])[0]
                                                       or raw[0] == _TAG_MORE):
        return None  # (format 4's crc needs the chain of every record before it: the decoder checks it)
    reader.more = raw[0] == _TAG_MORE
    return Ends(_TRAILER.unpack(body)[2], reader.place(), reader.opened)


def verify_block(bh: BlockHeader, original: bytes) -> None:
    """Check decoded bytes against the block header: the end-to-end guarantee of decompression."""
    if len(original) != bh.orig_len or zlib.crc32(original) != bh.data_crc:
        raise ChecksumMismatch(f"block {bh.index}: checksum mismatch (data corrupted)")
