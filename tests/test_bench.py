"""`shazip bench` end to end on a small real input, its pieces, and `fetch-enwik8`'s checks."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from click.testing import CliRunner

import shazip
from shazip.model import file as models
from shazip.bench import baselines, enwik8, hutter, runner
from shazip.cli import main
from shazip.errors import ModelError, ShazipError, UsageError

TRAINED = Path(__file__).parent / "data" / "tiny-trained.safetensors"
ROW_KEYS = {"compressor", "level", "implementation", "original_bytes", "archive_bytes", "bits_per_byte",
            "compress_KBps", "decompress_KBps", "compress_peak_rss_mb", "decompress_peak_rss_mb", "round_trip"}


@pytest.fixture(scope="module")
def result(tmp_path_factory, text):
    """The real command, in its own process, on 6,000 bytes of the fixture, with a --limit."""
    d = tmp_path_factory.mktemp("bench")
    (d / "in.xml").write_bytes(text)
    p = subprocess.run([sys.executable, "-m", "shazip", "bench", "--data", str(d / "in.xml"), "--limit", "6000",
                        "--model", str(TRAINED), "--lanes", "4", "--out", str(d / "out")],
                       capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stderr
    return d / "out", json.loads((d / "out" / "bench.json").read_text()), p.stdout


def test_bench_writes_every_column_for_every_compressor(result, text):
    out, r, stdout = result
    assert r["input"]["bytes"] == 6000
    names = [(row["compressor"], row["level"]) for row in r["rows"]]
    here = [(b.name, b.level) for b in baselines.BASELINES if b.python or b.tool()]
    assert names[0][0] == "shazip" and names[1:] == here  # tools without a Python fallback: where installed
    for row in r["rows"]:
        assert ROW_KEYS <= set(row), row["compressor"]
        assert row["original_bytes"] == 6000 and row["round_trip"] is True
        assert row["bits_per_byte"] == round(8 * row["archive_bytes"] / 6000, 4)
        assert row["compress_KBps"] > 0 and row["decompress_KBps"] > 0 and row["compress_peak_rss_mb"] > 0
    assert {"cpu", "cpu_count", "kernels", "shazip", "python"} <= set(r["machine"])
    assert (out / "bench.md").read_text() == stdout
    assert "| **total** |" in stdout and "projected" in stdout
    lines = stdout.splitlines()  # the projected total is a row of the Hutter-style table, right after its total
    at = next(i for i, line in enumerate(lines) if "projected from" in line)
    assert lines[at].startswith("| enwik8 total") and lines[at - 1].startswith("| **total** |")


def test_bench_shazip_row_totals_add_up(result):
    _, r, _ = result
    row = r["rows"][0]
    e, h = row["extra"], row["extra"]["hutter"]
    assert h["archive_bytes"] == row["archive_bytes"]
    assert h["model_file_bytes"] == TRAINED.stat().st_size
    assert h["source_zip_bytes"] == len(hutter.zipped(hutter.decoder_source(h["decoder_modules"])))
    assert h["source_zip_bytes"] < h["package_zip_bytes"]  # the tools are not part of the decoder
    assert "shazip.core" in h["decoder_modules"] and "shazip.model.numerics" in h["decoder_modules"]
    assert "shazip.model.twin" not in h["decoder_modules"]  # the torch twin is no part of the CPU decoder
    assert not [m for m in h["decoder_modules"] if m.startswith(("shazip.train", "shazip.bench"))]
    assert h["total_bytes"] == h["archive_bytes"] + h["model_file_bytes"] + h["source_zip_bytes"]
    projected = round(row["archive_bytes"] / 6000 * runner.ENWIK8_BYTES)
    assert h["projected_enwik8_total_bytes"] == projected + h["model_file_bytes"] + h["source_zip_bytes"]
    assert h["projected_from_bytes"] == 6000
    assert e["model_id"] == hashlib.sha256(TRAINED.read_bytes()).hexdigest()
    assert 0 < e["model_bits_per_byte"] < 8
    assert sum(e["blocks"].values()) == 1 and e["container_bytes"] > 0


def test_bundling_records_the_bench_figures(result, tmp_path, monkeypatch, random_model_path):
    """`shazip models --add FILE --bench bench.json` keeps the headline figures, and only for
    the file that was measured."""
    out, r, _ = result
    cli = CliRunner()  # into the user's models folder (SHAZIP_MODELS: a test's own, conftest.py)
    res = cli.invoke(main, ["models", "--add", str(TRAINED), "--name", "t", "--bench", str(out / "bench.json")])
    assert res.exit_code == 0, res.output
    figs = models.installed()["t"][1]["figures"]["bench"]
    row = r["rows"][0]
    assert (figs["bits_per_byte"], figs["compress_KBps"], figs["input_bytes"]) == \
        (row["bits_per_byte"], row["compress_KBps"], 6000)
    assert figs["xz_bits_per_byte"] == next(x["bits_per_byte"] for x in r["rows"] if x["compressor"] == "xz")
    listing = cli.invoke(main, ["models"]).output
    assert f"{row['bits_per_byte']} bits/byte achieved" in listing and "t (yours, in " in listing
    with pytest.raises(ModelError, match="not of this model file"):
        models.bundle_model(random_model_path, "other", r)
    assert "other" not in models.installed()


def test_python_fallbacks_round_trip(tmp_path, text, monkeypatch):
    """Without the system tools, the same formats run through Python (each in its own process)."""
    monkeypatch.setattr(baselines.shutil, "which", lambda _: None)
    src = tmp_path / "in"
    src.write_bytes(text[:3000])
    for b in baselines.BASELINES:
        row = baselines.run_baseline(b, src, tmp_path, 3000)
        if b.python is None:  # zpaq, 7-Zip, brotli: only the real tools
            assert row is None
            continue
        assert row.round_trip and row.implementation == f"python {b.python}"
        assert 0 < row.archive_bytes < 3000


def test_suite_table(tmp_path, text):
    """`shazip bench --suite DIR`: every file of the folder, a row each, winners and totals; shazip at
    the level asked for (here -2, the stage alone: what `shazip -2` makes)."""
    d = tmp_path / "suite"
    d.mkdir()
    (d / "a.xml").write_bytes(text[:3000])
    (d / "b.xml").write_bytes(text[3000:5000])
    p = subprocess.run([sys.executable, "-m", "shazip", "bench", "--suite", str(d), "--model", str(TRAINED),
                        "--lanes", "2", "-2", "--out", str(tmp_path / "out")],
                       capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stderr
    r = json.loads((tmp_path / "out" / "suite.json").read_text())
    assert [f["file"] for f in r["files"]] == ["a.xml", "b.xml"]
    assert all(row["round_trip"] for f in r["files"] for row in f["rows"])
    table = (tmp_path / "out" / "suite.md").read_text()
    assert table == p.stdout and "| a.xml | 3,000 |" in table and "| **total** | 5,000 |" in table
    shazip_total = sum(f["rows"][0]["archive_bytes"] for f in r["files"])
    assert f"**{shazip_total:,}**" in table
    first = r["files"][0]["rows"][0]
    assert first["extra"]["compression_level"] == 2 and first["level"].startswith("-2,") and "; shazip -2," in table
    assert first["archive_bytes"] == len(shazip.compress(text[:3000], model=str(TRAINED), level=2, lanes=2))


def test_select_input_splits_and_limits(tmp_path):
    f = tmp_path / "small"
    f.write_bytes(b"abcdef" * 10)
    assert runner.select_input(f, "all", None, tmp_path) == (f, 60)
    part, n = runner.select_input(f, "all", 7, tmp_path)
    assert n == 7 and part.read_bytes() == b"abcdefa"
    with pytest.raises(UsageError, match="needs the whole enwik8"):
        runner.select_input(f, "test", None, tmp_path)
    with pytest.raises(UsageError, match="no such file"):
        runner.select_input(tmp_path / "missing", "all", None, tmp_path)


def _zip_with(tmp_path: Path, name: str, content: bytes) -> str:
    z = tmp_path / "enwik8.zip"
    with zipfile.ZipFile(z, "w") as f:
        f.writestr(name, content)
    return z.as_uri()


def test_fetch_enwik8_refuses_a_wrong_checksum_and_leaves_nothing(tmp_path):
    url = _zip_with(tmp_path, "enwik8", b"not enwik8")
    dest = tmp_path / "d"
    with pytest.raises(ShazipError, match="refused"):
        enwik8.fetch_enwik8(dest, url)
    assert list(dest.iterdir()) == []


def test_fetch_enwik8_keeps_a_verified_file(tmp_path):
    content = b"pretend this is enwik8"
    url = _zip_with(tmp_path, "enwik8", content)
    path = enwik8.fetch_enwik8(tmp_path / "d", url, sha256=hashlib.sha256(content).hexdigest())
    assert path.read_bytes() == content and sorted(p.name for p in path.parent.iterdir()) == ["enwik8"]


def test_fetch_enwik8_errors(tmp_path):
    with pytest.raises(ShazipError, match="does not contain enwik8"):
        enwik8.fetch_enwik8(tmp_path / "a", _zip_with(tmp_path, "other", b"x"))
    bad = tmp_path / "bad.zip"
    bad.write_bytes(b"this is no zip")
    with pytest.raises(ShazipError, match="not a zip"):
        enwik8.fetch_enwik8(tmp_path / "b", bad.as_uri())
    with pytest.raises(ShazipError, match="cannot download"):
        enwik8.fetch_enwik8(tmp_path / "c", (tmp_path / "nothing.zip").as_uri())
