"""The seek table: where each frame of a framed output lies, read from the end of the file.

A framed output (frames.py) is a stream of archives, and finding them otherwise means reading
every header, block header and trailer from the first byte to the last. After the last of two
or more frames, every shazip writer (sequential, frames at once, Dask) appends this table: each
frame's archive size and decoded size, found from the file's last bytes, as in zstd's seekable
format. A reader that seeks (`shazip.open`) or splits the work (`-T N`, Dask) reads it instead
of the whole structure. It travels in a skippable frame, which every stream reader passes over:
readers that know nothing of it lose nothing, and a table is only ever an index - each frame it
points to is checked at its two ends (`container.recorded_size`) before it is trusted, and each
block is verified as it is decoded.

    skippable frame = "SHZ\\x8a" | length u32 | content                 (container.skippable)
    content         = entry* | n_frames u32 | crc u32 | "SHZ\\x8b"      (crc over entries and n_frames)
    entry           = archive_bytes u64 | decoded_bytes u64
"""

from __future__ import annotations

import io
import struct
import zlib
from typing import BinaryIO, Sequence

from .container import SKIP_MAGIC, TABLE_TAG as TAG, read_upto, skippable

_ENTRY = struct.Struct("<QQ")  # archive_bytes, decoded_bytes
_FOOTER = struct.Struct("<II4s")  # n_frames, crc, TAG
_HEAD = len(SKIP_MAGIC) + 4  # the skippable frame's magic and length


def pack(frames: Sequence[tuple[int, int]]) -> bytes:
    """The seek table (as a skippable frame) of frames given as (archive bytes, decoded bytes);
    nothing for fewer than two: one archive needs no index (and a small file keeps its size)."""
    if len(frames) < 2:
        return b""
    body = b"".join(_ENTRY.pack(a, d) for a, d in frames) + struct.pack("<I", len(frames))
    return skippable(body + struct.pack("<I", zlib.crc32(body)) + TAG)


def parse(content: bytes) -> list[tuple[int, int]] | None:
    """The (archive bytes, decoded bytes) of each frame from a seek table's skippable frame
    `content`; None where it is not an intact table."""
    if len(content) < _FOOTER.size:
        return None
    n, crc, tag = _FOOTER.unpack_from(content, len(content) - _FOOTER.size)
    body = content[:-8]  # the entries and n_frames (crc and tag follow)
    if tag != TAG or len(content) != n * _ENTRY.size + _FOOTER.size or zlib.crc32(body) != crc:
        return None
    return [_ENTRY.unpack_from(body, i * _ENTRY.size) for i in range(n)]


def read(src: BinaryIO, start: int) -> list[tuple[int, int]] | None:
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
    frames = parse(raw[_HEAD:])
    if (frames is None or raw[:len(SKIP_MAGIC)] != SKIP_MAGIC
            or struct.unpack_from("<I", raw, len(SKIP_MAGIC))[0] != size - _HEAD
            or sum(a for a, _ in frames) != end - size - start):
        return None
    return frames
