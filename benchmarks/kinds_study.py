"""What structured text wants of a block: lanes, and whether the model runs (issue 66's first question).

    python benchmarks/kinds_study.py DIR_OR_FILES... [--configs A,B,...] [--threads 1] [--json OUT]

Each file is compressed whole by the API under each configuration, one after the other on the
same cores, and the table gives bytes, bits/byte and seconds per file and in total:

    -6        the default level as it is (its lanes: 16 KB, 64 KB on repetitive blocks, at most 32)
    -6 1lane  the default level's stage and model, one lane a block (the stage sees the block in order)
    -6 stage  the default level's stage models without the model's input, one lane (no neural step)
    -2        the stage alone with its own models (the level that never runs the model)
    -9        the smallest level (one lane a block, every model)

Evaluation only: never train or tune on what this reads. The kernel path (`SHAZIP_KERNELS`) and
the CPU are printed with the table.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import time
from pathlib import Path

import shazip
from shazip.api import _stage_params
from shazip.core import kernels
from shazip.options import LEVELS, lane_policy

CONFIGS = {
    "-6": dict(level=6),
    "-6 1lane": dict(level=6, lanes=1),
    "-6 stage": dict(level=6, lanes=1, stage_only=True),
    "-2": dict(level=2),
    "-9": dict(level=9),
}


def compressor(config: dict, threads: int) -> shazip.Compressor:
    """The API's compressor for one configuration (`stage_only`: the level's stage parameters
    with the model's input off, given as parameters, so the archive records exactly them)."""
    options = {k: v for k, v in config.items() if k != "stage_only"}
    if config.get("stage_only"):
        level = LEVELS[config["level"]]
        params = _stage_params("cm", level, lane_policy(level, options.get("lanes"), False))
        options["adapt"] = dataclasses.replace(params, nn=False, nn_final=False)
    return shazip.Compressor(threads=threads, **options)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("inputs", nargs="+", type=Path)
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    files = sorted(p for i in args.inputs for p in ([i] if i.is_file() else i.iterdir()) if p.is_file())
    rows = []
    for name in args.configs.split(","):
        c = compressor(CONFIGS[name], args.threads)
        for f in files:
            data = f.read_bytes()
            t = time.perf_counter()
            blob = c.compress(data)
            seconds = time.perf_counter() - t
            assert shazip.decompress(blob, c.loaded) == data, (name, f)
            rows.append({"config": name, "file": f.name, "bytes": len(data), "archive": len(blob),
                         "bits_per_byte": round(8 * len(blob) / len(data), 4), "seconds": round(seconds, 2)})
            print(f"{name:10s} {f.name:28s} {len(data):9,d} -> {len(blob):8,d} {8 * len(blob) / len(data):6.3f} "
                  f"{seconds:7.1f} s", flush=True)
    print(f"\n{'config':10s} {'archive':>10s} {'bits/byte':>9s} {'seconds':>8s}   "
          f"(kernels {kernels()}, "
          f"{platform.processor() or platform.machine()}, {args.threads} thread(s))")
    total = sum(r["bytes"] for r in rows if r["config"] == rows[0]["config"])
    for name in args.configs.split(","):
        mine = [r for r in rows if r["config"] == name]
        packed = sum(r["archive"] for r in mine)
        print(f"{name:10s} {packed:10,d} {8 * packed / total:9.4f} {sum(r['seconds'] for r in mine):8.1f}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
