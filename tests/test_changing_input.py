"""An input that changes while it is read (a log still being written, a file cut or replaced):
the archive holds exactly the bytes read, a one-line warning names the file (exit 2, as gzip's
"file size changed while zipping"), and --rm never removes that input. The change is made at a
chosen moment through the reader itself, so no test races a clock."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import shazip
from shazip.codec import decode, encode
from test_cli import assert_ok, run, run_in

DATA = Path(__file__).parent / "data"


def _text() -> bytes:
    return ((DATA / "wiki.xml").read_bytes() * 4)[:150_000]


def _change(path: Path, how: str) -> None:
    data = path.read_bytes()
    if how == "append":
        with open(path, "ab") as f:
            f.write(b"appended while it was read\n" * 1000)
    elif how == "truncate":
        with open(path, "r+b") as f:
            f.truncate(len(data) // 2)
    elif how == "rewrite":  # same size, other bytes: only the time tells
        path.write_bytes(data[::-1])
        os.utime(path, ns=(0, path.stat().st_mtime_ns + 1_000_000_000))
    elif how == "replace":  # a new file renamed over the name, as editors and log rotation do
        fresh = path.with_name(path.name + ".new")
        fresh.write_bytes(data)
        os.replace(fresh, path)


@pytest.fixture
def changing(monkeypatch):
    """changing(path, how, after): the input at `path` is changed `how` once the compressor has
    read `after` bytes of it (None: once it has read it all)."""
    real = encode.compress_stream

    def arm(path: Path, how: str, after: int | None) -> None:
        def compress_stream(src, dst, *a, **kw):
            if after is None:
                n = real(src, dst, *a, **kw)
                _change(path, how)
                return n
            read, done = src.read, [0]

            def reading(size=-1):
                chunk = read(size)
                done[0] += len(chunk)
                if done[0] >= after and not getattr(reading, "fired", False):
                    reading.fired = True
                    _change(path, how)
                return chunk

            src.read = reading
            return real(src, dst, *a, **kw)

        monkeypatch.setattr(encode, "compress_stream", compress_stream)

    return arm


@pytest.mark.parametrize("frames", [None, "16384"])
@pytest.mark.parametrize("how, after", [("append", None), ("append", 40_000), ("truncate", None),
                                        ("rewrite", None), ("replace", None)])
def test_a_changed_input_is_kept_and_its_archive_holds_what_was_read(tmp_path, changing, how, after, frames):
    f = tmp_path / "log.txt"
    f.write_bytes(_text())
    changing(f, how, after)
    extra = ["--frame-size", frames] if frames else []
    r = run("-q", "--rm", "-1", "--block-size", "8192", *extra, f)
    assert r.exit_code == 2, r.output
    line = [x for x in r.stderr.splitlines() if x]
    assert len(line) == 1 and line[0].startswith(f"shazip: {f}: changed while it was read")
    assert f.exists(), "--rm removed an input that changed"
    archive = (tmp_path / "log.txt.shz").read_bytes()
    out = shazip.decompress(archive)
    if after is not None:  # appended before the end was reached: read on to the new end
        assert out == f.read_bytes()
    else:
        assert out == _text()  # exactly the bytes there were when they were read


def test_an_unchanged_input_is_removed_with_rm(tmp_path):
    f = tmp_path / "a.txt"
    f.write_bytes(_text())
    assert_ok(run("-q", "--rm", "-1", f))
    assert not f.exists() and shazip.decompress((tmp_path / "a.txt.shz").read_bytes()) == _text()


def test_standard_input_is_not_judged(tmp_path):
    """From a pipe or a redirected file there is no name to look at again: no warning."""
    src = tmp_path / "a.txt"
    src.write_bytes(_text()[:5000])
    r = run_in(["-q", "-c", "-1", "-"], src.read_bytes())
    assert r.exit_code == 0 and shazip.decompress(r.stdout_bytes) == _text()[:5000]


def test_an_archive_changed_while_decompressed_is_kept(tmp_path, monkeypatch):
    """The same rule on the way back: -d --rm keeps an archive that changed while it was read."""
    f = tmp_path / "a.txt"
    f.write_bytes(_text()[:20000])
    assert_ok(run("-q", "-1", f))
    f.unlink()
    archive = tmp_path / "a.txt.shz"
    real = decode.decompress_stream

    def decompress_stream(src, dst, *a, **kw):
        real(src, dst, *a, **kw)
        os.utime(archive, ns=(0, archive.stat().st_mtime_ns + 1_000_000_000))

    monkeypatch.setattr(decode, "decompress_stream", decompress_stream)
    r = run("-q", "-d", "--rm", archive)
    assert r.exit_code == 2 and "changed while it was read" in r.stderr
    assert archive.exists() and f.read_bytes() == _text()[:20000]


def test_a_killed_run_leaves_a_named_temporary_file_that_the_next_run_reports(tmp_path):
    """SIGKILL cannot be caught: its temporary output (NAME.PID.tmp) stays. The next run for that
    destination names it (and keeps it); with -f it is removed."""
    import signal
    import subprocess
    import sys

    from test_cli import wait_until_writing
    f = tmp_path / "big.txt"
    f.write_bytes(_text() * 8)
    p = subprocess.Popen([sys.executable, "-m", "shazip", "-q", "-9", "-T", "1", str(f)])
    wait_until_writing(p, tmp_path)
    p.send_signal(signal.SIGKILL)
    p.wait()
    left = tmp_path / f"big.txt.shz.{p.pid}.tmp"
    assert left.exists() and not (tmp_path / "big.txt.shz").exists()
    small = tmp_path / "small.txt"  # another destination: not reported
    small.write_bytes(b"x" * 100)
    r = run("-q", small)
    assert r.exit_code == 0 and r.stderr == ""
    r = run("-1", "-c", f)
    assert r.exit_code == 0 and r.stderr == ""  # to standard output: no destination, nothing to say
    r = run("-q", "-1", f)
    assert r.exit_code == 0 and left.exists()
    assert r.stderr.strip() == (f"shazip: {left}: an unfinished output of an ended run (process {p.pid}), "
                                "left in place (-f removes it)")
    r = run("-q", "-1", "-f", f)
    assert r.exit_code == 0 and not left.exists() and "removed" in r.stderr
    assert shazip.decompress((tmp_path / "big.txt.shz").read_bytes()) == f.read_bytes()
