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
from typing import Iterator

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


def held_out(data: Path) -> tuple[dict[str, bytes], dict[str, bytes]]:
    """Each kind's text split into (training part, the held-out last VALID bytes from a line start)."""
    train, valid = {}, {}
    for kind, (files, _) in KINDS.items():
        text = read_kind(data, files)
        cut = text.index(b"\n", len(text) - VALID) + 1
        train[kind], valid[kind] = text[:cut], text[cut:]
    return train, valid


def mixture(train: dict[str, bytes], n_chunks: int, seed: int) -> Iterator[tuple[str, bytes]]:
    """The mixture's first n_chunks chunks, each with its kind: each drawn kind gives its next CHUNK bytes, in order,
    starting the kind again once it is used up. A longer mixture of the same seed begins with
    the chunks of a shorter one (so device pieces can take slices of it)."""
    names = list(KINDS)
    p = np.array([KINDS[k][1] for k in names])
    order = np.random.default_rng(seed).choice(len(names), size=n_chunks, p=p)
    pos = dict.fromkeys(names, 0)
    for i in order:
        k = names[i]
        if pos[k] + CHUNK > len(train[k]):
            pos[k] = 0  # this kind is used up: start it again
        yield k, train[k][pos[k]:pos[k] + CHUNK]
        pos[k] += CHUNK


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=Path("../shared/data"))
    ap.add_argument("--out", type=Path, default=Path("runs/general"))
    ap.add_argument("--mb", type=float, default=240, help="mixture size in MB")
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    train, valid = held_out(a.data)
    for kind in KINDS:
        (a.out / f"valid-{kind}.txt").write_bytes(valid[kind])
        print(f"{kind}: {len(train[kind]) + len(valid[kind]):,} bytes, {len(valid[kind]):,} held out")
    (a.out / "valid.txt").write_bytes(b"".join(valid.values()))
    taken = dict.fromkeys(KINDS, 0)
    with open(a.out / "train.bin", "wb") as out:
        for kind, chunk in mixture(train, int(a.mb * 1e6) // CHUNK, a.seed):
            out.write(chunk)
            taken[kind] += len(chunk)
    for k in KINDS:
        print(f"{k}: {taken[k] / 1e6:.1f} MB in the mixture ({taken[k] / len(train[k]):.2f} passes)")


if __name__ == "__main__":
    main()
