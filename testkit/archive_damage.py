"""Damage for real `.shz` archives: what the fuzz test and `benchmarks/fuzz.py` feed the decoder,
and the readers' spans that tests damage by hand.

Blind damage (bit flips, truncation, inserted or deleted bytes) mostly meets a checksum first, so
the field edits also re-seal the record's crc: they reach the checks behind it (lengths, lanes,
methods, block order, totals). Every mutation is a function of the archive and a
`random.Random`, and returns (name, damaged bytes).

Not part of the package: tests reach it on pytest's pythonpath (pyproject.toml), benchmarks/fuzz.py
by one sys.path line; testkit/README.md says why it lives here."""

from __future__ import annotations

import io
import random
import struct
import zlib
from dataclasses import dataclass

from shazip.format.container import Method
from shazip.format.reader import ArchiveReader
from shazip.format.header import COMPACT, chained

# offsets within the records, as laid out in shazip/format/container.py
HEADER_FIELDS = {"format_version": (4, "B"), "engine": (5, "B"), "engine_version": (6, "B"), "threads": (7, "B"),
                 "name_len": (40, "B")}  # block_size and lanes follow the name: see Layout
BLOCK_FIELDS = {"tag": (0, "B"), "index": (1, "<I"), "method": (5, "B"), "lanes": (6, "<H"), "orig_len": (8, "<I"),
                "payload_len": (12, "<I"), "data_crc": (16, "<I")}
BLOCK_HEADER = 20  # bytes before the block header's crc
TRAILER_FIELDS = {"n_blocks": (1, "<I"), "total_len": (5, "<Q")}
TRAILER = 13


@dataclass
class Layout:
    """Where the records of an undamaged archive are."""
    header_end: int  # offset of the header crc
    blocks: list[tuple[int, int]]  # (offset, length) of each block record, payload included
    trailer: int | None  # None: a format 3/4 archive of one block, framed in its header
    tail: int | None  # formats 1, 2: offset of block_size (lanes, and in format 2 the stage's fields, follow)

    @staticmethod
    def of(blob: bytes) -> "Layout":
        reader = ArchiveReader(io.BytesIO(blob))
        header_end = reader.bytes_read - 4
        if blob[4] in COMPACT and blob[5] & 17:  # SOLO, or (format 4) EMPTY: no block records
            return Layout(header_end, [], None, None)
        pos, blocks = header_end + 4, []
        while blob[pos] == 0xB1:
            payload_len = struct.unpack_from("<I", blob, pos + 12)[0]
            n = BLOCK_HEADER + 4 + payload_len
            blocks.append((pos, n))
            pos += n
        return Layout(header_end, blocks, pos, 41 + blob[40] if blob[4] < 3 else None)


def _reseal(b: bytearray, start: int, end: int, lay: "Layout | None" = None) -> None:
    """Writes crc32(b[start:end]) at b[end:end+4], as the container does: in format 4 (with the
    `lay`out of a record after the header) starting from the crc of the record before it."""
    struct.pack_into("<I", b, end, zlib.crc32(bytes(b[start:end]), _seed(b, lay, start) if lay else 0))


def _seed(b: bytearray, lay: "Layout", pos: int) -> int:
    """The crc a format 4 record at `pos` starts from: the record's before it (0 before format 4)."""
    if not chained(b[4]):
        return 0
    prev = lay.header_end
    for p, _ in lay.blocks:
        if p >= pos:
            break
        prev = p + BLOCK_HEADER
    return struct.unpack_from("<I", b, prev)[0]


def _edge(fmt: str, rng: random.Random) -> int:
    top = {"B": 0xFF, "<H": 0xFFFF, "<I": 0xFFFFFFFF, "<Q": 0xFFFFFFFFFFFFFFFF}[fmt]
    return rng.choice([0, 1, 2, top, top - 1, top >> 1, rng.randrange(top + 1), rng.randrange(1, min(top, 5000))])


def _set(b: bytearray, off: int, fmt: str, rng: random.Random) -> None:
    struct.pack_into(fmt, b, off, _edge(fmt, rng))


