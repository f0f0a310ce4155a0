"""An archive's header, in its two layouts: what an archive says about itself before its first
record (docs/format.md, "Header").

    header 1/2 = "SHZ\\x89" | format_version u8 | engine u8 | engine_version u8 | threads u8 |
              model_id 32B | name_len u8 | model_name | block_size u32 | lanes u16 |
              [format 2: adapt_version u8 | params_len u8 | adapt_params] | header_crc u32
    header 3-5 = "SHZ\\x89" | 3, 4 or 5 | flags u8 (SOLO 1, NAME 2, solo method << 2; formats 4, 5: EMPTY 16,
              MORE 32, FRAME 64; format 5: the solo method's bit 2 << 7) | engine u8 (id << 4 | version) | model_id 8B |
              [NAME: name_len u8 | model_name] | adapt_version u8 | params_len u8 | adapt_params |
              [FRAME: index v | output_id u32 | link u32] |
              [SOLO: lanes v | orig_len - 1 v | payload_len v | data_crc u32
               EMPTY: nothing; else: block_size v | lanes v] | header_crc u32   (v: LEB128 varint)

Format 1 (shazip 0.3) has no adaptive stage; format 2 added its version and parameters to the
wide layout; format 3 is format 2 made compact: the model named by the first 8 bytes of its
sha256 (every block's crc still proves the decode), its name only when it is not a bundled one,
and an input of one block framed in the header itself (38 bytes in all for a 4 KB file, 40 at
most, against 108 in format 2); format 4 is format 3 with its checksums chained (`chained`) and
frames; format 5 (written today for every archive of the int8 engine) is format 4 with one more
block method, `stage` (container.Method). Archives of the float32 engine are still written as
format 1, byte for byte as 0.3 did. The records that follow a header are container.py's; the
reading and writing of whole archives reader.py's and writer.py's.
"""

import struct
import zlib
from dataclasses import dataclass
from typing import Callable

from shazip.errors import CorruptArchive

MAGIC: bytes = b"SHZ\x89"
FORMAT_VERSIONS = (1, 2, 3, 4, 5)
COMPACT = (3, 4, 5)  # the formats with format 3's layout
MAX_BLOCK_SIZE = 1 << 28  # largest block_size accepted in a header

_MODEL_ID_LEN = 32
_U16_MAX = 0xFFFF
_U32_MAX = 0xFFFFFFFF
# magic, format_version, engine, engine_version, threads, model_id, name_len
_HEADER_HEAD = struct.Struct("<4sBBBB32sB")
_HEADER_TAIL = struct.Struct("<IH")  # block_size, lanes
_SHORT_ID_LEN = 8  # format 3: the model id's first bytes
_SOLO, _NAME, _METHOD_BITS = 1, 2, 12  # format 3 flags: bits 2-3 hold a solo block's method
_METHOD_HIGH = 128  # format 5: the solo method's bit 2 (method `stage`, 4)
_EMPTY = 16  # formats 4, 5: the archive holds nothing (no block fields, no blocks, no trailer)
# Format 4 frames (docs/format.md, "Frames"): MORE, on a one-block archive, says more frames of its
# output follow (an archive of several blocks says it with its trailer's tag); FRAME marks a
# frame after an output's first, whose header holds its index, the output's id and the link to
# the frame before it.
_MORE, _FRAME = 32, 64
_FRAME_IDS = struct.Struct("<II")  # output_id, link
_VARINT_MAX = 5  # bytes of the longest varint a field may take (payload_len < 2**35)
_CRC = struct.Struct("<I")
MAX_HEADER = _HEADER_HEAD.size + 255 + _HEADER_TAIL.size + 2 + 255 + _CRC.size  # formats 3's are shorter


def with_crc(body: bytes, seed: int = 0) -> bytes:
    """A record's bytes: its body, then the body's crc (started from `seed`)."""
    return body + _CRC.pack(zlib.crc32(body, seed))


def chained(format_version: int) -> bool:
    """Formats 4 and 5 chain their checksums: each block header's crc and the trailer's start from the
    crc of the record before them (the header's for the first), so a record belongs to one
    archive at one place. Each block header holds its data's crc, so the chain covers the
    content before it too: a block spliced in from another archive, or moved, fails at its own
    header or at the next record, before its payload is decoded. (Formats 1-3 start every crc
    from 0.)"""
    return format_version >= 4


