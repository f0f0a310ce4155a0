"""Packs, on this machine, what a training run on a lent GPU machine (`models/gpu/train.sh`) takes
with it: a folder that travels with the working tree (git-ignored; name it in the device tool's
`carry`).

    python models/gpu/prepare.py --piece 0                      # the first lend: `large` from scratch
    python models/gpu/prepare.py --piece 1 --init runs/gpu-0/large.safetensors   # the next one

`train-run/` then holds
- `train.txt.xz`: piece K of the general mixture (models/prepare_general.py, same kinds, weights
  and seed): its chunks [K n, (K+1) n) for n chunks of --mb, so each lend trains on text no earlier
  lend saw until the kinds are used up;
- `valid.txt.xz`: the mixture's held-out slices (the last 256 KiB of each kind, never trained on);
- `init.safetensors` (with --init): the float export a lend continues from (the trainer's
  `--init`); a full checkpoint, with the optimizer's moments, is three times its size and does not
  fit the 64 MiB a working tree may carry;
- `manifest.json`: the piece, sizes and sha256 of the plain texts, which train.sh checks.

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
XZ = [{"id": lzma.FILTER_LZMA2, "preset": 9 | lzma.PRESET_EXTREME, "dict_size": 1 << 26}]


def pack(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(ROOT / "models"))
    from prepare_general import CHUNK, held_out, mixture

    out = args.out
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    train, valid = held_out(args.data)
    n = int(args.mb * 1e6) // CHUNK
    text = b"".join(chunk for _, chunk in islice(mixture(train, (args.piece + 1) * n, args.seed), args.piece * n, None))
    texts = {"train.txt": text, "valid.txt": b"".join(valid.values())}
    for name, data in texts.items():
        (out / f"{name}.xz").write_bytes(lzma.compress(data, format=lzma.FORMAT_XZ, filters=XZ))
    if args.init:
        shutil.copyfile(args.init, out / "init.safetensors")
    manifest = {"piece": args.piece, "mb": args.mb, "seed": args.seed, "init": bool(args.init),
                "texts": {k: {"bytes": len(v), "sha256": hashlib.sha256(v).hexdigest()} for k, v in texts.items()}}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    carried = sum(f.stat().st_size for f in out.iterdir())
    tree = int(subprocess.run(["bash", "-c", "git ls-files -z | xargs -0 du -cb | tail -1"], cwd=ROOT,
                              capture_output=True, text=True, check=True).stdout.split()[0])
    print(f"{out}: {carried / 2**20:.1f} MiB ({len(text) / 1e6:.1f} MB of training text, piece {args.piece}); "
          f"with the working tree's {tree / 2**20:.1f} MiB, {(carried + tree) / 2**20:.1f} of the "
          f"{CARRY_LIMIT >> 20} MiB a device run carries")
    if carried + tree > CARRY_LIMIT:
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
    ap.add_argument("--piece", type=int, default=0, help="which slice of the mixture (one per lend)")
    ap.add_argument("--mb", type=float, default=140, help="MB of training text in a piece")
    ap.add_argument("--seed", type=int, default=7, help="the mixture's seed (prepare_general's)")
    ap.add_argument("--init", type=Path, help="a float model file the lend continues from")
    ap.add_argument("--unpack", type=Path, metavar="DIR", help="on the GPU machine: write the texts into DIR")
    args = ap.parse_args()
    if args.unpack:
        unpack(args.out, args.unpack)
    else:
        pack(args)


if __name__ == "__main__":
    main()
