"""The `shazip bench` and `shazip fetch-enwik8` commands (registered lazily by shazip.cli)."""

from __future__ import annotations

from pathlib import Path

import click

from ..cli.flags import flag
from ..cli.io import run_command
from .enwik8 import ENWIK8_URL
from .enwik8 import fetch_enwik8 as fetch
from ..errors import UsageError
from .hutter import core_source
from .report import markdown, suite_markdown
from .runner import SPLITS, Setup
from .runner import bench as run_bench
from .runner import bench_suite as run_suite


@click.command()
@click.option("--data", type=click.Path(path_type=Path), help="Input file (e.g. enwik8 or enwik6).")
@click.option("--suite", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="A folder: every file in it, one table with per-file winners and totals.")
@click.option("--split", type=click.Choice(list(SPLITS)), default="all", show_default=True,
              help="enwik8's standard split: first 90M train, 5M valid, last 5M test.")
@click.option("--limit", type=int, default=None, help="Only the first N bytes (of the split).")
@flag("model")
@flag("lanes")
@flag("threads", default=1)
@flag("adapt", default="cm")
@flag("level")
@click.option("--out", type=click.Path(path_type=Path), default=Path("bench-results"), show_default=True,
              help="Folder for bench.json, bench.md and bench.png.")
@click.option("--baselines/--no-baselines", default=True, show_default=True,
              help="Also run the peers installed: zstd, xz, bzip2, gzip, brotli, zpaq, 7-Zip PPMd, paq8px.")
def bench(data: Path | None, suite: Path | None, split: str, limit: int | None, model: str | None, lanes: int,
          threads: int, adapt: str, level: int, out: Path, baselines: bool) -> None:
    """Benchmark shazip beside the classic compressors. zstd, xz, bzip2, gzip, brotli, zpaq, 7-Zip
    PPMd and paq8px (those installed) on one file: sizes, speeds, memory, round trips, model cross-entropy and
    Hutter-style totals; or, with --suite, on every file of a folder. Run it from a source
    checkout: the totals count the native core's C++ (csrc/). The level, model, lanes, threads
    and stage are the file command's options; -T 1 by default (the command line's default is
    every core), so speeds compare one core with one core."""

    def body() -> None:
        if (data is None) == (suite is None):
            raise UsageError("give either --data FILE or --suite DIR")
        core_source()  # before minutes of work
        setup = Setup(model, lanes, threads, adapt, level)
        if suite is not None:
            result = run_suite(suite, out, setup, log=lambda m: click.echo(m, err=True))
            click.echo(suite_markdown(result), nl=False)
            click.echo(f"wrote {out / 'suite.json'}, {out / 'suite.md'}", err=True)
            return
        result = run_bench(data, out, setup, split, limit, baselines, log=lambda m: click.echo(m, err=True))
        click.echo(markdown(result), nl=False)
        click.echo(f"wrote {out / 'bench.json'}, {out / 'bench.md'}"
                   + (f", {result['plot']}" if result["plot"] else " (no plot: pip install 'shazip[bench]')"), err=True)

    run_command(body)


@click.command("fetch-enwik8")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option("--url", default=ENWIK8_URL, show_default=True, help="Where enwik8.zip is downloaded from.")
def fetch_enwik8(directory: Path, url: str) -> None:
    """Download enwik8 (checked by sha256). Into DIRECTORY; needs the internet; a mismatch is refused."""
    run_command(lambda: click.echo(f"wrote {fetch(directory, url)} (sha256 verified)"))
