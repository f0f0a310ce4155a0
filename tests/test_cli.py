"""Tests for the `shazip` command line: round trips, default names, every user-facing error.

Most tests run the click command in-process with CliRunner (fast); a few use real subprocesses
(`python -m shazip`) where only a real process shows the behaviour: pipes, and no terminal.

No model is bundled yet, so compress/decompress get `--model <random_model_path>`. The random
model never beats zstd, so archives with model-coded blocks are made through the API with
`methods={Method.MODEL}` on data it predicts well (zero bytes: about 4.6 bits/byte).

Every error test checks: the exit code, a key phrase of the one-line `shazip: ...` message, that
no exception escaped (CliRunner would otherwise swallow a traceback), and that the directory
holds nothing beyond what was there before (no output, no temporary file).
"""

from __future__ import annotations

import io
import itertools
import json
import os
import pty
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import click
import pytest
from click.testing import CliRunner

from shazip.cli import files as cli, io as cli_io
from shazip.api import compress as api_compress
from shazip.cli import main
from shazip.errors import ArchiveError, CorruptArchive, ShazipError
from shazip.format.container import Method
from shazip.format.frames import index

from archive_damage import payload_spans

ZEROS = b"\x00" * 600  # 3 model-coded blocks of 200 bytes (1 lane each)
ZEROS_BLOCK = 200


# ---------------------------------------------------------------- helpers



def declared_size(src) -> int | None:
    """The decoded size the frames of src record, as `decompress_stream` tells a progress bar
    (`index`: nothing decoded); None where it cannot be had: a pipe, a damaged archive."""
    try:
        frames = index(src)
    except ArchiveError:
        return None
    return None if frames is None else sum(f.decoded for f in frames)


def run(*args):
    """`shazip ARGS` in-process (CliRunner keeps stdout and stderr apart since click 8.2)."""
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=True)


def run_in(args, data: bytes):
    return CliRunner().invoke(main, [str(a) for a in args], input=data, catch_exceptions=True)


def assert_ok(r) -> None:
    assert r.exception is None, f"exit {r.exit_code}, exception {r.exception!r}, stderr {r.stderr!r}"
    assert r.exit_code == 0, r.stderr


def listing(d: Path) -> list[str]:
    return sorted(os.listdir(d))


def assert_fails(r, phrase: str, d: Path, before: list[str], code: int | None = None) -> str:
    """Clean failure: non-zero exit via sys.exit, one `shazip: ...` line, nothing left behind."""
    assert r.exit_code != 0, f"expected failure, got exit 0 (stdout {r.stdout_bytes[:80]!r})"
    assert isinstance(r.exception, SystemExit), f"uncaught exception (would be a traceback): {r.exception!r}"
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("shazip: "), r.stderr
    assert phrase.lower() in lines[0].lower(), lines[0]
    if code is not None:
        assert r.exit_code == code, (r.exit_code, lines[0])
    assert listing(d) == before, f"left behind: {set(listing(d)) - set(before)}"
    return lines[0]


def cli_round_trip(tmp_path: Path, data: bytes, model: Path, *extra) -> Path:
    src = tmp_path / "in.bin"
    src.write_bytes(data)
    assert_ok(run("compress", src, "--model", model, "-q", *extra))
    arc = tmp_path / "in.bin.shz"
    assert arc.is_file() and src.read_bytes() == data
    out = tmp_path / "out.bin"
    assert_ok(run("decompress", arc, "-o", out, "--model", model, "-q"))
    assert out.read_bytes() == data
    assert listing(tmp_path) == ["in.bin", "in.bin.shz", "out.bin"]
    return arc


def shazip_cmd(*args) -> list[str]:
    return [sys.executable, "-m", "shazip", *map(str, args)]


# ---------------------------------------------------------------- fixtures


def wait_until_writing(p, folder: Path, timeout: float = 120) -> None:
    """Returns once the process `p` has a temporary output in `folder` (it is under way, past
    start-up): a signal sent then lands mid-work on any machine, however fast, where a fixed
    sleep would find a fast one already done."""
    deadline = time.time() + timeout
    while not any(f.name.endswith(".tmp") for f in folder.iterdir()):
        assert p.poll() is None, "ended before it could be interrupted: give it more work"
        assert time.time() < deadline, "no temporary output appeared"
        time.sleep(0.02)


@pytest.fixture(scope="module")
def model_archive(random_model) -> bytes:
    """Three model-coded blocks (forced with methods={MODEL}), threads=1 as the CLI uses."""
    a = api_compress(ZEROS, model=random_model, methods=frozenset({Method.MODEL}), adapt="none",
                     block_size=ZEROS_BLOCK, threads=1)
    assert [m for _, _, m in payload_spans(a)] == [Method.MODEL] * 3
    return a


@pytest.fixture(scope="module")
def raw_archive(random_model, text) -> bytes:
    a = api_compress(text[:600], model=random_model, methods=frozenset({Method.RAW}), block_size=200)
    assert [m for _, _, m in payload_spans(a)] == [Method.RAW] * 3
    return a


def write(tmp_path: Path, name: str, data: bytes) -> Path:
    p = tmp_path / name
    p.write_bytes(data)
    return p


# ---------------------------------------------------------------- 1. round trips


