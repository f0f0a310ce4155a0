"""Where the adaptive stage alone spends its bits on a file: the code length of every byte (the
stage of a level, one lane, without the NN input, as a level's `stage` blocks code), summed by
what the byte is in a number with a point (its integer digits, each place after the point, the
point, a sign; `other` for the rest). What the models of numbers (csrc/stage/floats.h, steps.h)
were measured with (benchmarks/JOURNAL.md, "Stage version 18").

    python benchmarks/stage_costs.py FILE --bytes 300000 --level 9 --set float_tail=0
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter
from dataclasses import replace
from pathlib import Path

import numpy as np

from shazip.codec.encode import stage_params
from shazip.options import LEVELS, ONE_LANE, LanePolicy
from shazip.stage.adaptive import AdaptiveStage


def byte_bits(data: bytes, level: int, settings: dict[str, bool]) -> np.ndarray:
    """Each byte's code length in bits under the level's stage alone (repetitive text's models)."""
    params = stage_params("cm", LEVELS[level], LanePolicy(1, ONE_LANE, ONE_LANE), True).for_data(data)
    params = replace(params, nn=False, nn_final=False, **settings).fitted(len(data))
    enc = AdaptiveStage(params).encoder(1, len(data), measure=True)
    freq = np.ones((1, 256), dtype=np.int64)  # unused without the NN input
    sym = np.zeros(1, dtype=np.int64)
    bits = np.empty(len(data))
    before = 0.0
    for i, b in enumerate(data):
        sym[0] = b
        enc.code(freq, sym)
        bits[i], before = enc.bits - before, enc.bits
    return bits


def by_place(data: bytes, bits: np.ndarray) -> dict[str, tuple[int, float]]:
    """(bytes, bits) by a byte's place in a number with a point."""
    place = np.full(len(data), "other", dtype=object)
    for m in re.finditer(rb"-?\d+\.\d+", data):
        text, start = m.group(), m.start()
        point = text.index(b".")
        for o in range(len(text)):
            place[start + o] = ("sign" if text[o:o + 1] == b"-" else "int" if o < point else
                                "point" if o == point else f"frac{o - point:02d}")
    count, cost = Counter(), Counter()
    for p, b in zip(place, bits):
        count[p] += 1
        cost[p] += b
    return {p: (count[p], round(cost[p], 1)) for p in sorted(count)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file", type=Path)
    ap.add_argument("--bytes", type=int, default=300_000, help="the file's first N bytes")
    ap.add_argument("--level", type=int, default=9, choices=[n for n, lv in LEVELS.items() if lv.model])
    ap.add_argument("--set", action="append", default=[], metavar="MODEL=0|1", help="a stage model off or on")
    args = ap.parse_args()
    settings = {k: bool(int(v)) for k, v in (s.split("=") for s in args.set)}
    data = args.file.read_bytes()[:args.bytes]
    bits = byte_bits(data, args.level, settings)
    print(json.dumps({"file": str(args.file), "bytes": len(data), "level": args.level, "set": settings,
                      "payload_bytes": round(bits.sum() / 8, 1), "bits_per_byte": round(bits.sum() / len(data), 4),
                      "by_place": by_place(data, bits)}))


if __name__ == "__main__":
    main()
