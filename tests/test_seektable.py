"""The seek table after a framed output: written by every writer, read past by every stream
reader, used by the readers that seek or split the work, and never trusted beyond what the
archives themselves confirm."""

from __future__ import annotations

import io

import pytest

import shazip
from shazip.errors import CorruptArchive, ShazipError
from shazip.format.frames import _scanned, index, pack_table, read_table
from shazip.format.container import BLOCK_HEADER_BYTES, TRAILER_BYTES, skippable
from shazip.format.listing import describe

from test_concat import _by_decompressors
from test_cli import declared_size
from test_frames import FRAMED, data, framed  # noqa: F401 (fixtures)


def test_the_table_lists_every_frame_and_agrees_with_a_scan(framed):
    archives = describe(io.BytesIO(framed))
    table = read_table(io.BytesIO(framed), 0)
    assert table == [(a["archive_bytes"], a["total_len"]) for a in archives]
    assert framed.endswith(pack_table(table)) and archives[-1]["skipped_bytes"] == len(pack_table(table))
    src = io.BytesIO(b"prefix" + framed)  # from where the file stands
    src.seek(6)
    found = index(src)
    assert src.tell() == 6 and found == _scanned(src, 6, None)
    assert [(f.end - f.start, f.decoded) for f in found] == table and found[0].start == 6


def test_one_frame_has_no_table(trained, data):
    one = shazip.compress(data[:12000], model=trained, **FRAMED)
    assert read_table(io.BytesIO(one), 0) is None and describe(io.BytesIO(one))[0]["skipped_bytes"] == 0


def test_every_reader_reads_past_the_table(trained, data, framed):
    assert shazip.decompress(framed, model=trained, threads=1) == data
    assert b"".join(shazip.iter_decompress(io.BytesIO(framed), model=trained)) == data
    assert _by_decompressors(framed, trained, 333) == data  # the table: a decompressor of its own
    assert _by_decompressors(framed + framed, trained, 5000) == data + data
    other = skippable(b"another tool's metadata")  # whatever a skippable frame holds
    one = shazip.compress(data[:3000], model=trained, lanes=1)
    assert shazip.decompress(one + other + one + other, model=trained) == data[:3000] * 2
    with pytest.raises(ShazipError, match="truncated"):
        shazip.decompress(one + other[:-1], model=trained)


def test_a_table_not_at_the_end_is_not_used(trained, data, framed):
    """Framed outputs one after the other, or an output appended to: the last table does not
    cover the file (or there is none at its end), so the frames are found by scanning, each
    table checked against the frames before it, and everything decodes."""
    appended = framed + shazip.compress(b"more", model=trained)
    for blob, want in ((framed + framed, data + data), (appended, data + b"more")):
        assert index(io.BytesIO(blob)) == _scanned(io.BytesIO(blob), 0, None)
        assert shazip.decompress(blob, model=trained, threads=2) == want
        with shazip.open(io.BytesIO(blob), "rb", model=trained) as f:
            f.seek(30000)
            assert f.read(100) == want[30000:30100]


def test_a_table_that_disagrees_with_the_frames_is_an_error(trained, data, framed):
    """Damaged, or describing other archives (its crc recomputed): a reader that would use it
    finds it does not fit and scans the frames, and every reader that meets it after the last
    frame refuses the file, as for any other damage (`--recover` still writes all the data)."""
    end = len(framed) - len(pack_table(read_table(io.BytesIO(framed), 0)))
    sizes = [(a["archive_bytes"], a["total_len"]) for a in describe(io.BytesIO(framed))]
    damaged = bytearray(framed)
    damaged[end + 12] ^= 1  # a frame size in the table
    lying = framed[:end] + pack_table([(1939, 12000), (2561, 12000), (1751, 12000), (685, 4000)])
    swapped = framed[:end] + pack_table([sizes[1], sizes[0]] + sizes[2:])
    for blob in (bytes(damaged), lying, swapped):
        for threads in (1, 2):
            with pytest.raises(CorruptArchive, match="seek table"):
                shazip.decompress(blob, model=trained, threads=threads)
        with pytest.raises(CorruptArchive, match="seek table"):
            describe(io.BytesIO(blob))
        with shazip.open(io.BytesIO(blob), "rb", model=trained) as f:
            f.seek(30000)  # frames 0-2 proven: their bytes are sound, as a stream gives them before the table
            assert f.read(100) == data[30000:30100]
            with pytest.raises(CorruptArchive, match="seek table"):
                f.seek(0, io.SEEK_END)
        out = io.BytesIO()
        lost = shazip.recover_stream(io.BytesIO(blob), out, model=trained)
        assert out.getvalue() == data and [(x.start, x.end) for x in lost] == [(end, len(blob))]