def bit_flips(blob: bytes, lay: Layout, rng: random.Random) -> tuple[str, bytes]:
    b = bytearray(blob)
    for _ in range(rng.choice([1, 1, 2, 8])):
        b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
    return "bit flips", bytes(b)


def truncation(blob: bytes, lay: Layout, rng: random.Random) -> tuple[str, bytes]:
    region = rng.choice(["header", "block", "trailer", "anywhere"])
    if region == "header":
        cut = rng.randrange(lay.header_end + 4)
    elif region == "block" and lay.blocks:
        off, n = rng.choice(lay.blocks)
        cut = off + rng.randrange(n)
    elif region == "trailer" and lay.trailer is not None:
        cut = lay.trailer + rng.randrange(TRAILER + 4)
    else:
        cut = rng.randrange(len(blob))
    return f"truncated ({region})", blob[:cut]


def insertion(blob: bytes, lay: Layout, rng: random.Random) -> tuple[str, bytes]:
    at = rng.randrange(len(blob) + 1)
    return "inserted bytes", blob[:at] + rng.randbytes(rng.choice([1, 1, 4, 100])) + blob[at:]


def deletion(blob: bytes, lay: Layout, rng: random.Random) -> tuple[str, bytes]:
    at = rng.randrange(len(blob))
    return "deleted bytes", blob[:at] + blob[at + rng.choice([1, 1, 3, 50]):]


def header_edit(blob: bytes, lay: Layout, rng: random.Random) -> tuple[str, bytes]:
    b = bytearray(blob)
    if lay.tail is None:  # formats 3, 4: flags, engine, lengths and varints, byte by byte
        off = rng.randrange(5, lay.header_end)
        _set(b, off, "B", rng)
        _reseal(b, 0, lay.header_end)
        return f"header byte {off} (crc resealed)", bytes(b)
    fields = dict(HEADER_FIELDS, block_size=(lay.tail, "<I"), lanes=(lay.tail + 4, "<H"))
    if lay.header_end > lay.tail + 6:  # format 2: the adaptive stage's version and parameters
        fields |= {"adapt_version": (lay.tail + 6, "B"), "adapt_params": (lay.tail + 8, "B")}
    name = rng.choice(sorted(fields))
    off, fmt = fields[name]
    _set(b, off, fmt, rng)
    _reseal(b, 0, lay.header_end)
    return f"header {name} (crc resealed)", bytes(b)


def block_edit(blob: bytes, lay: Layout, rng: random.Random) -> tuple[str, bytes]:
    if not lay.blocks:
        return header_edit(blob, lay, rng)
    b = bytearray(blob)
    pos, _ = rng.choice(lay.blocks)
    name = rng.choice(sorted(BLOCK_FIELDS))
    off, fmt = BLOCK_FIELDS[name]
    _set(b, pos + off, fmt, rng)
    _reseal(b, pos, pos + BLOCK_HEADER, lay)
    return f"block {name} (crc resealed)", bytes(b)


def payload_edit(blob: bytes, lay: Layout, rng: random.Random) -> tuple[str, bytes]:
    """Damaged payload bytes behind an intact block header: only the data crc (or the decoder)
    can notice."""
    spans = [(p, n) for p, n, _ in payload_spans(blob) if n]
    if not spans:
        return bit_flips(blob, lay, rng)
    b = bytearray(blob)
    pos, n = rng.choice(spans)
    at = pos + rng.randrange(n)
    b[at] = rng.choice([b[at] ^ 1, rng.randrange(256)])
    return "payload byte", bytes(b)


def trailer_edit(blob: bytes, lay: Layout, rng: random.Random) -> tuple[str, bytes]:
    if lay.trailer is None:
        return header_edit(blob, lay, rng)
    b = bytearray(blob)
    name = rng.choice(sorted(TRAILER_FIELDS))
    off, fmt = TRAILER_FIELDS[name]
    _set(b, lay.trailer + off, fmt, rng)
    _reseal(b, lay.trailer, lay.trailer + TRAILER, lay)
    return f"trailer {name} (crc resealed)", bytes(b)


