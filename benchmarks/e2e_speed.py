"""End-to-end speed of `shazip compress` / `decompress` as a user runs them (a fresh process
each time, start-up included), for one or more source trees side by side, at several thread
counts, optionally with a CPU hog competing for a core.

    python benchmarks/e2e_speed.py FILE --roots /tmp/base . --threads 1,2 [--levels 5,6] [--repeat 3] [--hog] [--peers]

Each root is a checkout of shazip, run from its own folder (`python -m shazip` then imports
that tree's package: before/after compared in one run, on one machine state). The round trip is checked. --peers adds brotli -q 11, xz -9e and
zpaq -m5 -t1 on the same file. Prints a markdown table: archive bytes, wall seconds, KB/s, and
each time as a multiple of zpaq -m5 -t1's (with --peers). Pin the whole run to one core
(`taskset -c 1 python benchmarks/e2e_speed.py ...`) for one-core figures. --levels compares
levels side by side (default: the default level, no flag given).

This VM's speed drifts by a third within minutes (other tenants), so the trees take turns
(root by root within each repeat) and each figure is the best of --repeat runs."""

from __future__ import annotations

import argparse
import itertools
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def timed(cmd: list[str], stdin=None, stdout=subprocess.DEVNULL, cwd: Path | None = None) -> float:
    """Wall seconds of one run; its chatter (zpaq prints to stdout) is dropped, a failure raises."""
    t = time.perf_counter()
    subprocess.run(cmd, stdin=stdin, stdout=stdout, stderr=subprocess.DEVNULL, cwd=cwd, check=True)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file", type=Path)
    ap.add_argument("--roots", nargs="+", default=["."])
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--levels", default="", help="compression levels, e.g. 5,6 (default: the default level)")
    ap.add_argument("--hog", action="store_true", help="a busy-looping process competes throughout")
    ap.add_argument("--peers", action="store_true")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--compress-args", default="", help="more options for compress, e.g. \"--frame-size 250000\"")
    a = ap.parse_args()
    data = a.file.read_bytes()
    levels = a.levels.split(",") if a.levels else [""]
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if a.hog else None
    best: dict[str, list] = {}  # name -> [bytes, compress s, decompress s], fastest seen

    def note(name: str, size: int, tc: float, td: float) -> None:
        row = best.setdefault(name, [size, tc, td])
        row[1], row[2] = min(row[1], tc), min(row[2], td)

    try:
        with tempfile.TemporaryDirectory() as tmp:
            arc, out = Path(tmp) / "a.shz", Path(tmp) / "out"
            shazip = [sys.executable, "-m", "shazip"]
            for _ in range(a.repeat):
                for t, level, root in itertools.product(a.threads.split(","), levels, a.roots):
                    cwd, flag = Path(root).resolve(), [f"-{level}"] if level else []
                    with open(arc, "wb") as f:
                        tc = timed(shazip + ["compress", "-c", "-q", "-T", t, *flag, *a.compress_args.split(),
                                             str(a.file.resolve())], stdout=f, cwd=cwd)
                    with open(out, "wb") as f:
                        td = timed(shazip + ["decompress", "-c", "-q", "-T", t, str(arc)], stdout=f, cwd=cwd)
                    assert out.read_bytes() == data, f"round trip failed for {root}"
                    note(f"shazip {root}{' ' + flag[0] if flag else ''} -T {t}", arc.stat().st_size, tc, td)
            if a.peers:
                for name, comp, dec in [("brotli -q 11", ["brotli", "-q", "11", "-c"], ["brotli", "-d", "-c"]),
                                        ("xz -9e", ["xz", "-9e", "-c"], ["xz", "-d", "-c"])]:
                    with open(a.file, "rb") as src, open(arc, "wb") as f:
                        tc = timed(comp, stdin=src, stdout=f)
                    with open(arc, "rb") as src, open(out, "wb") as f:
                        td = timed(dec, stdin=src, stdout=f)
                    note(name, arc.stat().st_size, tc, td)
                zp = Path(tmp) / "a.zpaq"
                for _ in range(a.repeat):
                    zp.unlink(missing_ok=True)
                    tc = timed(["zpaq", "a", str(zp), a.file.name, "-m5", "-t1"], cwd=a.file.parent)
                    td = timed(["zpaq", "x", str(zp), "-to", str(Path(tmp) / f"x{_}"), "-t1"])
                    note("zpaq -m5 -t1", zp.stat().st_size, tc, td)
    finally:
        if hog is not None:
            hog.kill()
    print(f"{a.file.name}, {len(data):,} bytes{', with a CPU hog' if a.hog else ''}, best of {a.repeat}\n")
    zc, zd = best.get("zpaq -m5 -t1", [0, 0.0, 0.0])[1:]
    print("| | bytes | compress s | KB/s | x zpaq | decompress s | KB/s | x zpaq |\n|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, (size, tc, td) in best.items():
        rc, rd = (f"{tc / zc:.1f}", f"{td / zd:.1f}") if zc else ("", "")
        print(f"| {name} | {size:,} | {tc:.2f} | {len(data) / tc / 1e3:.1f} | {rc} | {td:.2f} | {len(data) / td / 1e3:.1f} | {rd} |")


if __name__ == "__main__":
    main()
