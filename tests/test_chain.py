"""The frames of one output cannot be lost, reordered or taken from elsewhere unnoticed: a cut at
a frame boundary, every reordering, a frame dropped, repeated or from another output, and a seek
table that lies, are each refused by every reader with a line naming the frame; a concatenation
of whole outputs still decodes."""

from __future__ import annotations

import io
import itertools
import os
import re
import subprocess
import zlib

import pytest

import shazip
from shazip.errors import ArchiveError, CorruptArchive, Truncated
from shazip.format.frames import pack_table, read_table
from shazip.format.container import BLOCK_HEADER_BYTES, TRAILER_BYTES, skippable
from shazip.format.listing import describe

from test_cli import shazip_cmd

FRAMES = dict(level=1, frame_size=4096, block_size=1024)  # the stage alone: quick, and framed as any level


@pytest.fixture(scope="module")
def data(text) -> bytes:
    return text[:14000]  # four frames: 4096 * 3 + 1712


@pytest.fixture(scope="module")
def framed(data) -> bytes:
    return shazip.compress(data, threads=1, **FRAMES)


def frames_of(blob: bytes) -> tuple[list[bytes], bytes]:
    """The frames of one framed output, and the seek table after them."""
    found = describe(io.BytesIO(blob))
    return [blob[a["offset"]:a["offset"] + a["archive_bytes"]] for a in found], blob[sum(a["archive_bytes"]
                                                                                          for a in found):]


def by_decompressor(blob: bytes, piece: int = 700) -> bytes:
    """A stream through decompressors fed in pieces, a new one for what each leaves unused; a
    cut shows as lzma's do: a decompressor given bytes and not at its end."""
    d, out, given = shazip.ShazipDecompressor(), [], False
    for i in range(0, len(blob), piece):
        rest = blob[i:i + piece]
        while rest:
            out.append(d.decompress(rest))
            rest, given = b"", True
            if d.eof:
                rest, d, given = d.unused_data, shazip.ShazipDecompressor(), False
    if given and not d.eof:
        raise Truncated("the decompressor did not reach the output's end")
    return b"".join(out)


def by_file(blob: bytes) -> bytes:
    with shazip.open(io.BytesIO(blob), "rb") as f:
        return f.read()


READERS = {
    "decompress -T 1": lambda b: shazip.decompress(b, threads=1),
    "decompress -T 2": lambda b: shazip.decompress(b, threads=2),
    "a stream": lambda b: b"".join(shazip.iter_decompress(io.BytesIO(b), threads=1)),
    "a decompressor": by_decompressor,
    "a file object": by_file,
    "a listing": lambda b: describe(io.BytesIO(b)) and b"",
}


def refused_by_all(blob: bytes, kind: type[ArchiveError], phrase: str) -> None:
    """Every reader raises `kind` with `phrase`; a decompressor, which cannot know that no more
    input comes, shows a cut as lzma's do: not at the end (`eof` false)."""
    for name, read in READERS.items():
        with pytest.raises(kind) as e:
            read(blob)
        assert (name == "a decompressor" and kind is Truncated) or re.search(phrase, str(e.value)), (name, e.value)


def test_the_frames_carry_their_place(data, framed):
    found = describe(io.BytesIO(framed))
    assert [(a["frame_index"], a["more"]) for a in found] == [(0, True), (1, True), (2, True), (3, False)]
    assert {a["output_id"] for a in found} == {zlib.crc32(data[:1024])}  # the crc of the output's first block
    assert [a["link"] for a in found] == [0] + [zlib.crc32(data[i:i + 4096]) for i in (0, 4096, 8192)]
    for name, read in READERS.items():
        assert read(framed) in (data, b""), name


def test_a_cut_at_every_frame_boundary_is_truncated(framed):
    frames, table = frames_of(framed)
    for k in range(1, len(frames)):
        refused_by_all(b"".join(frames[:k]), Truncated, f"frame {k} of the output is missing")
    assert shazip.decompress(b"".join(frames)) == shazip.decompress(framed)  # the table alone is no data


def test_every_reordering_is_refused_naming_the_frame(framed):
    frames, table = frames_of(framed)
    for order in itertools.permutations(range(4)):
        if order == (0, 1, 2, 3):
            continue
        blob = b"".join(frames[i] for i in order) + table
        first = next(k for k, i in enumerate(order) if i != k)  # the first frame out of place
        found = order[first]
        phrase = (f"frame {found} of an output where an output starts" if first == 0 else
                  f"frame {found} of the output is repeated" if found < first else f"frame.? {first}")
        refused_by_all(blob, CorruptArchive, phrase)


