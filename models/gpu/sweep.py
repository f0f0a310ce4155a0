"""The training setting a lent card runs fastest, decided on that card in about a minute.

    python models/gpu/sweep.py TRAIN VALID --init M --seconds 60 --max-batch 1024 --out DIR

Each candidate (batch x bptt, then the fastest of them compiled) is the real trainer
(`shazip.train.trainer.train`) run in-process for its share of --seconds from the same weights,
no checkpoint, a fresh optimizer whose rate and warm-up are scaled from the reference batch
(--ref-batch, `scaled_for_batch`); its speed is the median bytes/s of its logged intervals after
the first (which holds cuDNN's and the allocator's start). A candidate is admissible when its
batch is at most --max-batch (the largest batch that benchmarks/batch_study.py found to learn as
much per byte; a minute on the card cannot judge that, since a large batch's warm-up alone is
longer) and its training loss stayed finite and below where it began. Prints the chosen setting
as one line `BATCH BPTT COMPILE STEPS_PER_S` (what models/gpu/train.sh reads) and writes
DIR/sweep.json with every candidate's figures.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from shazip.train.trainer import TrainArgs, train  # noqa: E402


def trial(args: argparse.Namespace, batch: int, bptt: int, compile: bool, seconds: float) -> dict:
    """One candidate: its median bytes/s and steps/s, and whether it learned."""
    with tempfile.TemporaryDirectory() as tmp:
        started = time.time()
        try:
            with contextlib.redirect_stdout(sys.stderr):  # the export's id: stdout is the chosen line alone
                train(TrainArgs(corpus=(str(args.train), str(args.valid)), out=tmp, config=args.config, name="trial",
                                init=str(args.init) if args.init else None, batch=batch, bptt=bptt, lr=args.lr,
                                warmup=args.warmup, ref_batch=args.ref_batch, valid_bytes=args.valid.stat().st_size,
                                eval_bytes=args.eval_bytes, eval_every=10**9, log_every=args.log_every,
                                minutes=seconds / 60, checkpoint=False, compile=compile, device=args.device,
                                progress=False))
        except Exception as e:  # out of memory, a compile that fails: the candidate is out, the sweep goes on
            return {"batch": batch, "bptt": bptt, "compile": compile, "error": f"{type(e).__name__}: {e}"[:300],
                    "seconds": round(time.time() - started, 1)}
        records = [json.loads(line) for line in (Path(tmp) / "metrics.jsonl").read_text().splitlines()]
    logged = [r for r in records if "bytes_per_s" in r]
    rates = [r["bytes_per_s"] for r in logged[1:]] or [r["bytes_per_s"] for r in logged]
    losses = [r["train_bpc"] for r in logged]
    bytes_per_s = statistics.median(rates) if rates else 0.0
    learned = len(losses) >= 2 and all(map(math.isfinite, losses)) and losses[-1] < losses[0]
    return {"batch": batch, "bptt": bptt, "compile": compile, "bytes_per_s": round(bytes_per_s),
            "steps_per_s": round(bytes_per_s / (batch * bptt), 2), "intervals": len(rates),
            "train_bpc": losses, "learned": learned, "seconds": round(time.time() - started, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("train", type=Path)
    ap.add_argument("valid", type=Path)
    ap.add_argument("--init", type=Path, help="the float model every candidate starts from")
    ap.add_argument("--config", default="large", help="the shape when there is no --init")
    ap.add_argument("--seconds", type=float, default=60, help="the whole sweep's time")
    ap.add_argument("--batches", type=int, nargs="+", default=[256, 1024, 4096])
    ap.add_argument("--bptts", type=int, nargs="+", default=[128, 256])
    ap.add_argument("--max-batch", type=int, required=True, help="the largest batch the batch study admits")
    ap.add_argument("--compile", action="store_true", help="also try the fastest candidate under torch.compile")
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup", type=int, default=300)
    ap.add_argument("--ref-batch", type=int, default=256)
    ap.add_argument("--eval-bytes", type=int, default=1 << 16, help="the trials' one evaluation (at their end)")
    ap.add_argument("--log-every", type=int, default=5)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    grid = [(b, t) for b in args.batches if b <= args.max_batch for t in args.bptts]
    if not grid:
        sys.exit(f"no candidate batch is at most --max-batch {args.max_batch}")
    share = args.seconds / (len(grid) + (1.5 if args.compile else 0))
    results = []
    for b, t in grid:
        results.append(trial(args, b, t, False, share))
        print(json.dumps(results[-1]), file=sys.stderr, flush=True)
    good = [r for r in results if r.get("learned")]
    if not good:
        sys.exit("no candidate trained: see the lines above")
    best = max(good, key=lambda r: r["bytes_per_s"])
    if args.compile:
        results.append(trial(args, best["batch"], best["bptt"], True, 1.5 * share))
        print(json.dumps(results[-1]), file=sys.stderr, flush=True)
        if results[-1].get("learned") and results[-1]["bytes_per_s"] > best["bytes_per_s"]:
            best = results[-1]
    (args.out / "sweep.json").write_text(json.dumps({"chosen": best, "max_batch": args.max_batch,
                                                     "candidates": results}, indent=1) + "\n")
    print(best["batch"], best["bptt"], int(best["compile"]), best["steps_per_s"])


if __name__ == "__main__":
    main()
