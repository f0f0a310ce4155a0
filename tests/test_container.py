"""Tests for the .shz container: round trips, every error path, hostile lengths, short reads."""

import dataclasses
import io
import itertools
import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shazip.errors import (
    ChecksumMismatch,
    CorruptArchive,
    NotAnArchive,
    ShazipError,
    Truncated,
    UnsupportedVersion,
)
from shazip.format.container import STAGED, BlockHeader, Method, Trailer, verify_block
from shazip.format.reader import ArchiveReader, first_unit
from shazip.format.writer import ArchiveWriter
from shazip.format.header import FORMAT_VERSIONS, MAGIC, MAX_HEADER, MAX_BLOCK_SIZE, Header
from shazip.format.listing import describe

HEADER = Header(
    engine=0, engine_version=3, threads=4, model_id=bytes(range(32)),
    model_name="tiny-ü", block_size=64, lanes=2,
)
HEADER_LEN = len(HEADER.pack())
V3 = Header(engine=1, engine_version=1, threads=0, model_id=bytes(range(32)), model_name="", block_size=1 << 21,
            lanes=32, adapt_version=1, adapt_params=bytes(range(8)), format_version=3)  # format 3: a stage archive
V4 = dataclasses.replace(V3, format_version=4)  # format 4 (written today): format 3 with chained checksums
BLOCK_HEADER_LEN = 24
TRAILER_LEN = 17


def build(blocks: list[tuple[Method, int, bytes, bytes]], header: Header = HEADER) -> bytes:
    out = io.BytesIO()
    writer = ArchiveWriter(out, header)
    for method, lanes, original, payload in blocks:
        writer.add_block(method, lanes, original, payload)
    writer.finish()
    assert writer.bytes_written == len(out.getvalue())
    return out.getvalue()


def read_all(data: bytes) -> tuple[ArchiveReader, list[tuple[BlockHeader, bytes]]]:
    reader = ArchiveReader(io.BytesIO(data))
    return reader, list(reader.blocks())


def two_raw_blocks() -> bytes:
    return build([(Method.RAW, 1, b"hello", b"hello"), (Method.RAW, 2, b"world!", b"world!")])


def refresh_block_crc(data: bytearray, offset: int) -> None:
    """Recompute bh_crc of the block header at offset, so field checks (not the crc) run."""
    body = bytes(data[offset:offset + BLOCK_HEADER_LEN - 4])
    struct.pack_into("<I", data, offset + BLOCK_HEADER_LEN - 4, zlib.crc32(body))


def refresh_header_crc(data: bytearray) -> None:
    data[HEADER_LEN - 4:HEADER_LEN] = struct.pack("<I", zlib.crc32(bytes(data[:HEADER_LEN - 4])))


class ShortReads:
    """A non-seekable stream (like a pipe) whose read(n) returns at most 3 bytes; logs requests."""

    def __init__(self, data: bytes) -> None:
        self._buf = io.BytesIO(data)
        self.largest_request = 0

    def read(self, n: int) -> bytes:
        self.largest_request = max(self.largest_request, n)
        return self._buf.read(min(n, 3))


class WriteOnly:
    """A non-seekable sink: only write() exists, as on a pipe."""

    def __init__(self) -> None:
        self.chunks: list[bytes] = []

    def write(self, data: bytes) -> int:
        self.chunks.append(bytes(data))
        return len(data)


# ------------------------------------------------------------------ round trips


def test_round_trip():
    blocks = [
        (Method.MODEL, 2, b"abcdefghij", b"\x01\x02\x03\x04"),
        (Method.ZSTD, 1, b"z" * 64, b"zstd-frame"),
        (Method.RAW, 3, b"xyz", b"xyz"),
    ]
    reader, got = read_all(build(blocks))
    assert reader.header == HEADER
    assert reader.trailer == Trailer(n_blocks=3, total_len=10 + 64 + 3)
    for i, ((method, lanes, original, payload), (bh, got_payload)) in enumerate(zip(blocks, got)):
        crc = zlib.crc32(original)
        assert bh == BlockHeader(i, method, lanes, len(original), len(payload), crc)
        assert isinstance(bh.method, Method)
        assert got_payload == payload
        verify_block(bh, original)


