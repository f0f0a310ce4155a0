"""Prepares, on this machine, what the GPU device run (`benchmarks/gpu/run.sh`) takes with it: a
folder that travels with the working tree (git-ignored; name it in the device tool's `carry`).

    python benchmarks/gpu/prepare.py            # then: carry ["gpu-run"], command "bash benchmarks/gpu/run.sh"

It holds
- `wheels/`: pybind11 (the core's build needs >= 2.12; the device machine's may be older, and it
  has no network);
- `mixed.txt.xz`: >= 32 MiB of mixed text (books in several languages, code, markup, logs,
  CRLF text, Wikipedia), slices of every file of ../shared/data/general and a Wikipedia file,
  for the benchmark; xz (Python's lzma) because the device machine has the standard library but
  not zstandard;
- `archives/`: archives made here on the CPU at levels 3 .. 9, `--adapt none`, several frames
  and `-T 2`, each with its input and its options in `manifest.json`, for tests/test_gpu.py:
  the GPU must decode them and, given the same options (the same lane layout), write the very
  same bytes. Archives made on this machine and checked on another: the numerics contract.

It reads ../shared/data (which does not travel) and writes nothing else.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import lzma
import subprocess
import sys
from pathlib import Path

import zstandard

import shazip

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT.parent / "shared" / "data"
SOURCES = ["general/books-en.txt.zst", "general/books-intl.txt.zst", "general/code.txt.zst",
           "general/markup-data.txt.zst", "general/logs.txt.zst", "general/crlf.txt.zst", "wiki-text-b.txt.zst"]
# The archives' options: a lane layout fixed by hand (the automatic one differs on a GPU), small
# blocks and frames so a 12 KB input has several of each, and lanes short enough that the GPU's
# step-by-step engine (~6 ms a step) codes each archive in seconds.
SLICE, LAYOUT = 12_000, dict(lanes=24, block_size=3_000, frame_size=6_000)
CASES = ([dict(level=k) for k in range(3, 10)] + [dict(level=6, adapt="none"), dict(level=6, threads=2),
                                                  dict(level=9, threads=2, lanes=48)])


def mixed(size: int) -> bytes:
    """`size` bytes of mixed text: an equal slice from the middle of each source file."""
    each = -(-size // len(SOURCES))
    parts = []
    for name in SOURCES:
        with open(DATA / name, "rb") as f, zstandard.ZstdDecompressor().stream_reader(f) as r:
            r.read(each)  # past the first slice: files often start with licences and headers
            parts.append(r.read(each))
    return b"".join(parts)[:size]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "gpu-run")
    ap.add_argument("--mib", type=int, default=36, help="MiB of mixed text for the benchmark")
    args = ap.parse_args()
    out = args.out
    (out / "wheels").mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "pybind11>=2.12", "-d",
                    str(out / "wheels")], check=True)
    text = mixed(args.mib << 20)
    (out / "mixed.txt.xz").write_bytes(lzma.compress(text, format=lzma.FORMAT_XZ, preset=6))
    arch = out / "archives"
    arch.mkdir(exist_ok=True)
    data = text[len(text) // 2:len(text) // 2 + SLICE]  # (a slice of every kind would be too long: one from the middle)
    (arch / "input.bin").write_bytes(data)
    manifest = []
    for i, case in enumerate(CASES):
        options = dict(LAYOUT, **case)
        blob = shazip.compress(data, **options)
        assert shazip.decompress(blob) == data
        name = f"case{i}.shz"
        (arch / name).write_bytes(blob)
        manifest.append({"archive": name, "options": options, "sha256": hashlib.sha256(blob).hexdigest()})
        print(name, options, len(blob), flush=True)
    (arch / "manifest.json").write_text(json.dumps({"input": "input.bin", "input_sha256":
                                                    hashlib.sha256(data).hexdigest(), "cases": manifest}, indent=1))
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    print(json.dumps({"folder": str(out), "bytes": size, "mixed_bytes": len(text)}))


if __name__ == "__main__":
    main()
