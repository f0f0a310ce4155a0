"""Ratio against parallelism by frame size: one mixed-text sample compressed at the default level
with frames of each size (each frame an archive coded apart, so the frames code at once, one a
thread), its bytes, frames and wall time side by side, each archive decoded back and compared.

    python benchmarks/frame_size.py --mib 8 --frames 2,4,8 --threads 2 [--out results.json]

The sample is benchmarks/gpu/prepare.py's mixed text (an equal slice of each ../shared/data
source: books in several languages, code, markup, logs, CRLF text, Wikipedia), so a frame of a
MiB or two often starts where a new source does, cold anyway: it understates what a frame costs
on text of one kind. Smaller frames give more threads work at once; each frame's stage and lanes
start cold, which costs bytes. A frame holds whole blocks (2 MiB by default): a smaller frame
size is one block.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import shazip
from shazip import core

sys.path.insert(0, str(Path(__file__).resolve().parent / "gpu"))
from prepare import mixed  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mib", type=int, default=8, help="MiB of mixed text")
    ap.add_argument("--frames", default="2,4,8", help="frame sizes in MiB, comma-separated")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--level", type=int, default=6)
    ap.add_argument("--out", type=Path, help="also write the rows as JSON here")
    args = ap.parse_args()
    data = mixed(args.mib << 20)
    rows = []
    print(f"{len(data):,} bytes of mixed text, level {args.level}, {args.threads} threads, "
          f"kernels {core.kernels()}")
    print("| frame MiB | frames | bytes | bits/byte | vs largest frame | compress s | decompress s |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for mib in sorted((int(x) for x in args.frames.split(",")), reverse=True):
        t = time.perf_counter()
        blob = shazip.compress(data, args.level, frame_size=mib << 20, threads=args.threads)
        c = time.perf_counter() - t
        t = time.perf_counter()
        assert shazip.decompress(blob, threads=args.threads) == data
        d = time.perf_counter() - t
        rows.append(dict(frame_mib=mib, frames=-(-len(data) // (mib << 20)), bytes=len(blob),
                         compress_s=round(c, 1), decompress_s=round(d, 1)))
        r = rows[-1]
        print(f"| {mib} | {r['frames']} | {len(blob):,} | {8 * len(blob) / len(data):.4f} | "
              f"{len(blob) / rows[0]['bytes']:.4f}x | {c:.1f} | {d:.1f} |", flush=True)
    if args.out:
        args.out.write_text(json.dumps(dict(bytes=len(data), level=args.level, threads=args.threads,
                                            kernels=core.kernels(), rows=rows), indent=1))


if __name__ == "__main__":
    main()
