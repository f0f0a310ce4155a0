"""The training curve of a model from its trainer's JSONL metrics: valid bits/byte (and the
training loss) against bytes seen, as a PNG; prints the run's totals (steps, bytes seen, wall
time summed over its resumed segments).

    python models/plot_curve.py runs/A/metrics.jsonl runs/B/metrics.jsonl -o models/default-curve.png

Several files are read in order (e.g. a long constant-rate run, then the cooldown branch
resumed from one of its checkpoints); a later file's records replace an earlier file's from
the first step it logs. Needs matplotlib (the `bench` extra)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def read(paths: list[Path]) -> list[dict]:
    records: list[dict] = []
    for p in paths:
        new = [json.loads(line) for line in p.read_text().splitlines() if line.strip()]
        first = min((r["step"] for r in new if not r.get("final")), default=None)
        if first is not None:
            records = [r for r in records if r["step"] < first]
        records += new
    return records


def wall_seconds(records: list[dict]) -> float:
    """`time` counts from each (re)start of the trainer: sum each segment's last value."""
    total, last = 0.0, 0.0
    for r in records:
        if r["time"] < last:
            total += last
        last = r["time"]
    return total + last


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("metrics", nargs="+", type=Path)
    ap.add_argument("-o", "--out", type=Path, required=True)
    ap.add_argument("--title", default="shazip default model")
    args = ap.parse_args()
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    recs = read(args.metrics)
    valid = [(r["bytes_seen"] / 1e6, r["valid_bpc"]) for r in recs if "valid_bpc" in r]
    train = [(r["bytes_seen"] / 1e6, r["train_bpc"]) for r in recs if "train_bpc" in r]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.plot(*zip(*train), color="C0", alpha=0.35, lw=0.8, label="train (mean over each logging interval)")
    ax.plot(*zip(*valid), "o-", color="C3", label="valid (held-out MediaWiki XML)")
    ax.set_xlabel("bytes seen (MB)")
    ax.set_ylabel("bits/byte")
    ax.set_ylim(min(v for _, v in valid + train) - 0.05, 2.6)
    ax.grid(True, alpha=0.3)
    ax.legend()
    ax.set_title(args.title, fontsize=10)
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    last = recs[-1]
    print(json.dumps({"steps": last["step"], "bytes_seen": last["bytes_seen"], "valid_bpc": valid[-1][1],
                      "wall_hours": round(wall_seconds(recs) / 3600, 2), "plot": str(args.out)}))


if __name__ == "__main__":
    main()
