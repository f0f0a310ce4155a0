"""The benchmark: shazip beside standard compressors on one input, with Hutter-style totals.

    shazip bench --data enwik8 --split test          # the standard enwik8 test split
    shazip bench --data ../shared/data/enwik6        # any file, whole or --limit N prefix

Every figure is measured in this run, each compressor in its own process (so its peak RSS is
its own, read from `wait4`) and timed end to end as a user would run it: for shazip that is
the Python start-up, the model load, coding and writing the archive. Every archive is
decompressed again and compared with the input (`round_trip`).

shazip's row adds the model's cross-entropy (bits/byte under the integer engine's very rows
the coder got) and the archive's overhead above it. The Hutter-style total counts what a
decompressor needs besides the archive: the model file and the source of the modules that
`shazip decompress` of this very archive imports (found with `python -X importtime`; the
C++ of a compiled step included), zipped; each is listed apart, with the whole package's
zipped source beside it for reference. For inputs that are not the whole of enwik8, a projected enwik8
total (measured bits/byte x 10**8 bytes, plus the decompressor) is given, labelled as such.

Baselines run the system tools when they are on PATH (zstd, xz, bzip2, gzip) and otherwise
the same formats and levels through Python (zstandard, lzma, bz2, gzip); the output says which.
Writes a Markdown table to stdout and, in --out, bench.json (every figure, plus the machine,
threads and versions), bench.md and bench.png (bits/byte vs compress speed; needs the
optional `bench` extra, matplotlib).
"""

from __future__ import annotations

import importlib.util
import io
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..errors import ShazipError, UsageError
from ..optional import available, require
from ..options import DEFAULT_LEVEL

ENWIK8_BYTES = 100_000_000
SPLITS = {"all": (0, None), "train": (0, 90_000_000), "valid": (90_000_000, 95_000_000),
          "test": (95_000_000, 100_000_000)}


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


def _py_codec(kind: str):
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


def _measure(cmd: list[str], stdin: Path | None = None, stdout: Path | None = None, cwd: Path | None = None) -> Run:
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


def _row(name: str, level: str, impl: str, n: int, archive: Path, c: Run, d: Run, ok: bool, **extra) -> Row:
    size = archive.stat().st_size
    return Row(name, level, impl, n, size, round(8 * size / n, 4) if n else 0.0,
               round(n / c.seconds / 1e3, 2), round(n / d.seconds / 1e3, 2),
               round(c.peak_rss_mb, 1), round(d.peak_rss_mb, 1), ok, extra)


def _same(a: Path, b: Path) -> bool:
    if a.stat().st_size != b.stat().st_size:
        return False
    with open(a, "rb") as fa, open(b, "rb") as fb:
        while True:
            x, y = fa.read(1 << 20), fb.read(1 << 20)
            if x != y:
                return False
            if not x:
                return True


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
        c = _measure(fill(compress), cwd=work)
        d = _measure(fill(decompress), cwd=work)
        back = out_dir / "in"
    elif tool:
        c = _measure(compress, src, arc)
        d = _measure(decompress, arc, back)
    elif b.python is not None:
        worker = [sys.executable, "-m", "shazip.bench", "_py", b.python]
        c = _measure(worker + ["c", str(src), str(arc)])
        d = _measure(worker + ["d", str(arc), str(back)])
        return _row(b.name, b.level, f"python {b.python}", n, arc, c, d, _same(src, back))
    else:
        return None
    return _row(b.name, b.level, _tool_version(tool, b.version), n, arc, c, d, _same(src, back))


@dataclass(frozen=True)
class Setup:
    """How the benchmark runs shazip (the command's options)."""

    model: str | None = None  # None: the level's
    lanes: int = 0  # 0: the level's automatic choice
    threads: int = 1
    adapt: str = "cm"  # the adaptive stage, or "none": the model alone
    level: int = DEFAULT_LEVEL


