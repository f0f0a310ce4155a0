"""The habits a gzip/xz/zstd user brings (issue 25): names, exit codes, one version, a clean
progress line."""

from __future__ import annotations

import io
import random
import sys
import time
from pathlib import Path

import pytest

import shazip
from shazip.cli.io import ProgressBar

from test_cli import assert_ok, listing, run

DATA = Path(__file__).parent / "data"


def test_an_archive_is_not_compressed_again(tmp_path):
    """gzip's rule: a file that already has the suffix is left alone with a warning (exit 2),
    the other files done; -f compresses it anyway."""
    (tmp_path / "ten.shz").write_bytes(b"x" * 10)
    (tmp_path / "a.txt").write_bytes(b"a" * 10)
    r = run("--no-progress", tmp_path / "ten.shz", tmp_path / "a.txt")
    assert r.exit_code == 2 and "ten.shz: already has the .shz suffix -- unchanged" in r.stderr
    assert listing(tmp_path) == ["a.txt", "a.txt.shz", "ten.shz"]
    assert_ok(run("-q", "-f", tmp_path / "ten.shz"))
    assert (tmp_path / "ten.shz.shz").exists()


def test_file_names_that_are_command_names(tmp_path, monkeypatch):
    """`shazip -- info` compresses a file named info; usage errors name the program, never the
    hidden command behind the gzip-style use."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "info").write_bytes(b"i" * 10)
    assert_ok(run("-q", "--", "info"))
    assert listing(tmp_path) == ["info", "info.shz"]
    r = run("--bogus")
    assert r.exit_code == 2 and "files" not in r.output and "Usage: main [OPTIONS] [FILES]..." in r.output


def test_one_version_everywhere():
    """`shazip -V`, the package metadata and the README's status line give one version."""
    from pathlib import Path
    assert run("-V").output.strip().endswith(shazip.__version__)
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    major_minor = ".".join(shazip.__version__.split(".")[:2])
    assert f"Status ({major_minor}," in readme



def test_the_progress_line_leaves_no_stale_characters(monkeypatch):
    """A shorter line (an ETA of 0:27 after one of 0:270) is padded over the longer one."""
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    err = Tty()
    monkeypatch.setattr(sys, "stderr", err)
    bar = ProgressBar(total=10**9, name="big.txt", show=True)
    clock = [bar.t0]
    monkeypatch.setattr(time, "time", lambda: clock[0])
    for done, t in ((10**6, 1.0), (10**8, 2.0)):  # a slow start, then fast: the ETA shrinks
        clock[0] = bar.t0 + t
        bar(done)
    lines = err.getvalue().split("\r")[1:]
    assert len(lines) == 2 and len(lines[1].rstrip()) < len(lines[0])  # the text got shorter (ETA 0:18, was 16:39)...
    assert len(lines[1]) == len(lines[0])  # ...and covers the longer line's last characters
    assert all(line.startswith("big.txt  ") for line in lines)


def test_the_progress_line_waits_a_second_for_its_rate_and_shows_the_ratio(monkeypatch):
    err = io.StringIO()  # not a terminal: shown only because asked (--progress)
    monkeypatch.setattr(sys, "stderr", err)
    bar = ProgressBar(total=10**6, name="a.txt", show=True, ratio=True)
    clock = [bar.t0]
    monkeypatch.setattr(time, "time", lambda: clock[0])
    clock[0] += 0.5
    bar(40_000, 8000.0)  # half a second in: no rate, ETA or ratio yet
    clock[0] += 1.0
    bar(60_000, 32000.0)
    first, second = err.getvalue().split("\r")[1:]
    assert "4.0%" in first and "KB/s" not in first and "ETA" not in first and "bits/byte" not in first
    assert "ETA" in second and "66.7 KB/s" in second and "0.400 bits/byte" in second
    assert ProgressBar(10, "x", None).enabled is False  # auto: stderr here is no terminal


