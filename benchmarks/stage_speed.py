"""The adaptive stage's speed alone, in µs per byte, at given levels, on the int8 model's rows of
a real file (computed once, outside the timings, and kept as adaptive_ablation.py keeps them).
With --against DIR (another checkout, its core built in place: `python setup.py build_ext
--inplace`) both builds code the same rows with the same parameters in separate processes, in
alternating rounds so that the machine's drift falls on both; each round also compares the two
builds' payloads (they must be the same bytes). Pin it to one core (taskset) and name the kernel
path (SHAZIP_KERNELS) with its figures. On a VM whose speed drifts, each round's ratio (the two
builds one after the other) tells more than the fastest rounds.

    taskset -c 1 python benchmarks/stage_speed.py ../shared/data/enwik6 --bytes 200000 --levels 6 9 \\
        --against /tmp/old --rounds 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from adaptive_ablation import lane_grid, rows_for  # noqa: E402
from shazip.codec.encode import stage_params  # noqa: E402
from shazip.codec.block import effective_lanes  # noqa: E402
from shazip.options import LEVELS, lane_policy  # noqa: E402

# One timing in a fresh process of the build on sys.path: the rows' encoder, process time.
CHILD = """
import hashlib, json, sys, time
import numpy as np
import os, shazip
if os.path.isdir(os.path.join(os.path.dirname(shazip.__file__), "stage")):
    from shazip.stage.adaptive import AdaptiveParams, AdaptiveStage
else:  # a tree from before the package's folders (and not the editable install's finder's)
    from shazip.adaptive import AdaptiveParams, AdaptiveStage
job = json.load(open(sys.argv[1]))
z = np.load(job["rows"])
freq, sym, active = z["freq"], z["sym"], z["active"]
steps = [(freq[t, :k].astype(np.int64), sym[t, :k]) for t, k in enumerate(active)]
stage = AdaptiveStage(AdaptiveParams(**job["params"]))
t0 = time.process_time()
enc = stage.encoder(int(job["lanes"]), int(job["span"]))
for f, s in steps:
    enc.code(f, s)
payload = enc.finish()
print(json.dumps({"seconds": time.process_time() - t0, "sha256": hashlib.sha256(payload).hexdigest(),
                  "bytes": len(payload)}))
"""


def timed(tree: Path, job: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree))  # and run in the tree: `-c` puts the working folder first
    out = subprocess.run([sys.executable, "-c", CHILD, str(job)], env=env, cwd=tree, capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file", type=Path)
    ap.add_argument("--bytes", type=int, default=200_000, help="the file's first N bytes")
    ap.add_argument("--levels", type=int, nargs="+", default=[6, 9])
    ap.add_argument("--against", type=Path, help="another checkout with its core built in place")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--model", default="default")
    ap.add_argument("--rows", type=Path, default=ROOT / "runs" / "rows", help="where the model's rows are kept")
    args = ap.parse_args()
    data = args.file.read_bytes()[: args.bytes]
    args.rows.mkdir(parents=True, exist_ok=True)
    prefix = args.rows / f"{args.file.name}-{len(data)}"
    prefix.write_bytes(data)
    trees = [("this", ROOT)] + ([("against", args.against.resolve())] if args.against else [])
    print(f"{args.file.name}, first {len(data):,} bytes; kernel path {os.environ.get('SHAZIP_KERNELS', 'auto')}")
    with tempfile.TemporaryDirectory() as tmp:
        for level in args.levels:
            policy = lane_policy(LEVELS[level], None, False)
            lanes = effective_lanes(len(data), policy.most, policy.min_lane)
            freq, arr, lanes = rows_for(prefix, args.model, lanes, args.rows)
            sym, active, span = lane_grid(arr, lanes)
            params = stage_params("cm", LEVELS[level], policy).for_data(data).fitted(len(data))
            rows = Path(tmp) / f"rows-{level}.npz"
            np.savez(rows, freq=freq, sym=sym, active=active)
            job = Path(tmp) / f"job-{level}.json"
            job.write_text(json.dumps({"rows": str(rows), "params": params.to_dict(), "lanes": lanes, "span": span}))
            seconds: dict[str, list[float]] = {name: [] for name, _ in trees}
            digests = set()
            for _ in range(args.rounds):
                for name, tree in trees:
                    r = timed(tree, job)
                    seconds[name].append(r["seconds"])
                    digests.add(r["sha256"])
            if len(digests) != 1:
                raise SystemExit(f"-{level}: the builds' payloads differ")
            line = f"-{level} ({lanes} lanes, {r['bytes']:,} B payload)"
            for name, _ in trees:
                us = [1e6 * s / len(data) for s in seconds[name]]
                line += f"  {name}: {min(us):.2f} µs/byte (median {statistics.median(us):.2f})"
            if args.against:
                ratio = min(seconds["against"]) / min(seconds["this"])
                paired = statistics.median(a / t for a, t in zip(seconds["against"], seconds["this"]))
                line += (f"  this build {ratio:.3f}x as fast (min over {args.rounds} rounds; the median of each"
                         f" round's ratio {paired:.3f}x); payloads identical")
            print(line, flush=True)


if __name__ == "__main__":
    main()