def test_dropped_repeated_and_foreign_frames_are_refused(data, framed):
    frames, table = frames_of(framed)
    refused_by_all(frames[0] + frames[2] + frames[3], CorruptArchive, r"frame 1 of the output missing \(found frame 2")
    refused_by_all(frames[0] + frames[1] + frames[1] + frames[2] + frames[3], CorruptArchive,
                   "frame 1 of the output is repeated")
    other, _ = frames_of(shazip.compress(data[::-1], threads=1, **FRAMES))  # another file, compressed the same way
    refused_by_all(frames[0] + other[1] + frames[2] + frames[3], CorruptArchive, "frame 1 is from another output")
    # the same first block, other data after it: the same id, but not the frame that follows
    twin, _ = frames_of(shazip.compress(data[:1024] + data[1024:][::-1], threads=1, **FRAMES))
    blob = frames[0] + twin[1] + frames[2] + frames[3]
    assert describe(io.BytesIO(blob))[1]["output_id"] == describe(io.BytesIO(framed))[0]["output_id"]
    for name in ("decompress -T 1", "decompress -T 2", "a stream", "a decompressor", "a file object"):
        with pytest.raises(CorruptArchive, match="frame 1 does not follow frame 0"):
            READERS[name](blob)
    # an output's first frame where a frame is awaited, or a later frame where an output starts
    one = shazip.compress(data[:3000], **FRAMES)
    refused_by_all(frames[0] + one, CorruptArchive, "frame 1 of the output is missing")
    refused_by_all(frames[1] + frames[2] + frames[3], CorruptArchive, "frame 1 of an output where an output starts")


def test_whole_outputs_one_after_the_other_decode(data, framed):
    one = shazip.compress(data[:3000], **FRAMES)
    for blob, want in ((framed + framed, data + data), (one + framed + one, data[:3000] + data + data[:3000])):
        for name, read in READERS.items():
            assert read(blob) in (want, b""), name
    d = shazip.ShazipDecompressor()  # one output, frames and all, then the rest is unused
    assert d.decompress(framed + one) == data and d.eof and d.unused_data.startswith(frames_of(framed)[1])


def test_forged_tables_never_lead_to_wrong_bytes(data, framed):
    """Entries merged, swapped or shifted, the table's crc recomputed: a full decode refuses the
    file, and a seek either refuses it too or returns the right bytes, never others."""
    frames, table = frames_of(framed)
    sizes = read_table(io.BytesIO(framed), 0)
    body = b"".join(frames)
    forged = {
        "merged": [(sizes[0][0] + sizes[1][0], sizes[0][1] + sizes[1][1])] + sizes[2:],
        "merged, sizes kept": [(sizes[0][0] + sizes[1][0], sizes[0][1])] + sizes[2:] + [(0, sizes[1][1])],
        "swapped": [sizes[1], sizes[0]] + sizes[2:],
        "shifted": [(a + 1, d) for a, d in sizes[:1]] + [(sizes[1][0] - 1, sizes[1][1])] + sizes[2:],
        "decoded sizes moved": [(sizes[0][0], sizes[0][1] - 100), (sizes[1][0], sizes[1][1] + 100)] + sizes[2:],
    }
    for name, entries in forged.items():
        blob = body + pack_table(entries)
        for threads in (1, 2):
            with pytest.raises(CorruptArchive, match="seek table"):
                shazip.decompress(blob, threads=threads)
        for at, whence in ((4096, io.SEEK_SET), (0, io.SEEK_END), (9000, io.SEEK_SET)):
            try:
                with shazip.open(io.BytesIO(blob), "rb") as f:
                    pos = f.seek(at, whence)
                    got = f.read(16)
            except CorruptArchive as e:
                assert "seek table" in str(e), name
                continue
            assert pos == (at if whence == io.SEEK_SET else len(data)) and got == data[pos:pos + 16], name


def test_the_command_line_refuses_a_cut_and_a_reordering(tmp_path, data, framed):
    frames, table = frames_of(framed)
    cases = {"cut.shz": b"".join(frames[:2]), "swapped.shz": frames[0] + frames[2] + frames[1] + frames[3] + table}
    for name, blob in cases.items():
        (tmp_path / name).write_bytes(blob)
        for mode in ("-d", "-t", "-l"):
            p = subprocess.run(shazip_cmd(mode, "-q", "-f", tmp_path / name), capture_output=True, text=True,
                               timeout=120, stdin=subprocess.DEVNULL)
            assert p.returncode == 1 and "Traceback" not in p.stderr, (name, mode, p.stderr)
            assert p.stderr.count("\n") == 1 and f"{name}: " in p.stderr and "frame" in p.stderr, p.stderr
        assert not os.path.exists(tmp_path / name.replace(".shz", ""))