@pytest.mark.parametrize("frame_size", [None, 16384])
def test_progress_reports_the_bits_as_blocks_are_coded(text, trained, frame_size):
    """Compressing reports each block's bits as it is coded (not only at its end), and the bits
    reported add up to the payloads' size exactly, whatever method each block ended with (one
    frame, and frames made at once on two threads)."""
    from shazip.codec.block import CodingStats
    data = text[:49152] + random.Random(5).randbytes(16384) + text[:4000]  # a block stored, not model-coded
    calls = []
    stats = CodingStats()
    c = shazip.Compressor(trained, level=6, block_size=16384, frame_size=frame_size, threads=2)
    out = io.BytesIO()
    c.compress_stream(io.BytesIO(data), out, lambda n, bits=0.0: calls.append((n, bits)), stats)
    assert sum(n for n, _ in calls) == len(data)
    assert abs(sum(b for _, b in calls) - 8 * stats.payload) < 1e-6 * stats.payload
    assert set(stats.methods) - {"mixed"}  # a block not model-coded is counted too
    during = [b for n, b in calls if n and b]  # bits told with bytes, before any block's end
    assert len(during) > 10 and sum(during) > 0.9 * 8 * stats.chosen_payload  # the model-coded blocks' cost, as coded
    assert shazip.decompress(out.getvalue(), trained) == data


def test_bench_finds_7zip_under_debians_names(tmp_path, monkeypatch):
    """The PPMd column needs 7-Zip, which Debian installs as 7z / 7za rather than 7zz."""
    import os
    from shazip.bench.baselines import BASELINES, run_baseline
    ppmd = next(b for b in BASELINES if b.key == "ppmd")
    fake = tmp_path / "bin" / "7za"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(fake.parent))
    assert ppmd.tool() == str(fake)
    monkeypatch.undo()
    if not ppmd.tool():
        return  # no 7-Zip on this machine: the row would be left out, as before
    src = tmp_path / "t.txt"
    src.write_bytes(b"the habits a user brings\n" * 200)
    (tmp_path / "w").mkdir()
    row = run_baseline(ppmd, src, tmp_path / "w", os.path.getsize(src))
    assert row is not None and row.round_trip and 0 < row.archive_bytes < 5000


def test_listing_several_archives_names_each_and_the_model_as_the_user_knows_it(tmp_path):
    from shazip.model.file import bundled_index
    if "default" not in bundled_index():
        return  # a checkout without the bundled model
    for name in ("a.txt", "b.txt"):
        (tmp_path / name).write_bytes(name.encode() + b" holds a quick brown fox that jumps over the lazy dog\n")
    assert_ok(run("-q", tmp_path / "a.txt", tmp_path / "b.txt"))
    r = run("-lv", tmp_path / "a.txt.shz", tmp_path / "b.txt.shz")
    assert_ok(r)
    assert f"{tmp_path / 'a.txt.shz'}:" in r.stdout and f"{tmp_path / 'b.txt.shz'}:" in r.stdout
    assert r.stdout.count("model default") == 2 and "(bundled), id " in r.stdout


def test_an_empty_file_costs_little(tmp_path):
    """Format 4 writes an empty input as its header alone (no block fields, no trailer, no stage
    parameters): 21 bytes with the bundled model (gzip 20, xz 32); it decodes to nothing and
    concatenates like any archive."""
    from shazip.model.file import bundled_index
    if "default" not in bundled_index():
        return
    empty = shazip.compress(b"")
    assert len(empty) == 21 and shazip.decompress(empty) == b""
    assert shazip.decompress(empty + shazip.compress(b"x") + empty) == b"x"
    d = shazip.ShazipDecompressor()
    assert d.decompress(empty + b"SHZ") == b"" and d.eof and d.unused_data == b"SHZ"