def run_shazip(src: Path, work: Path, n: int, setup: Setup) -> Row:
    """shazip compress (through the API, in its own process, to collect the cross-entropy)
    and `shazip decompress` (the command line), each timed end to end."""
    from ..codec.encode import level_model
    from ..modelfile import load_model
    model, lanes, threads, adapt = level_model(setup.level, setup.model), setup.lanes, setup.threads, setup.adapt
    loaded = load_model(model)
    arc, back, stats = work / "shazip.shz", work / "shazip.back", work / "shazip.stats.json"
    c = _measure([sys.executable, "-m", "shazip.bench", "_shazip", str(src), str(arc), str(stats),
                  model, str(lanes), str(threads), adapt, str(setup.level)])
    d = _measure([sys.executable, "-m", "shazip", "decompress", str(arc), "-o", str(back), "-q", "-f",
                  "--threads", str(threads), "--model", model])
    s = json.loads(stats.read_text())
    size = arc.stat().st_size
    ce = s["model_bits"] / s["model_bytes"] if s["model_bytes"] else None
    mixed = s["mixed_bits"] / s["model_bytes"] if s["model_bytes"] and adapt != "none" else None
    coder = 100 * (8 * s["chosen_payload"] / s["chosen_bits"] - 1) if s["chosen_bits"] else None
    model_bytes = loaded.path.stat().st_size if loaded.path else 0
    modules = decoder_modules(arc, model)
    source_zip = len(_zip(decoder_source(modules)))
    extra = {
        "model": loaded.name, "model_id": loaded.id_hex, "engine": "int8", "lanes": lanes, "threads": threads,
        "adapt": adapt, "compression_level": setup.level,
        "model_bits_per_byte": round(ce, 4) if ce is not None else None,
        "mixed_bits_per_byte": round(mixed, 4) if mixed is not None else None,
        "coder_overhead_pct": round(coder, 4) if coder is not None else None,
        "container_bytes": size - s["payload"],
        "blocks": s["methods"],
        "hutter": {"archive_bytes": size, "model_file_bytes": model_bytes, "source_zip_bytes": source_zip,
                   "package_zip_bytes": len(_zip(package_source())), "decoder_modules": modules,
                   "total_bytes": size + model_bytes + source_zip},
    }
    if n != ENWIK8_BYTES and n:
        extra["hutter"]["projected_enwik8_total_bytes"] = round(8 * size / n * ENWIK8_BYTES / 8) + model_bytes + source_zip
        extra["hutter"]["projected_from_bytes"] = n
    return _row("shazip", f"-{setup.level}, {loaded.name} int8, {lanes or 'auto'} lanes", f"shazip {_version()}", n, arc, c, d,
                _same(src, back), **extra)


def _zip(files: dict[str, bytes]) -> bytes:
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


def _version() -> str:
    from .. import __version__
    return __version__


def machine() -> dict:
    from .. import core
    cpu = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"platform": platform.platform(), "cpu": cpu, "cpu_count": os.cpu_count(), "python": platform.python_version(),
            "kernels": core.kernels(), "shazip": _version(), "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def select_input(data: Path, split: str, limit: int | None, work: Path) -> tuple[Path, int]:
    """The bytes to benchmark: the split of enwik8 (only for a 10**8-byte file), then the first
    `limit` bytes; copied into `work` unless it is the whole file."""
    if not data.is_file():
        raise UsageError(f"no such file: '{data}'")
    size = data.stat().st_size
    start, end = SPLITS[split]
    if split != "all" and size != ENWIK8_BYTES:
        raise UsageError(f"--split {split} needs the whole enwik8 ({ENWIK8_BYTES} bytes); '{data}' has {size}")
    end = size if end is None else end
    if limit is not None:
        if limit < 1:
            raise UsageError("--limit must be at least 1")
        end = min(end, start + limit)
    if start == 0 and end == size:
        return data, size
    part = work / "input"
    with open(data, "rb") as f, open(part, "wb") as g:
        f.seek(start)
        left = end - start
        while left:
            chunk = f.read(min(left, 1 << 20))
            g.write(chunk)
            left -= len(chunk)
    return part, end - start


