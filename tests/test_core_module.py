"""The native core as an installed module: a missing or damaged build is a one-line error with a
non-zero exit, never a crash or a hang."""

from __future__ import annotations

import importlib.abc
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

import shazip
from shazip import _core, core

BROKEN = "import sys; sys.modules['shazip._core'] = None; from shazip.cli import main; main()"


@pytest.mark.parametrize("damage", ["truncated", "empty", "header only"])
def test_damaged_core_file_is_refused_before_loading(tmp_path, damage):
    """A cut-short shared object would be mapped and kill the process with SIGBUS: it is
    refused from its ELF header before the loader sees it."""
    blob = Path(_core.__file__).read_bytes()
    bad = tmp_path / Path(_core.__file__).name
    bad.write_bytes({"truncated": blob[: len(blob) // 3], "empty": b"", "header only": blob[:64]}[damage])
    spec = importlib.util.spec_from_file_location("shazip._core", bad)
    with pytest.raises(ImportError):
        core.check_file(spec)
    core.check_file(importlib.util.find_spec("shazip._core"))  # the real one passes


class _InterruptedLoader(importlib.abc.Loader):
    """Fails as pybind11 does when Ctrl-C lands while the core initialises: ImportError("initialization
    failed") raised from the KeyboardInterrupt."""

    def create_module(self, spec):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as e:
            raise ImportError("initialization failed") from e

    def exec_module(self, module) -> None:
        pass


class _InterruptedFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "shazip._core":
            return None
        return importlib.util.spec_from_file_location(name, _core.__file__, loader=_InterruptedLoader())


def test_an_interruption_while_the_core_loads_stays_one(monkeypatch):
    """Not "the native core is missing or damaged" (exit 1): the run ends as interrupted (exit 130)."""
    monkeypatch.setattr(sys, "meta_path", [_InterruptedFinder(), *sys.meta_path])
    monkeypatch.delitem(sys.modules, "shazip._core")
    monkeypatch.delattr(shazip, "_core")
    monkeypatch.setattr(core, "_module", None)
    with pytest.raises(KeyboardInterrupt):
        core.load()


def test_missing_core_is_one_line(tmp_path, text):
    arc = tmp_path / "a.txt.shz"
    arc.write_bytes(shazip.compress(text[:3000]))
    src = tmp_path / "a.txt"
    src.write_bytes(text[:3000])
    for args in (["-d", "-c", str(arc)], ["-f", "-c", str(src)]):
        p = subprocess.run([sys.executable, "-c", BROKEN, *args], capture_output=True, text=True, timeout=120,
                           stdin=subprocess.DEVNULL)
        assert p.returncode == 1, (args, p.stderr)
        lines = p.stderr.strip().splitlines()
        assert len(lines) == 1 and "native core is missing or damaged" in lines[0] and "reinstall" in lines[0]


def test_stored_archives_decode_without_the_core(tmp_path):
    """Archives of stored blocks (and empty inputs) never reach the model: they need no core."""
    arc = tmp_path / "e.shz"
    arc.write_bytes(shazip.compress(b""))
    p = subprocess.run([sys.executable, "-c", BROKEN, "-d", "-c", str(arc)], capture_output=True, text=True,
                       timeout=120, stdin=subprocess.DEVNULL)
    assert p.returncode == 0 and p.stdout == "", p.stderr