def test_layout_offsets():
    data = build([(Method.RAW, 1, b"ab", b"ab")])
    name = HEADER.model_name.encode()
    assert data[:4] == MAGIC and data[4] == 1  # no adaptive stage: format 1, as 0.3 wrote
    assert data[5:8] == bytes([0, 3, 4])
    assert data[8:40] == HEADER.model_id and data[40] == len(name)
    assert HEADER_LEN == 51 + len(name)
    block = data[HEADER_LEN:]
    assert block[0] == 0xB1 and block[BLOCK_HEADER_LEN:BLOCK_HEADER_LEN + 2] == b"ab"
    trailer = data[-TRAILER_LEN:]
    assert trailer[0] == 0xE0 and struct.unpack("<IQ", trailer[1:13]) == (1, 2)


def test_empty_archive():
    data = build([])
    assert len(data) == HEADER_LEN + TRAILER_LEN
    reader, got = read_all(data)
    assert got == [] and reader.trailer == Trailer(0, 0)


def test_trailer_only_set_after_last_block():
    reader = ArchiveReader(io.BytesIO(two_raw_blocks()))
    it = reader.blocks()
    next(it)
    next(it)
    assert reader.trailer is None
    assert list(it) == []
    assert reader.trailer == Trailer(2, 11)
    with pytest.raises(RuntimeError):
        list(reader.blocks())


def test_short_reads_from_non_seekable_stream():
    data = two_raw_blocks()
    reader = ArchiveReader(ShortReads(data))
    assert [p for _, p in reader.blocks()] == [b"hello", b"world!"]
    assert reader.bytes_read == len(data)


def test_writer_to_non_seekable_sink():
    sink = WriteOnly()
    writer = ArchiveWriter(sink, HEADER)
    writer.add_block(Method.RAW, 1, b"pipe", b"pipe")
    writer.finish()
    assert b"".join(sink.chunks) == build([(Method.RAW, 1, b"pipe", b"pipe")])


def test_describe():
    data = build([(Method.MODEL, 2, b"abcdefgh", b"1234"), (Method.RAW, 1, b"q", b"q")])
    (info,) = describe(io.BytesIO(data))
    assert info["model_id"] == HEADER.model_id.hex()
    assert info["model_name"] == HEADER.model_name
    assert info["format_version"] == 1
    assert (info["engine"], info["engine_version"], info["threads"]) == (0, 3, 4)
    assert (info["block_size"], info["lanes"]) == (64, 2)
    assert info["blocks"] == [
        {"index": 0, "method": "model", "lanes": 2, "orig_len": 8, "payload_len": 4},
        {"index": 1, "method": "raw", "lanes": 1, "orig_len": 1, "payload_len": 1},
    ]
    assert (info["n_blocks"], info["total_len"], info["archive_bytes"]) == (2, 9, len(data))
    first, second = describe(io.BytesIO(data + data))
    assert first == dict(info, offset=0) and second == dict(info, offset=len(data))


