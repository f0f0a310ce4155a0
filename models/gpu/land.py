"""Lands what a lent GPU returned as a milestone that outlives every machine.

    python models/gpu/land.py FILES_AT --device-seconds WALL_S [--pack train-run] [--threads 2]

FILES_AT is the folder the device tool put the run's files in (models/gpu/train.sh wrote them:
the float export NAME.safetensors, metrics.jsonl, train.log, sweep.json). This
- writes the export's weights as float16 (`save_model(..., weights="float16")`, half the size,
  loaded back as float32 exactly) to models/milestones/NAME-DATE[-K].safetensors, refused over 8 MB;
- measures the model alone, float, on the pack's held-out slices and on enwik6 (the trainer's
  `evaluate`, 16 streams, bptt 256, as benchmarks/eval_bpc.py), unless --no-eval;
- appends one line to models/milestones/ledger.jsonl: date, card, device seconds, bytes seen in
  this lend and in all, the mixture's chunks and unique MB the pack held, held-out and enwik6
  bits/byte, the sha256 of the milestone and of the returned float file.

models/gpu/prepare.py reads the ledger: the next pack continues from the newest milestone of its
model and from the first chunk of the mixture no pack has held yet.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import lzma
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

MILESTONES = ROOT / "models" / "milestones"
LEDGER = "ledger.jsonl"
MAX_BYTES = 8_000_000


def ledger(folder: Path = MILESTONES) -> list[dict]:
    """Every line of the folder's ledger, oldest first (models/gpu/prepare.py reads it without torch)."""
    path = folder / LEDGER
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def bits_per_byte(model, path: Path) -> float:
    from shazip.train.data import Corpus
    from shazip.train.trainer import evaluate
    corpus = Corpus([path])
    return round(evaluate(model, corpus, 0, len(corpus), 256, 16), 4)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", type=Path, help="the folder the device run's files came back in")
    ap.add_argument("--name", default="large", help="the returned export is NAME.safetensors")
    ap.add_argument("--device-seconds", type=float, required=True, help="the device run's wall_s")
    ap.add_argument("--pack", type=Path, default=ROOT / "train-run", help="the folder the lend carried")
    ap.add_argument("--enwik6", type=Path, default=ROOT.parent / "shared" / "data" / "enwik6")
    ap.add_argument("--no-eval", action="store_true")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--note", default="")
    ap.add_argument("--milestones", type=Path, default=MILESTONES, help="the folder of milestones and their ledger")
    args = ap.parse_args()
    import torch

    from shazip.model.file import load_model, save_model
    torch.set_num_threads(args.threads)
    returned = args.files / f"{args.name}.safetensors"
    loaded = load_model(returned)
    manifest = json.loads((args.pack / "manifest.json").read_text())
    date = datetime.date.today().isoformat()
    dest = args.milestones / f"{args.name}-{date}.safetensors"
    k = 1
    while dest.exists():
        k += 1
        dest = args.milestones / f"{args.name}-{date}-{k}.safetensors"
    digest = save_model(loaded.model, dest, args.name, loaded.info, weights="float16")
    if dest.stat().st_size > MAX_BYTES:
        dest.unlink()
        sys.exit(f"{returned}: too large as float16 for a milestone (over {MAX_BYTES:,} bytes)")
    figures = {}
    if not args.no_eval:
        model = load_model(dest).model
        with tempfile.TemporaryDirectory() as tmp:
            valid = Path(tmp) / "valid.txt"
            valid.write_bytes(lzma.decompress((args.pack / "valid.txt.xz").read_bytes()))
            figures["valid_bpc"] = bits_per_byte(model, valid)
        figures["enwik6_bpc"] = bits_per_byte(model, args.enwik6)
    info = loaded.info
    line = {"date": date, "model": args.name, "file": dest.name, "card": info.get("device"),
            "device_seconds": args.device_seconds, "train_seconds": info.get("train_seconds"),
            "batch": info.get("batch"), "bptt": info.get("bptt"), "bytes_seen": info.get("bytes_seen"),
            "bytes_seen_total": int(info.get("bytes_seen", 0)) + int(info.get("bytes_seen_before", 0)),
            "chunks": manifest["chunks"], "unique_mb": round(manifest["texts"]["train.txt"]["bytes"] / 1e6, 1),
            **figures, "sha256": digest, "returned_sha256": hashlib.sha256(returned.read_bytes()).hexdigest(),
            **({"note": args.note} if args.note else {})}
    with open(args.milestones / LEDGER, "a") as f:
        f.write(json.dumps(line) + "\n")
    print(json.dumps(line))
    print(f"commit {dest} and {args.milestones / LEDGER}")


if __name__ == "__main__":
    main()
