"""Packs, on this machine, what a training run on a lent GPU machine (`models/gpu/train.sh`) takes
with it: a folder that travels with the working tree (git-ignored; name it in the device tool's
`carry`).

    python models/gpu/prepare.py            # continues the newest `large` milestone, on new text

`train-run/` then holds
- `train.txt.xz`: the next chunks of the general mixture (models/prepare_general.py, same kinds,
  weights and seed), from the first chunk no landed lend has trained on (the ledger's, see
  models/gpu/land.py), as many as fill the 64 MiB a device run carries beside the working tree and
  the rest of the pack (--mb auto: the text's xz ratio is measured on its first 16 MB). The
  mixture starts each kind again once it is used up, so lends see every kind's new text before
  any repeats;
- `valid.txt.xz`: the mixture's held-out slices (the last 256 KiB of each kind, never trained on);
- `init.safetensors`: the model the lend continues from, by default the newest milestone of
  --model in models/milestones/ledger.jsonl (float16 weights, 7.6 MB for `large`); none for the
  first lend of a model;
- `manifest.json`: the chunks, sizes and sha256 of the plain texts, which train.sh checks.

xz (Python's lzma) because the GPU machine has the standard library but not zstandard, and it packs
text ~10 % smaller than zstd -19. It reads ../shared/data (which does not travel) and writes
nothing else. `python models/gpu/prepare.py --unpack DIR` (on the GPU machine) writes train.txt
and valid.txt into DIR and checks them.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import lzma
import shutil
import subprocess
import sys
from itertools import islice
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CARRY_LIMIT = 64 << 20  # what the device tool carries: the working tree and the folders named
MARGIN = 1 << 20  # for what the tree gains between packing and the lend
SAMPLE = 16_000_000  # bytes of text whose xz size gives the ratio --mb auto packs by
XZ = [{"id": lzma.FILTER_LZMA2, "preset": 9 | lzma.PRESET_EXTREME, "dict_size": 1 << 26}]


def xz(data: bytes) -> bytes:
    return lzma.compress(data, format=lzma.FORMAT_XZ, filters=XZ)


def tree_bytes() -> int:
    return int(subprocess.run(["bash", "-c", "git ls-files -z | xargs -0 du -cb | tail -1"], cwd=ROOT,
                              capture_output=True, text=True, check=True).stdout.split()[0])


def newest_milestone(model: str, folder: Path) -> tuple[Path | None, int]:
    """(the newest landed milestone of `model`, the first mixture chunk no landed lend trained on)."""
    sys.path.insert(0, str(ROOT / "models" / "gpu"))
    from land import ledger
    lines = [line for line in ledger(folder) if line["model"] == model]
    landed = [line for line in lines if line.get("file") and (folder / line["file"]).exists()]
    return (folder / landed[-1]["file"] if landed else None,
            max((line["chunks"][1] for line in lines if line.get("chunks")), default=0))


def pack(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(ROOT / "models"))
    from prepare_general import CHUNK, held_out, mixture

    init, first = newest_milestone(args.model, args.milestones)
    if args.init is not None:
        init = Path(args.init) if args.init else None
    first = args.start_chunk if args.start_chunk is not None else first
    out = args.out
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    train, valid = held_out(args.data)
    valid_text = b"".join(valid.values())
    (out / "valid.txt.xz").write_bytes(xz(valid_text))
    if init:
        shutil.copyfile(init, out / "init.safetensors")
    fixed = tree_bytes() + sum(f.stat().st_size for f in out.iterdir()) + MARGIN
    budget = CARRY_LIMIT - fixed

    def text_of(n: int) -> bytes:
        return b"".join(chunk for _, chunk in islice(mixture(train, first + n, args.seed), first, None))

    if args.mb == "auto":
        sample = text_of(SAMPLE // CHUNK)
        n = int(budget * len(sample) / len(xz(sample)) * 0.97) // CHUNK
    else:
        n = int(float(args.mb) * 1e6) // CHUNK
    while True:
        text = text_of(n)
        packed = xz(text)
        if len(packed) <= budget or args.mb != "auto":
            break
        n = int(n * budget / len(packed) * 0.98)
    (out / "train.txt.xz").write_bytes(packed)
    manifest = {"chunks": [first, first + n], "seed": args.seed, "init": init.name if init else None,
                "texts": {k: {"bytes": len(v), "sha256": hashlib.sha256(v).hexdigest()}
                          for k, v in {"train.txt": text, "valid.txt": valid_text}.items()}}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    carried = sum(f.stat().st_size for f in out.iterdir())
    total = tree_bytes() + carried
    print(f"{out}: {carried / 2**20:.1f} MiB ({len(text) / 1e6:.1f} MB of training text, chunks {first}..{first + n}"
          f"{', from ' + init.name if init else ', from random weights'}); with the working tree, "
          f"{total / 2**20:.1f} of the {CARRY_LIMIT >> 20} MiB a device run carries")
    if total > CARRY_LIMIT:
        sys.exit("too large to travel: lower --mb")


def unpack(run: Path, dest: Path) -> None:
    """Writes the carried texts into dest, each checked against the manifest."""
    dest.mkdir(parents=True, exist_ok=True)
    for name, want in json.loads((run / "manifest.json").read_text())["texts"].items():
        data = lzma.decompress((run / f"{name}.xz").read_bytes())
        if len(data) != want["bytes"] or hashlib.sha256(data).hexdigest() != want["sha256"]:
            sys.exit(f"{run / name}.xz: damaged (its text is not the one packed)")
        (dest / name).write_bytes(data)
        print(f"{dest / name}: {len(data):,} bytes")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    ap.add_argument("--out", type=Path, default=ROOT / "train-run")
    ap.add_argument("--model", default="large", help="whose milestones and ledger lines to continue")
    ap.add_argument("--start-chunk", type=int, help="the mixture's first chunk [default: the first no lend trained on]")
    ap.add_argument("--mb", default="auto", help="MB of training text, or auto: as much as the carry holds")
    ap.add_argument("--seed", type=int, default=7, help="the mixture's seed (prepare_general's)")
    ap.add_argument("--init", help="the model file the lend continues from; '' for random weights "
                    "[default: the newest milestone]")
    ap.add_argument("--milestones", type=Path, default=ROOT / "models" / "milestones")
    ap.add_argument("--unpack", type=Path, metavar="DIR", help="on the GPU machine: write the texts into DIR")
    args = ap.parse_args()
    if args.unpack:
        unpack(args.out, args.unpack)
    else:
        pack(args)


if __name__ == "__main__":
    main()