def headed(format_version: int) -> bool:
    """Whether a model-coded payload of this format starts with its head check: the crc of the
    block's first bytes in coding order (format 5 on, docs/format.md)."""
    return format_version >= 5


def _check_range(name: str, value: int, lo: int, hi: int) -> None:
    if not lo <= value <= hi:
        raise ValueError(f"{name} must be in {lo}..{hi}, got {value}")


@dataclass(frozen=True)
class Solo:
    """The fields of a format 3-5 archive's only block, which its header holds (the block's
    index is 0; container.BlockHeader is the block's whole record)."""

    method: int
    lanes: int
    orig_len: int
    payload_len: int
    data_crc: int


@dataclass(frozen=True)
class Header:
    """Archive-wide parameters the decoder needs before the first block.

    engine/engine_version/threads are opaque here: the codec decides whether it can decode them.
    """

    engine: int
    engine_version: int
    threads: int
    model_id: bytes  # sha256 of the model file, 32 bytes
    model_name: str  # <= 255 utf-8 bytes
    block_size: int  # 1..MAX_BLOCK_SIZE
    lanes: int  # 1..65535
    adapt_version: int = 0  # 0: no adaptive stage (format 1, or 4 with the int8 engine)
    adapt_params: bytes = b""  # the stage's parameters, <= 255 bytes, opaque here
    format_version: int = 0  # 0: the format written today for these fields (5; 1 for the float32 engine)
    # format 4, the frames after the first of an output (docs/format.md, "Frames"): the frame's
    # index (0: an output's first frame, or its only one), the output's id (the crc of its first
    # block's data) and the crc of the previous frame's data
    frame_index: int = 0
    output_id: int = 0
    link: int = 0

    def __post_init__(self) -> None:
        if not self.format_version:  # formats 3-5 have no room for a thread count, which float32 needs
            object.__setattr__(self, "format_version", 5 if self.adapt_version or not self.threads else 1)

    def pack(self, solo: "Solo | None" = None, empty: bool = False, more: bool = False) -> bytes:
        """Serialize (formats 3, 4: with the fields of the archive's only block, if `solo`;
        format 4: as the whole of an archive of nothing, if `empty`; format 4, `solo`: `more`,
        frames of this output follow); a field that cannot be represented is a programmer error
        (ValueError)."""
        if empty and (not chained(self.format_version) or solo is not None or more):
            raise ValueError("only formats 4 and 5 write an empty archive as its header alone, and only as a whole "
                             "output")
        if (self.frame_index or more) and not chained(self.format_version):
            raise ValueError(f"format {self.format_version} has no frame fields")
        if more and solo is None:
            raise ValueError("the trailer, not the header, says more frames follow an archive of several blocks")
        if self.format_version in COMPACT:
            return self._pack_compact(solo, empty, more)
        if solo is not None:
            raise ValueError(f"format {self.format_version} has no single-block layout")
        _check_range("engine", self.engine, 0, 255)
        _check_range("engine_version", self.engine_version, 0, 255)
        _check_range("threads", self.threads, 0, 255)
        if not isinstance(self.model_id, bytes) or len(self.model_id) != _MODEL_ID_LEN:
            raise ValueError(f"model_id must be {_MODEL_ID_LEN} bytes")
        name = self.model_name.encode("utf-8")
        _check_range("model_name length in utf-8 bytes", len(name), 0, 255)
        _check_range("block_size", self.block_size, 1, MAX_BLOCK_SIZE)
        _check_range("lanes", self.lanes, 1, _U16_MAX)
        _check_range("adapt_version", self.adapt_version, 0, 255)
        _check_range("adapt_params length", len(self.adapt_params), 0, 255)
        if not self.adapt_version and self.adapt_params:
            raise ValueError("adapt_params without an adaptive stage")
        if (self.format_version == 2) != bool(self.adapt_version):
            raise ValueError(f"format {self.format_version} with adapt_version {self.adapt_version}")
        head = _HEADER_HEAD.pack(
            MAGIC, self.format_version, self.engine, self.engine_version, self.threads,
            self.model_id, len(name),
        )
        tail = _HEADER_TAIL.pack(self.block_size, self.lanes)
        if self.adapt_version:
            tail += bytes([self.adapt_version, len(self.adapt_params)]) + self.adapt_params
        return with_crc(head + name + tail)

    def _pack_compact(self, solo: "Solo | None", empty: bool, more: bool) -> bytes:
        _check_range("engine", self.engine, 0, 15)
        _check_range("engine_version", self.engine_version, 0, 15)
        _check_range("threads", self.threads, 0, 0)
        _check_range("adapt_version", self.adapt_version, 0 if chained(self.format_version) else 1, 255)
        if solo is not None:
            _check_range("solo method", solo.method, 0, 4 if self.format_version >= 5 else 3)
        if not self.adapt_version and self.adapt_params:
            raise ValueError("adapt_params without an adaptive stage")
        _check_range("adapt_params length", len(self.adapt_params), 0, 255)
        _check_range("block_size", self.block_size, 1, MAX_BLOCK_SIZE)
        _check_range("lanes", self.lanes, 1, _U16_MAX)
        if not isinstance(self.model_id, bytes) or len(self.model_id) not in (_SHORT_ID_LEN, _MODEL_ID_LEN):
            raise ValueError(f"model_id must be {_MODEL_ID_LEN} (or its first {_SHORT_ID_LEN}) bytes")
        name = self.model_name.encode("utf-8")
        _check_range("model_name length in utf-8 bytes", len(name), 0, 255)
        _check_range("frame_index", self.frame_index, 0, _U32_MAX)
        _check_range("output_id", self.output_id, 0, _U32_MAX)
        _check_range("link", self.link, 0, _U32_MAX)
        if empty and self.frame_index:
            raise ValueError("an empty archive is a whole output, never a later frame")
        solo_bits = _SOLO | (solo.method & 3) << 2 | (solo.method & 4) << 5 if solo is not None else 0
        flags = (solo_bits | (_NAME if name else 0) | (_EMPTY if empty else 0)
                 | (_MORE if more else 0) | (_FRAME if self.frame_index else 0))
        out = MAGIC + bytes([self.format_version, flags, self.engine << 4 | self.engine_version])
        out += self.model_id[:_SHORT_ID_LEN]
        if name:
            out += bytes([len(name)]) + name
        out += bytes([self.adapt_version, len(self.adapt_params)]) + self.adapt_params
        if self.frame_index:
            out += _varint(self.frame_index) + _FRAME_IDS.pack(self.output_id, self.link)
        if empty:
            pass
        elif solo is None:
            out += _varint(self.block_size) + _varint(self.lanes)
        else:  # orig_len >= 1: less one, a full default block (2 MiB) still takes 3 bytes
            out += _varint(solo.lanes) + _varint(solo.orig_len - 1) + _varint(solo.payload_len)
            out += _CRC.pack(solo.data_crc)
        return with_crc(out)


