"""The standard compressors shazip is measured beside, at the levels that are their best or
their usual: zstd, xz, bzip2, gzip, brotli, and the context mixers and PPM (zpaq, 7-Zip's PPMd,
paq8px) that shazip's adaptive stage is measured against.

Each runs as its system tool when that is on PATH, and otherwise, for the formats Python has
(zstandard, lzma, bz2, gzip), through Python at the same level; its row says which.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from ..optional import require
from .measure import Row, measure, row, same


@dataclass(frozen=True)
class Baseline:
    """One standard compressor at one level. Its commands filter stdin to stdout, or, when they
    name `{out}` (the archive) and `{dir}` (a folder to extract into), work on files in the
    work folder: the input as `in`, extracted again as `{dir}/in`. `python` names the same format
    through Python for machines without the tool (None: the row is left out there)."""
    name: str
    level: str
    compress: list[str]
    decompress: list[str]
    python: str | None
    key: str = ""  # file names in the work folder (defaults to python's)
    version: tuple[str, ...] = ("--version",)  # arguments that make the tool print its version first
    aliases: tuple[str, ...] = ()  # other names of the same tool, tried in turn (Debian's 7z, 7za)

    @property
    def files(self) -> bool:
        return "{out}" in self.compress

    def tool(self) -> str | None:
        """The path of the first of the tool's names on PATH (None: not installed)."""
        return next(filter(None, map(shutil.which, (self.compress[0], *self.aliases))), None)


BASELINES = [
    Baseline("zstd", "-19", ["zstd", "-19", "-q", "-c"], ["zstd", "-d", "-q", "-c"], "zstd19"),
    Baseline("zstd", "--ultra -22 --long=27", ["zstd", "--ultra", "-22", "--long=27", "-q", "-c"],
             ["zstd", "-d", "--long=27", "-q", "-c"], "zstd22"),
    Baseline("xz", "-9e", ["xz", "-9e", "-c"], ["xz", "-d", "-c"], "xz9e"),
    Baseline("bzip2", "-9", ["bzip2", "-9", "-c"], ["bzip2", "-d", "-c"], "bzip2"),
    Baseline("gzip", "-9", ["gzip", "-9", "-n", "-c"], ["gzip", "-d", "-c"], "gzip"),
    Baseline("brotli", "-q 11", ["brotli", "-q", "11", "-c"], ["brotli", "-d", "-c"], None, "brotli"),
    # context mixing and PPM: the compressors shazip's adaptive stage is measured against
    Baseline("zpaq", "-m5", ["zpaq", "a", "{out}", "in", "-m5"], ["zpaq", "x", "{out}", "-to", "{dir}"], None,
             "zpaq", ()),
    Baseline("7-Zip PPMd", "o=16 mem=1g", ["7zz", "a", "-bd", "-m0=PPMd:o=16:mem=1g", "{out}", "in"],
             ["7zz", "e", "-bd", "{out}", "-o{dir}"], None, "ppmd", (), ("7z", "7za")),
    # the strongest open context mixer: built from source (benchmarks/JOURNAL.md, "Structured text"), found on PATH
    Baseline("paq8px", "-8", ["paq8px", "-8", "in", "{out}"], ["paq8px", "-d", "{out}", "{dir}/in"], None,
             "paq8px", ()),
]


def py_codec(kind: str):
    """(compress, decompress) in Python for a baseline (the fallback without system tools)."""
    import bz2
    import gzip
    import lzma

    zstandard = require("zstandard", "zstd's levels without a zstd binary")
    if kind == "zstd19":
        return zstandard.ZstdCompressor(level=19).compress, zstandard.ZstdDecompressor().decompress
    if kind == "zstd22":
        params = zstandard.ZstdCompressionParameters.from_level(22, window_log=27, enable_ldm=True)
        return (zstandard.ZstdCompressor(compression_params=params).compress,
                lambda b: zstandard.ZstdDecompressor(max_window_size=1 << 27).decompress(b))
    if kind == "xz9e":
        return lambda b: lzma.compress(b, preset=9 | lzma.PRESET_EXTREME), lzma.decompress
    if kind == "bzip2":
        return lambda b: bz2.compress(b, 9), bz2.decompress
    if kind == "gzip":
        return lambda b: gzip.compress(b, 9, mtime=0), gzip.decompress
    raise ValueError(kind)


def _tool_version(tool: str, args: tuple[str, ...]) -> str:
    p = subprocess.run([tool, *args], capture_output=True, text=True, stdin=subprocess.DEVNULL)
    lines = (p.stdout or p.stderr).strip().splitlines()
    return lines[0].strip(" *") if lines else f"system {Path(tool).name}"


def run_baseline(b: Baseline, src: Path, work: Path, n: int) -> Row | None:
    """The baseline's row, or None where neither its tool nor a Python equivalent is here."""
    key = b.key or b.python
    arc, back = work / f"{key}.out", work / f"{key}.back"
    tool = b.tool()
    compress, decompress = ([tool, *cmd[1:]] for cmd in (b.compress, b.decompress))
    if tool and b.files:
        shutil.copyfile(src, work / "in")  # the name archivers store: short, and the same for all
        out_dir = work / f"{key}.d"
        out_dir.mkdir(exist_ok=True)  # some tools make it, others (paq8px) write into it
        fill = lambda cmd: [a.replace("{out}", str(arc)).replace("{dir}", str(out_dir)) for a in cmd]  # noqa: E731
        c = measure(fill(compress), cwd=work)
        d = measure(fill(decompress), cwd=work)
        back = out_dir / "in"
    elif tool:
        c = measure(compress, src, arc)
        d = measure(decompress, arc, back)
    elif b.python is not None:
        worker = [sys.executable, "-m", "shazip.bench", "_py", b.python]
        c = measure(worker + ["c", str(src), str(arc)])
        d = measure(worker + ["d", str(arc), str(back)])
        return row(b.name, b.level, f"python {b.python}", n, arc, c, d, same(src, back))
    else:
        return None
    return row(b.name, b.level, _tool_version(tool, b.version), n, arc, c, d, same(src, back))