@settings(max_examples=60, deadline=None)
@given(st.lists(
    st.tuples(st.sampled_from([m for m in Method if m not in STAGED]), st.binary(min_size=1, max_size=64), st.data()),
    max_size=6,
))
def test_property_round_trip(specs):
    blocks = []
    for method, original, data in specs:
        lanes = data.draw(st.integers(1, len(original)))
        if method is Method.RAW:
            payload = original
        elif method is Method.MODEL:
            words = data.draw(st.integers(0, len(original) // 4))
            payload = data.draw(st.binary(min_size=4 * words, max_size=4 * words))
        else:
            payload = data.draw(st.binary(max_size=len(original)))
        blocks.append((method, lanes, original, payload))
    reader, got = read_all(build(blocks))
    assert [(bh.method, bh.lanes, p) for bh, p in got] == [(m, n, p) for m, n, _, p in blocks]
    for (bh, _), (_, _, original, _) in zip(got, blocks):
        verify_block(bh, original)
    assert reader.trailer == Trailer(len(blocks), sum(len(b[2]) for b in blocks))


# ------------------------------------------------------------------ header errors


def test_bad_magic():
    data = bytearray(build([]))
    data[0] ^= 0xFF
    with pytest.raises(NotAnArchive, match="not a shazip archive"):
        ArchiveReader(io.BytesIO(bytes(data)))
    with pytest.raises(NotAnArchive):
        ArchiveReader(io.BytesIO(b"PK\x03"))  # short AND wrong: not an archive, not truncated


def test_unsupported_version_checked_before_crc():
    data = bytearray(build([]))
    data[4] = max(FORMAT_VERSIONS) + 1  # header crc is now also wrong; version must be reported first
    with pytest.raises(UnsupportedVersion, match=f"format version {max(FORMAT_VERSIONS) + 1} is not supported"):
        ArchiveReader(io.BytesIO(bytes(data)))


def test_header_crc():
    data = bytearray(build([]))
    data[10] ^= 0x01  # inside model_id
    with pytest.raises(CorruptArchive, match="header checksum"):
        ArchiveReader(io.BytesIO(bytes(data)))


@pytest.mark.parametrize("block_size", [0, MAX_BLOCK_SIZE + 1, 0xFFFFFFFF])
def test_header_block_size_out_of_range(block_size):
    data = bytearray(build([]))
    name_len = data[40]
    data[41 + name_len:45 + name_len] = struct.pack("<I", block_size)
    refresh_header_crc(data)
    with pytest.raises(CorruptArchive, match="block size"):
        ArchiveReader(io.BytesIO(bytes(data)))


def test_header_pack_rejects_programmer_errors():
    for bad in [
        dict(model_id=b"short"), dict(model_name="x" * 256), dict(block_size=0),
        dict(block_size=MAX_BLOCK_SIZE + 1), dict(lanes=0), dict(lanes=1 << 16), dict(threads=256),
    ]:
        with pytest.raises(ValueError):
            dataclasses.replace(HEADER, **bad).pack()


# ------------------------------------------------------------------ block and trailer errors


def test_block_header_crc():
    data = bytearray(two_raw_blocks())
    second = HEADER_LEN + BLOCK_HEADER_LEN + 5
    data[second + 9] ^= 0x10  # inside orig_len of block 1
    with pytest.raises(CorruptArchive, match="block 1: header checksum mismatch"):
        read_all(bytes(data))


def test_swapped_blocks():
    data = two_raw_blocks()
    first = slice(HEADER_LEN, HEADER_LEN + BLOCK_HEADER_LEN + 5)
    second = slice(first.stop, len(data) - TRAILER_LEN)
    swapped = data[:first.start] + data[second] + data[first] + data[-TRAILER_LEN:]
    with pytest.raises(CorruptArchive, match=r"block 0: out of order \(found index 1\)"):
        read_all(swapped)


def test_dropped_block():
    data = two_raw_blocks()
    start = HEADER_LEN
    without_first = data[:start] + data[start + BLOCK_HEADER_LEN + 5:]
    with pytest.raises(CorruptArchive, match=r"block 0: out of order \(found index 1\)"):
        read_all(without_first)


def test_dropped_last_block_caught_by_trailer():
    data = two_raw_blocks()
    second = HEADER_LEN + BLOCK_HEADER_LEN + 5
    with pytest.raises(CorruptArchive, match="trailer declares 2 blocks"):
        read_all(data[:second] + data[-TRAILER_LEN:])


def test_trailer_total_len_mismatch():
    data = bytearray(two_raw_blocks())
    body = bytes([0xE0]) + struct.pack("<IQ", 2, 999)
    data[-TRAILER_LEN:] = body + struct.pack("<I", zlib.crc32(body))
    with pytest.raises(CorruptArchive, match="999 original bytes"):
        read_all(bytes(data))


def test_trailer_crc():
    data = bytearray(two_raw_blocks())
    data[-5] ^= 0x01
    with pytest.raises(CorruptArchive, match="trailer checksum"):
        read_all(bytes(data))


def test_unknown_tag():
    data = bytearray(two_raw_blocks())
    data[HEADER_LEN] = 0x42
    with pytest.raises(CorruptArchive, match="unknown record tag 0x42"):
        read_all(bytes(data))


def test_trailing_garbage():
    with pytest.raises(CorruptArchive, match="trailing data after end of archive"):
        read_all(two_raw_blocks() + b"\x00")


@pytest.mark.parametrize("offset,value,message", [
    (5, 7, "unknown method 7"),
    (8, 0xFFFFFFFF, "original length 4294967295 is outside 1..64"),  # huge orig_len
    (8, 0, "original length 0"),
    (12, 0xFFFFFFFF, "payload length 4294967295 exceeds the limit"),  # huge payload_len
    (12, 4, "raw payload length 4 differs"),
    (6, 6, r"6 lanes for 5 bytes \(must be 1..5\)"),
    (6, 0, "0 lanes"),
])
def test_impossible_block_fields_rejected_before_reading(offset, value, message):
    data = bytearray(two_raw_blocks())
    fmt = {5: "<B", 6: "<H"}.get(offset, "<I")
    struct.pack_into(fmt, data, HEADER_LEN + offset, value)
    refresh_block_crc(data, HEADER_LEN)
    stream = ShortReads(bytes(data))
    reader = ArchiveReader(stream)
    with pytest.raises(CorruptArchive, match=message):
        list(reader.blocks())
    assert stream.largest_request <= 64  # nothing near the declared length was ever requested
    assert reader.bytes_read == HEADER_LEN + BLOCK_HEADER_LEN  # payload untouched


def test_model_payload_must_be_whole_words():
    data = bytearray(build([(Method.MODEL, 1, b"abcdefgh", b"1234")]))
    struct.pack_into("<B", data, HEADER_LEN + 5, Method.MODEL)
    struct.pack_into("<I", data, HEADER_LEN + 12, 3)
    refresh_block_crc(data, HEADER_LEN)
    with pytest.raises(CorruptArchive, match="not a multiple of 4"):
        read_all(bytes(data))


def damaged_fixtures() -> dict[str, bytes]:
    """Small archives of each layout, for the exhaustive damage tests."""
    return {
        "format 1": build([(Method.MODEL, 2, b"abcdefgh", b"1234"), (Method.RAW, 1, b"xyz", b"xyz")]),
        "format 3, one block": build([(Method.RAW, 2, b"hello", b"hello")], V3),
        "format 3, two blocks": build([(Method.RAW, 1, b"hi", b"hi")] * 2, V3),
        "format 4, one block": build([(Method.RAW, 2, b"hello", b"hello")], V4),
        "format 4, two blocks": build([(Method.RAW, 1, b"hi", b"hi")] * 2, V4),
    }


@pytest.mark.parametrize("layout", ["format 1", "format 3, one block", "format 3, two blocks"])
def test_truncation_at_every_offset(layout):
    data = damaged_fixtures()[layout]
    for cut in range(len(data)):
        with pytest.raises(Truncated, match=r"^archive is truncated \(.+\)$"):
            read_all(data[:cut])


@pytest.mark.parametrize("layout", ["format 1", "format 3, one block", "format 3, two blocks"])
def test_every_single_bit_flip_is_detected(layout):
    """Raw payloads are covered by verify_block, everything else by the container itself."""
    data = damaged_fixtures()[layout] if layout != "format 1" else two_raw_blocks()
    for bit in range(len(data) * 8):
        flipped = bytearray(data)
        flipped[bit // 8] ^= 1 << (bit % 8)
        with pytest.raises(ShazipError):
            _, got = read_all(bytes(flipped))
            for bh, payload in got:
                verify_block(bh, payload)  # raw: the payload is the original


# ------------------------------------------------------------------ verify_block and writer checks


def test_verify_block_names_the_block():
    _, got = read_all(two_raw_blocks())
    bh, payload = got[1]
    verify_block(bh, payload)
    with pytest.raises(ChecksumMismatch, match=r"^block 1: checksum mismatch \(data corrupted\)$"):
        verify_block(bh, bytes([payload[0] ^ 0x04]) + payload[1:])
    with pytest.raises(ChecksumMismatch, match="block 1"):
        verify_block(bh, payload[:-1])


def test_writer_rejects_what_the_reader_would():
    writer = ArchiveWriter(io.BytesIO(), HEADER)
    for args in [
        (Method.RAW, 1, b"", b""),  # empty block
        (Method.RAW, 1, b"x" * 65, b"x" * 65),  # larger than block_size
        (Method.RAW, 1, b"abc", b"abd"),  # raw payload differs
        (Method.ZSTD, 1, b"abc", b"a" * 200),  # payload beyond zstd's worst case
        (Method.MODEL, 1, b"abcdef", b"12345"),  # not whole words
        (Method.ZSTD, 4, b"abc", b"a"),  # more lanes than bytes
        (9, 1, b"abc", b"a"),  # unknown method
    ]:
        with pytest.raises(ValueError):
            writer.add_block(*args)
    writer.add_block(Method.ZSTD, 1, b"abc", b"a")
    writer.finish()
    with pytest.raises(ValueError):
        writer.add_block(Method.RAW, 1, b"a", b"a")
    with pytest.raises(ValueError):
        writer.finish()


def test_writer_rejects_lanes_beyond_u16():
    writer = ArchiveWriter(io.BytesIO(), dataclasses.replace(HEADER, block_size=1 << 17))
    with pytest.raises(ValueError, match="must be 1..65535"):
        writer.add_block(Method.ZSTD, 1 << 16, b"x" * 70000, b"a")


def test_format_2_header_carries_the_adaptive_stage():
    """Format 2 (shazip 0.4, still read): the stage's version and parameters before the crc;
    MIXED blocks are allowed only with a stage."""
    h = dataclasses.replace(HEADER, adapt_version=1, adapt_params=b"\x16\x18\x01", format_version=2)
    out = io.BytesIO()
    w = ArchiveWriter(out, h)
    w.add_block(Method.MIXED, 1, b"abc", b"\x01\x02")
    w.finish()
    data = out.getvalue()
    at = HEADER_LEN - 4  # the format 1 header, less its crc
    assert data[4] == 2 and data[at:at + 5] == b"\x01\x03\x16\x18\x01"
    r = ArchiveReader(io.BytesIO(data))
    assert r.header == h and [bh.method for bh, _ in r.blocks()] == [Method.MIXED]
    with pytest.raises(ValueError, match="unknown method 3"):
        ArchiveWriter(io.BytesIO(), HEADER).add_block(Method.MIXED, 1, b"abc", b"\x01")
    bad = bytearray(data)
    bad[at] = 0  # a format 2 header without a stage (crc resealed)
    end = at + 5
    bad[end:end + 4] = struct.pack("<I", zlib.crc32(bytes(bad[:end])))
    with pytest.raises(CorruptArchive, match="without an adaptive stage"):
        ArchiveReader(io.BytesIO(bytes(bad)))


# ------------------------------------------------------------------ format 3


def test_format_3_single_block_is_framed_in_the_header():
    """What a small file pays: the whole archive less its payload is 38 bytes for a 4 KB
    input (108 in format 2), and 40 for a full default block of 2 MiB."""
    original, payload = b"t" * 4096, b"p" * 1200
    for h in (V3, V4):
        data = build([(Method.MIXED, 16, original, payload)], h)
        assert data[4] == h.format_version and data.endswith(payload)
        assert len(data) - len(payload) == 38
        reader, got = read_all(data)
        assert reader.header == dataclasses.replace(h, model_id=h.model_id[:8], block_size=4096, lanes=16)
        assert got == [(BlockHeader(0, Method.MIXED, 16, 4096, 1200, zlib.crc32(original)), payload)]
        assert reader.trailer == Trailer(1, 4096)
        big = build([(Method.MIXED, 32, b"t" * (1 << 21), b"p" * 300_000)], h)
        assert len(big) - 300_000 == 40  # varints grow with the lengths


def test_format_3_several_blocks_and_none():
    blocks = [(Method.MIXED, 2, b"abcdefgh", b"12"), (Method.RAW, 1, b"xyz", b"xyz"), (Method.ZSTD, 1, b"q" * 9, b"z")]
    for n, h in itertools.product(range(4), (V3, V4)):
        reader, got = read_all(build(blocks[:n], h))
        assert [(bh.method, bh.lanes, p) for bh, p in got] == [(m, k, p) for m, k, _, p in blocks[:n]]
        assert reader.trailer == Trailer(n, sum(len(b[2]) for b in blocks[:n]))
        assert reader.header.block_size == (h.block_size if n > 1 or (n == 0 and h is V3) else 8 if n else 1)
        assert reader.header.adapt_version == (0 if h is V4 and n == 0 else 1)  # nothing coded: no stage


def test_format_4_chains_its_records_to_the_archive_and_its_content():
    """A block (header and payload) from another archive made the same way, or moved within one,
    is refused at its own header or at the next record, before any payload is decoded; in
    format 3 such a splice of stored blocks decoded cleanly to the other file's bytes."""
    a = [(Method.RAW, 1, bytes([65 + i]) * 8, bytes([65 + i]) * 8) for i in range(4)]
    b = a[:2] + [(Method.RAW, 1, b"Z" * 8, b"Z" * 8)] + a[3:]  # the same but block 2
    c = [(Method.RAW, 1, b"z" + x[2][1:], b"z" + x[2][1:]) for x in a]  # every block other
    for h in (V3, V4):
        arcs = [build(x, h) for x in (a, b, c)]
        first = len(arcs[0]) - 4 * (BLOCK_HEADER_LEN + 8) - TRAILER_LEN  # where block 0 starts
        rec = BLOCK_HEADER_LEN + 8

        def block(arc: bytes, i: int) -> bytes:
            return arc[first + i * rec:first + (i + 1) * rec]

        def spliced(arc: bytes, i: int, new: bytes) -> bytes:
            return arc[:first + i * rec] + new + arc[first + (i + 1) * rec:]

        cases = [spliced(arcs[0], 2, block(arcs[1], 2)),  # the same content before it: caught at the next record
                 spliced(arcs[0], 3, block(arcs[1], 3)),  # equal blocks, other content before: caught at once
                 spliced(arcs[0], 1, block(arcs[2], 1)),
                 spliced(spliced(arcs[0], 2, block(arcs[0], 3)), 3, block(arcs[0], 2))]  # two swapped
        for bad in cases[:3] if h is V3 else cases:
            if h is V3:  # format 3 cannot tell: the splice reads as a sound archive
                read_all(bad)
                continue
            with pytest.raises(CorruptArchive, match="checksum mismatch"):
                read_all(bad)
        assert read_all(arcs[0])[1][3][1] == b"D" * 8


def test_format_3_records_a_name_only_when_given():
    named = dataclasses.replace(V3, model_name="mine-ü")
    reader, _ = read_all(build([(Method.RAW, 1, b"ab", b"ab")], named))
    assert reader.header.model_name == "mine-ü"
    assert len(build([(Method.RAW, 1, b"ab", b"ab")], named)) == len(build([(Method.RAW, 1, b"ab", b"ab")], V3)) + 8


def test_format_3_pack_rejects_what_it_cannot_hold():
    for bad in [dict(engine=16), dict(engine_version=16), dict(threads=2), dict(model_id=b"short")]:
        with pytest.raises(ValueError):
            dataclasses.replace(V3, **bad).pack()


def test_format_3_refuses_overlong_varints_and_unknown_flags():
    """(Truncation and bit flips of format 3 are in the exhaustive tests above.)"""
    head = build([(Method.RAW, 1, b"hi", b"hi")] * 2, V3)[:-4 - 2 * (BLOCK_HEADER_LEN + 2) - TRAILER_LEN]
    for body, message in [(head[:-2] + b"\x80\x80\x80\x80\x80\x01", "too long"),
                          (head[:-1] + b"\xa0\x00", "shortest form"),
                          (head[:5] + b"\x40" + head[6:], "unknown flags"),
                          (head[:5] + b"\x04" + head[6:], "unknown flags")]:  # a method without SOLO
        bad = body + struct.pack("<I", zlib.crc32(body))
        with pytest.raises(CorruptArchive, match=message):
            ArchiveReader(io.BytesIO(bad + b"\xe0"))


def test_first_unit_tells_a_push_decoder_how_much_to_wait_for():
    """The unit is the header with the first record (a solo archive whole, ending it); a
    shorter prefix asks for more, or already tells the unit's length once it holds its header."""
    one = [(Method.RAW, 2, b"hello", b"hello")]
    two = one + [(Method.RAW, 1, b"xyz", b"xyz")]
    cases = [(build(one, V3), len(build(one, V3)), True), (build(two, V3), len(build(two, V3)) - 3 - 24 - 17, False),
             (build(two), HEADER_LEN + BLOCK_HEADER_LEN + 5, False)]
    for data, unit, ends in cases:
        assert first_unit(data[:MAX_HEADER + BLOCK_HEADER_LEN]) == (unit, ends)
        for cut in range(unit):
            assert first_unit(data[:cut]) in (None, (unit, ends)), cut
    assert first_unit(b"PK\x03\x04") == (4, True)  # not an archive: its first bytes are enough to refuse it
