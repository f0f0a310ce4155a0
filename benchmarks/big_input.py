"""A 1 GiB input through `shazip compress` and `decompress` as pipes: peak RSS and speed.

    python benchmarks/big_input.py --size 1024 --text-every 100 --model default

The input is made at run time, one 2 MiB block (shazip's default block size) at a time:
random bytes, except every `--text-every`-th block, which is real text (consecutive slices of
`--text`, plain or .zst; default: the committed fixture, repeated), so both the model path and
the stored-block path run. `shazip compress - -c` reads it from a pipe and writes the archive to
a pipe; `shazip decompress - -c` does the same; the bytes are compared by sha256 as they
stream, so nothing holds the whole input. Each process's peak RSS comes from wait4."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import zstandard

ROOT = Path(__file__).resolve().parent.parent
MIB = 1 << 20
BLOCK = 2 * MIB


def text_blocks(path: Path):
    """Consecutive 2 MiB slices of a text file (plain or .zst), round and round."""
    while True:
        with open(path, "rb") as f:
            src = zstandard.ZstdDecompressor().stream_reader(f) if path.suffix == ".zst" else f
            while len(b := src.read(BLOCK)) == BLOCK:
                yield b
            if b and len(b) < BLOCK:  # a short file: repeat it to fill the block
                yield (b * (BLOCK // len(b) + 1))[:BLOCK]


def chunks(n_blocks: int, text_every: int, text: Path, seed: int = 0):
    texts, rng = text_blocks(text), random.Random(seed)
    for i in range(n_blocks):
        yield next(texts) if text_every and i % text_every == 0 else rng.randbytes(BLOCK)


def run(cmd: list[str], feed, sink) -> dict:
    """Runs cmd with `feed()` chunks written to its stdin and its stdout handed to `sink`;
    returns its wall time and peak RSS (MB)."""
    t = time.perf_counter()
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def writer() -> None:
        for c in feed():
            p.stdin.write(c)
        p.stdin.close()

    w = threading.Thread(target=writer)
    w.start()
    while data := p.stdout.read(MIB):
        sink(data)
    w.join()
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode:
        raise SystemExit(f"{cmd[3]} failed with exit code {p.returncode}")
    return {"seconds": round(time.perf_counter() - t, 1), "peak_rss_mb": round(usage.ru_maxrss / 1024, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=1024, help="MiB of input (a multiple of 2)")
    ap.add_argument("--text-every", type=int, default=64, help="every N-th 2 MiB block is real text (0: none)")
    ap.add_argument("--text", type=Path, default=ROOT / "tests" / "data" / "wiki.xml")
    ap.add_argument("--model", default="default")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    shz = [sys.executable, "-m", "shazip"]
    src_hash = hashlib.sha256()
    with tempfile.TemporaryFile() as archive:
        def feed_input():
            for c in chunks(args.size // 2, args.text_every, args.text):
                src_hash.update(c)
                yield c
        comp = run(shz + ["compress", "-", "-c", "-q", "--model", args.model, "--threads", str(args.threads)],
                   feed_input, archive.write)
        archive_bytes = archive.tell()

        def feed_archive():
            archive.seek(0)
            while c := archive.read(MIB):
                yield c
        out_hash, n_out = hashlib.sha256(), [0]

        def sink(c: bytes) -> None:
            out_hash.update(c)
            n_out[0] += len(c)
        dec = run(shz + ["decompress", "-", "-c", "-q", "--threads", str(args.threads)]
                  + (["--model", args.model] if args.model != "default" else []), feed_archive, sink)
    n = args.size // 2 * BLOCK
    print(json.dumps({"input_bytes": n, "text_bytes": BLOCK * sum(1 for i in range(args.size // 2) if args.text_every
                                                                  and i % args.text_every == 0),
                      "archive_bytes": archive_bytes, "model": args.model, "threads": args.threads,
                      "compress": comp | {"KBps": round(n / comp["seconds"] / 1e3, 1)},
                      "decompress": dec | {"KBps": round(n / dec["seconds"] / 1e3, 1)},
                      "round_trip": n_out[0] == n and out_hash.digest() == src_hash.digest()}))


if __name__ == "__main__":
    main()
