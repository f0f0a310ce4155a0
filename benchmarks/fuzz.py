"""Fuzz the decoder with damaged real archives; print what became of every case.

    python benchmarks/fuzz.py --cases 10000

Five archives of the committed fixture text plus random bytes, with model-coded (with and without
the adaptive stage; a level's choice and every model of the newest stage version), raw and zstd
blocks (the committed `tiny-trained` model; small blocks so there are several), and the golden
archives of formats 1-3 (tests/data: shazip 0.3-0.7's, which every version decodes), damaged by the
mutations of shazip.testing: bit flips, truncation in every region, inserted and deleted
bytes, header/block/trailer field edits with their crc resealed, payload bytes, blocks swapped,
dropped or repeated, a block spliced in from an archive of other text made the same way, and
blocks claiming far more bytes and lanes than their payload holds; and, every fourth case, a
framed output's frames cut at a boundary, reordered, dropped, repeated or taken from another
output, or its seek table forged (`frame_damage`). Each case must end in a
clean ShazipError ("refused") or the exact original ("intact"); anything else is counted as a
failure and printed, and the exit code is 1. Also prints the slowest case and the process's
peak RSS (`--max-seconds`, `--max-mb`: a case slower, or a peak larger, fails the run), and the
slowest case by the format its header claims (a claim of 2**28 bytes in each among them)."""

from __future__ import annotations

import argparse
import collections
import json
import random
import resource
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

import shazip
from shazip.errors import ShazipError
from shazip.format.container import Method
from shazip.format.header import FORMAT_VERSIONS
from shazip.modelfile import load_model
from shazip.stage.adaptive import AdaptiveParams

from shazip.testing import frame_damage, mutate


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-seconds", type=float, default=2.0)
    # the newest stage at full size (its fifth coding, AdaptiveParams()) is most of the peak: 576 MB
    # with stage version 14, 625 MB with version 15's six more tables (each 4 MB, and its snapshot),
    # 663 MB with version 16, 829 MB with version 17's four mixers of 65,536 sets (22.5 MB each, twice)
    ap.add_argument("--max-mb", type=float, default=900.0)
    args = ap.parse_args()
    model = load_model(ROOT / "tests" / "data" / "tiny-trained.safetensors")
    text = (ROOT / "tests" / "data" / "wiki.xml").read_bytes()
    data = text[:2000] + random.Random(1).randbytes(600) + text[2000:3000]
    other = text[3000:5000] + random.Random(2).randbytes(600) + text[5000:6000]
    codings = ((frozenset({Method.MODEL, Method.RAW}), "none"), (frozenset({Method.MIXED, Method.RAW}), "cm"),
               (frozenset(Method), "cm"),
               (frozenset({Method.MIXED, Method.RAW}), AdaptiveParams(nn=False, nn_final=False)),
               (frozenset({Method.MIXED, Method.RAW}), AdaptiveParams()))  # every model of the newest stage
    archives, donors = ([shazip.compress(d, model=model, block_size=900, lanes=3, methods=m, adapt=a)
                         for m, a in codings] for d in (data, other))
    expected = [data] * len(archives)
    # and the golden archives of formats 1-3 (written by shazip 0.3-0.7), which every version must decode
    for name in ("golden-int8.shz", "golden-mixed.shz", "golden-mixed-v3.shz"):
        old = (ROOT / "tests" / "data" / name).read_bytes()
        archives.append(old)
        donors.append(None)
        expected.append(shazip.decompress(old, model=model))
    # and framed outputs (three frames and a seek table), for mistakes with whole frames (every 4th case)
    framed, framed_donors = ([shazip.compress(d, model=model, block_size=600, frame_size=1200, lanes=2, methods=m,
                                              adapt=a, threads=1) for m, a in codings[1:3]] for d in (data, other))
    rng = random.Random(args.seed)
    counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    failures, slowest = [], (0.0, "")
    by_format: dict[int, tuple[float, str]] = {}  # the slowest case by the format its header says (0: none known)
    t0 = time.perf_counter()
    for case in range(args.cases):
        if case % 4 == 3:
            k = case // 4 % len(framed)
            name, bad = frame_damage(framed[k], rng, framed_donors[k])
        else:
            k = (case - case // 4) % len(archives)  # every archive in turn over the other cases
            name, bad = mutate(archives[k], rng, donors[k])
            name += f" (format {archives[k][4]})"
        t = time.perf_counter()
        try:
            out = shazip.decompress(bad, model=model, threads=1 + case % 2)
            outcome = "intact" if out == (data if case % 4 == 3 else expected[k]) else "WRONG OUTPUT"
        except ShazipError:
            outcome = "refused"
        except Exception:  # anything else is a bug: record it and go on
            outcome = "CRASH"
            failures.append((case, name, traceback.format_exc(limit=3)))
        dt = time.perf_counter() - t
        slowest = max(slowest, (dt, name))
        fmt = bad[4] if len(bad) > 4 and bad[:4] == b"SHZ\x89" and bad[4] in FORMAT_VERSIONS else 0
        by_format[fmt] = max(by_format.get(fmt, (0.0, "")), (dt, name))
        if dt > args.max_seconds:
            failures.append((case, name, f"took {dt:.1f} s"))
        counts[name.split(" (")[0] + (name[name.index(" (format"):] if " (format" in name else "")][outcome] += 1
        if outcome == "WRONG OUTPUT":
            failures.append((case, name, "decoded to different bytes without an error"))
    total = collections.Counter()
    for c in counts.values():
        total.update(c)
    print(f"{'mutation':28s} {'refused':>8s} {'intact':>7s} {'failed':>7s}")
    for name in sorted(counts):
        c = counts[name]
        print(f"{name:28s} {c['refused']:8d} {c['intact']:7d} {c['CRASH'] + c['WRONG OUTPUT']:7d}")
    print(json.dumps({"cases": args.cases, "refused": total["refused"], "intact": total["intact"],
                      "crashes": total["CRASH"], "wrong_output": total["WRONG OUTPUT"],
                      "seconds": round(time.perf_counter() - t0, 1), "slowest_case_s": round(slowest[0], 3),
                      "slowest_mutation": slowest[1],
                      "slowest_s_by_format": {f: round(t, 3) for f, (t, _) in sorted(by_format.items())},
                      "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if peak > args.max_mb:
        failures.append((-1, "the whole run", f"peak RSS {peak:.0f} MB"))
    for case, name, what in failures[:20]:
        print(f"case {case} ({name}): {what}", file=sys.stderr)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
