"""Model cross-entropy (bits/byte) on a file, with the float sequence forward.

    python benchmarks/eval_bpc.py --model runs/A/default.safetensors --data ../shared/data/enwik6

The file is read as --streams contiguous streams with state and memory carried across
segments, as the trainer evaluates; this is the model's own bpc, not an archive size."""

from __future__ import annotations

import argparse
import json
import time

import torch

from shazip.data import Corpus
from shazip.models import load_model
from shazip.train import evaluate


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--limit", type=int, default=None, help="only the first N bytes")
    ap.add_argument("--streams", type=int, default=16)
    ap.add_argument("--bptt", type=int, default=256)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    loaded = load_model(args.model)
    corpus = Corpus([args.data])
    n = min(len(corpus), args.limit or len(corpus))
    t = time.perf_counter()
    bpc = evaluate(loaded.model, corpus, 0, n, args.bptt, args.streams)
    print(json.dumps({"model": loaded.name, "id": loaded.id_hex, "data": args.data, "bytes": n,
                      "streams": args.streams, "bpc": round(bpc, 4), "seconds": round(time.perf_counter() - t, 1)}))


if __name__ == "__main__":
    main()
