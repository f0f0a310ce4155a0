"""Throughput of shazip.distributed on a LocalCluster of 1..N single-threaded worker processes:
the same file compressed and decompressed, one task per frame, beside the bytes a local run makes.

    python benchmarks/dask_speed.py ../shared/data/enwik6 --workers 1,2 --block-size 250000 --frame-size 250000

Prints one JSON line per worker count: seconds each way (cluster start-up excluded, the model
load in the workers included), KB/s, and whether the archive equals `shazip.compress` with the
same options and the round trip holds."""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from distributed import Client, LocalCluster

import shazip
import shazip.distributed as sd


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file", type=Path)
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--block-size", type=int, default=2 << 20)
    ap.add_argument("--frame-size", type=int, default=16 << 20)
    a = ap.parse_args()
    data = a.file.read_bytes()
    options = dict(block_size=a.block_size, frame_size=a.frame_size)
    local = shazip.compress(data, **options)  # every core: the bytes do not depend on it
    with tempfile.TemporaryDirectory() as tmp:
        arc, out = Path(tmp) / "a.shz", Path(tmp) / "out"
        for n in map(int, a.workers.split(",")):
            with LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
                    Client(cluster) as client:
                t = time.perf_counter()
                sd.compress(str(a.file.resolve()), str(arc), client, **options)
                tc = time.perf_counter() - t
                t = time.perf_counter()
                sd.decompress(str(arc), str(out), client)
                td = time.perf_counter() - t
            print(json.dumps({"file": a.file.name, "bytes": len(data), "workers": n, **options,
                              "compress_s": round(tc, 2), "decompress_s": round(td, 2),
                              "compress_KBps": round(len(data) / tc / 1e3, 1),
                              "decompress_KBps": round(len(data) / td / 1e3, 1),
                              "archive_bytes": arc.stat().st_size, "equals_local": arc.read_bytes() == local,
                              "round_trip": out.read_bytes() == data}))


if __name__ == "__main__":
    main()
