"""Concatenated archives, gzip's rule: a stream of archives decodes to the concatenation of their
contents, through every entry point; what follows an archive and is not one is refused."""

from __future__ import annotations

import io
import subprocess
import sys

import pytest

import shazip
from shazip.errors import CorruptArchive, Truncated

from test_cli import assert_fails, assert_ok, listing, run, run_in


@pytest.fixture(scope="module")
def parts(trained, text) -> list[tuple[bytes, bytes]]:
    """(original, archive) of three inputs: model-coded blocks through the stage, an empty one,
    and stored blocks under another format (adapt none)."""
    inputs = [(text[:6000], dict(block_size=2500, lanes=2)), (b"", {}),
              (bytes(range(256)) * 8, dict(adapt="none", lanes=1))]
    return [(data, shazip.compress(data, model=trained, **kw)) for data, kw in inputs]


def test_every_entry_point_decodes_a_concatenation(trained, parts):
    for order in ([0, 1, 2], [2, 0], [1, 1], [2, 1, 0, 2]):
        want = b"".join(parts[i][0] for i in order)
        blob = b"".join(parts[i][1] for i in order)
        assert shazip.decompress(blob, model=trained) == want
        out = io.BytesIO()
        assert shazip.decompress_stream(io.BytesIO(blob), out, model=trained) == len(want)
        assert out.getvalue() == want
        assert b"".join(shazip.iter_decompress(io.BytesIO(blob), model=trained)) == want
        with shazip.open(io.BytesIO(blob), "rb", model=trained) as f:
            assert f.read() == want
        assert _by_decompressors(blob, trained, 777) == want


def _by_decompressors(blob: bytes, model, piece: int) -> bytes:
    """lzma's idiom: a new decompressor for each archive, fed the last one's unused_data."""
    out, d = [], shazip.ShazipDecompressor(model=model)
    for i in range(0, len(blob), piece):
        data = blob[i:i + piece]
        while data:
            out.append(d.decompress(data))
            data = b""
            if d.eof:
                data, d = d.unused_data, shazip.ShazipDecompressor(model=model)
    assert d.needs_input and not d.eof  # the last one was given nothing
    return b"".join(out)


def test_what_follows_an_archive_must_be_one(trained, parts):
    data, arc = parts[0]
    for tail in (b"\n", b"x" * 40, bytes(8)):
        with pytest.raises(CorruptArchive, match="trailing data after end of archive"):
            shazip.decompress(arc + tail, model=trained)
    with pytest.raises(Truncated):
        shazip.decompress(arc + parts[2][1][:-3], model=trained)
    with pytest.raises(CorruptArchive, match="trailing data"):
        shazip.decompress(arc + b"z", model=trained, concatenated=False)


def test_command_line(tmp_path, trained, parts):
    blob = b"".join(arc for _, arc in parts)
    want = b"".join(data for data, _ in parts)
    model = ["--model", trained.path]
    (tmp_path / "abc.shz").write_bytes(blob)
    assert_ok(run("-d", "-q", *model, tmp_path / "abc.shz"))
    assert (tmp_path / "abc").read_bytes() == want
    assert_ok(run("-t", "-q", *model, tmp_path / "abc.shz"))
    r = run_in(["-d", "-c", *model], blob)
    assert_ok(r)
    assert r.stdout_bytes == want
    r = run("-lv", tmp_path / "abc.shz")
    assert_ok(r)
    assert "archive 3 of 3" in r.stdout
    # `cat a.shz b.shz | shazip -d` in a real pipe
    p = subprocess.run([sys.executable, "-m", "shazip", "-d", "-c", *map(str, model)], input=blob,
                       capture_output=True, timeout=300)
    assert p.returncode == 0 and p.stdout == want, p.stderr
    # garbage after the archives: one line, exit 1, nothing written
    (tmp_path / "bad.shz").write_bytes(blob + b"garbage")
    before = listing(tmp_path)
    assert_fails(run("-d", "-q", *model, tmp_path / "bad.shz"), "trailing data", tmp_path, before, code=1)


def test_several_inputs_to_standard_output_make_a_concatenation(tmp_path, trained, parts):
    """`shazip -c a b > ab.shz` writes two archives one after the other: they decode."""
    a = tmp_path / "a.txt"
    b = tmp_path / "b.txt"
    a.write_bytes(parts[0][0])
    b.write_bytes(parts[2][0])
    r = run("-c", "-q", "--model", trained.path, a, b)
    assert_ok(r)
    assert shazip.decompress(r.stdout_bytes, model=trained) == parts[0][0] + parts[2][0]


def test_open_ab_appends_an_archive(tmp_path, trained, text):
    path = tmp_path / "log.shz"
    with shazip.open(path, "wb", model=trained, lanes=1) as f:
        f.write(text[:3000])
    for i in range(2):
        with shazip.open(path, "at", model=trained, lanes=1, encoding="utf-8") as f:
            f.write(f"line {i}\n")
    with shazip.open(path, "rb", model=trained) as f:
        assert f.read() == text[:3000] + b"line 0\nline 1\n"
