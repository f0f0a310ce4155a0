"""The benchmark: shazip beside standard compressors on one input, with Hutter-style totals.

    shazip bench --data enwik8 --split test          # the standard enwik8 test split
    shazip bench --data ../shared/data/enwik6        # any file, whole or --limit N prefix

Every figure is measured in this run, each compressor in its own process (measure.py) and timed
end to end as a user would run it: for shazip that is the Python start-up, the model load, coding
and writing the archive. Every archive is decompressed again and compared with the input
(`round_trip`). The peers are baselines.py's.

shazip's row adds the model's cross-entropy (bits/byte under the integer engine's very rows
the coder got) and the archive's overhead above it. The Hutter-style total counts what a
decompressor needs besides the archive: the model file and the code (hutter.py), each listed
apart. For inputs that are not the whole of enwik8, a projected enwik8 total (measured bits/byte
x 10**8 bytes, plus the decompressor) is given, labelled as such.

Writes a Markdown table to stdout and, in --out, bench.json (every figure, plus the machine,
threads and versions), bench.md and bench.png (report.py; the plot needs the optional `bench`
extra, matplotlib).
"""

from __future__ import annotations

import json
import os
import platform
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from ..errors import UsageError
from ..options import DEFAULT_LEVEL
from .baselines import BASELINES, py_codec, run_baseline
from .hutter import decoder_modules, decoder_source, package_source, zipped
from .measure import Row, measure, row, same
from .report import markdown, plot, suite_markdown

ENWIK8_BYTES = 100_000_000
SPLITS = {"all": (0, None), "train": (0, 90_000_000), "valid": (90_000_000, 95_000_000),
          "test": (95_000_000, 100_000_000)}


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
    from ..model.file import load_model
    model, lanes, threads, adapt = level_model(setup.level, setup.model), setup.lanes, setup.threads, setup.adapt
    loaded = load_model(model)
    arc, back, stats = work / "shazip.shz", work / "shazip.back", work / "shazip.stats.json"
    c = measure([sys.executable, "-m", "shazip.bench", "_shazip", str(src), str(arc), str(stats),
                 model, str(lanes), str(threads), adapt, str(setup.level)])
    d = measure([sys.executable, "-m", "shazip", "decompress", str(arc), "-o", str(back), "-q", "-f",
                 "--threads", str(threads), "--model", model])
    s = json.loads(stats.read_text())
    size = arc.stat().st_size
    ce = s["model_bits"] / s["model_bytes"] if s["model_bytes"] else None
    mixed = s["mixed_bits"] / s["model_bytes"] if s["model_bytes"] and adapt != "none" else None
    coder = 100 * (8 * s["chosen_payload"] / s["chosen_bits"] - 1) if s["chosen_bits"] else None
    model_bytes = loaded.path.stat().st_size if loaded.path else 0
    modules = decoder_modules(arc, model)
    source_zip = len(zipped(decoder_source(modules)))
    extra = {
        "model": loaded.name, "model_id": loaded.id_hex, "engine": "int8", "lanes": lanes, "threads": threads,
        "adapt": adapt, "compression_level": setup.level,
        "model_bits_per_byte": round(ce, 4) if ce is not None else None,
        "mixed_bits_per_byte": round(mixed, 4) if mixed is not None else None,
        "coder_overhead_pct": round(coder, 4) if coder is not None else None,
        "container_bytes": size - s["payload"],
        "blocks": s["methods"],
        "hutter": {"archive_bytes": size, "model_file_bytes": model_bytes, "source_zip_bytes": source_zip,
                   "package_zip_bytes": len(zipped(package_source())), "decoder_modules": modules,
                   "total_bytes": size + model_bytes + source_zip},
    }
    if n != ENWIK8_BYTES and n:
        extra["hutter"]["projected_enwik8_total_bytes"] = round(8 * size / n * ENWIK8_BYTES / 8) + model_bytes + source_zip
        extra["hutter"]["projected_from_bytes"] = n
    return row("shazip", f"-{setup.level}, {loaded.name} int8, {lanes or 'auto'} lanes", f"shazip {_version()}", n, arc, c, d,
               same(src, back), **extra)


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
        comp, decomp = py_codec(kind)
        Path(dst).write_bytes((comp if mode == "c" else decomp)(Path(src).read_bytes()))
    else:
        raise SystemExit(f"unknown worker command {argv[0]}")

