"""What `--lanes` trades: bits/byte and speed of one input at several lane counts, and the
shortest lane worth starting (the automatic policy's codec.MIN_LANE) on small inputs.

    python benchmarks/lanes.py FILE... [--lanes 1,4,8,16,32,64] [--threads 1] [--min-lane 64,256,1024,4096]

Each lane starts the model cold; the adaptive stage's tables are shared by all lanes, which
softens that. More lanes make each step a larger batch (faster per byte, and what threads split).
One process, each input compressed once per setting (after a warm-up); prints a markdown table."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from shazip.api import Compressor
from shazip.codec import block as codec
from shazip.options import LanePolicy


def measure(c: Compressor, data: bytes) -> tuple[float, float]:
    t = time.perf_counter()
    size = len(c.compress(data))
    return 8 * size / len(data), len(data) / (time.perf_counter() - t) / 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+", type=Path)
    ap.add_argument("--lanes", default="1,4,8,16,32,64")
    ap.add_argument("--min-lane", default="")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--model", default="default")
    a = ap.parse_args()
    lanes = [int(x) for x in a.lanes.split(",")]
    mins = [int(x) for x in a.min_lane.split(",")] if a.min_lane else [codec.MIN_LANE]
    print("| file | bytes | min lane | " + " | ".join(f"{k} lanes" for k in lanes) + " |")
    print("|---|---:|---:|" + "---:|" * len(lanes))
    comps = {k: Compressor(a.model, lanes=k, threads=a.threads) for k in lanes}
    comps[lanes[0]].compress(b"warm-up " * 64)
    for f in a.files:
        data = f.read_bytes()
        for m in mins:
            for k, c in comps.items():
                c.lane_policy = LanePolicy(k, m, m)
            cells = [measure(comps[k], data) for k in lanes]
            print(f"| {f.name} | {len(data):,} | {m} | " + " | ".join(f"{b:.3f} ({s:.1f} KB/s)" for b, s in cells) + " |",
                  flush=True)


if __name__ == "__main__":
    main()
