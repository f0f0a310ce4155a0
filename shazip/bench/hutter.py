"""The code part of the Hutter-style total: what a decompressor needs besides the archive and
the model file. That is the source of the modules `shazip decompress` of the very archive imports
(found with `python -X importtime`; the native core's C++ for `shazip._core`), zipped. The whole
package's source, tools included, is zipped beside it for reference.
"""

from __future__ import annotations

import importlib.util
import io
import subprocess
import sys
import zipfile
from pathlib import Path

from ..errors import ShazipError, UsageError


def zipped(files: dict[str, bytes]) -> bytes:
    """Files zipped deterministically (fixed dates, sorted names, deflate level 9)."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        for name in sorted(files):
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, files[name], compresslevel=9)
    return out.getvalue()


def package_source() -> dict[str, bytes]:
    """Every source file of the shazip package (Python, and the native core's C++ in csrc/)."""
    root, csrc = Path(__file__).parent.parent, core_source()
    return ({f"shazip/{p.relative_to(root)}": p.read_bytes() for p in sorted(root.rglob("*.py"))}
            | {f"csrc/{p.relative_to(csrc)}": p.read_bytes() for p in sorted(csrc.rglob("*")) if p.is_file()})


def decoder_modules(archive: Path, model: str) -> list[str]:
    """The shazip modules that `shazip decompress` of this archive imports (from
    `python -X importtime`, in a fresh process)."""
    p = subprocess.run([sys.executable, "-X", "importtime", "-m", "shazip", "decompress", str(archive), "-c", "-q",
                        "--model", model], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise ShazipError(f"decompressing {archive} failed: {p.stderr.strip()[-300:]}")
    names = {line.rsplit("|", 1)[1].strip() for line in p.stderr.splitlines() if line.startswith("import time:")}
    return sorted(n for n in names if n == "shazip" or n.startswith("shazip."))


def core_source() -> Path:
    """The native core's C++ (csrc/), which only a source checkout has beside the package."""
    csrc = Path(__file__).parent.parent.parent / "csrc"
    if not csrc.is_dir():
        raise UsageError("shazip bench counts the decompressor's source (the native core's csrc/) in its "
                         "Hutter-style total: run it from a source checkout (README, \"Benchmark\")")
    return csrc


def decoder_source(modules: list[str]) -> dict[str, bytes]:
    """The source of those modules, the native core's C++ (csrc/) for `shazip._core`: the code
    part of a decompressor. Bundled models are counted apart, as the model file."""
    root = Path(__file__).parent.parent
    files = {}
    for name in modules:
        if name == "shazip._core":
            csrc = core_source()
            files |= {f"csrc/{f.relative_to(csrc)}": f.read_bytes() for f in sorted(csrc.rglob("*")) if f.is_file()}
            continue
        path = Path(importlib.util.find_spec(name).origin)
        files[f"shazip/{path.relative_to(root)}"] = path.read_bytes()
    return files