def test_levels_record_what_they_chose_and_decode_without_being_told(trained, text):
    """-1 and -2 code with the adaptive stage alone (no NN input; version 1's and version 11's
    models, here without its table models: this wiki markup is no table) in one lane; -3 .. -9
    every model (-3 .. -6 because this wiki markup is repetitive: zstd's fastest level shrinks it
    more than 3-fold; on prose they leave out the heaviest), and the model in ever
    longer lanes (2 KB at -3, 16 KB at the default -6, one lane at -9; four times longer on repetitive
    text, as this wiki markup is, but not fewer than 8 where the plain rule gives that many, and
    not on text zstd shrinks less than 3-fold). Where every block is one lane (-2, -9) the
    stage leaves out its models of a lane's own statistics. Every level but -1 has version 16's
    slow final mixer, version 17's seeded sets, version 18's models of numbers and version 19's
    number echo (its archive is version 19), -7 .. -9 also version 17's
    order, place and match mixers and the NN's final input. The archive records every choice: decoding
    takes no level."""
    from shazip.stage.adaptive import AdaptiveParams
    from shazip.format.listing import describe
    data = text[:40000]
    lanes = {}
    for level in range(1, 10):
        blob = shazip.compress(data, model=trained, level=level)
        head = describe(io.BytesIO(blob))[0]
        params = AdaptiveParams.unpack(bytes.fromhex(head["adapt_params"]), head["adapt_version"])
        assert params.nn == (level >= 3) and params.runs == params.groups == (level >= 3)
        assert params.group_word == params.group_mix == params.group_apm == (level >= 3)
        assert params.tokens == params.indirect == (level >= 3)
        assert params.places == params.order_mix == params.match_mix == params.nn_final == (level >= 3)
        assert params.slow_final == params.seed_sets == (level >= 2)
        assert params.float_tail == params.line_step == params.number_echo == (level >= 2)
        assert head["adapt_version"] == (1 if level == 1 else 19)
        assert params.sparse
        assert params.local_ctx == params.local_match == (3 <= level <= 8)
        assert params.cell_left is params.cell_order is params.cell_up is False
        lanes[level] = [b["lanes"] for b in head["blocks"]]
        assert shazip.decompress(blob, model=trained) == data
    assert [lanes[k] for k in range(1, 10)] == [[1], [1], [8], [8], [1], [1], [1], [1], [1]]
    head = describe(io.BytesIO(shazip.compress(data[:5000], model=trained, lanes=1)))[0]  # one lane asked for
    params = AdaptiveParams.unpack(bytes.fromhex(head["adapt_params"]), head["adapt_version"])
    assert not params.local_ctx and not params.local_match and params.groups
    rng, words = random.Random(3), text.split()
    loose = b" ".join(rng.choice(words) for _ in range(8000))[:40000]  # its words shuffled: zstd -1 2.9-fold
    for level, want in ((3, 19), (4, 9), (6, 2)):
        blob = shazip.compress(loose, model=trained, level=level)
        head = describe(io.BytesIO(blob))[0]
        assert [b["lanes"] for b in head["blocks"]] == [want]
        params = AdaptiveParams.unpack(bytes.fromhex(head["adapt_params"]), head["adapt_version"])
        assert not (params.group_word or params.tokens or params.sparse)  # prose keeps the level's lighter models
    assert shazip.compress(data, model=trained) == shazip.compress(data, model=trained, level=6)
    for bad in (0, 10):
        with pytest.raises(shazip.ShazipError, match="level must be between 1 and 9"):
            shazip.compress(data, model=trained, level=bad)
    with pytest.raises(shazip.ShazipError, match="cannot be off"):
        shazip.compress(data, model=trained, level=1, adapt="none")


def test_level_flags_as_gzip_has_them(tmp_path):
    """-1 .. -9, --fast (-1) and --best (-9), in the gzip-style form and in `compress`; no flag is
    -6; the bytes are the API's at that level."""
    src = tmp_path / "t.txt"
    data = (DATA / "wiki.xml").read_bytes()[:6000]
    src.write_bytes(data)
    model = DATA / "tiny-trained.safetensors"
    out = {}
    for flags in (["-1"], ["--fast"], ["-2"], ["-3"], ["-6"], [], ["-9"], ["--best"]):
        r = run(*flags, "-c", "--model", model, src)
        assert_ok(r)
        out[" ".join(flags)] = r.stdout_bytes
    assert out["-1"] == out["--fast"] and out["-9"] == out["--best"] and out[""] == out["-6"]
    assert len({out["-1"], out["-2"], out["-3"], out["-9"]}) == 4  # 6 KB: -6 is one lane, as -9
    r = run("compress", "-9", "-c", "--model", model, src)
    assert_ok(r)
    assert r.stdout_bytes == out["-9"] == shazip.compress(data, model=str(model), level=9)
    assert run("-0", "-c", "--model", model, src).exit_code == 2  # no such level: a usage error


def test_suffix_names_the_archives_as_gzip_s_does(tmp_path):
    """-S/--suffix: the ending added, looked for, and taken off again (gzip's -S)."""
    src = tmp_path / "a.txt"
    src.write_bytes(b"suffix " * 300)
    model = DATA / "tiny-trained.safetensors"
    assert_ok(run("-q", "-S", ".sz", "--model", model, src))
    assert listing(tmp_path) == ["a.txt", "a.txt.sz"]
    r = run("--no-progress", "-S", ".sz", "--model", model, tmp_path / "a.txt.sz")  # already an archive: left alone
    assert r.exit_code == 2 and "already has the .sz suffix" in r.stderr
    src.unlink()
    assert_ok(run("-d", "-q", "--suffix", ".sz", "--model", model, tmp_path / "a.txt.sz"))
    assert src.read_bytes() == b"suffix " * 300
    r = run("-d", "-q", "-S", "", tmp_path / "a.txt.sz")
    assert r.exit_code == 2 and "suffix" in r.stderr