@pytest.mark.parametrize("data", [
    b"",
    b"x",
    bytes(range(256)),
    ("Grüße, 世界! Ελληνικά — naïve café ✓ 🎉 𝄞\n" * 8).encode("utf-8"),
], ids=["empty", "one-byte", "all-256-values", "utf8-multibyte"])
def test_round_trip(tmp_path, random_model_path, data):
    cli_round_trip(tmp_path, data, random_model_path)


def test_round_trip_random_binary_does_not_expand(tmp_path, random_model_path):
    data = random.Random(1).randbytes(20_000)
    arc = cli_round_trip(tmp_path, data, random_model_path)
    # incompressible: stored raw, so the archive is the input plus framing only (docs/format.md,
    # format 4 of one block): magic, version, flags, engine 7 + model id 8 + name 1 + len("tiny-random")
    # + no adaptive stage (a stored block needs none) 2 + lanes 1, orig_len 3, payload_len 3 + data
    # crc 4 + header crc 4
    overhead = 7 + 8 + 1 + len("tiny-random") + 2 + 7 + 8
    assert arc.stat().st_size == len(data) + overhead
    assert json.loads(run("info", arc, "--json").stdout)["blocks"][0]["method"] == "raw"


def test_round_trip_text_several_blocks(tmp_path, random_model_path, text):
    arc = cli_round_trip(tmp_path, text, random_model_path, "--block-size", 20000)
    r = run("info", arc, "--json")
    assert_ok(r)
    d = json.loads(r.stdout)
    assert d["n_blocks"] == len(d["blocks"]) == -(-len(text) // 20000) > 1
    assert d["total_len"] == len(text) == sum(b["orig_len"] for b in d["blocks"])
    assert d["block_size"] == 20000 and d["model_name"] == "tiny-random"
    assert d["archive_bytes"] == arc.stat().st_size


def test_round_trip_model_coded_blocks(tmp_path, random_model_path, model_archive):
    """The CLI decodes model-coded payloads (made through the API: the CLI cannot force them)."""
    arc = write(tmp_path, "z.shz", model_archive)
    assert_ok(run("decompress", arc, "--model", random_model_path, "-q"))
    assert (tmp_path / "z").read_bytes() == ZEROS


def test_round_trip_stdin_stdout_in_process(random_model_path, text):
    data = text[:500]
    r = run_in(["compress", "-", "-c", "--model", random_model_path, "-q"], data)
    assert_ok(r)
    assert r.stdout_bytes.startswith(b"SHZ\x89")
    r2 = run_in(["decompress", "-", "-c", "--model", random_model_path, "-q"], r.stdout_bytes)
    assert_ok(r2)
    assert r2.stdout_bytes == data


def test_round_trip_through_a_pipe(tmp_path, random_model_path, text):
    """`shazip compress - -c | shazip decompress - -c`, several blocks through real pipes."""
    data = random.Random(2).randbytes(32768) + text[:700]
    comp = subprocess.Popen(shazip_cmd("compress", "-", "-c", "--model", random_model_path,
                                       "--block-size", 16384),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
    dec = subprocess.Popen(shazip_cmd("decompress", "-", "-c", "--model", random_model_path),
                           stdin=comp.stdout, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
    comp.stdout.close()  # only `dec` reads it now
    comp.stdin.write(data)
    comp.stdin.close()
    out, dec_err = dec.communicate(timeout=120)
    comp_err = comp.stderr.read()
    comp.stderr.close()
    assert comp.wait(timeout=120) == 0, comp_err
    assert dec.returncode == 0, dec_err
    building = b"shazip: building the native int8 engine (once per machine)...\n"  # only on a first use
    assert comp_err.replace(building, b"") == b"" and dec_err.replace(building, b"") == b""
    assert out == data
    assert listing(tmp_path) == []


def test_works_without_a_tty(tmp_path, random_model_path):
    """No terminal anywhere: no progress bar written, no prompt, output produced."""
    data = random.Random(3).randbytes(5000)
    src = write(tmp_path, "f.bin", data)
    p = subprocess.run(shazip_cmd("compress", src.name, "--model", random_model_path), cwd=tmp_path,
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout == b"" and p.stderr == b""
    assert listing(tmp_path) == ["f.bin", "f.bin.shz"]
    assert_ok(run("decompress", tmp_path / "f.bin.shz", "-o", tmp_path / "g.bin", "--model", random_model_path))
    assert (tmp_path / "g.bin").read_bytes() == data


class _Terminal(io.StringIO):
    """stderr as the progress bar sees a terminal."""

    def isatty(self) -> bool:
        return True


def _decompress_on_a_terminal(monkeypatch, arc: Path, model: Path) -> tuple[str, ShazipError | None]:
    """`shazip -d ARC` (both commands run `decompress_file`) with stderr a terminal and a clock
    that moves a second at each look, so the bar draws at every update; returns what it drew
    and the error raised, if any."""
    term, error = _Terminal(), None
    with monkeypatch.context() as m:
        m.setattr(sys, "stderr", term)
        m.setattr(cli_io, "time", SimpleNamespace(time=itertools.count().__next__))
        try:
            cli.decompress_file(str(arc), str(arc.with_suffix("")), force=False, remove=False, bar=None,
                                model=str(model), threads=1)
        except ShazipError as e:
            error = e
    return term.getvalue(), error


def test_decompress_progress_has_percent_and_eta(tmp_path, monkeypatch, random_model_path, model_archive):
    """The archive's trailer gives the decoded size: the bar shows % and ETA up to 100 %."""
    arc = write(tmp_path, "z.shz", model_archive)
    drawn, error = _decompress_on_a_terminal(monkeypatch, arc, random_model_path)
    assert error is None and (tmp_path / "z").read_bytes() == ZEROS
    percents = [float(m) for m in re.findall(r"([0-9.]+)% +[0-9.]+ KB/s  ETA \d+:\d\d", drawn)]
    assert len(percents) > 3 and percents == sorted(percents) and percents[-1] == 100.0, drawn[-200:]
    assert re.search(r"\r {60,}\r$", drawn)  # the bar is wiped at the end


def test_compress_progress_shows_the_bits_per_byte_written_so_far(tmp_path, monkeypatch, text):
    """The compress bar's bits/byte moves within a block (the whole input here is one block) and
    ends at the archive's own figure (its headers aside)."""
    src = write(tmp_path, "a.txt", text[:40_000])
    term = _Terminal()
    with monkeypatch.context() as m:
        m.setattr(sys, "stderr", term)
        m.setattr(cli_io, "time", SimpleNamespace(time=itertools.count().__next__))
        cli.compress_file(str(src), str(src) + ".shz", False, False, None,
                          dict(model=str(Path(__file__).parent / "data" / "tiny-trained.safetensors"), level=6, lanes=None, block_size=1 << 20, frame_size=None,
                               threads=1, engine="int8", adapt="cm", device="cpu"))
    ratios = [float(r) for r in re.findall(r"([0-9.]+) bits/byte", term.getvalue())]
    final = 8 * (tmp_path / "a.txt.shz").stat().st_size / 40_000
    assert len(set(ratios)) > 10 and min(ratios) > 0, term.getvalue()[-300:]
    assert 0.97 * final < ratios[-1] <= final  # the headers and trailer aside (~60 bytes here)


def test_decompress_progress_without_a_trailer_to_trust(tmp_path, monkeypatch, random_model_path, model_archive,
                                                        raw_archive):
    """A damaged trailer (or a pipe) gives the bar no total: no %, and the decode's own error
    (found by the frames' index before anything is decoded), word for word what it says when
    read from standard input. (A single block's size is in its format 3 header.)"""
    assert declared_size(io.BytesIO(model_archive)) == len(ZEROS) == declared_size(io.BytesIO(raw_archive))
    solo = api_compress(b"abc" * 500, model=random_model_path, lanes=2)
    assert solo[5] & 1 and declared_size(io.BytesIO(solo)) == 1500
    bad = bytearray(model_archive)
    bad[-1] ^= 1  # the trailer's crc
    arc = write(tmp_path, "bad.shz", bytes(bad))

    class Pipe(io.BytesIO):
        def seekable(self) -> bool:
            return False

    assert declared_size(io.BytesIO(bad)) is None and declared_size(Pipe(model_archive)) is None
    assert declared_size(io.BytesIO(model_archive[-10:])) is None
    assert declared_size(io.BytesIO(model_archive + solo + raw_archive)) == 2 * len(ZEROS) + 1500  # frames
    drawn, error = _decompress_on_a_terminal(monkeypatch, arc, random_model_path)
    assert isinstance(error, CorruptArchive) and str(error).startswith(f"{arc}: end-of-archive trailer checksum mismatch")
    assert "%" not in drawn  # no total
    assert listing(tmp_path) == ["bad.shz"]
    from_file = assert_fails(run("-d", arc, "--model", random_model_path), "trailer checksum", tmp_path, ["bad.shz"], 1)
    from_stdin = run_in(["-d", "--model", random_model_path], bytes(bad))
    assert from_file == f"shazip: {error}" == from_stdin.stderr.strip().replace("standard input", str(arc))


def test_refuses_to_write_archive_to_a_terminal(tmp_path, random_model_path):
    """The counterpart: compressed data to a tty is refused (stdout is a pseudo-terminal)."""
    src = write(tmp_path, "f.bin", b"hello")
    master, slave = pty.openpty()
    try:
        p = subprocess.run(shazip_cmd("compress", src.name, "-c", "--model", random_model_path), cwd=tmp_path,
                           stdin=subprocess.DEVNULL, stdout=slave, stderr=subprocess.PIPE, timeout=120)
    finally:
        os.close(slave)
        os.close(master)
    assert p.returncode == 1
    assert b"refusing to write compressed data to a terminal" in p.stderr
    assert b"Traceback" not in p.stderr
    assert listing(tmp_path) == ["f.bin"]


# ---------------------------------------------------------------- 2. default names


def test_compress_default_name_keeps_input(tmp_path, random_model_path):
    src = write(tmp_path, "notes.txt", b"some notes\n")
    assert_ok(run("compress", src, "--model", random_model_path, "-q"))
    assert listing(tmp_path) == ["notes.txt", "notes.txt.shz"]
    assert src.read_bytes() == b"some notes\n"
    assert_ok(run("compress", src, "-k", "-f", "--model", random_model_path, "-q"))  # -k: same thing
    assert listing(tmp_path) == ["notes.txt", "notes.txt.shz"]


def test_decompress_default_name_strips_suffix(tmp_path, random_model_path):
    src = write(tmp_path, "notes.txt", b"some notes\n")
    assert_ok(run("compress", src, "--model", random_model_path, "-q"))
    src.unlink()
    assert_ok(run("decompress", tmp_path / "notes.txt.shz", "--model", random_model_path, "-q"))
    assert src.read_bytes() == b"some notes\n"
    assert listing(tmp_path) == ["notes.txt", "notes.txt.shz"]  # archive kept by default


def test_decompress_with_output_option(tmp_path, random_model_path):
    src = write(tmp_path, "a.txt", b"abc")
    assert_ok(run("compress", src, "--model", random_model_path, "-q"))
    assert_ok(run("decompress", tmp_path / "a.txt.shz", "-o", tmp_path / "b.txt", "--model", random_model_path))
    assert (tmp_path / "b.txt").read_bytes() == b"abc"
    assert listing(tmp_path) == ["a.txt", "a.txt.shz", "b.txt"]


def test_rm_removes_input_after_success(tmp_path, random_model_path):
    src = write(tmp_path, "a.txt", b"remove me")
    assert_ok(run("compress", src, "--rm", "--model", random_model_path, "-q"))
    assert listing(tmp_path) == ["a.txt.shz"]
    assert_ok(run("decompress", tmp_path / "a.txt.shz", "--rm", "--model", random_model_path, "-q"))
    assert listing(tmp_path) == ["a.txt"]
    assert src.read_bytes() == b"remove me"


def test_rm_keeps_input_on_failure(tmp_path, random_model_path):
    arc = write(tmp_path, "bad.shz", b"this is not an archive\n")
    before = listing(tmp_path)
    assert_fails(run("decompress", arc, "--rm", "--model", random_model_path), "not a shazip archive", tmp_path,
                 before, code=1)
    assert arc.read_bytes() == b"this is not an archive\n"


def test_decompress_unknown_suffix(tmp_path, random_model_path):
    arc = write(tmp_path, "data.bin", b"whatever")
    before = listing(tmp_path)
    assert_fails(run("decompress", arc, "--model", random_model_path), "unknown suffix", tmp_path, before, code=2)


# ---------------------------------------------------------------- 3. errors


def test_input_missing(tmp_path, random_model_path):
    """An error, as gzip's: exit status 1 (2 is for warnings and bad usage)."""
    assert_fails(run("compress", tmp_path / "nope.txt", "--model", random_model_path), "no such file",
                 tmp_path, [], code=1)
    assert_fails(run("decompress", tmp_path / "nope.shz", "--model", random_model_path), "no such file",
                 tmp_path, [], code=1)
    assert_fails(run("info", tmp_path / "nope.shz"), "no such file", tmp_path, [], code=1)


def test_input_is_a_directory(tmp_path, random_model_path):
    (tmp_path / "d").mkdir()
    assert_fails(run("compress", tmp_path / "d", "--model", random_model_path), "is a directory",
                 tmp_path, ["d"], code=2)


def test_not_an_archive(tmp_path, random_model_path):
    arc = write(tmp_path, "x.shz", b"plain text, no magic here\n")
    before = listing(tmp_path)
    assert_fails(run("decompress", arc, "--model", random_model_path), "not a shazip archive", tmp_path, before,
                 code=1)
    assert_fails(run("info", arc), "not a shazip archive", tmp_path, before, code=1)


def test_unsupported_version(tmp_path, random_model_path, raw_archive):
    assert raw_archive[4] == 5  # format_version (with the adaptive stage), docs/format.md
    data = bytearray(raw_archive)
    data[4] = 9
    arc = write(tmp_path, "v.shz", bytes(data))
    before = listing(tmp_path)
    msg = assert_fails(run("decompress", arc, "--model", random_model_path), "version 9 is not supported",
                       tmp_path, before, code=1)
    assert "format" in msg


def test_truncated_archive(tmp_path, random_model_path, raw_archive):
    arc = write(tmp_path, "t.shz", raw_archive[: len(raw_archive) // 2])
    before = listing(tmp_path)
    assert_fails(run("decompress", arc, "--model", random_model_path), "truncated", tmp_path, before, code=1)
    assert_fails(run("info", arc), "truncated", tmp_path, before, code=1)


def test_truncated_archive_to_stdout_fails(random_model_path, raw_archive):
    r = run_in(["decompress", "-", "-c", "--model", random_model_path], raw_archive[:-1])
    assert r.exit_code == 1 and isinstance(r.exception, SystemExit)
    assert "truncated" in r.stderr


def test_model_not_found_on_compress(tmp_path):
    src = write(tmp_path, "a.txt", b"hello")
    assert_fails(run("compress", src, "--model", "/nonexistent"), "model not found", tmp_path, ["a.txt"], code=1)


def test_model_not_found_on_decompress(tmp_path, model_archive):
    arc = write(tmp_path, "z.shz", model_archive)
    assert_fails(run("decompress", arc, "--model", "/nonexistent"), "model not found", tmp_path, ["z.shz"],
                 code=1)


def test_model_file_is_not_a_model(tmp_path):
    src = write(tmp_path, "a.txt", b"hello")
    bogus = write(tmp_path, "bogus.safetensors", b"\x00" * 64)
    assert_fails(run("compress", src, "--model", bogus), "not a shazip model", tmp_path,
                 ["a.txt", "bogus.safetensors"], code=1)


def test_archive_needs_model_that_is_not_installed(tmp_path, model_archive):
    arc = write(tmp_path, "z.shz", model_archive)
    msg = assert_fails(run("decompress", arc), "tiny-random", tmp_path, ["z.shz"], code=1)
    assert "not installed" in msg and "--model" in msg


def test_wrong_model(tmp_path, other_model_path, model_archive):
    arc = write(tmp_path, "z.shz", model_archive)
    assert_fails(run("decompress", arc, "--model", other_model_path), "wrong model", tmp_path, ["z.shz"], code=1)


def test_output_exists_compress(tmp_path, random_model_path):
    src = write(tmp_path, "a.txt", b"new content")
    arc = write(tmp_path, "a.txt.shz", b"precious")
    before = listing(tmp_path)
    assert_fails(run("compress", src, "--model", random_model_path, "-q"), "already exists", tmp_path, before,
                 code=1)
    assert arc.read_bytes() == b"precious"
    assert_ok(run("compress", src, "-f", "--model", random_model_path, "-q"))
    assert listing(tmp_path) == before
    assert arc.read_bytes().startswith(b"SHZ\x89")
    src.unlink()
    assert_ok(run("decompress", arc, "--model", random_model_path, "-q"))
    assert src.read_bytes() == b"new content"


def test_output_exists_decompress(tmp_path, random_model_path):
    src = write(tmp_path, "a.txt", b"archived")
    assert_ok(run("compress", src, "--model", random_model_path, "-q"))
    src.write_bytes(b"precious")
    before = listing(tmp_path)
    assert_fails(run("decompress", tmp_path / "a.txt.shz", "--model", random_model_path), "already exists",
                 tmp_path, before, code=1)
    assert src.read_bytes() == b"precious"
    assert_ok(run("decompress", tmp_path / "a.txt.shz", "-f", "--model", random_model_path))
    assert src.read_bytes() == b"archived"
    assert listing(tmp_path) == before


def test_failed_decompress_with_force_keeps_existing_output(tmp_path, random_model_path, raw_archive):
    """-f replaces the output only after the whole archive decoded and verified."""
    arc = write(tmp_path, "t.shz", raw_archive[:-5])
    out = write(tmp_path, "t", b"precious")
    before = listing(tmp_path)
    assert_fails(run("decompress", arc, "-f", "--model", random_model_path), "truncated", tmp_path, before)
    assert out.read_bytes() == b"precious"


@pytest.mark.parametrize("args, phrase", [
    (["--block-size", "0"], "block size must be between"),
    (["--lanes", "-1"], "lanes must be between"),  # 0 is the automatic choice
    (["--lanes", "5000"], "lanes must be between"),
], ids=["block-size-0", "lanes-negative", "lanes-too-many"])
def test_bad_numeric_options(tmp_path, random_model_path, args, phrase):
    src = write(tmp_path, "a.txt", b"hello")
    assert_fails(run("compress", src, "--model", random_model_path, *args), phrase, tmp_path, ["a.txt"], code=2)


# ---------------------------------------------------------------- 5. info, models, misc


def test_info_text(tmp_path, model_archive):
    arc = write(tmp_path, "z.shz", model_archive)
    r = run("info", arc)
    assert_ok(r)
    assert "model tiny-random" in r.stdout
    assert "3 blocks" in r.stdout
    assert f"original {len(ZEROS)} bytes, archive {len(model_archive)} bytes" in r.stdout
    assert r.stdout.count("  block ") == 3 and "model" in r.stdout.splitlines()[-1]
    assert listing(tmp_path) == ["z.shz"]  # info writes nothing


def test_info_json_of_empty_archive(tmp_path, random_model_path):
    src = write(tmp_path, "e", b"")
    assert_ok(run("compress", src, "--model", random_model_path, "-q"))
    r = run("info", tmp_path / "e.shz", "--json")
    assert_ok(r)
    d = json.loads(r.stdout)
    assert d["n_blocks"] == 0 and d["blocks"] == [] and d["total_len"] == 0
    r = run("info", tmp_path / "e.shz")  # no division by zero for the ratio
    assert_ok(r)
    assert "0 blocks" in r.stdout


def test_models_runs():
    r = run("models")
    assert_ok(r)
    assert r.stdout.strip()


def test_models_tell_a_warm_started_models_whole_training():
    from shazip.cli.models import _describe_model
    entry = {"file": "m.safetensors", "sha256": "ab" * 32, "figures": {"bytes_seen": 39_700_000, "steps": 5000,
                                                                       "bytes_seen_before": 175_200_000}}
    text = "\n".join(_describe_model("m", entry, "bundled"))
    assert "trained on 39.7 MB in 5000 steps, warm-started from weights trained on 175.2 MB (214.9 MB in all)" in text


def test_version_and_help():
    r = run("--version")
    assert_ok(r)
    assert r.stdout.startswith("shazip")
    for cmd in ([], ["compress"], ["decompress"], ["info"]):
        assert_ok(run(*cmd, "--help"))


def test_outputs_keep_the_inputs_mode_and_times(tmp_path, random_model_path):
    """As gzip/xz/zstd: a private file stays private, and its dates survive both ways."""
    src = write(tmp_path, "a.txt", b"private notes\n")
    src.chmod(0o600)
    times = (981_173_106_000_000_000, 981_173_106_123_456_789)

    def kept(path: Path) -> None:
        st = path.stat()
        assert st.st_mode & 0o777 == 0o600 and (st.st_atime_ns, st.st_mtime_ns) == times, (oct(st.st_mode), st)

    os.utime(src, ns=times)
    assert_ok(run("compress", src, "--model", random_model_path, "-q"))
    kept(tmp_path / "a.txt.shz")  # (before decompress reads it, which may move its access time)
    assert_ok(run("decompress", tmp_path / "a.txt.shz", "-o", tmp_path / "b.txt", "--model", random_model_path, "-q"))
    kept(tmp_path / "b.txt")


def test_output_from_standard_input_follows_umask(tmp_path, random_model_path):
    umask = os.umask(0)
    os.umask(umask)
    r = run_in(["compress", "-", "-o", tmp_path / "s.shz", "--model", random_model_path, "-q"], b"hello")
    assert_ok(r)
    assert (tmp_path / "s.shz").stat().st_mode & 0o777 == 0o666 & ~umask


def test_other_formats_are_named(tmp_path, random_model_path):
    import gzip
    arc = write(tmp_path, "x.shz", gzip.compress(b"hello"))
    msg = assert_fails(run("decompress", arc, "--model", random_model_path), "this is a gzip file", tmp_path,
                       ["x.shz"], code=1)
    assert str(arc) in msg  # the user's file is named


def test_unwritable_output_names_the_output(tmp_path, random_model_path):
    src = write(tmp_path, "a.txt", b"hello")
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        if os.access(locked, os.W_OK):
            pytest.skip("running as a user who can write anywhere")
        msg = assert_fails(run("compress", src, "-o", locked / "a.shz", "--model", random_model_path), "cannot write",
                           tmp_path, ["a.txt", "locked"])
        assert str(locked / "a.shz") in msg and ".tmp" not in msg
    finally:
        locked.chmod(0o700)


def test_refuses_to_read_compressed_data_from_a_terminal(tmp_path, random_model_path):
    master, slave = pty.openpty()
    try:
        p = subprocess.run(shazip_cmd("decompress", "-", "-c", "--model", random_model_path), cwd=tmp_path,
                           stdin=slave, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    finally:
        os.close(slave)
        os.close(master)
    assert p.returncode == 1 and b"refusing to read compressed data from a terminal" in p.stderr


def test_output_onto_the_input_is_refused(tmp_path, random_model_path):
    src = tmp_path / "a"
    src.write_bytes(b"hello world\n")
    r = CliRunner().invoke(main, ["compress", str(src), "-o", str(src), "-f", "--rm", "--model", str(random_model_path)])
    assert r.exit_code == 2 and "would overwrite the input" in r.stderr
    assert src.read_bytes() == b"hello world\n" and sorted(p.name for p in tmp_path.iterdir()) == ["a"]


@pytest.fixture(scope="module")
def slow_archive(random_model, text) -> bytes:
    """Model-coded with one lane: slow enough to decode that a signal catches it mid-way."""
    return api_compress(text * 2, model=random_model, block_size=20000, lanes=1, methods=frozenset({Method.MODEL}), adapt="none")


@pytest.mark.parametrize("command", ["compress", "decompress"])
@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_interrupt_leaves_no_output(tmp_path, slow_archive, random_model_path, text, sig, code, command):
    """A real process interrupted mid-way: exit 130/143, no output or temp file, input intact."""
    if command == "compress":
        src = write(tmp_path, "big.txt", text * 4)
    else:
        src = write(tmp_path, "big.txt.shz", slow_archive)
    before = src.read_bytes()
    # the signals' default handling, as at a terminal: a test run in the background inherits SIGINT ignored
    p = subprocess.Popen([sys.executable, "-m", "shazip", command, str(src), "--model", str(random_model_path),
                          "-q"] + (["--block-size", "20000"] if command == "compress" else []), stderr=subprocess.PIPE,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    wait_until_writing(p, tmp_path)
    time.sleep(0.3)
    p.send_signal(sig)
    _, err = p.communicate(timeout=60)
    assert p.returncode == code, err
    assert b"Traceback" not in err
    assert sorted(f.name for f in tmp_path.iterdir()) == [src.name]
    assert src.read_bytes() == before


def test_two_processes_at_once(tmp_path, random_model_path, text):
    """Two `shazip compress` processes on different files at the same time (sharing the
    native-engine cache and the model file): both archives are correct."""
    a = write(tmp_path, "a.txt", text[:30000])
    b = write(tmp_path, "b.txt", text[30000:] + os.urandom(5000))
    procs = [subprocess.Popen([sys.executable, "-m", "shazip", "compress", str(f), "--model", str(random_model_path),
                               "--block-size", "8000", "-q"], stderr=subprocess.PIPE) for f in (a, b)]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    for f in (a, b):
        assert_ok(run("decompress", f"{f}.shz", "-o", f"{f}.back", "--model", random_model_path))
        assert Path(f"{f}.back").read_bytes() == f.read_bytes()


def test_memory_does_not_grow_with_the_input(tmp_path, random_model_path, text):
    """compress and decompress stream block by block (frame by frame, a few frames in flight):
    192 MiB in costs no more peak memory than 96 MiB in, both enough frames to fill every
    worker (each process's own peak RSS, from wait4). Two workers whatever the machine: with 16,
    96 MiB of frames filled fewer of them than 192 did (seen on a 16-core machine)."""
    from shazip.bench.measure import measure
    rng, peaks = random.Random(3), {}
    for mib in (96, 192):
        src = tmp_path / f"in{mib}"
        with open(src, "wb") as f:
            f.write(text)
            for _ in range(mib):
                f.write(rng.randbytes(1 << 20))
        shz = [sys.executable, "-m", "shazip"]
        arc, back = tmp_path / f"a{mib}", tmp_path / f"b{mib}"
        c = measure(shz + ["compress", "-", "-c", "-q", "-T", "2", "--model", str(random_model_path)], src, arc)
        d = measure(shz + ["decompress", "-", "-c", "-q", "-T", "2", "--model", str(random_model_path)], arc, back)
        assert back.read_bytes() == src.read_bytes()
        peaks[mib] = (c.peak_rss_mb, d.peak_rss_mb)
    # memory that grew with the input would add ~96 MB; one frame more in flight at the peak (16 MiB
    # in, its output beside it) is the timing of two workers, and stays under half of that
    assert peaks[192][0] - peaks[96][0] < 48 and peaks[192][1] - peaks[96][1] < 48, peaks


# ---------------------------------------------------------------- 6. gzip habits


def test_several_files_one_bad_others_done(tmp_path, random_model_path):
    """`shazip a b missing c`: the good files are compressed, the bad one is reported, the exit
    status says so; then `-d` on the archives and `-t` on them."""
    for name in "abc":
        write(tmp_path, f"{name}.txt", f"text of {name}\n".encode() * 20)
    r = run("--model", random_model_path, "-q", tmp_path / "a.txt", tmp_path / "b.txt", tmp_path / "nope.txt",
            tmp_path / "c.txt")
    assert r.exit_code == 1 and "nope.txt: no such file" in r.stderr
    assert {"a.txt.shz", "b.txt.shz", "c.txt.shz"} <= set(listing(tmp_path))
    archives = [tmp_path / f"{n}.txt.shz" for n in "abc"]
    assert_ok(run("-t", "--model", random_model_path, "-q", *archives))
    for n in "abc":
        (tmp_path / f"{n}.txt").unlink()
    assert_ok(run("-d", "--model", random_model_path, "-q", *archives))
    assert (tmp_path / "b.txt").read_bytes() == b"text of b\n" * 20


def test_test_mode_catches_a_flipped_bit_and_writes_nothing(tmp_path, random_model_path, raw_archive):
    start, n, _ = payload_spans(raw_archive)[1]
    bad = bytearray(raw_archive)
    bad[start + n // 2] ^= 1
    arc = write(tmp_path, "x.shz", bytes(bad))
    good = write(tmp_path, "y.shz", raw_archive)
    r = run("-t", "--model", random_model_path, arc, good)
    assert r.exit_code == 1 and "x.shz: block 1: checksum mismatch" in r.stderr and "y.shz" not in r.stderr
    assert listing(tmp_path) == ["x.shz", "y.shz"]


def test_filter_without_files(random_model_path):
    data = b"through a filter\n" * 30
    comp = subprocess.run(shazip_cmd("--model", random_model_path), input=data, capture_output=True, timeout=120)
    assert comp.returncode == 0 and comp.stdout.startswith(b"SHZ\x89")
    back = subprocess.run(shazip_cmd("-d", "--model", random_model_path), input=comp.stdout, capture_output=True,
                          timeout=120)
    assert back.returncode == 0 and back.stdout == data


def test_tar_uses_shazip_both_ways(tmp_path, random_model_path):
    """`tar -I shazip`: tar runs the compressor as a filter, and with -d to read."""
    import shutil
    if shutil.which("tar") is None:
        pytest.skip("no tar")
    tool = tmp_path / "shz"
    tool.write_text(f"#!/bin/sh\nexec {sys.executable} -m shazip --model {random_model_path} -q \"$@\"\n")
    tool.chmod(0o755)
    tree = tmp_path / "tree"
    (tree / "sub").mkdir(parents=True)
    (tree / "sub" / "f.txt").write_bytes(b"inside a tar\n" * 50)
    subprocess.run(["tar", "-I", str(tool), "-cf", "t.tar.shz", "tree"], cwd=tmp_path, check=True, timeout=120)
    assert (tmp_path / "t.tar.shz").read_bytes()[:4] == b"SHZ\x89"
    out = tmp_path / "out"
    out.mkdir()
    subprocess.run(["tar", "-I", str(tool), "-xf", str(tmp_path / "t.tar.shz")], cwd=out, check=True, timeout=120)
    assert (out / "tree" / "sub" / "f.txt").read_bytes() == b"inside a tar\n" * 50


def test_recursive_and_one_output(tmp_path, random_model_path):
    (tmp_path / "d" / "e").mkdir(parents=True)
    write(tmp_path / "d", "x.txt", b"x" * 100)
    write(tmp_path / "d" / "e", "y.txt", b"y" * 100)
    assert_ok(run("-r", "--model", random_model_path, "-q", tmp_path / "d"))
    assert sorted(os.listdir(tmp_path / "d" / "e")) == ["y.txt", "y.txt.shz"]
    r = run("-o", tmp_path / "o.shz", "--model", random_model_path, tmp_path / "d" / "x.txt", tmp_path / "d" / "e" / "y.txt")
    assert r.exit_code == 2 and "exactly one input" in r.stderr


def test_unshazip_and_shazcat_entry_points(tmp_path, random_model_path):
    arc = tmp_path / "a.txt.shz"
    assert_ok(run_in(["-o", arc, "--model", random_model_path, "-q", "-"], b"cat me\n"))
    entry = "import sys; from shazip.programs import {0}; sys.argv[0] = '{0}'; {0}()"
    cat = subprocess.run([sys.executable, "-c", entry.format("shazcat"), "--model", str(random_model_path), str(arc)],
                         capture_output=True, timeout=120)
    assert cat.returncode == 0 and cat.stdout == b"cat me\n"
    un = subprocess.run([sys.executable, "-c", entry.format("unshazip"), "--model", str(random_model_path), "-q",
                         str(arc)], capture_output=True, timeout=120)
    assert un.returncode == 0 and (tmp_path / "a.txt").read_bytes() == b"cat me\n"
    import tomllib
    scripts = tomllib.loads((Path(__file__).parent.parent / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {name: f"shazip.programs:{name}" for name in ("shazip", "unshazip", "shazcat")}


def test_verbose_says_what_each_file_became(tmp_path, random_model_path):
    src = write(tmp_path, "v.txt", b"verbose " * 100)
    r = run("-v", "-q", "--model", random_model_path, src)
    assert_ok(r)
    size = (tmp_path / "v.txt.shz").stat().st_size
    assert f"{src}: 800 -> {size:,} bytes ({8 * size / 800:.3f} bits/byte), {src}.shz" in r.stderr


# ---------------------------------------------------------------- the first hour (issue 49)

def test_help_lists_every_option_in_80_columns():
    from shazip.cli import FILES
    from shazip.cli.flags import GROUPS
    r = run("--help")
    assert_ok(r)
    assert max(map(len, r.stdout.splitlines())) <= 80
    files = main.commands[FILES]
    grouped = {n for names in GROUPS.values() for n in names}
    for p in files.params:
        if isinstance(p, click.Argument):
            continue
        assert p.name in grouped, f"{p.name} is under no heading of shazip --help"
        if not p.hidden:
            assert all(opt in r.stdout for opt in p.opts), p.opts
    for name in main.list_commands(None):
        assert f"\n  {name} " in r.stdout, name


def test_every_option_is_one_row_of_the_table():
    """The file command's options are flags.py's rows, in order, and the tools' commands that
    take one of them take it from there: the same names and help (only a default may differ)."""
    from shazip.cli import FILES
    from shazip.cli.flags import BY_DEST, FLAGS
    files = [p for p in main.commands[FILES].params if isinstance(p, click.Option)]
    assert [(p.name, p.opts, p.help) for p in files] == [(p.name, p.opts, p.help) for f in FLAGS for p in f.params()]
    for name in ("compress", "decompress"):
        assert [p.opts for p in main.commands[name].params] == [p.opts for p in main.commands[FILES].params
                                                                if p.name != "mode"]
    bench = main.get_command(None, "bench")
    shared = [p for p in bench.params if p.name in BY_DEST]
    assert {p.name for p in shared} == {"model", "lanes", "threads", "adapt", "level"}
    for p in shared:
        assert (p.opts, p.help) in [(q.opts, q.help) for q in BY_DEST[p.name].params()], p.name


def test_a_level_past_nine_is_named():
    r = run("-10", "x")
    assert r.exit_code == 2 and "no such level: -10 (the levels are -1 .. -9)" in r.stderr


def test_recursing_skips_dangling_links_with_a_warning(tmp_path):
    (tmp_path / "a.txt").write_bytes(b"real text\n" * 50)
    (tmp_path / "gone").symlink_to(tmp_path / "nowhere")
    r = run("-1", "-r", tmp_path)
    assert r.exit_code == 2 and "gone: a symbolic link to nothing" in r.stderr
    assert (tmp_path / "a.txt.shz").exists() and not (tmp_path / "gone.shz").exists()
    (tmp_path / "a.txt.shz").unlink()
    r = run("-1", "-r", "-q", tmp_path)  # -q silences warnings, as gzip's; the status still says one
    assert r.exit_code == 2 and r.stderr == "" and (tmp_path / "a.txt.shz").exists()


def test_a_file_named_like_a_command_is_pointed_out(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "models").write_bytes(b"not the command\n")
    r = run("models")
    assert_ok(r)
    assert "shazip -- models" in r.stderr
    assert_ok(run("-1", "--", "models"))
    assert (tmp_path / "models.shz").exists()


def test_listing_counts_in_words(tmp_path):
    (tmp_path / "one").write_bytes(b"x")
    assert_ok(run("-1", "-q", tmp_path / "one"))
    r = run("-lv", tmp_path / "one.shz")
    assert "original 1 byte," in r.stdout and ", 1 block\n" in r.stdout


def test_verbose_shows_undecodable_names_as_errors_do(tmp_path):
    name = tmp_path / os.fsdecode(b"bad\xffname.txt")
    name.write_bytes(b"some text\n")
    r = run("-1", "-v", "-q", name)
    assert_ok(r)
    assert "bad\\xffname.txt: 10 -> " in r.stderr and "bad\\xffname.txt.shz" in r.stderr


def test_listing_names_the_levels_whose_stage_an_archive_has(tmp_path):
    src = tmp_path / "t.txt"
    src.write_bytes(b"the stage's models, named by level " * 200)
    # repetitive text: -3 .. -6 code it with -7's models too
    for level, named in (("-1", "the models of level -1 ("), ("-7", "the models of levels -3 / -4 / -5 / -6 / -7 / -8 / -9 (")):
        assert_ok(run(level, "-f", "-q", src, "--model", Path(__file__).parent / "data" / "tiny-trained.safetensors"))
        r = run("-lv", tmp_path / "t.txt.shz")
        assert named in r.stdout, r.stdout
