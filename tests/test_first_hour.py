"""What a new user tries in the first hour, from the habits of zlib, lzma, bz2 and gzip: each
finding of that trial, kept fixed."""

from __future__ import annotations

import io
import json
import re
import subprocess
from pathlib import Path

import pytest

import shazip
from shazip.model.config import PRESETS
from shazip.errors import ShazipError

from test_cli import assert_ok, run

ROOT = Path(__file__).resolve().parent.parent
TRAINED = ROOT / "tests" / "data" / "tiny-trained.safetensors"


@pytest.fixture(scope="module")
def sample(text) -> bytes:
    return text[:3000]


def test_the_level_by_every_name_the_standard_library_uses(sample, trained):
    want = shazip.compress(sample, 7, model=trained)
    for make in (lambda: shazip.ShazipCompressor(7, model=trained), lambda: shazip.compressobj(7, model=trained),
                 lambda: shazip.ShazipCompressor(level=7, model=trained),
                 lambda: shazip.ShazipCompressor(preset=7, model=trained),  # lzma's name
                 lambda: shazip.ShazipCompressor(compresslevel=7, model=trained),  # bz2's and gzip's
                 lambda: shazip.ShazipCompressor(shazip.Compressor(7, model=trained))):
        obj = make()
        assert obj.compress(sample) + obj.flush() == want
    assert shazip.compress(sample, preset=7, model=trained) == want
    assert shazip.Compressor(trained, compresslevel=7).compress(sample) == want
    out = io.BytesIO()
    assert shazip.compress_stream(io.BytesIO(sample), out, trained, preset=7) == len(sample) and out.getvalue() == want
    assert shazip.decompressobj(trained).decompress(want) == sample


def test_open_takes_the_level_as_gzip_and_lzma_name_it(tmp_path, sample, trained):
    for name, options in (("a", {"compresslevel": 7}), ("b", {"preset": 7})):
        with shazip.open(tmp_path / name, "wb", model=trained, **options) as f:
            f.write(sample)
        assert (tmp_path / name).read_bytes() == shazip.compress(sample, 7, model=trained)
        with shazip.open(tmp_path / name, model=trained) as f:
            assert f.read() == sample


@pytest.mark.parametrize("call, error, says", [
    (lambda t: shazip.Compressor(7, level=5, model=t), TypeError, "the level is given twice (the first argument and level)"),
    (lambda t: shazip.compress(b"x", 7, preset=3, model=t), TypeError, "the level is given twice (level and preset)"),
    (lambda t: shazip.Compressor(t, preset="9"), TypeError, "preset must be an int, not 'str'"),
    (lambda t: shazip.Compressor(t, compresslevel=12), ShazipError, "compresslevel must be between 1 and 9, not 12"),
    (lambda t: shazip.ShazipCompressor(shazip.Compressor(t), lanes=3), TypeError, "options beside a ready Compressor"),
    (lambda t: shazip.ShazipCompressor(9, bogus=1), TypeError, "ShazipCompressor() got an unexpected keyword argument 'bogus'"),
    (lambda t: shazip.Compressor(t, engine="float32", adapt="cm"), ShazipError, "adapt='none' (--adapt none)"),
])
def test_errors_name_the_argument(trained, call, error, says):
    with pytest.raises(error) as e:
        call(trained)
    assert says in str(e.value)


def test_float32_codes_with_the_model_alone_unasked(tmp_path, sample):
    src = tmp_path / "a.txt"
    src.write_bytes(sample)
    assert_ok(run("compress", "--engine", "float32", "-T", "1", "--model", TRAINED, "-q", src))
    assert_ok(run("-d", "-c", "-T", "1", "--model", TRAINED, src.with_suffix(".txt.shz")))
    r = run("--engine", "float32", "--adapt", "cm", "--model", TRAINED, "-q", "-f", src)
    assert r.exit_code == 2 and "--adapt none" in r.stderr


def test_compress_and_decompress_take_every_option_of_the_program(tmp_path, sample):
    """`shazip compress` is `shazip FILE...` by name: several files, -v, -S, -r; `decompress` -d's."""
    for name in ("a.txt", "b.txt"):
        (tmp_path / name).write_bytes(sample)
    r = run("compress", "-1", "-v", "-S", ".sz", tmp_path / "a.txt", tmp_path / "b.txt")
    assert_ok(r)
    assert r.stderr.count(".sz") == 2 and (tmp_path / "a.txt.sz").exists() and (tmp_path / "b.txt.sz").exists()
    for name in ("a.txt", "b.txt"):
        (tmp_path / name).unlink()
    assert_ok(run("decompress", "-S", ".sz", "-q", tmp_path / "a.txt.sz", tmp_path / "b.txt.sz"))
    assert (tmp_path / "a.txt").read_bytes() == sample == (tmp_path / "b.txt").read_bytes()
    help_text = run("compress", "--help").stdout
    for option in ("-S, --suffix", "-v, --verbose", "-r, --recursive", "--engine", "--frame-size"):
        assert option in help_text, option


def test_list_is_a_table_a_line_a_file_and_names_the_model_decoding_needs(tmp_path, sample):
    """`-l` as gzip -l (one line a file, totals for several); `-lv` each archive's header and
    blocks. A -1 archive records a model's id but decodes without it: none is named."""
    (tmp_path / "a.txt").write_bytes(sample)
    (tmp_path / "b.txt").write_bytes(sample * 2)
    assert_ok(run("-1", "-q", tmp_path / "a.txt"))
    assert_ok(run("-6", "-q", "--model", TRAINED, tmp_path / "b.txt"))
    r = run("-l", tmp_path / "a.txt.shz", tmp_path / "b.txt.shz")
    assert_ok(r)
    head, a, b, total = r.stdout.splitlines()
    assert head.split() == ["compressed", "uncompressed", "bits/byte", "model", "uncompressed", "name"]
    size_a = (tmp_path / "a.txt.shz").stat().st_size
    assert a.split() == [f"{size_a:,}", f"{len(sample):,}", f"{8 * size_a / len(sample):.3f}", "none",
                         str(tmp_path / "a.txt")]
    assert b.split()[3] == "tiny-trained" and total.split()[-1] == "(totals)"
    assert "model none needed" in run("-lv", tmp_path / "a.txt.shz").stdout
    listed = json.loads(run("info", "--json", tmp_path / "a.txt.shz").stdout)
    assert listed["model"] is None
    listed = json.loads(run("info", "--json", tmp_path / "b.txt.shz").stdout)
    assert listed["model"] == "tiny-trained"


def test_models_lists_yours_first_as_its_help_says(tmp_path, own_models_folder):
    from shazip.model.file import bundled_index
    assert_ok(run("models", "--add", TRAINED, "--name", "zz-mine"))
    lines = [ln for ln in run("models").stdout.splitlines() if not ln.startswith(" ")]
    assert lines[0].startswith("zz-mine (yours") and len(lines) == 1 + len(bundled_index())
    assert "your own, then the bundled ones" in run("models", "--help").stdout


def test_readme_names_every_preset_and_bench_output_is_ignored():
    readme = (ROOT / "README.md").read_text()
    training = readme[readme.index("### Training"):readme.index("### Benchmark")]
    for name in PRESETS:
        assert f"`{name}`" in training, name
    assert re.search(r"^bench-results/$", (ROOT / ".gitignore").read_text(), re.M)
    ignored = subprocess.run(["git", "check-ignore", "-q", "bench-results/bench.json"], cwd=ROOT)
    assert ignored.returncode in (0, 128)  # 128: not a git checkout (an sdist)
