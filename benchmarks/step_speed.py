"""Speed of the int8 engine's step alone for a model shape (random weights): what a config
would cost before training it.

    python benchmarks/step_speed.py --d-model 256 --layers 2 --boom 1024 --mem 512 --lanes 64
    python benchmarks/step_speed.py --shape 256x2x1024x512 --shape 512x3x2048x1024 --lanes 1

`--shape DxLxBxM` (d_model x layers x d_boom x mem_len; repeatable) times several shapes in one
run, one JSON line each, in place of the four shape options. Times the native core's step (on the kernel path --kernels, "auto" by default) after the
attention memory is full; prints the best of three timings as ms per step and KB/s (lanes bytes
a step).
Random weights spread attention over every key; a trained model's peaked attention lets the
mix skip keys, so trained models run a little faster than this."""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch

from shazip import core
from shazip.model import exact, twin as quant
from shazip.model.config import Config
from shazip.model.sharnn import SHARNN


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--d-model", type=int, default=256)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--boom", type=int, default=1024)
    ap.add_argument("--mem", type=int, default=512)
    ap.add_argument("--lanes", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--kernels", default="auto", help="kernel path: auto, or one of those the core runs here (shazip._core.available_kernels())")
    ap.add_argument("--shape", action="append", type=shape, help="DxLxBxM: time this shape (repeatable)")
    args = ap.parse_args()
    for cfg in args.shape or [shape(f"{args.d_model}x{args.layers}x{args.boom}x{args.mem}")]:
        time_step(cfg, args)


def shape(text: str) -> Config:
    """"DxLxBxM" -> a Config (attention in the last-but-one block, as the presets have it)."""
    try:
        d, layers, boom, mem = map(int, text.split("x"))
        return Config(d, layers, boom, mem, attn_layer=-2 if layers > 1 else 0)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"{text!r}: expected DxLxBxM ({e})") from None


def time_step(cfg: Config, args: argparse.Namespace) -> None:
    torch.manual_seed(0)
    model = SHARNN(cfg)
    model.collapse_vs()
    m = core.model(exact.int_weights(cfg, quant.float_params(model)), args.kernels)
    pool = core.load().ThreadPool(args.threads)
    state, prev = m.state(args.lanes), np.random.default_rng(0).integers(0, 256, args.lanes, dtype=np.int64)
    for _ in range(cfg.mem_len + 5):
        m.step(state, prev, pool)
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        for _ in range(args.steps):
            m.step(state, prev, pool)
        best = min(best, (time.perf_counter() - t) / args.steps)
    print(json.dumps({"d_model": cfg.d_model, "layers": cfg.n_layers, "d_boom": cfg.d_boom, "mem_len": cfg.mem_len,
                      "params": model.num_params(), "lanes": args.lanes, "threads": args.threads,
                      "kernels": m.kernels,
                      "ms_per_step": round(best * 1e3, 3), "KBps": round(args.lanes / best / 1e3, 1)}), flush=True)


if __name__ == "__main__":
    main()