def test_a_decompressor_bounds_each_call_with_max_length(data, framed):
    """lzma's `max_length`: no call returns more; what is decoded but not returned waits, and
    `needs_input` is false while it does."""
    d, out, rest = shazip.ShazipDecompressor(), [], framed[3000:]
    out.append(d.decompress(framed[:3000], max_length=1000))
    while not d.eof:
        assert len(out[-1]) <= 1000
        fed, rest = (rest, b"") if d.needs_input else (b"", rest)
        out.append(d.decompress(fed, max_length=1000))
    assert b"".join(out) == data and max(map(len, out)) == 1000 and d.unused_data.endswith(b"SHZ\x8b")
    with pytest.raises(EOFError):
        d.decompress(b"")
    d = shazip.ShazipDecompressor()
    assert d.decompress(framed, max_length=0) == b"" and not d.needs_input and not d.eof


def test_recover_names_exactly_the_bytes_it_could_not_write(data, framed, tmp_path):
    """A cut inside a frame: every block before the cut is written, and the loss is named from
    the end of the last one; a cut at a frame boundary is named at the end of the file."""
    found = describe(io.BytesIO(framed))
    second = found[1]
    cut = second["offset"] + second["archive_bytes"] - 40  # inside the second frame's last block
    out = io.BytesIO()
    lost = shazip.recover_stream(io.BytesIO(framed[:cut]), out)
    written = out.getvalue()
    assert data.startswith(written) and len(written) == 4096 + 3 * 1024
    end = second["offset"] + second["archive_bytes"]  # the last block's header starts where the blocks before end
    blocks_end = end - TRAILER_BYTES - second["blocks"][-1]["payload_len"] - BLOCK_HEADER_BYTES
    assert [(x.start, x.end, x.output_at) for x in lost] == [(blocks_end, cut, len(written))]
    boundary = found[2]["offset"]
    out = io.BytesIO()
    lost = shazip.recover_stream(io.BytesIO(framed[:boundary]), out)
    assert out.getvalue() == data[:8192] and [(x.start, x.end, x.output_at) for x in lost] == [(boundary, boundary, 8192)]
    assert "frame 2 of the output is missing" in lost[0].reason


def test_outputs_made_before_the_marks_still_decode_and_seek(data):
    """shazip 0.20 wrote frames without marks, each an archive of one frame, and its seek table
    after them: it reads as their concatenation, in every reader, its table still checked."""
    parts = [shazip.compress(data[i:i + 4096], **FRAMES) for i in range(0, len(data), 4096)]
    old = b"".join(parts) + pack_table([(len(p), min(4096, len(data) - 4096 * i)) for i, p in enumerate(parts)])
    assert all(not a["more"] and a["frame_index"] == 0 for a in describe(io.BytesIO(old)))
    for name, read in READERS.items():
        assert read(old) in (data, b""), name
    with shazip.open(io.BytesIO(old), "rb") as f:
        assert f.seek(0, io.SEEK_END) == len(data) and f.seek(9000) == 9000 and f.read(50) == data[9000:9050]
    with pytest.raises(CorruptArchive, match="seek table"):
        shazip.decompress(b"".join(parts[:3]) + old[len(b"".join(parts)):])  # a frame dropped, the table kept


def test_nothing_stands_between_the_frames_of_an_output(framed):
    frames, table = frames_of(framed)
    blob = frames[0] + skippable(b"metadata") + b"".join(frames[1:]) + table
    for name in ("decompress -T 1", "a stream", "a listing"):
        with pytest.raises(CorruptArchive, match="skippable frame where frame 1 of the output belongs"):
            READERS[name](blob)


def test_golden_framed_output(trained, text, monkeypatch):
    """shazip 0.21's framed output (format 4) and today's (format 5), frozen: both decode,
    compressing again with the levels' stages of version 17 (which wrote it) gives the format 5
    one byte for byte, and their frames carry the marks (tests/data/README.md)."""
    from dataclasses import replace
    from pathlib import Path
    from shazip.format.container import Method
    from shazip.options import LEVELS
    from shazip.stage.adaptive import EXTRA_FLAGS, EXTRAS_OF
    later = set(EXTRA_FLAGS[EXTRAS_OF[17]:])
    for n, level in LEVELS.items():
        monkeypatch.setitem(LEVELS, n, replace(level, models=tuple(m for m in level.models if m not in later),
                                               repetitive_models=level.repetitive_models and tuple(
                                                   m for m in level.repetitive_models if m not in later)))
    data = text[:5000]
    made = shazip.compress(data, model=trained, lanes=1, block_size=1000, frame_size=2000,
                           methods=frozenset({Method.MIXED}), threads=2)
    for name, version in (("golden-framed.shz", 4), ("golden-framed-v5.shz", 5)):
        golden = (Path(__file__).parent / "data" / name).read_bytes()
        assert shazip.decompress(golden, model=trained) == data
        found = describe(io.BytesIO(golden))
        assert [(a["frame_index"], a["more"], a["format_version"]) for a in found] == [
            (0, True, version), (1, True, version), (2, False, version)]
        assert found[-1]["skipped_bytes"] == len(pack_table([(1, 1)] * 3))
    assert made == golden
