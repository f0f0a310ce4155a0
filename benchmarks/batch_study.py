"""Does a larger batch learn as much per byte? The study behind the GPU sweep's batch limit.

    python benchmarks/batch_study.py --corpus ../shared/data/wiki-text-a.txt.zst --mb 20 \
        --ref-batch 32 --factors 1 4 16 --jobs 2 --out benchmarks/results/batch-study

A lent GPU trains fastest at a batch far beyond the 256 streams the models were tuned at, but a
batch k times larger takes k times fewer steps for the same bytes. This trains the same small
model on the same bytes at the reference batch and at k times it, with `shazip train
--ref-batch` scaling the rate and warm-up (`trainer.scaled_for_batch`) and the last fifth a
cooldown as on a lend, and compares the held-out bits/byte at the same bytes seen (the same
fixed held-out tail each time). With --init every run continues the same trained model, as each
lend continues the last milestone: later in training a larger batch costs less. A factor passes when its final figure is within --tolerance of the
reference's; the sweep on the card (models/gpu/sweep.py) takes no batch past the largest factor
that passed. Each run is the real trainer in its own process, one thread (--jobs at a time);
writes OUT/study.json and OUT/study.md.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path


def run(args: argparse.Namespace, batch: int) -> dict:
    out = args.out / f"batch-{batch}"
    steps = max(10, round(args.mb * 1e6 / (batch * args.bptt)))
    cmd = [sys.executable, "-m", "shazip.train", str(args.corpus), "--out", str(out), "--config", args.config,
           "--batch", str(batch), "--bptt", str(args.bptt), "--ref-batch", str(args.ref_batch),
           "--lr", str(args.lr), "--warmup", str(args.warmup), "--steps", str(steps), "--cooldown", str(steps // 5),
           "--valid-bytes", str(args.valid_bytes), "--eval-every", str(max(1, steps // 5)),
           "--log-every", str(max(1, steps // 20)), "--threads", "1", "--seed", str(args.seed), "-q"]
    if args.init:
        cmd += ["--init", str(args.init)]
    if (out / "checkpoint.json").exists():
        cmd.append("--resume")
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    curve = [(r["bytes_seen"], r["valid_bpc"]) for r in records if "valid_bpc" in r]
    final = records[-1]
    return {"batch": batch, "factor": batch / args.ref_batch, "steps": final["step"], "bytes_seen": final["bytes_seen"],
            "valid_bpc": final["valid_bpc"], "seconds": final["time"], "curve": curve}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, required=True)
    ap.add_argument("--out", type=Path, default=Path("runs/batch-study"))
    ap.add_argument("--config", default="tiny")
    ap.add_argument("--init", type=Path, help="continue a trained model (as a lend does) instead of starting afresh")
    ap.add_argument("--mb", type=float, default=20, help="MB of text every run sees")
    ap.add_argument("--bptt", type=int, default=128)
    ap.add_argument("--ref-batch", type=int, default=32)
    ap.add_argument("--factors", type=int, nargs="+", default=[1, 4, 16])
    ap.add_argument("--lr", type=float, default=2e-3, help="the rate at the reference batch")
    ap.add_argument("--warmup", type=int, default=200, help="warm-up steps at the reference batch")
    ap.add_argument("--valid-bytes", type=int, default=500_000)
    ap.add_argument("--tolerance", type=float, default=0.01)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(lambda f: run(args, f * args.ref_batch), sorted(args.factors, reverse=True)))
    results.sort(key=lambda r: r["batch"])
    ref = next(r for r in results if r["factor"] == 1)
    for r in results:
        r["vs_ref"] = round(r["valid_bpc"] / ref["valid_bpc"], 4)
        r["passes"] = r["vs_ref"] <= 1 + args.tolerance
    passed = [r["factor"] for r in results if r["passes"]]
    study = {"config": args.config, "init": args.init.name if args.init else None, "corpus": args.corpus.name, "mb": args.mb, "bptt": args.bptt,
             "ref_batch": args.ref_batch, "lr": args.lr, "warmup": args.warmup, "tolerance": args.tolerance,
             "largest_factor_passed": max(passed), "runs": results}
    (args.out / "study.json").write_text(json.dumps(study, indent=1) + "\n")
    start = f"from {args.init.name}" if args.init else "from random weights"
    lines = [f"# Batch study: `{args.config}` {start}, {args.mb:g} MB of {args.corpus.name}, bptt {args.bptt}, "
             f"reference batch {args.ref_batch} (lr {args.lr:g}, warm-up {args.warmup})", "",
             "| batch | factor | steps | MB seen | held-out bits/byte | vs reference | seconds |",
             "|---:|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['batch']} | {r['factor']:g} | {r['steps']} | {r['bytes_seen'] / 1e6:.1f} | {r['valid_bpc']:.4f} | "
              f"{r['vs_ref']:.4f}{'' if r['passes'] else ' (fails)'} | {r['seconds']:.0f} |" for r in results]
    lines += ["", f"Largest factor within {args.tolerance:.0%}: **{max(passed):g}**", ""]
    (args.out / "study.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
