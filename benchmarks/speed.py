"""Compress/decompress speed of the current engine for a model (random weights by default).

    python benchmarks/speed.py --config small --bytes 200000 --lanes 32 --threads 1

Every block is forced through the model (so the figure is the model path's speed, not zstd's),
the round trip is verified, and KB/s is input bytes over wall time. Real text is read from
--data (default: the test fixture, repeated to --bytes)."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

import shazip
from shazip.container import Method
from shazip.model import SHARNN, get_config
from shazip.models import load_model, save_model

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="small")
    ap.add_argument("--model", help="model file (default: random weights of --config)")
    ap.add_argument("--data", default=str(ROOT / "tests" / "data" / "wiki.xml"))
    ap.add_argument("--bytes", type=int, default=200_000)
    ap.add_argument("--lanes", type=int, default=32)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()

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
    blob = shazip.compress(data, model=loaded, lanes=args.lanes, threads=args.threads,
                           methods=frozenset({Method.MODEL}), block_size=1 << 22)
    t_c = time.perf_counter() - t
    t = time.perf_counter()
    ok = shazip.decompress(blob, model=loaded) == data
    t_d = time.perf_counter() - t
    print(json.dumps({"config": args.config, "params": loaded.model.num_params(), "bytes": len(data),
                      "lanes": args.lanes, "threads": args.threads, "engine": "float32",
                      "compress_KBps": round(len(data) / t_c / 1e3, 2),
                      "decompress_KBps": round(len(data) / t_d / 1e3, 2),
                      "bits_per_byte": round(8 * len(blob) / len(data), 3), "round_trip": ok}))


if __name__ == "__main__":
    main()
