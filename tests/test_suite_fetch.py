"""benchmarks/suite/fetch.py's GitHub sources (the structured set, STRUCTURED.tsv): a file comes
from a pinned commit and is written only if its size and sha256 are the manifest's. The download
is GitHub's raw file, stood in for here (no network in the tests)."""

from __future__ import annotations

import hashlib
import importlib.util
import io
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
COMMIT = "dd61d0952749ee7963bde24220d1be5ede023033"


@pytest.fixture
def fetch():
    spec = importlib.util.spec_from_file_location("suite_fetch", ROOT / "benchmarks" / "suite" / "fetch.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def manifest(tmp_path: Path, data: bytes, source: str) -> Path:
    path = tmp_path / "set.tsv"
    path.write_text("name\tkind\tbytes\tsha256\tsource\tlicence\n"
                    f"a.log\tlog\t{len(data)}\t{hashlib.sha256(data).hexdigest()}\t{source}\tfree\n")
    return path


def serving(monkeypatch, fetch, files: dict[str, bytes]) -> list[str]:
    """urlopen answering from `files` by URL; returns the URLs asked for."""
    asked = []

    def urlopen(url: str, timeout: float):
        asked.append(url)
        if url not in files:
            raise OSError("404")
        return io.BytesIO(files[url])

    monkeypatch.setattr(fetch.urllib.request, "urlopen", urlopen)
    return asked


def test_a_github_file_is_fetched_from_its_commit_and_checked(tmp_path, monkeypatch, fetch):
    data = b"Dec 10 06:55:46 LabSZ sshd[24200]: reverse mapping checking getaddrinfo\n" * 20
    url = f"https://raw.githubusercontent.com/logpai/loghub/{COMMIT}/OpenSSH/OpenSSH_2k.log"
    asked = serving(monkeypatch, fetch, {url: data})
    listed = manifest(tmp_path, data, f"github:logpai/loghub@{COMMIT}:OpenSSH/OpenSSH_2k.log")
    out = tmp_path / "out"
    assert fetch.main([str(out), "--manifest", str(listed)]) == 0
    assert (out / "a.log").read_bytes() == data and asked == [url]
    assert fetch.main([str(out), "--manifest", str(listed)]) == 0 and asked == [url]  # present: not fetched again


def test_a_github_file_that_differs_is_refused_and_not_written(tmp_path, monkeypatch, fetch, capsys):
    data = b"2,000 lines of a log\n" * 30
    url = f"https://raw.githubusercontent.com/logpai/loghub/{COMMIT}/Apache/Apache_2k.log"
    serving(monkeypatch, fetch, {url: data.replace(b"2,000", b"3,000")})
    listed = manifest(tmp_path, data, f"github:logpai/loghub@{COMMIT}:Apache/Apache_2k.log")
    out = tmp_path / "out"
    assert fetch.main([str(out), "--manifest", str(listed)]) == 1
    assert not (out / "a.log").exists() and "REFUSED a.log" in capsys.readouterr().err


def test_a_github_source_must_pin_a_whole_commit(tmp_path, monkeypatch, fetch, capsys):
    asked = serving(monkeypatch, fetch, {})
    listed = manifest(tmp_path, b"x", "github:logpai/loghub@dd61d09:Apache/Apache_2k.log")
    assert fetch.main([str(tmp_path / "out"), "--manifest", str(listed)]) == 1
    assert "the commit's full hash" in capsys.readouterr().err and not asked


def test_the_structured_set_is_a_valid_manifest(fetch):
    rows = fetch.read_manifest(ROOT / "benchmarks" / "suite" / "STRUCTURED.tsv")
    assert rows and all(fetch.parse_source(r["source"])[0] == "github" for r in rows)
    assert len({r["name"] for r in rows}) == len(rows)
