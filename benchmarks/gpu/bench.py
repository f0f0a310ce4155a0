"""The GPU beside the CPU on one input: compress and decompress MB/s and archive size, the GPU at
several lane counts (its step as a CUDA graph, and eager for comparison), the CPU at its automatic
choice with every core; every round trip checked
and the GPU's archive decoded by the CPU. One JSON line a row, all rows in `--out`.

    python benchmarks/gpu/bench.py --input gpu-run/mixed.txt.xz --mib 8 --out $OUT/bench.json

Run by benchmarks/gpu/run.sh on the device machine; runs anywhere with `--no-gpu` (the CPU row only).
"""

from __future__ import annotations

import argparse
import json
import lzma
import os
import platform
import time
from pathlib import Path

import shazip
from shazip import core


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def row(data: bytes, device: str, lanes: int, threads: int, frame_size: int, graphs: bool = True) -> dict:
    os.environ["SHAZIP_CUDA_GRAPHS"] = "1" if graphs else "0"  # read where the engine is made
    c = shazip.Compressor(device=device, lanes=lanes or None, threads=threads, frame_size=frame_size)
    blob, tc = timed(lambda: c.compress(data))
    back, td = timed(lambda: shazip.decompress(blob, device=device, threads=threads))
    assert back == data, "round trip"
    out = {"device": device, "lanes": lanes or "auto", "threads": threads, "frame_size": frame_size,
           **({"cuda_graphs": graphs} if device != "cpu" else {}), "bytes": len(data), "archive": len(blob),
           "bits_per_byte": round(8 * len(blob) / len(data), 4), "compress_s": round(tc, 2),
           "decompress_s": round(td, 2), "compress_mb_s": round(len(data) / tc / 1e6, 4),
           "decompress_mb_s": round(len(data) / td / 1e6, 4)}
    if device != "cpu":  # the GPU's archive decodes on the CPU
        assert shazip.decompress(blob, device="cpu", threads=threads) == data, "GPU archive on the CPU"
        out["decodes_on_cpu"] = True
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--input", type=Path, required=True)
    ap.add_argument("--mib", type=float, default=1.0, help="MiB of the input to code")
    ap.add_argument("--lanes", type=int, nargs="*", default=[0, 64],
                    help="the GPU's lanes a block, one row each (0: its automatic choice; 64: 8 KB lanes of a "
                         "512 KiB frame, near the CPU's layout and archive size)")
    ap.add_argument("--eager-lanes", type=int, nargs="*", default=[0],
                    help="lane counts also timed with the eager step (SHAZIP_CUDA_GRAPHS=0), beside the graphs")
    ap.add_argument("--eager-mib", type=float, default=1.0,
                    help="MiB the eager rows code (the eager step is slow: a shorter input keeps the run short)")
    ap.add_argument("--frame-kib", type=int, default=512,
                    help="frame size, every row: the input in as many frames as the machine has cores, coded at once")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--no-gpu", action="store_true")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    raw = args.input.read_bytes()
    text = lzma.decompress(raw) if args.input.suffix == ".xz" else raw
    data = text[:int(args.mib * (1 << 20))]
    rows = []
    machine = {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
               "kernels": core.kernels()}
    if not args.no_gpu:
        import torch
        machine["gpu"] = torch.cuda.get_device_name(0)
    print(json.dumps(machine), flush=True)
    frame = args.frame_kib << 10
    gpu_rows = [] if args.no_gpu else [(n, True) for n in args.lanes] + [(n, False) for n in args.eager_lanes]
    for lanes, graphs in gpu_rows:
        rows.append(row(data if graphs else data[:int(args.eager_mib * (1 << 20))], "cuda", lanes, args.threads,
                        frame, graphs))
        print(json.dumps(rows[-1]), flush=True)
    rows.append(row(data, "cpu", 0, args.threads, frame))
    print(json.dumps(rows[-1]), flush=True)
    if args.out:
        args.out.write_text(json.dumps({"machine": machine, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
