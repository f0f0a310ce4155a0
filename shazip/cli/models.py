"""`shazip models`: the models installed (yours, then the bundled ones) with what they were
trained on and measured at; `--add` adds a model file to yours (or, for a release, to the package)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from ..errors import UsageError
from .io import count, run_command


@click.command()
@click.option("--add", "add", type=click.Path(dir_okay=False),
              help="Add this model file to your models (SHAZIP_MODELS, else ~/.local/share/shazip/models): "
                   "--model NAME then finds it, and so do archives that need it.")
@click.option("--name", default=None, help="Name for --add (default: the name stored in the file).")
@click.option("--bench", "bench_json", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="With --add: a bench.json of this model whose figures are recorded.")
@click.option("--into-package", is_flag=True, help="With --add: into the installed package itself, as a "
              "release of shazip bundles its models.")
def models(add: str | None, name: str | None, bench_json: Path | None, into_package: bool) -> None:
    """List the models (your own, then the bundled ones), or add one with --add."""
    from ..model.file import BUNDLED_DIR, bundle_model, installed, user_models_dir
    if add:
        def body() -> None:
            try:
                result = json.loads(bench_json.read_text()) if bench_json else None
            except (OSError, ValueError) as e:
                raise UsageError(f"cannot read {bench_json}: {e}") from None
            entry = bundle_model(add, name, result, BUNDLED_DIR if into_package else None)
            click.echo(f"added {entry['name']} to {entry['folder']}: {entry['sha256']}")
        run_command(body)
        return
    if bench_json or into_package:
        raise click.UsageError("--bench and --into-package go with --add")

    def body() -> None:
        found = installed()
        if not found:
            click.echo("no models installed")
        user = user_models_dir()
        for name, (folder, e) in sorted(found.items(), key=lambda item: item[1][0] != user):  # yours first
            click.echo("\n".join(_describe_model(name, e, "yours, in " + str(user) if folder == user else "bundled")))
    run_command(body)


def _describe_model(name: str, e: dict, where: str) -> list[str]:
    f = dict(e.get("figures", {}))
    b = f.pop("bench", None)
    lines = [f"{name} ({where}): {e['file']}, {e.get('bytes', 0) / 1e6:.1f} MB, {e.get('params', 0) / 1e6:.2f}M "
             f"params ({f.pop('config_name', '?')}), id {e['sha256']}"]
    if "bytes_seen" in f:
        before = f.pop("bytes_seen_before", 0)  # the warm start's own training, in earlier runs
        seen = f.pop("bytes_seen")
        lines.append(f"  trained on {seen / 1e6:.1f} MB in {f.pop('steps', '?')} steps"
                     + (f", warm-started from weights trained on {before / 1e6:.1f} MB "
                        f"({(seen + before) / 1e6:.1f} MB in all)" if before else "") + ", "
                     f"valid {f.pop('valid_bpc', '?')} bits/byte; "
                     + ", ".join(f"{k}={v}" for k, v in f.items() if k != "params"))
    if b:
        xz = f", xz -9e {b['xz_bits_per_byte']}" if "xz_bits_per_byte" in b else ""
        lines.append(f"  {b['input']} ({b['input_bytes']:,} bytes): {b['bits_per_byte']} bits/byte achieved "
                     f"(model {b['model_bits_per_byte']}){xz}; compress {b['compress_KBps']} KB/s, decompress "
                     f"{b['decompress_KBps']} KB/s ({count(b['threads'], 'thread')}, {b['lanes'] or 'auto'} lanes, {b['cpu']}, "
                     f"{b['date'][:10]})")
    return lines
