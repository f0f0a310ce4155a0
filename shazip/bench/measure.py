"""A compressor measured as a user runs it: every command in its own process, timed end to end,
with a peak resident memory that is its own (read from `wait4`), and the row of figures the
benchmark reports for one compressor on one input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ShazipError


@dataclass
class Run:
    """One process: wall seconds and peak resident memory."""
    seconds: float
    peak_rss_mb: float


# Runs a command and reports its own wall time and peak RSS (wait4's ru_maxrss). A small
# launcher process starts it: a child forked straight from this process would count the
# benchmark's own memory (torch is loaded here) in its peak before it execs.
_LAUNCH = """import json, os, sys, time
t = time.perf_counter()
pid = os.posix_spawnp(sys.argv[2], sys.argv[2:], os.environ)
_, status, usage = os.wait4(pid, 0)
open(sys.argv[1], "w").write(json.dumps({"seconds": time.perf_counter() - t, "maxrss": usage.ru_maxrss,
                                          "code": os.waitstatus_to_exitcode(status)}))"""


def measure(cmd: list[str], stdin: Path | None = None, stdout: Path | None = None, cwd: Path | None = None) -> Run:
    with tempfile.NamedTemporaryFile(suffix=".json") as rep:
        with open(stdin or os.devnull, "rb") as fin, open(stdout or os.devnull, "wb") as fout:
            p = subprocess.run([sys.executable, "-S", "-c", _LAUNCH, rep.name] + cmd, stdin=fin, stdout=fout,
                               stderr=subprocess.PIPE, cwd=cwd)
        r = json.loads(Path(rep.name).read_text() or "{}")
    if p.returncode != 0 or r.get("code") != 0:
        raise ShazipError(f"{' '.join(cmd[:3])}... failed: {p.stderr.decode(errors='replace').strip()[-300:]}")
    kib = r["maxrss"] / 1024 if sys.platform == "darwin" else r["maxrss"]  # bytes on macOS, KiB elsewhere
    return Run(r["seconds"], kib / 1024)


@dataclass
class Row:
    """One compressor's figures on the input."""
    compressor: str
    level: str
    implementation: str
    original_bytes: int
    archive_bytes: int
    bits_per_byte: float
    compress_KBps: float
    decompress_KBps: float
    compress_peak_rss_mb: float
    decompress_peak_rss_mb: float
    round_trip: bool
    extra: dict = field(default_factory=dict)


def row(name: str, level: str, impl: str, n: int, archive: Path, c: Run, d: Run, ok: bool, **extra) -> Row:
    """The row from a compress run and a decompress run of `n` bytes into `archive`."""
    size = archive.stat().st_size
    return Row(name, level, impl, n, size, round(8 * size / n, 4) if n else 0.0,
               round(n / c.seconds / 1e3, 2), round(n / d.seconds / 1e3, 2),
               round(c.peak_rss_mb, 1), round(d.peak_rss_mb, 1), ok, extra)


def same(a: Path, b: Path) -> bool:
    """Whether two files hold the same bytes (the round trip), read a MiB at a time."""
    if a.stat().st_size != b.stat().st_size:
        return False
    with open(a, "rb") as fa, open(b, "rb") as fb:
        while True:
            x, y = fa.read(1 << 20), fb.read(1 << 20)
            if x != y:
                return False
            if not x:
                return True
