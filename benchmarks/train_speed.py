"""Training throughput (bytes/s) of `shazip train` for a config, single process or DDP.

    python benchmarks/train_speed.py --config small --steps 30 --threads 1
    python benchmarks/train_speed.py --config small --steps 30 --threads 1 --nproc 2   # torchrun, gloo

Runs the real trainer on real text (--data, default the test fixture repeated to 4 MB) in a
temporary folder and reports the median bytes/s of its logged intervals, first one excluded
(warm-up). The issue's target for `small` on the 2-core machine is 15 KB/s."""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="small")
    ap.add_argument("--data", default=str(ROOT / "tests" / "data" / "wiki.xml"))
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--bptt", type=int, default=128)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--nproc", type=int, default=1)
    ap.add_argument("--bf16", action="store_true")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "corpus.txt"
        text = Path(args.data).read_bytes()
        corpus.write_bytes((text * (4_000_000 // len(text) + 1))[:4_000_000])
        train = ["-m", "shazip.train", str(corpus), "--config", args.config, "--out", f"{tmp}/run",
                 "--steps", str(args.steps), "--batch", str(args.batch), "--bptt", str(args.bptt),
                 "--threads", str(args.threads), "--valid-bytes", "20000", "--log-every", "5",
                 "--eval-every", "1000000", "-q", "--bf16" if args.bf16 else "--fp32"]
        if args.nproc > 1:
            cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={args.nproc}",
                   f"--master_port={free_port()}", *train]
        else:
            cmd = [sys.executable, *train]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env={**os.environ, "OMP_NUM_THREADS": str(args.threads)})
        rates = [json.loads(l)["bytes_per_s"] for l in open(f"{tmp}/run/metrics.jsonl") if "bytes_per_s" in l][1:]
    print(json.dumps({"config": args.config, "nproc": args.nproc, "threads": args.threads, "batch": args.batch,
                      "bptt": args.bptt, "bf16": args.bf16, "bytes_per_s": statistics.median(rates)}))


if __name__ == "__main__":
    main()
