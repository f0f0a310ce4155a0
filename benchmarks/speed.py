"""Compress/decompress speed of an engine, beside the int8 matmul roofline for the same shapes.

    python benchmarks/speed.py --model shazip/models/default.safetensors --bytes 100000 --lanes 64

Every block is forced through the model (the figure is the model path's speed, not zstd's),
the round trip is verified, and KB/s is input bytes over wall time. The roofline is what the
step would reach if it did nothing but its int8 matmuls (`torch._int_mm`, timed here on the
model's shapes at this lane count): achieved / roofline says how much the rest costs.
Real text is read from --data (default: the test fixture, repeated to --bytes)."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

import shazip
from shazip.model.config import Config, get_config
from shazip.format.container import Method
from shazip.model.sharnn import SHARNN
from shazip.model.file import load_model, save_model

ROOT = Path(__file__).resolve().parent.parent


def matmul_shapes(cfg: Config) -> list[tuple[int, int]]:
    """(K, N) of every int8 matmul in one step of the integer engine."""
    d = cfg.d_model
    shapes = [(d, 4 * d), (d, 4 * d), (d, cfg.d_boom)] * cfg.n_layers  # LSTM x and h parts, Boom
    return shapes + [(d, d), (d, 256)]  # attention query, output


def roofline_seconds_per_step(cfg: Config, lanes: int, repeats: int = 50) -> float:
    total = 0.0
    for k, n in matmul_shapes(cfg):
        a = torch.randint(-127, 128, (lanes, k), dtype=torch.int8)
        w = torch.randint(-127, 128, (k, n), dtype=torch.int8)
        torch._int_mm(a, w)
        best = float("inf")
        for _ in range(3):
            t = time.perf_counter()
            for _ in range(repeats):
                torch._int_mm(a, w)
            best = min(best, (time.perf_counter() - t) / repeats)
        total += best
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="small", help="preset for random weights (without --model)")
    ap.add_argument("--model", help="model file or bundled name (default: random weights of --config)")
    ap.add_argument("--data", default=str(ROOT / "tests" / "data" / "wiki.xml"))
    ap.add_argument("--bytes", type=int, default=100_000)
    ap.add_argument("--lanes", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--engine", default="int8", choices=["int8", "float32"])
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    if args.model:
        loaded = load_model(args.model)
    else:
        torch.manual_seed(0)
        path = Path("/tmp") / f"shazip-speed-{args.config}.safetensors"
        save_model(SHARNN(get_config(args.config)), path, f"{args.config}-random")
        loaded = load_model(path)
    text = Path(args.data).read_bytes()
    data = (text * (args.bytes // len(text) + 1))[: args.bytes]

    t = time.perf_counter()
    blob = shazip.compress(data, model=loaded, lanes=args.lanes, threads=args.threads, engine=args.engine,
                           methods=frozenset({Method.MODEL}), adapt="none", block_size=1 << 24)
    t_c = time.perf_counter() - t
    t = time.perf_counter()
    ok = shazip.decompress(blob, model=loaded, threads=args.threads) == data
    t_d = time.perf_counter() - t
    roof = args.lanes / roofline_seconds_per_step(loaded.model.cfg, args.lanes) / 1e3
    c_kbps, d_kbps = len(data) / t_c / 1e3, len(data) / t_d / 1e3
    print(json.dumps({"model": loaded.name, "params": loaded.model.num_params(), "bytes": len(data),
                      "lanes": args.lanes, "threads": args.threads, "engine": args.engine,
                      "compress_KBps": round(c_kbps, 2), "decompress_KBps": round(d_kbps, 2),
                      "int8_matmul_roofline_KBps": round(roof, 1),
                      "compress_vs_roofline": round(c_kbps / roof, 3),
                      "bits_per_byte": round(8 * len(blob) / len(data), 3), "round_trip": ok}))


if __name__ == "__main__":
    main()
