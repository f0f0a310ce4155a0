"""The GPU beside the CPU: compress and decompress MB/s and archive size, the GPU with every default
on the issue's 32 MiB, then on a shorter input in as many frames as cores with the twin's own
kernels instead of the compiled step (SHAZIP_GPU_COMPILE=0), the CPU at its automatic choice
with every core, the GPU at other lane lengths and ways of batching the frames coded at once
(their lanes in 2 or 1 shared batches, or each frame its own step: SHAZIP_GPU_GROUPS); every
round trip checked and the shorter rows' GPU archives decoded by the CPU. The CUDA set-up
(context, libraries, the step's compilation, first graphs) is timed apart, before the rows. One
JSON line a row; `--out` holds every row finished so far (a run cut by its time limit keeps them).

    python benchmarks/gpu/bench.py --input gpu-run/mixed.txt.xz --mib 8 --out $OUT/bench.json

Run by benchmarks/gpu/run.sh on the device machine; runs anywhere with `--no-gpu` (the CPU row only)
or `--dry-run` (every row, the twin on the CPU standing in for the GPU: slow; check with small
sizes, e.g. `--mib 0.06 --target-mib 0.05 --alone-mib 0.03 --frame-kib 16 --threads 2`).
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
from shazip.options import DEFAULT_BLOCK_SIZE


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def row(data: bytes, device: str, lane_kib: int, threads: int, frame_size: int | None, graphs: bool = True,
        groups: int = GPU_GROUPS, check_on_cpu: bool = True, compiled: bool = True) -> dict:
    """One row. `frame_size` None: every default; else frames of that size, each one block (so
    frames under the default block are what they say); `lane_kib` 0: the automatic lanes, else
    lanes of that length."""
    os.environ["SHAZIP_CUDA_GRAPHS"] = "1" if graphs else "0"  # both read where the engines are made
    os.environ["SHAZIP_GPU_GROUPS"] = str(groups)
    os.environ["SHAZIP_GPU_COMPILE"] = "1" if compiled else "0"
    block = DEFAULT_BLOCK_SIZE if frame_size is None else min(frame_size, DEFAULT_BLOCK_SIZE)
    lanes = max(1, block // (lane_kib << 10)) if lane_kib else None
    c = shazip.Compressor(device=device, lanes=lanes, threads=threads, block_size=block,
                          **({} if frame_size is None else {"frame_size": frame_size}))
    blob, tc = timed(lambda: c.compress(data))
    print(json.dumps({"compressed": len(data), "device": device, "lane_kib": lane_kib, "groups": groups,
                      "seconds": round(tc, 2), "archive": len(blob)}), flush=True)  # a row cut short keeps this
    back, td = timed(lambda: shazip.decompress(blob, device=device, threads=threads))
    assert back == data, "round trip"
    out = {"device": device, "lanes": lanes or "auto", "lane_bytes": lane_kib << 10 if lane_kib else "auto",
           "threads": threads, "frame_size": "default" if frame_size is None else frame_size,
           **({"cuda_graphs": graphs, "gpu_groups": groups, "compiled": compiled} if device != "cpu" else {}),
           "bytes": len(data), "archive": len(blob),
           "bits_per_byte": round(8 * len(blob) / len(data), 4), "compress_s": round(tc, 2),
           "decompress_s": round(td, 2), "compress_mb_s": round(len(data) / tc / 1e6, 4),
           "decompress_mb_s": round(len(data) / td / 1e6, 4)}
    if device != "cpu" and check_on_cpu:  # the GPU's archive decodes on the CPU
        assert shazip.decompress(blob, device="cpu", threads=threads) == data, "GPU archive on the CPU"
        out["decodes_on_cpu"] = True
    return out


def stand_in_for_cuda() -> None:
    """--dry-run: the twin on torch's CPU device answers for "cuda" (eagerly, no graphs), so every
    GPU row runs here, slowly, before a lend spends device time on it."""
    import torch

    from shazip.model import twin as quant
    from shazip import hardware
    hardware.resolve_device = lambda device: "cpu" if device == "cpu" else "cuda"
    make = quant.IntModel.__init__
    quant.IntModel.__init__ = lambda self, model, device="cpu", int8_rows=None: make(self, model, "cpu", int8_rows)
    torch.cuda.get_device_name = lambda index=0: "none: the twin on the CPU (--dry-run)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--input", type=Path, required=True)
    ap.add_argument("--mib", type=float, default=1.0, help="MiB of the input to code")
    ap.add_argument("--lane-kib", type=int, nargs="*", default=[2],
                    help="lane lengths besides the automatic choice, one row each, in --groups[0] batches "
                         "(2: the GPU's earlier choice, faster and larger)")
    ap.add_argument("--groups", type=int, nargs="*", default=[GPU_GROUPS, 1, 0],
                    help="the frames' lanes in this many shared batches (0: each frame steps its own lanes): the "
                         "first for every row, each other one a row at the automatic lanes")
    ap.add_argument("--alone-mib", type=float, default=2.0,
                    help="MiB the rows of frames stepped alone (groups 0) and eager code (they are slow)")
    ap.add_argument("--eager-lane-kib", type=int, nargs="*", default=[],
                    help="lane lengths also timed with the eager step (SHAZIP_CUDA_GRAPHS=0)")
    ap.add_argument("--target-mib", type=float, default=32.0,
                    help="MiB of the first GPU row, with every default (lanes, frames of options.GPU_FRAME_SIZE), "
                         "in --groups[0] batches (0: none)")
    ap.add_argument("--frame-kib", type=int, default=512,
                    help="frame size of the --mib rows (each frame one block): the input in as many frames as "
                         "the machine has cores, coded at once")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--no-gpu", action="store_true")
    ap.add_argument("--dry-run", action="store_true", help="the GPU rows on the CPU's twin (to check the bench)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    if args.dry_run:
        stand_in_for_cuda()
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
        small = dict(lanes=64, block_size=16 << 10, frame_size=16 << 10)  # 4 frames at once, 256 steps each
        assert shazip.decompress(shazip.compress(warm, device="cuda", threads=args.threads, **small),
                                 device="cuda", threads=args.threads) == warm
        machine["cuda_setup_s"] = round(time.perf_counter() - t, 2)
    print(json.dumps(machine), flush=True)
    if args.no_gpu:
        done(row(data, "cpu", 0, args.threads, frame))
        return
    if args.target_mib:  # the target, every default (no decode on the CPU: its cores would take a minute)
        done(row(text[:int(args.target_mib * (1 << 20))], "cuda", 0, args.threads, None, True, args.groups[0],
                 check_on_cpu=False))
    # then the twin's own kernels (SHAZIP_GPU_COMPILE=0), the CPU, and the quick rows first: a
    # row's time is its lanes' length in steps (16,384 for 16 KB), not its size
    alone = data[:int(args.alone_mib * (1 << 20))]
    done(row(data, "cuda", 0, args.threads, frame, compiled=False))
    done(row(data, "cpu", 0, args.threads, frame))
    for lane_kib, graphs, groups in ([(n, True, args.groups[0]) for n in args.lane_kib]
                                     + [(0, True, g) for g in args.groups[1:]]
                                     + [(n, False, args.groups[0]) for n in args.eager_lane_kib]):
        done(row(data if graphs and groups else alone, "cuda", lane_kib, args.threads, frame, graphs, groups))


if __name__ == "__main__":
    main()
