"""Speed of the int8 engine's step alone for a model shape (random weights): what a config
would cost before training it.

    python benchmarks/step_speed.py --d-model 256 --layers 2 --boom 1024 --mem 512 --lanes 64

Times the compiled step (native.py) when it builds, else the torch step, after the attention
memory is full; prints the best of three timings as ms per step and KB/s (lanes bytes a step).
Random weights spread attention over every key; a trained model's peaked attention lets the
mix skip keys, so trained models run a little faster than this."""

from __future__ import annotations

import argparse
import json
import time

import torch

from shazip import native, quant
from shazip.model import SHARNN, Config


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--d-model", type=int, default=256)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--boom", type=int, default=1024)
    ap.add_argument("--mem", type=int, default=512)
    ap.add_argument("--lanes", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=60)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    cfg = Config(args.d_model, args.layers, args.boom, args.mem, attn_layer=-2 if args.layers > 1 else 0)
    model = SHARNN(cfg)
    model.collapse_vs()
    im = quant.IntModel(model)
    step = native.NativeModel(im) if native.load() is not None else im
    state, prev = step.init_state(args.lanes), torch.randint(0, 256, (args.lanes,))
    with torch.no_grad():
        for _ in range(cfg.mem_len + 5):
            state, _ = step.step(state, prev)
        best = float("inf")
        for _ in range(3):
            t = time.perf_counter()
            for _ in range(args.steps):
                state, _ = step.step(state, prev)
            best = min(best, (time.perf_counter() - t) / args.steps)
    print(json.dumps({"d_model": cfg.d_model, "layers": cfg.n_layers, "d_boom": cfg.d_boom, "mem_len": cfg.mem_len,
                      "params": model.num_params(), "lanes": args.lanes, "threads": args.threads,
                      "implementation": "native" if step is not im else "torch",
                      "ms_per_step": round(best * 1e3, 3), "KBps": round(args.lanes / best / 1e3, 1)}))


if __name__ == "__main__":
    main()