def block_shuffle(blob: bytes, lay: Layout, rng: random.Random) -> tuple[str, bytes]:
    """Blocks swapped, dropped or repeated, each record intact."""
    recs = [blob[p:p + n] for p, n in lay.blocks]
    if len(recs) < 2:
        return truncation(blob, lay, rng)
    how = rng.choice(["swap", "drop", "repeat"])
    i, j = rng.sample(range(len(recs)), 2)
    if how == "swap":
        recs[i], recs[j] = recs[j], recs[i]
    elif how == "drop":
        del recs[i]
    else:
        recs.insert(j, recs[i])
    head, tail = blob[: lay.header_end + 4], blob[lay.trailer:]
    return f"blocks {how}", head + b"".join(recs) + tail


def resource_claim(blob: bytes, lay: Layout, rng: random.Random) -> tuple[str, bytes]:
    """A block (or a one-block archive's header) that claims far more than its payload holds:
    the most bytes and lanes a block may have, every crc resealed along the chain, so only the
    reader's bounds (format 4: the payload floor and the overrun limit) stand in the way."""
    b = bytearray(blob)
    orig = rng.choice([1 << 28, 1 << 24, 1 << 20, 300_000])
    lanes = rng.choice([1024, 65535, max(1, orig >> 8), 1])
    if not lay.blocks:  # a one-block archive: its header holds the block; set a large block size instead
        return header_edit(blob, lay, rng)
    pos, _ = rng.choice(lay.blocks)
    struct.pack_into("<I", b, pos + BLOCK_FIELDS["orig_len"][0], orig)
    struct.pack_into("<H", b, pos + BLOCK_FIELDS["lanes"][0], min(lanes, 0xFFFF))
    if lay.tail is not None:  # formats 1, 2: the header's block size must admit the claim
        struct.pack_into("<I", b, lay.tail, 1 << 28)
        _reseal(b, 0, lay.header_end)
    _reseal(b, pos, pos + BLOCK_HEADER, lay)
    return f"resource claim ({orig} bytes in {lanes} lanes, crc resealed)", bytes(b)


def splice(blob: bytes, lay: Layout, rng: random.Random, donor: bytes | None = None) -> tuple[str, bytes]:
    """A block record (header and payload) of another archive made the same way put in place
    of one of this archive's."""
    other = Layout.of(donor) if donor else None
    if not other or not other.blocks or not lay.blocks:
        return block_shuffle(blob, lay, rng)
    i = rng.randrange(len(lay.blocks))
    p, n = lay.blocks[i]
    q, m = other.blocks[min(i, len(other.blocks) - 1) if rng.random() < 0.7 else rng.randrange(len(other.blocks))]
    return "block spliced from another archive", blob[:p] + donor[q:q + m] + blob[p + n:]


MUTATIONS = [bit_flips, truncation, insertion, deletion, header_edit, block_edit, payload_edit, trailer_edit,
             block_shuffle, resource_claim, splice]


def mutate(blob: bytes, rng: random.Random, donor: bytes | None = None) -> tuple[str, bytes]:
    """One random damage of `blob`; `donor`, another archive made the same way, for splices."""
    how = rng.choice(MUTATIONS)
    lay = Layout.of(blob)
    return how(blob, lay, rng, donor) if how is splice else how(blob, lay, rng)


# ----------------------------------------------------------------------------------------------
# Damage to the frames of a framed output (shazip/format/frames.py): each frame and the seek table intact


def frames_of(framed: bytes) -> tuple[list[bytes], bytes]:
    """The frames (archives) of one undamaged framed output, and what follows them (the seek
    table's skippable frame)."""
    src, frames, lead = io.BytesIO(framed), [], b""
    at = 0
    while True:
        reader = ArchiveReader(src, lead, more=True)
        for _ in reader.blocks():
            pass
        size = reader.bytes_read - len(reader.after) - reader.skipped
        frames.append(framed[at:at + size])
        at += size
        if not reader.more:
            return frames, framed[at:]
        lead = reader.after


