"""The benchmark's report: the Markdown table of one input (with shazip's cross-entropy, overhead
and Hutter-style total below it), the plot of bits/byte against compress speed, and the suite's
table of every file's sizes, winners and totals."""

from __future__ import annotations

from pathlib import Path

from ..optional import available


def markdown(result: dict) -> str:
    """One input's table (bytes, bits/byte, size against xz, speeds, memory, round trip), then
    shazip's figures and its Hutter-style total."""
    rows = result["rows"]
    xz = next((r for r in rows if r["compressor"] == "xz"), None)
    lines = [f"Input: {result['input']['path']} ({result['input']['split']}, {result['input']['bytes']:,} bytes); "
             f"{result['machine']['cpu']}, {result['machine']['cpu_count']} CPUs, kernels {result['machine'].get('kernels', '?')}",
             "",
             "| compressor | level | bytes | bits/byte | vs xz | compress KB/s | decompress KB/s | peak RSS MB (c/d) | round trip | implementation |",
             "|---|---|---:|---:|---:|---:|---:|---:|---|---|"]
    for r in rows:
        vs = f"{100 * (r['archive_bytes'] / xz['archive_bytes'] - 1):+.1f} %" if xz else "-"
        lines.append(f"| {r['compressor']} | {r['level']} | {r['archive_bytes']:,} | {r['bits_per_byte']:.4f} | {vs} | "
                     f"{r['compress_KBps']:.1f} | {r['decompress_KBps']:.1f} | "
                     f"{r['compress_peak_rss_mb']:.0f} / {r['decompress_peak_rss_mb']:.0f} | "
                     f"{'yes' if r['round_trip'] else 'NO'} | {r['implementation']} |")
    for r in rows:
        if r["compressor"] != "shazip":
            continue
        e, h = r["extra"], r["extra"]["hutter"]
        lines += ["", f"shazip -{e['compression_level']}, model `{e['model']}` ({e['model_id'][:16]}…), {e['engine']} engine, {e['lanes'] or 'auto'} lanes, "
                      f"{e['threads']} thread{'' if e['threads'] == 1 else 's'}, adaptive stage {e['adapt']}: model "
                      "cross-entropy "
                      f"{e['model_bits_per_byte']} bits/byte"
                      + (f", mixed {e['mixed_bits_per_byte']}" if e.get("mixed_bits_per_byte") is not None else "")
                      + ", archive "
                      f"{r['bits_per_byte']} bits/byte; "
                      + (f"model-coded payload {e['coder_overhead_pct']} % above its cross-entropy, "
                         if e["coder_overhead_pct"] is not None else "no block kept model-coded, ")
                      + f"container {e['container_bytes']} bytes; blocks {e['blocks']}.",
                  "", "| Hutter-style total | bytes |", "|---|---:|",
                  f"| archive | {h['archive_bytes']:,} |", f"| model file | {h['model_file_bytes']:,} |",
                  f"| decompressor source (zip of the {len(h['decoder_modules'])} modules decompression imports) | "
                  f"{h['source_zip_bytes']:,} |", f"| **total** | **{h['total_bytes']:,}** |"]
        if "projected_enwik8_total_bytes" in h:  # a row of the same table
            lines.append(f"| enwik8 total, projected from {h['projected_from_bytes']:,} bytes | "
                         f"{h['projected_enwik8_total_bytes']:,} |")
        lines += ["", f"(The whole package's source, tools included, zips to {h['package_zip_bytes']:,} bytes.)"]
    return "\n".join(lines) + "\n"


def plot(result: dict, path: Path) -> bool:
    """bits/byte against compress speed (log x), one point per compressor and level."""
    if not available("matplotlib"):
        return False
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for r in result["rows"]:
        ax.scatter(r["compress_KBps"], r["bits_per_byte"], color="C3" if r["compressor"] == "shazip" else "C0")
    ax.set_xscale("log")
    ax.set_xlabel("compress speed, KB/s (log)")
    ax.set_ylabel("bits/byte (lower is better)")
    ax.set_title(f"{Path(result['input']['path']).name}: {result['input']['bytes']:,} bytes", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    renderer = fig.canvas.get_renderer()
    inside = ax.get_window_extent(renderer)
    placed = []  # each label takes the first spot beside its point inside the axes that no earlier label covers
    spots = ((5, 4), (5, -10), (-5, 4), (-5, -10), (5, 14), (5, -20), (-5, 14), (-5, -20))
    for r in result["rows"]:
        for dx, dy in spots:
            label = ax.annotate(f"{r['compressor']} {r['level']}", (r["compress_KBps"], r["bits_per_byte"]),
                                textcoords="offset points", xytext=(dx, dy), fontsize=8,
                                ha="left" if dx > 0 else "right")
            box = label.get_window_extent(renderer)
            fits = inside.x0 <= box.x0 and box.x1 <= inside.x1 and inside.y0 <= box.y0 and box.y1 <= inside.y1
            if (fits and not any(box.overlaps(b) for b in placed)) or (dx, dy) == spots[-1]:
                break
            label.remove()
        placed.append(box)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def _label(r: dict) -> str:
    return r["compressor"] if r["compressor"] != "zstd" else f"zstd {r['level'].split()[0]}"


def suite_markdown(result: dict) -> str:
    """Bytes per file and compressor (bits/byte below each total), the winner of each file, and
    shazip's size against zpaq -m5 and xz -9e where they ran."""
    names = list(dict.fromkeys(_label(r) for f in result["files"] for r in f["rows"]))
    head = "| file | bytes | " + " | ".join(names) + " | shazip model only | winner |"
    shazip = next(r for r in result["files"][0]["rows"] if r["compressor"] == "shazip")
    lines = [f"Suite: {result['suite']}; {result['machine']['cpu']}, {result['machine']['date'][:10]}; "
             f"shazip {shazip['level']}", "", head, "|---|---:|" + "---:|" * len(names) + "---:|---|"]
    totals = dict.fromkeys(names, 0)
    n_total = model_bits = 0.0
    for f in result["files"]:
        by = {_label(r): r for r in f["rows"]}
        best = min(by.values(), key=lambda r: r["archive_bytes"])
        e = by["shazip"]["extra"]
        cells = [f"{by[k]['archive_bytes']:,}" if k in by else "-" for k in names]
        lines.append(f"| {f['file']} | {f['bytes']:,} | " + " | ".join(cells) +
                     f" | {e['model_bits_per_byte']} | {_label(best)} |")
        for k in names:
            totals[k] += by[k]["archive_bytes"] if k in by else 0
        n_total += f["bytes"]
        model_bits += (e["model_bits_per_byte"] or 8) * f["bytes"]
    lines.append(f"| **total** | {int(n_total):,} | " + " | ".join(f"**{totals[k]:,}**" for k in names) +
                 f" | {model_bits / n_total:.3f} | {min(totals, key=totals.get)} |")
    lines.append("| bits/byte | | " + " | ".join(f"{8 * totals[k] / n_total:.3f}" for k in names) + " | | |")
    for peer in ("paq8px", "zpaq", "xz"):
        if peer in totals and totals[peer]:
            lines.append(f"\nshazip / {peer}: {totals['shazip'] / totals[peer]:.3f} over the suite")
    return "\n".join(lines) + "\n"
