"""The GPU beside the CPU on one input: compress and decompress MB/s and archive size, the GPU at
several lane counts and ways of batching the frames coded at once (their lanes in 2 or 1 shared
batches, or each frame its own step: SHAZIP_GPU_GROUPS), the CPU at its automatic choice with
every core; every round trip checked and the GPU's archive decoded by the CPU. The CUDA set-up
(context, libraries, first graphs) is timed apart, before the rows. One JSON line a row; `--out`
holds every row finished so far (a run cut by its time limit keeps them).

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
from shazip.codec.engines import GPU_GROUPS


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def row(data: bytes, device: str, lanes: int, threads: int, frame_size: int | None, graphs: bool = True,
        groups: int = GPU_GROUPS) -> dict:
    os.environ["SHAZIP_CUDA_GRAPHS"] = "1" if graphs else "0"  # both read where the engines are made
    os.environ["SHAZIP_GPU_GROUPS"] = str(groups)
    c = shazip.Compressor(device=device, lanes=lanes or None, threads=threads, frame_size=frame_size)
    blob, tc = timed(lambda: c.compress(data))
    back, td = timed(lambda: shazip.decompress(blob, device=device, threads=threads))
    assert back == data, "round trip"
    out = {"device": device, "lanes": lanes or "auto", "threads": threads, "frame_size": "default" if frame_size is None else frame_size,
           **({"cuda_graphs": graphs, "gpu_groups": groups} if device != "cpu" else {}), "bytes": len(data),
           "archive": len(blob),
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
    ap.add_argument("--lanes", type=int, nargs="*", default=[64],
                    help="the GPU's lanes a block besides its automatic choice, one row each (64: 8 KB lanes of a "
                         "512 KiB frame, near the CPU's layout and archive size), frames in --groups[0] batches")
    ap.add_argument("--groups", type=int, nargs="*", default=[GPU_GROUPS, 1, 0],
                    help="at the automatic lanes, one row each: the frames' lanes in this many shared batches "
                         "(0: each frame steps its own lanes)")
    ap.add_argument("--alone-mib", type=float, default=2.0,
                    help="MiB the rows of frames stepped alone (groups 0) and eager code (they are slow)")
    ap.add_argument("--eager-lanes", type=int, nargs="*", default=[],
                    help="lane counts also timed with the eager step (SHAZIP_CUDA_GRAPHS=0)")
    ap.add_argument("--target-mib", type=float, default=32.0,
                    help="MiB of a last row with every default (lanes, frames of options.GPU_FRAME_SIZE), "
                         "in --groups[0] batches (0: none)")
    ap.add_argument("--frame-kib", type=int, default=512,
                    help="frame size, every row: the input in as many frames as the machine has cores, coded at once")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--no-gpu", action="store_true")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    raw = args.input.read_bytes()
    text = lzma.decompress(raw) if args.input.suffix == ".xz" else raw
    data = text[:int(args.mib * (1 << 20))]
    rows: list[dict] = []
    machine = {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
               "kernels": core.kernels()}

    def done(r: dict) -> None:
        rows.append(r)
        print(json.dumps(r), flush=True)
        if args.out:
            args.out.write_text(json.dumps({"machine": machine, "rows": rows}, indent=1))

    frame = args.frame_kib << 10
    if not args.no_gpu:
        import torch
        machine["gpu"] = torch.cuda.get_device_name(0)
        warm = data[:64 << 10]
        t = time.perf_counter()  # CUDA's context, libraries and first graphs: once a process
        assert shazip.decompress(shazip.compress(warm, device="cuda", threads=args.threads, frame_size=16 << 10),
                                 device="cuda", threads=args.threads) == warm
        machine["cuda_setup_s"] = round(time.perf_counter() - t, 2)
    print(json.dumps(machine), flush=True)
    done(row(data, "cpu", 0, args.threads, frame))
    if args.no_gpu:
        return
    alone = data[:int(args.alone_mib * (1 << 20))]
    for lanes, graphs, groups in ([(0, True, g) for g in args.groups] + [(n, True, args.groups[0]) for n in args.lanes]
                                  + [(n, False, args.groups[0]) for n in args.eager_lanes]):
        done(row(data if graphs and groups else alone, "cuda", lanes, args.threads, frame, graphs, groups))
    if args.target_mib:  # the target: its size, every default; last, so the rows above survive a cut
        done(row(text[:int(args.target_mib * (1 << 20))], "cuda", 0, args.threads, None, True, args.groups[0]))


if __name__ == "__main__":
    main()