def _varint(n: int) -> bytes:
    """LEB128: 7 bits a byte, least significant first, the high bit set on all but the last."""
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


class NeedMore(Exception):
    """The bytes at hand end inside the header (`take_from`: wait for more)."""


def take_from(buf: bytes, pos: list[int]) -> Callable[[int], bytes]:
    """`take(n)` for `parse` over the bytes at hand: n bytes of buf from pos[0] on (advancing
    it), or NeedMore."""
    def take(n: int) -> bytes:
        if pos[0] + n > len(buf):
            raise NeedMore
        pos[0] += n
        return buf[pos[0] - n:pos[0]]
    return take


@dataclass(frozen=True)
class Parsed:
    """A header as read: the header, its only block's fields (formats 3, 4: `Solo`), its length
    and crc, whether it is the whole of an empty archive (format 4), and whether (a solo format 4
    archive) more frames of its output follow."""

    header: Header
    solo: Solo | None
    length: int
    crc: int
    empty: bool = False
    more: bool = False


def parse(take: Callable[[int], bytes], version: int) -> Parsed:
    """The header of a format `version` archive after its magic and version byte, pulled
    through `take(n)` (which returns exactly n bytes or raises). The crc is checked before any
    field is trusted."""
    return _parse_compact(take, version) if version in COMPACT else _parse_wide(take, version)