def markdown(result: dict) -> str:
    rows = result["rows"]
    xz = next((r for r in rows if r["compressor"] == "xz"), None)
    lines = [f"Input: {result['input']['path']} ({result['input']['split']}, {result['input']['bytes']:,} bytes); "
             f"{result['machine']['cpu']}, {result['machine']['cpu_count']} CPUs, kernels {result['machine'].get('kernels', '?')}",
             "",
             "| compressor | level | bytes | bits/byte | vs xz | compress KB/s | decompress KB/s | peak RSS MB (c/d) | round trip | implementation |",
             "|---|---|---:|---:|---:|---:|---:|---:|---|---|"]
    for r in rows:
        vs = f"{100 * (r['archive_bytes'] / xz['archive_bytes'] - 1):+.1f} %" if xz else "-"
        lines.append(f"| {r['compressor']} | {r['level']} | {r['archive_bytes']:,} | {r['bits_per_byte']:.4f} | {vs} | "
                     f"{r['compress_KBps']:.1f} | {r['decompress_KBps']:.1f} | "
                     f"{r['compress_peak_rss_mb']:.0f} / {r['decompress_peak_rss_mb']:.0f} | "
                     f"{'yes' if r['round_trip'] else 'NO'} | {r['implementation']} |")
    for r in rows:
        if r["compressor"] != "shazip":
            continue
        e, h = r["extra"], r["extra"]["hutter"]
        lines += ["", f"shazip -{e['compression_level']}, model `{e['model']}` ({e['model_id'][:16]}…), {e['engine']} engine, {e['lanes'] or 'auto'} lanes, "
                      f"{e['threads']} thread{'' if e['threads'] == 1 else 's'}, adaptive stage {e['adapt']}: model "
                      "cross-entropy "
                      f"{e['model_bits_per_byte']} bits/byte"
                      + (f", mixed {e['mixed_bits_per_byte']}" if e.get("mixed_bits_per_byte") is not None else "")
                      + ", archive "
                      f"{r['bits_per_byte']} bits/byte; "
                      + (f"model-coded payload {e['coder_overhead_pct']} % above its cross-entropy, "
                         if e["coder_overhead_pct"] is not None else "no block kept model-coded, ")
                      + f"container {e['container_bytes']} bytes; blocks {e['blocks']}.",
                  "", "| Hutter-style total | bytes |", "|---|---:|",
                  f"| archive | {h['archive_bytes']:,} |", f"| model file | {h['model_file_bytes']:,} |",
                  f"| decompressor source (zip of the {len(h['decoder_modules'])} modules decompression imports) | "
                  f"{h['source_zip_bytes']:,} |", f"| **total** | **{h['total_bytes']:,}** |"]
        if "projected_enwik8_total_bytes" in h:  # a row of the same table
            lines.append(f"| enwik8 total, projected from {h['projected_from_bytes']:,} bytes | "
                         f"{h['projected_enwik8_total_bytes']:,} |")
        lines += ["", f"(The whole package's source, tools included, zips to {h['package_zip_bytes']:,} bytes.)"]
    return "\n".join(lines) + "\n"


def plot(result: dict, path: Path) -> bool:
    """bits/byte against compress speed (log x), one point per compressor and level."""
    if not available("matplotlib"):
        return False
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for r in result["rows"]:
        ax.scatter(r["compress_KBps"], r["bits_per_byte"], color="C3" if r["compressor"] == "shazip" else "C0")
    ax.set_xscale("log")
    ax.set_xlabel("compress speed, KB/s (log)")
    ax.set_ylabel("bits/byte (lower is better)")
    ax.set_title(f"{Path(result['input']['path']).name}: {result['input']['bytes']:,} bytes", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    renderer = fig.canvas.get_renderer()
    inside = ax.get_window_extent(renderer)
    placed = []  # each label takes the first spot beside its point inside the axes that no earlier label covers
    spots = ((5, 4), (5, -10), (-5, 4), (-5, -10), (5, 14), (5, -20), (-5, 14), (-5, -20))
    for r in result["rows"]:
        for dx, dy in spots:
            label = ax.annotate(f"{r['compressor']} {r['level']}", (r["compress_KBps"], r["bits_per_byte"]),
                                textcoords="offset points", xytext=(dx, dy), fontsize=8,
                                ha="left" if dx > 0 else "right")
            box = label.get_window_extent(renderer)
            fits = inside.x0 <= box.x0 and box.x1 <= inside.x1 and inside.y0 <= box.y0 and box.y1 <= inside.y1
            if (fits and not any(box.overlaps(b) for b in placed)) or (dx, dy) == spots[-1]:
                break
            label.remove()
        placed.append(box)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def _rows(src: Path, work: Path, n: int, setup: Setup, baselines: bool, log) -> list[dict]:
    rows = []
    log(f"shazip ({n:,} bytes)...")
    rows.append(run_shazip(src, work, n, setup))
    for b in BASELINES if baselines else []:
        if b.tool() is None and b.python is None:
            log(f"{b.name} {b.level}: not installed, left out")
            continue
        log(f"{b.name} {b.level}...")
        rows.append(run_baseline(b, src, work, n))
    return [asdict(r) for r in rows]


def bench(data: Path, out: Path, setup: Setup = Setup(), split: str = "all", limit: int | None = None,
          baselines: bool = True, log=print) -> dict:
    """Runs the benchmark; writes out/bench.json, bench.md and (with matplotlib) bench.png."""
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="shazip-bench-") as tmp:
        work = Path(tmp)
        src, n = select_input(data, split, limit, work)
        rows = _rows(src, work, n, setup, baselines, log)
    result = {"input": {"path": str(data), "split": split, "limit": limit, "bytes": n}, "machine": machine(),
              "rows": rows}
    result["plot"] = str(out / "bench.png") if plot(result, out / "bench.png") else None
    (out / "bench.json").write_text(json.dumps(result, indent=2) + "\n")
    (out / "bench.md").write_text(markdown(result))
    return result


