"""Builds the general-purpose training mixture and its per-kind validation slices.

    python models/prepare_general.py [--data ../shared/data] [--out runs/general] [--mb 240]

Writes OUT/train.bin (the mixture: 64 KiB chunks drawn from each kind in proportion to its
weight, each kind read in order so nothing repeats until a kind is used up), OUT/valid-KIND.txt
(the last 256 KiB of each kind, cut at a line start, never trained on) and OUT/valid.txt (those
slices concatenated, the trainer's held-out tail). Only files in ../shared/data are read; the
evaluation-only files its READMEs list (enwik6 and the standard corpora) are not among them.

Weights are fractions of the bytes seen. Why these: the warm start already knows Wikipedia,
but a first mixture that gave it only a maintenance share (wiki 0.19, wiki-xml 0.03) lost
0.37 bits/byte on held-out Wikipedia and 0.26 on enwik6 in 42 MB, so Wikipedia now keeps a
third, with the XML markup (enwik-style) at 0.08; code and markup/data are what everyday files are made of and
get the largest new shares; the books teach prose in English and seven other languages (and,
being CRLF, Windows line endings); logs are few (14.8 MB) and the adaptive stage learns their
repeats online, so they get a small share; GCIDE stands for dictionary-style reference text.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import zstandard

KINDS: dict[str, tuple[tuple[str, ...], float]] = {
    "wiki": (("wiki-text-a.txt.zst", "wiki-text-b.txt.zst"), 0.26),
    "wiki-xml": (("wiki-xml.xml.zst",), 0.08),
    "books-en": (("general/books-en.txt.zst",), 0.14),
    "books-intl": (("general/books-intl.txt.zst",), 0.10),
    "code": (("general/code.txt.zst",), 0.17),
    "markup-data": (("general/markup-data.txt.zst",), 0.12),
    "logs": (("general/logs.txt.zst",), 0.04),
    "crlf": (("general/crlf.txt.zst",), 0.05),
    "gcide": (("gcide.txt.zst",), 0.04),
}
CHUNK = 64 << 10
VALID = 256 << 10


def read_kind(data: Path, files: tuple[str, ...]) -> bytes:
    d = zstandard.ZstdDecompressor(max_window_size=2**27)
    parts = []
    for f in files:
        with open(data / f, "rb") as src:
            parts.append(d.stream_reader(src).read())
    return b"".join(parts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=Path("../shared/data"))
    ap.add_argument("--out", type=Path, default=Path("runs/general"))
    ap.add_argument("--mb", type=float, default=240, help="mixture size in MB")
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    assert abs(sum(w for _, w in KINDS.values()) - 1) < 1e-9
    train: dict[str, bytes] = {}
    valid_all = []
    for kind, (files, _) in KINDS.items():
        text = read_kind(a.data, files)
        cut = text.index(b"\n", len(text) - VALID) + 1
        train[kind] = text[:cut]
        (a.out / f"valid-{kind}.txt").write_bytes(text[cut:])
        valid_all.append(text[cut:])
        print(f"{kind}: {len(text):,} bytes, {len(text) - cut:,} held out")
    (a.out / "valid.txt").write_bytes(b"".join(valid_all))
    n_chunks = int(a.mb * 1e6) // CHUNK
    names = list(KINDS)
    p = np.array([KINDS[k][1] for k in names])
    order = np.random.default_rng(a.seed).choice(len(names), size=n_chunks, p=p)
    pos = dict.fromkeys(names, 0)
    with open(a.out / "train.bin", "wb") as out:
        for i in order:
            k = names[i]
            src = train[k]
            if pos[k] + CHUNK > len(src):
                pos[k] = 0  # this kind is used up: start it again
            out.write(src[pos[k]:pos[k] + CHUNK])
            pos[k] += CHUNK
    for i, k in enumerate(names):
        print(f"{k}: {int((order == i).sum()) * CHUNK / 1e6:.1f} MB in the mixture "
              f"({int((order == i).sum()) * CHUNK / len(train[k]):.2f} passes)")


if __name__ == "__main__":
    main()