def _table(sizes: list[tuple[int, int]]) -> bytes:
    """A seek table of these entries, its crc sealed as a writer's (frames.pack_table, for any count)."""
    body = b"".join(struct.pack("<QQ", a, d) for a, d in sizes) + struct.pack("<I", len(sizes))
    content = body + struct.pack("<I", zlib.crc32(body)) + b"SHZ\x8b"
    return b"SHZ\x8a" + struct.pack("<I", len(content)) + content


def frame_damage(framed: bytes, rng: random.Random, donor: bytes,
                 reframed: bytes | None = None) -> tuple[str, bytes]:
    """One random mistake with the frames of `framed` (of two or more), each frame intact: cut
    at a frame boundary; frames reordered, dropped or repeated; one taken from `donor` (another
    output made the same way) or from `reframed` (the same data framed otherwise: the same
    output id and indexes, only the links differ); a frame's trailer forged with the table made
    to agree (its decoded size changed, every crc but the chained one sealed); or a seek table
    forged (entries merged, swapped, shifted, dropped, its crc sealed again)."""
    frames, table = frames_of(framed)
    sizes = [(len(f), 0) for f in frames]
    entries = list(struct.iter_unpack("<QQ", table[8:-12])) if table else sizes
    k = rng.randrange(len(frames))
    hows = ["cut", "reorder", "drop", "repeat", "foreign", "trailer", "merged", "swapped", "shifted", "dropped entry"]
    how = rng.choice(hows + ["reframed"] * (reframed is not None))
    if how == "reframed":
        others, _ = frames_of(reframed)
        j = rng.randrange(1, min(len(frames), len(others)))
        return "frames: one of another framing", b"".join(frames[:j] + [others[j]] + frames[j + 1:]) + table
    if how == "trailer" and entries and frames[k][-17] in (0xE0, 0xE1):  # a frame of blocks: its trailer
        tag, n_blocks, total = struct.unpack("<BIQ", frames[k][-17:-4])
        d = rng.choice([-100, -1, 1, 100])
        forged = frames[k][:-17] + struct.pack("<BIQ", tag, n_blocks, max(total + d, 0)) + frames[k][-4:]
        new = [(a, dec + d * (i == k)) for i, (a, dec) in enumerate(entries)]
        return "frames: trailer forged, table to match", b"".join(frames[:k] + [forged] + frames[k + 1:]) + _table(new)
    if how == "trailer":
        how = "swapped"
    if how == "cut":  # at a frame boundary, or just before the table
        return "frames: cut at a frame boundary", b"".join(frames[:rng.randrange(1, len(frames))])
    if how in ("reorder", "drop", "repeat", "foreign"):
        order = list(frames)
        if how == "reorder":
            while order == frames:
                rng.shuffle(order)
        elif how == "drop":
            del order[k]
        elif how == "repeat":
            order.insert(k, frames[k])
        else:
            other, _ = frames_of(donor)
            order[k] = other[min(k, len(other) - 1)]
        return f"frames: {how}", b"".join(order) + (table if rng.random() < 0.5 else b"")
    forged = list(entries)
    j = rng.randrange(len(forged) - 1)
    if how == "merged":
        forged[j:j + 2] = [(forged[j][0] + forged[j + 1][0], forged[j][1] + forged[j + 1][1])]
    elif how == "swapped":
        forged[j], forged[j + 1] = forged[j + 1], forged[j]
    elif how == "shifted":
        d = rng.choice([-7, -1, 1, 7])
        forged[j], forged[j + 1] = (forged[j][0] + d, forged[j][1]), (forged[j + 1][0] - d, forged[j + 1][1])
    else:
        del forged[j]
    return f"frames: table {how}", b"".join(frames) + _table(forged)


def payload_spans(archive: bytes) -> list[tuple[int, int, Method]]:
    """(offset, length, method) of every block's payload, found with the archive reader."""
    reader = ArchiveReader(io.BytesIO(archive))
    spans = []
    for bh, payload in reader.blocks():
        start = reader.bytes_read - bh.payload_len
        assert archive[start : start + bh.payload_len] == payload
        spans.append((start, bh.payload_len, bh.method))
    return spans


def flip(data: bytes, offset: int, bit: int) -> bytes:
    b = bytearray(data)
    b[offset] ^= 1 << bit
    return bytes(b)
