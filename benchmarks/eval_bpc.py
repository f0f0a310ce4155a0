"""Model cross-entropy (bits/byte) on a file, with the float sequence forward.

    python benchmarks/eval_bpc.py --model runs/A/default.safetensors --data ../shared/data/enwik6
    python benchmarks/eval_bpc.py --model default --mem-len 128 --data runs/general/valid-*.txt

The file is read as --streams contiguous streams with state and memory carried across
segments, as the trainer evaluates; this is the model's own bpc, not an archive size."""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace

import torch

from shazip.model.sharnn import SHARNN
from shazip.model.file import load_model
from shazip.train.data import Corpus
from shazip.train.trainer import evaluate


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--data", required=True, nargs="+", help="one line of output per file")
    ap.add_argument("--mem-len", type=int, default=None, help="evaluate with another attention memory length")
    ap.add_argument("--limit", type=int, default=None, help="only the first N bytes")
    ap.add_argument("--streams", type=int, default=16)
    ap.add_argument("--bptt", type=int, default=256)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    loaded = load_model(args.model)
    model = loaded.model
    if args.mem_len is not None:  # the weights do not depend on the memory length
        model = SHARNN(replace(model.cfg, mem_len=args.mem_len))
        model.load_state_dict(loaded.model.state_dict())
    for path in args.data:
        corpus = Corpus([path])
        n = min(len(corpus), args.limit or len(corpus))
        t = time.perf_counter()
        bpc = evaluate(model, corpus, 0, n, args.bptt, args.streams)
        print(json.dumps({"model": loaded.name, "id": loaded.id_hex, "mem_len": model.cfg.mem_len, "data": path,
                          "bytes": n, "streams": args.streams, "bpc": round(bpc, 4),
                          "seconds": round(time.perf_counter() - t, 1)}), flush=True)


if __name__ == "__main__":
    main()
