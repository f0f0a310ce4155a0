"""What `pip install .` installs: the package a user runs, and no test hook (shazip._testing, the
core's kernel hooks, testkit/'s helpers).

The wheel is built as pip builds it, from a copy of this checkout: its files as git lists them,
and the extensions built in place beside them (a checkout where the tests ran has shazip._testing
there, which must not reach the wheel)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

INSTALLED = """
import sys
for m in ("torch", "zstandard", "matplotlib"):
    sys.modules[m] = None  # as where they are not installed
import shazip, shazip._core as core
assert shazip.__file__.startswith(sys.argv[1]), shazip.__file__
assert not [n for n in dir(core) if n.startswith("kernel_")], dir(core)
data = b"hello world " * 100
assert shazip.decompress(shazip.compress(data)) == data
"""


def checkout_copy(dest: Path) -> Path:
    """This checkout's files (tracked, and new ones git does not ignore) and its in-place extensions."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for rel in [f for f in listed if f] + [p.relative_to(ROOT).as_posix() for p in (ROOT / "shazip").glob("*.so")]:
        if (ROOT / rel).is_file():  # (a file deleted but not yet committed is still listed)
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, dest / rel)
    return dest


@pytest.mark.slow
def test_a_plain_install_holds_no_test_hook(tmp_path):
    """The wheel of `pip install .` holds the package and its metadata, nothing of the tests' nor
    what an earlier build left in the build folder;
    installed, its core has no kernel hook and compresses without torch. Costs one build of the
    core, with pip's build isolation as a user's install has it: about 80 s on two cores."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs git and a checkout")
    src = checkout_copy(tmp_path / "src")
    import sysconfig
    for lib in ("lib", f"lib.{sysconfig.get_platform()}-{sys.implementation.cache_tag}"):  # an earlier build's
        (src / "build" / lib / "shazip" / "codec").mkdir(parents=True)                 # module, since moved
        (src / "build" / lib / "shazip" / "codec" / "moved_away.py").write_text("")
    env = {k: v for k, v in os.environ.items() if k != "SHAZIP_TEST_HOOKS"}
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-cache-dir", "-w",
                            str(tmp_path / "dist"), str(src)], env=env, capture_output=True, text=True)
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = (tmp_path / "dist").glob("shazip-*.whl")
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        z.extractall(tmp_path / "site")
    tops = {n.split("/")[0] for n in names}
    assert tops == {"shazip", "-".join(wheel.name.split("-")[:2]) + ".dist-info"}, tops
    assert [n for n in names if n.startswith("shazip/_core.")]
    assert not [n for n in names if "testing" in n or "testkit" in n or "moved_away" in n], names
    modules = {p.relative_to(src).as_posix() for p in (src / "shazip").rglob("*.py")}
    assert not modules - set(names), sorted(modules - set(names))  # every module of the package (its packages found)
    site = str(tmp_path / "site")
    ran = subprocess.run([sys.executable, "-c", INSTALLED, site], cwd=tmp_path, capture_output=True, text=True,
                         env=dict(env, PYTHONPATH=site))
    assert ran.returncode == 0, ran.stderr[-3000:]
