"""What a hostile trial found (frames spliced for a seek, forged trailers, hostile model folders,
a decompressor handed the seek table, names from an archive): each case rebuilt and refused, or
answered exactly."""

from __future__ import annotations

import io
import random
import struct
import zlib

import pytest

import shazip
from shazip.codec.frames import index
from shazip.format import crc, seektable


def test_crc_of_joined_pieces_from_their_crcs():
    rng = random.Random(3)
    for _ in range(200):
        a, b = rng.randbytes(rng.randrange(0, 2000)), rng.randbytes(rng.choice([0, 1, 3, 64, rng.randrange(0, 70000)]))
        assert crc.combine(zlib.crc32(a), zlib.crc32(b), len(b)) == zlib.crc32(a + b)


@pytest.fixture(scope="module")
def framed(text) -> tuple[bytes, bytes, bytes]:
    """The same 20,000 bytes as frames of 4 KB and of 8 KB (blocks of 1 KB: one output id)."""
    data = text[:20000]
    return (data, shazip.compress(data, 1, block_size=1024, frame_size=4096),
            shazip.compress(data, 1, block_size=1024, frame_size=8192))


def _read_at(blob: bytes, offset: int, n: int) -> bytes:
    with shazip.open(io.BytesIO(blob)) as f:
        f.seek(offset)
        return f.read(n)


def test_a_seek_into_a_frame_of_another_framing_is_refused(framed):
    """Frame 1 of the 8 KB framing between frames 0 and 2.. of the 4 KB one, no seek table: the
    ids and indexes agree, only the links (the crc of the frame before's data) tell. A seek
    returned the original's bytes 9096.. for 5000.. with no error."""
    data, a, b = framed
    fa, fb = index(io.BytesIO(a)), index(io.BytesIO(b))
    spliced = a[fa[0].start:fa[0].end] + b[fb[1].start:fb[1].end] + b"".join(a[f.start:f.end] for f in fa[2:])
    with pytest.raises(shazip.CorruptArchive, match="frame 1 does not follow frame 0"):
        _read_at(spliced, 5000, 3000)
    with pytest.raises(shazip.CorruptArchive, match="frame 1 does not follow frame 0"):
        shazip.decompress(spliced)
    assert _read_at(a, 5000, 3000) == data[5000:8000]  # the genuine file seeks as before


def test_a_forged_trailer_with_a_table_to_match_is_refused_by_a_seek(framed):
    """Frame 1's trailer says 2,048 bytes fewer and the seek table is rewritten to agree, with a
    valid crc: its chained crc, which a seek never checked, tells (the end was 17,952, and
    seek(10000) returned the original's bytes from 12,048)."""
    data, a, _ = framed
    frames = index(io.BytesIO(a))
    forged = bytearray(a[:frames[-1].end])
    at = frames[1].end - 17  # the trailer: tag u8, n_blocks u32, total_len u64, crc u32
    tag, n_blocks, total = struct.unpack("<BIQ", forged[at:at + 13])
    forged[at:at + 13] = struct.pack("<BIQ", tag, n_blocks, total - 2048)
    forged += seektable.pack([(f.end - f.start, f.decoded - 2048 * (i == 1)) for i, f in enumerate(frames)])
    for seek in ((0, 2), (10000, 0)):
        with pytest.raises(shazip.CorruptArchive, match="trailer checksum mismatch"):
            with shazip.open(io.BytesIO(bytes(forged))) as f:
                f.seek(*seek)
                f.read(100)
