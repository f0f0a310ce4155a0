"""What an archive holds, read from its headers alone: `shazip info FILE` and `shazip -l` (gzip -l's
table, one line a file; with -v each archive's header and blocks)."""

from __future__ import annotations

import json

import click

from ..errors import ArchiveError, ShazipError
from ..format.listing import describe
from .io import count, input_file, run_command, shown


@click.command()
@click.argument("file")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def info(file: str, as_json: bool) -> None:
    """Print an archive's header and block table (as -l). Of each archive, for a concatenation
    of them; --json: one object, or a list of them."""
    run_command(lambda: list_archives(file, as_json))


def list_archives(file: str, as_json: bool, several: bool = False) -> None:
    """The listing of FILE's archives; `several`: one of several files listed, each under its name."""
    with input_file(file) as src:
        try:
            archives = describe(src)
        except ArchiveError as e:
            raise type(e)(f"{'standard input' if file == '-' else file}: {e}") from None
    if as_json:
        for d in archives:  # the model decoding runs, by the name --model takes (null: none runs, or unknown here)
            d["model"] = _model_of(d)[0]
        click.echo(json.dumps(archives[0] if len(archives) == 1 else archives, indent=2))
        return
    if several:
        click.echo(f"{shown(file)}:")
    for i, d in enumerate(archives):
        if len(archives) > 1:
            if i:
                click.echo()
            frame = (f", frame {d['frame_index']} of output {d['output_id']:08x}" + (" (more follow)" if d["more"] else
                     " (its last)")) if d["frame_index"] or d["more"] else ""
            click.echo(f"archive {i + 1} of {len(archives)}, at byte {d['offset']}{frame}:")
        _list_one(d)


class Table:
    """`shazip -l`: gzip -l's table, one line a file (an output of many frames, or several
    outputs one after the other, summed), and their totals where there are several."""

    FORMAT = "{:>14} {:>14} {:>10}  {:<10} {}"

    def __init__(self) -> None:
        self.rows: list[tuple[int, int]] = []

    def add(self, file: str, suffix: str) -> None:
        with input_file(file) as src:
            try:
                archives = describe(src)
            except ArchiveError as e:
                raise type(e)(f"{'standard input' if file == '-' else file}: {e}") from None
        packed = sum(d["archive_bytes"] + d["skipped_bytes"] for d in archives)
        plain = sum(d["total_len"] for d in archives)
        models = list(dict.fromkeys(shown(_model_of(d)[0] or "none") for d in archives))
        name = "standard input" if file == "-" else shown(file[:-len(suffix)] if file.endswith(suffix) else file)
        self._line(packed, plain, " + ".join(models), name)
        self.rows.append((packed, plain))

    def _line(self, packed: int, plain: int, model: str, name: str) -> None:
        if not self.rows:
            click.echo(self.FORMAT.format("compressed", "uncompressed", "bits/byte", "model", "uncompressed name"))
        ratio = f"{8 * packed / plain:.3f}" if plain else "-"
        click.echo(self.FORMAT.format(f"{packed:,}", f"{plain:,}", ratio, model, name))

    def close(self) -> None:
        if len(self.rows) > 1:
            packed, plain = map(sum, zip(*self.rows))
            self._line(packed, plain, "", "(totals)")


def _model_of(d: dict) -> tuple[str | None, str]:
    """(the name, as `--model` takes it here, of the model decoding an archive runs, None where
    none runs; a description for the listing). An archive at -1 or -2, or of stored and zstd
    blocks, records a model's id but decodes without it."""
    from ..model.file import BUNDLED_DIR, installed, installed_names
    known = installed_names(bytes.fromhex(d["model_id"]))
    name = d["model_name"] or (known[0] if known else None)
    if not _runs_model(d):
        return None, f"none needed (its blocks decode without one; the header records id {d['model_id']})"
    shelves = installed()
    where = [f"{n} ({'bundled' if shelves[n][0] == BUNDLED_DIR else 'yours'})" for n in known]
    named = shown(d["model_name"]) or " / ".join(where) or "(not recorded, not installed here)"
    return name, f"{named}, id {d['model_id']}"


def _runs_model(d: dict) -> bool:
    """Whether decoding the archive `d` (as `describe` gives it) runs the neural model: a
    model-coded block, or a mixed one whose stage takes the model's rows."""
    from ..stage.adaptive import AdaptiveParams
    methods = {b["method"] for b in d["blocks"]}
    if "model" in methods or "mixed" not in methods:
        return "model" in methods
    try:
        return AdaptiveParams.unpack(bytes.fromhex(d["adapt_params"]), d["adapt_version"]).nn
    except (ShazipError, KeyError):  # parameters this shazip does not know: assume the model runs
        return True


def _stage_models(d: dict) -> str:
    """", the models of level -6" where a level's stage has the archive's models."""
    from ..stage.adaptive import AdaptiveParams
    from ..codec.encode import levels_of
    try:
        levels = levels_of(AdaptiveParams.unpack(bytes.fromhex(d["adapt_params"]), d["adapt_version"]))
    except ShazipError:  # parameters no level of this shazip writes (the listing shows them)
        return ""
    return f", the models of level{'s' * (len(levels) > 1)} {' / '.join(f'-{n}' for n in levels)}" if levels else ""


def _list_one(d: dict) -> None:
    from ..codec.engines import BY_ID
    click.echo(f"format version {d['format_version']}, engine {d['engine']} "
               f"({BY_ID[d['engine']].description if d['engine'] in BY_ID else 'unknown'}) v{d['engine_version']}"
               + (f", {count(d['threads'], 'thread')}" if d["threads"] else "")
               + (f", adaptive stage v{d['adapt_version']}{_stage_models(d)} (parameters {d['adapt_params']})"
                  if d["adapt_version"] else ", no adaptive stage"))
    click.echo(f"model {_model_of(d)[1]}")
    ratio = 8 * d["archive_bytes"] / d["total_len"] if d["total_len"] else 0.0
    click.echo(f"original {count(d['total_len'], 'byte')}, archive {count(d['archive_bytes'], 'byte')} "
               f"({ratio:.3f} bits/byte)")
    click.echo(f"block size {d['block_size']:,}, lanes {d['lanes']}, {count(d['n_blocks'], 'block')}")
    for b in d["blocks"]:
        click.echo(f"  block {b['index']}: {b['method']:5s} lanes {b['lanes']:4d} "
                   f"{b['orig_len']:10d} -> {b['payload_len']:10d}")
    if d["skipped_bytes"]:
        click.echo(f"then {d['skipped_bytes']} bytes of skippable frames (the seek table of a framed file)")