def bench_suite(folder: Path, out: Path, setup: Setup = Setup(), log=print) -> dict:
    """Every file of `folder` (sorted by name) through shazip and every baseline; writes
    out/suite.json and suite.md (per-file sizes, winners, totals)."""
    files = sorted(p for p in folder.iterdir() if p.is_file() and p.stat().st_size) if folder.is_dir() else []
    if not files:
        raise UsageError(f"--suite {folder}: no files to benchmark")
    out.mkdir(parents=True, exist_ok=True)
    per_file = []
    for f in files:
        log(f"== {f.name}")
        with tempfile.TemporaryDirectory(prefix="shazip-bench-") as tmp:
            per_file.append({"file": f.name, "bytes": f.stat().st_size,
                             "rows": _rows(f, Path(tmp), f.stat().st_size, setup, True, log)})
    result = {"suite": str(folder), "machine": machine(), "files": per_file}
    (out / "suite.json").write_text(json.dumps(result, indent=2) + "\n")
    (out / "suite.md").write_text(suite_markdown(result))
    return result


def _label(r: dict) -> str:
    return r["compressor"] if r["compressor"] != "zstd" else f"zstd {r['level'].split()[0]}"


def suite_markdown(result: dict) -> str:
    """Bytes per file and compressor (bits/byte below each total), the winner of each file, and
    shazip's size against zpaq -m5 and xz -9e where they ran."""
    names = list(dict.fromkeys(_label(r) for f in result["files"] for r in f["rows"]))
    head = "| file | bytes | " + " | ".join(names) + " | shazip model only | winner |"
    shazip = next(r for r in result["files"][0]["rows"] if r["compressor"] == "shazip")
    lines = [f"Suite: {result['suite']}; {result['machine']['cpu']}, {result['machine']['date'][:10]}; "
             f"shazip {shazip['level']}", "", head, "|---|---:|" + "---:|" * len(names) + "---:|---|"]
    totals = dict.fromkeys(names, 0)
    n_total = model_bits = 0.0
    for f in result["files"]:
        by = {_label(r): r for r in f["rows"]}
        best = min(by.values(), key=lambda r: r["archive_bytes"])
        e = by["shazip"]["extra"]
        cells = [f"{by[k]['archive_bytes']:,}" if k in by else "-" for k in names]
        lines.append(f"| {f['file']} | {f['bytes']:,} | " + " | ".join(cells) +
                     f" | {e['model_bits_per_byte']} | {_label(best)} |")
        for k in names:
            totals[k] += by[k]["archive_bytes"] if k in by else 0
        n_total += f["bytes"]
        model_bits += (e["model_bits_per_byte"] or 8) * f["bytes"]
    lines.append(f"| **total** | {int(n_total):,} | " + " | ".join(f"**{totals[k]:,}**" for k in names) +
                 f" | {model_bits / n_total:.3f} | {min(totals, key=totals.get)} |")
    lines.append("| bits/byte | | " + " | ".join(f"{8 * totals[k] / n_total:.3f}" for k in names) + " | | |")
    for peer in ("paq8px", "zpaq", "xz"):
        if peer in totals and totals[peer]:
            lines.append(f"\nshazip / {peer}: {totals['shazip'] / totals[peer]:.3f} over the suite")
    return "\n".join(lines) + "\n"


def _worker(argv: list[str]) -> None:
    """Processes the benchmark measures: `_shazip SRC ARCHIVE STATS MODEL LANES THREADS ADAPT LEVEL` and
    `_py KIND c|d SRC DST`."""
    if argv[0] == "_shazip":
        from ..codec.encode import compress_stream
        from ..codec.block import CodingStats
        src, arc, stats_path, model, lanes, threads, adapt, level = argv[1:]
        stats = CodingStats()
        with open(src, "rb") as f, open(arc, "wb") as g:
            compress_stream(f, g, model, level=int(level), lanes=int(lanes) or None, threads=int(threads),
                            stats=stats, adapt=adapt)
        Path(stats_path).write_text(json.dumps({k: getattr(stats, k) for k in (
            "model_bits", "mixed_bits", "model_bytes", "chosen_bits", "chosen_payload", "payload")} | {"methods": dict(stats.methods)}))
    elif argv[0] == "_py":
        kind, mode, src, dst = argv[1:]
        comp, decomp = _py_codec(kind)
        Path(dst).write_bytes((comp if mode == "c" else decomp)(Path(src).read_bytes()))
    else:
        raise SystemExit(f"unknown worker command {argv[0]}")

