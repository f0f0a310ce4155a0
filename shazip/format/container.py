"""The `.shz` archive container: an archive's records and the bounds every one meets; byte layout
only, no compression. The header (its two layouts) is header.py's; writing an archive is
writer.py's, reading one reader.py's.

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
from dataclasses import dataclass

from shazip.errors import ChecksumMismatch, CorruptArchive

from .header import Header, Parsed, chained, with_crc

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

TAG_BLOCK = 0xB1
TAG_TRAILER = 0xE0
TAG_MORE = 0xE1  # format 4: the trailer of a frame that more frames of its output follow
# The seek table's tag (its skippable frame's last bytes, frames.py); a skippable frame of at most
# MAX_TABLE bytes (a table of 4 Mi frames) that ends with it is kept by readers, to be checked.
TABLE_TAG = b"SHZ\x8b"
MAX_TABLE = 1 << 26
_U16_MAX = 0xFFFF
_U32_MAX = 0xFFFFFFFF

# tag, index, method, lanes, orig_len, payload_len, data_crc (bh_crc follows)
BLOCK_RECORD = struct.Struct("<BIBHIII")
TRAILER_RECORD = struct.Struct("<BIQ")  # tag, n_blocks, total_len (tr_crc follows)
CRC = struct.Struct("<I")
SKIP_LEN = struct.Struct("<I")


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
METHOD_VALUES = frozenset(m.value for m in Method)



def skippable(content: bytes) -> bytes:
    """A skippable frame holding `content`, which readers of archives pass over."""
    if len(content) > _U32_MAX:
        raise ValueError("a skippable frame holds at most 4 GiB")
    return SKIP_MAGIC + SKIP_LEN.pack(len(content)) + content


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
        return with_crc(BLOCK_RECORD.pack(
            TAG_BLOCK, self.index, self.method, self.lanes,
            self.orig_len, self.payload_len, self.data_crc,
        ), seed)


def solo_block(parsed: Parsed) -> BlockHeader | None:
    """The only block that a header holds, checked as every block header is (CorruptArchive)."""
    s = parsed.solo
    if s is None:
        return None
    problem = block_problem(0, parsed.header, 0, s.method, s.lanes, s.orig_len, s.payload_len)
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
        return with_crc(TRAILER_RECORD.pack(TAG_MORE if self.more else TAG_TRAILER, self.n_blocks, self.total_len), seed)


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


def block_problem(
    expected_index: int, header: Header,
    index: int, method: int, lanes: int, orig_len: int, payload_len: int,
) -> str | None:
    """What is impossible about a block header, or None.

    Shared by writer and reader so the writer can never emit an archive the reader rejects.
    """
    i, block_size = expected_index, header.block_size
    if index != expected_index:
        return f"block {i}: out of order (found index {index})"
    if (method not in METHOD_VALUES or (method in STAGED and not header.adapt_version)
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


BLOCK_HEADER_BYTES = BLOCK_RECORD.size + CRC.size
TRAILER_BYTES = TRAILER_RECORD.size + CRC.size


def verify_block(bh: BlockHeader, original: bytes) -> None:
    """Check decoded bytes against the block header: the end-to-end guarantee of decompression."""
    if len(original) != bh.orig_len or zlib.crc32(original) != bh.data_crc:
        raise ChecksumMismatch(f"block {bh.index}: checksum mismatch (data corrupted)")