def _parse_wide(take: Callable[[int], bytes], version: int) -> Parsed:
    """Formats 1 and 2."""
    head = MAGIC + bytes([version]) + take(_HEADER_HEAD.size - len(MAGIC) - 1)
    _, _, engine, engine_version, threads, model_id, name_len = _HEADER_HEAD.unpack(head)
    name = take(name_len)
    tail = take(_HEADER_TAIL.size)
    adapt_version, adapt_params = 0, b""
    if version == 2:
        adapt = take(2)
        adapt_version, adapt_params = adapt[0], take(adapt[1])
        tail += adapt + adapt_params
    (crc,) = _CRC.unpack(take(_CRC.size))
    if zlib.crc32(head + name + tail) != crc:
        raise CorruptArchive("header checksum mismatch")
    block_size, lanes = _HEADER_TAIL.unpack(tail[:_HEADER_TAIL.size])
    if version == 2 and adapt_version == 0:
        raise CorruptArchive("format 2 header without an adaptive stage")
    if not 1 <= block_size <= MAX_BLOCK_SIZE:
        raise CorruptArchive(f"header block size {block_size} is outside 1..{MAX_BLOCK_SIZE}")
    if lanes < 1:
        raise CorruptArchive("header declares 0 lanes")
    try:
        model_name = name.decode("utf-8")
    except UnicodeDecodeError:
        raise CorruptArchive("header model name is not valid utf-8") from None
    header = Header(engine, engine_version, threads, model_id, model_name, block_size, lanes,
                    adapt_version, adapt_params, version)
    return Parsed(header, None, len(head) + len(name) + len(tail) + _CRC.size, crc)


def _parse_compact(take: Callable[[int], bytes], version: int) -> Parsed:
    """Formats 3 to 5."""
    raw = bytearray(MAGIC + bytes([version]))

    def get(n: int) -> bytes:
        b = take(n)
        raw.extend(b)
        return b

    def varint() -> int:
        n = 0
        for i in range(_VARINT_MAX):
            byte = get(1)[0]
            n |= (byte & 0x7F) << 7 * i
            if not byte & 0x80:
                if byte == 0 and i:
                    raise CorruptArchive("header has a varint that is not in its shortest form")
                return n
        raise CorruptArchive("header has a varint that is too long")

    flags, engine = get(2)
    model_id = get(_SHORT_ID_LEN)
    name = get(get(1)[0]) if flags & _NAME else b""
    adapt_version, params_len = get(2)
    params = get(params_len)
    framed = chained(version) and flags & _FRAME
    frame_index = varint() if framed else 0
    output_id, link = _FRAME_IDS.unpack(get(_FRAME_IDS.size)) if framed else (0, 0)
    empty = chained(version) and flags & ~_NAME == _EMPTY
    high = _METHOD_HIGH if version >= 5 else 0
    if flags & _SOLO:
        method = flags >> 2 & 3 | (flags & high) >> 5
        lanes, orig_len, payload_len = varint(), varint() + 1, varint()
        (data_crc,) = _CRC.unpack(get(_CRC.size))
        block_size = orig_len
    elif empty:
        block_size, lanes = 1, 1  # nothing is coded: no block fields
    else:
        block_size, lanes = varint(), varint()
    (crc,) = _CRC.unpack(take(_CRC.size))
    if zlib.crc32(raw) != crc:
        raise CorruptArchive("header checksum mismatch")
    known = _SOLO | _NAME | (_METHOD_BITS | high | (_MORE if chained(version) else 0) if flags & _SOLO else 0)
    if flags & ~(known | (_EMPTY if empty else 0) | (_FRAME if framed else 0)):
        raise CorruptArchive(f"header has unknown flags 0x{flags:02x}")
    if framed and not frame_index:
        raise CorruptArchive("header marks a later frame but gives index 0")
    if not adapt_version and (version == 3 or params):
        raise CorruptArchive(f"format {version} header without an adaptive stage" + (" but with its parameters"
                                                                                     if params else ""))
    try:
        model_name = name.decode("utf-8")
    except UnicodeDecodeError:
        raise CorruptArchive("header model name is not valid utf-8") from None
    if not 1 <= block_size <= MAX_BLOCK_SIZE:
        raise CorruptArchive(f"header block size {block_size} is outside 1..{MAX_BLOCK_SIZE}")
    if not 1 <= lanes <= _U16_MAX:
        raise CorruptArchive(f"header declares {lanes} lanes (must be 1..{_U16_MAX})")
    header = Header(engine >> 4, engine & 15, 0, bytes(model_id), model_name, block_size, lanes, adapt_version,
                    bytes(params), version, frame_index, output_id, link)
    solo = Solo(method, lanes, orig_len, payload_len, data_crc) if flags & _SOLO else None
    return Parsed(header, solo, len(raw) + _CRC.size, crc, bool(empty), bool(flags & _MORE))
