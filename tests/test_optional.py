"""An optional dependency that is absent or broken (whatever its import raises) fails the command
that needs it in one line naming the package and the error, and leaves the rest working."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from shazip import optional
from shazip.errors import MissingDependency
from shazip.optional import available, require

# what a broken install's import raises: a CUDA build without its libraries, the loader's OSError,
# a dependency of its own missing, and the package absent
FAILURES = {
    "cuda": ('ImportError("libcudart.so.12: cannot open shared object file")', "libcudart.so.12"),
    "loader": ('OSError("libtorch_cpu.so: cannot open shared object file")', "libtorch_cpu.so"),
    "inner": ('ModuleNotFoundError("No module named \'typing_extensions\'", name="typing_extensions")',
              "typing_extensions"),
}


def broken(tmp_path: Path, package: str, raise_expr: str) -> Path:
    """A folder that, first on sys.path, makes `import package` raise `raise_expr`."""
    root = tmp_path / f"broken-{package}"
    (root / package).mkdir(parents=True)
    (root / package / "__init__.py").write_text(f"raise {raise_expr}\n")
    return root


def run(args: list[str], path: Path, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(path), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "shazip", *args], capture_output=True, text=True, env=env,
                          cwd=cwd, stdin=subprocess.DEVNULL, timeout=120)


def one_line(p: subprocess.CompletedProcess, *names: str) -> str:
    assert p.returncode == 2, p.stderr
    assert "Traceback" not in p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    for n in names:
        assert n in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("failure", sorted(FAILURES))
def test_broken_torch_fails_in_one_line(tmp_path, failure):
    raise_expr, shown = FAILURES[failure]
    fake = broken(tmp_path, "torch", raise_expr)
    text = tmp_path / "a.txt"
    text.write_bytes(b"a line of text\n" * 200)
    for args in (["train", "--help"], ["train", str(text), "--out", str(tmp_path / "run")],
                 ["compress", "--engine", "float32", "--adapt", "none", "-c", "-f", str(text)],
                 ["--device", "cuda", "-c", "-f", str(text)]):
        line = one_line(run(args, fake, tmp_path), "torch", "fails to load", shown)
        assert "download.pytorch.org/whl/cpu" in line  # the CPU wheel: never a CUDA build by accident
    # what needs no torch still works: compress and decompress, --device auto falls back to the CPU
    p = run(["-f", "--device", "auto", str(text)], fake, tmp_path)
    assert p.returncode == 0, p.stderr
    p = run(["-d", "-c", str(text) + ".shz"], fake, tmp_path)
    assert p.returncode == 0 and p.stdout == text.read_text()


def test_absent_torch_says_not_installed(tmp_path):
    fake = broken(tmp_path, "torch", 'ModuleNotFoundError("No module named \'torch\'", name="torch")')
    one_line(run(["train", "--help"], fake, tmp_path), "`shazip train` needs torch, which is not installed")


def test_broken_dask_fails_in_one_line(tmp_path):
    fake = broken(tmp_path, "distributed", FAILURES["loader"][0])
    text = tmp_path / "a.txt"
    text.write_bytes(b"x" * 100)
    one_line(run(["--scheduler", "tcp://127.0.0.1:1", str(text)], fake, tmp_path), "--scheduler needs distributed",
             "libtorch_cpu.so")


def test_require_in_process(tmp_path, monkeypatch):
    for failure, (raise_expr, shown) in FAILURES.items():
        name = f"shazip_fake_{failure}"
        monkeypatch.syspath_prepend(str(broken(tmp_path, name, raise_expr)))
        monkeypatch.setitem(optional.INSTALL, name, "pip install it")
        with pytest.raises(MissingDependency, match=f"the test needs {name}, which fails to load .*{shown}.*: pip install it"):
            require(name, "the test")
        assert not available(name)
    assert require("json", "the test").dumps([]) == "[]"