def test_a_seek_proves_the_frames_before_it_and_no_more(trained, data, framed):
    """A seek decodes one frame alone, so the frames before it are proven first as a stream
    proves them (their checksums, places and links), and those after are not read: with frame
    1's structure damaged, a seek into frame 0 reads, one past it or to the end is refused. The
    progress bar's glance still takes the size from the table."""
    second = describe(io.BytesIO(framed))[1]
    blocks = second["blocks"]
    header = second["archive_bytes"] - sum(BLOCK_HEADER_BYTES + b["payload_len"] for b in blocks) - TRAILER_BYTES
    bad = bytearray(framed)
    bad[second["offset"] + header + BLOCK_HEADER_BYTES + blocks[0]["payload_len"] + 3] ^= 0xFF  # block 1's header
    with pytest.raises(ShazipError):
        _scanned(io.BytesIO(bytes(bad)), 0, None)
    assert declared_size(io.BytesIO(bytes(bad))) == len(data)  # the progress bar's total, from the table
    first = describe(io.BytesIO(framed))[0]["total_len"]
    with shazip.open(io.BytesIO(bytes(bad)), "rb", model=trained) as f:
        f.seek(first - 100)
        assert f.read(50) == data[first - 100:first - 50]
        for offset, whence in ((0, io.SEEK_END), (26000, io.SEEK_SET)):
            with pytest.raises(ShazipError, match="block 1: header checksum mismatch"):
                f.seek(offset, whence)
    with shazip.open(io.BytesIO(framed), "rb", model=trained) as f:
        assert f.seek(0, io.SEEK_END) == len(data)
        f.seek(26000)
        assert f.read(5000) == data[26000:31000]


class Bar:
    """A progress bar as decompress_stream sees one: counts, and takes the total (`expect`)."""

    def __init__(self) -> None:
        self.told: list[int] = []

    def __call__(self, n: int, bits: float = 0.0) -> None:
        pass

    def expect(self, total: int) -> None:
        self.told.append(total)


@pytest.mark.parametrize("threads", [1, 2])
def test_a_bar_is_told_the_total_however_long_the_frames(trained, data, framed, monkeypatch, threads):
    """The total comes from every frame, also where the frames are too long to be held in memory
    (then decoded one after the other, each header still read once)."""
    from shazip.codec import decode
    monkeypatch.setattr(decode, "MAX_FRAME_IN_MEMORY", 100)
    bar, out = Bar(), io.BytesIO()
    decode.decompress_stream(io.BytesIO(framed), out, trained, progress=bar, threads=threads)
    assert out.getvalue() == data and bar.told == [len(data)]


def test_a_bar_changes_nothing_of_a_damaged_stream_at_one_thread(trained, data, framed):
    """At one thread the index only serves a bar's total: where it fails (here the seek table's
    crc), the decoder writes and reports exactly what it does without a bar."""
    from shazip.codec.decode import decompress_stream
    bad = bytearray(framed)
    bad[-6] ^= 1  # the seek table's crc
    results = []
    for progress in (None, Bar()):
        out = io.BytesIO()
        with pytest.raises(CorruptArchive) as e:
            decompress_stream(io.BytesIO(bytes(bad)), out, trained, progress=progress, threads=1)
        results.append((out.getvalue(), str(e.value)))
    assert results[0] == results[1] and results[0][0] == data, results[0][1]
