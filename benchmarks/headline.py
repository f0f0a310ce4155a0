"""The README's headline figures, written from one `shazip bench` result, so that they come from
one measurement run and cannot drift from it (tests/test_structure.py checks the README's block).

    taskset -c 1 shazip bench --data ../shared/data/enwik6 --threads 1 --out benchmarks/results
    python benchmarks/headline.py --write README.md
    shazip models --add shazip/models/default.safetensors --name default --into-package \\
        --bench benchmarks/results/bench.json                # the same figures in `shazip models`

The block sits between HEAD and TAIL in README.md.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULT = ROOT / "benchmarks" / "results" / "bench.json"
HEAD = "<!-- headline: written by benchmarks/headline.py from benchmarks/results/bench.json -->"
TAIL = "<!-- /headline -->"
PEERS = [("paq8px", "-8"), ("zpaq", "-m5"), ("7-Zip PPMd", "o=16 mem=1g"), ("xz", "-9e"), ("brotli", "-q 11"),
         ("zstd", "-19")]


def render(result: dict) -> str:
    """The headline, as Markdown lines."""
    rows = {(r["compressor"], r["level"]): r for r in result["rows"]}
    me = next(r for r in result["rows"] if r["compressor"] == "shazip")
    e, m, inp = me["extra"], result["machine"], result["input"]
    name = Path(inp["path"]).name
    zpaq = rows.get(("zpaq", "-m5"))
    times = (f", {zpaq['compress_KBps'] / me['compress_KBps']:.1f}x the time of `zpaq -m5` there"
             if zpaq else "")
    paq = rows.get(("paq8px", "-8"))
    beside = (f" Beside paq8px -8: {me['archive_bytes'] / paq['archive_bytes']:.3f}x its bytes at "
              f"{me['compress_KBps'] / paq['compress_KBps']:.1f}x its speed." if paq else "")
    peers = "; ".join(f"{c} {lv} {r['archive_bytes']:,} ({r['bits_per_byte']:.3f}, {r['compress_KBps']:.1f} KB/s)"
                      for c, lv in PEERS if (r := rows.get((c, lv))))
    return "\n".join([
        f"- **Measured** (one `shazip bench --data {name} --threads {e['threads']}` run, shazip {m['shazip']}, "
        f"{m['date'][:10]}, {m['cpu']}, the {m['kernels']} kernel path, one core):",
        f"  {name} ({inp['bytes']:,} bytes) at `-{e['compression_level']}` with `{e['model']}` is "
        f"**{me['archive_bytes']:,} bytes ({me['bits_per_byte']:.3f} bits/byte)**, the model alone "
        f"{e['model_bits_per_byte']:.3f}; compression {me['compress_KBps']:.1f} KB/s, decompression "
        f"{me['decompress_KBps']:.1f} KB/s{times}.{beside}",
        f"  In the same run (bytes, bits/byte, compression speed): {peers}.",
    ])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--result", type=Path, default=RESULT)
    ap.add_argument("--write", type=Path, help="replace the block in this file (README.md)")
    args = ap.parse_args()
    block = render(json.loads(args.result.read_text()))
    if not args.write:
        print(block)
        return
    text = args.write.read_text()
    start, end = text.index(HEAD) + len(HEAD), text.index(TAIL)
    args.write.write_text(text[:start] + "\n" + block + "\n" + text[end:])


if __name__ == "__main__":
    main()
