"""The `shazip` command: compress, decompress, info, models; train and bench (tools, imported
only when their command runs).

Outputs go to a temporary file beside the destination (NAME.PID.tmp) and are renamed into place
only after the whole archive was written (or every block decoded and verified); on any error,
Ctrl-C or SIGTERM the temporary file is removed and the input is left untouched. One that a
killed run left (SIGKILL, a power cut) is named by the next run for that destination. Errors are one line on
stderr with a non-zero exit code (130 after SIGINT, 128 + N after SIGTERM, SIGHUP or SIGQUIT).
"""

from __future__ import annotations

import contextlib
import importlib
import io
import itertools
import json
import logging
import os
import stat
import sys
from concurrent.futures import CancelledError
from pathlib import Path
from typing import BinaryIO, Callable

import click

from . import __version__
from .cli_io import ProgressBar, input_file, os_error, output, run_command, show_bar, shown, standard
from .codec.frames import declared_size
from .errors import (ArchiveError, CorruptArchive, FileTrouble, InputChanged, MissingDependency, OutputExists,
                     ShazipError, Skipped, UsageError)
from .format.listing import describe
from .optional import require
from .options import (ADAPT_CHOICES, DEFAULT_BLOCK_SIZE, DEFAULT_LEVEL, DEVICES, ENGINE_CHOICES,
                      FRAME_HELP, LANES_HELP, LEVELS_HELP)

SUFFIX = ".shz"


def _destination(src: str, output: str | None, stdout: bool, make_name: Callable[[str], str]) -> str | None:
    if stdout or (src == "-" and output is None):
        return None
    if src != "-" and os.path.isdir(src):
        raise Skipped(f"{src}: is a directory -- ignored (-r goes into it)")
    dest = output or make_name(src)
    if src != "-" and os.path.exists(src) and os.path.abspath(os.path.realpath(dest)) == os.path.realpath(src):
        raise UsageError(f"{dest}: output would overwrite the input")
    return dest


def _size(path: str) -> int | None:
    return None if path == "-" else os.path.getsize(path)


def _level_options(f: Callable) -> Callable:
    """-1 .. -9, --fast (-1) and --best (-9), as gzip, xz and zstd have them; -6 is the default.
    The help shows the three that carry the meaning."""
    for n in reversed(range(1, 10)):
        names = {1: ("-1", "--fast"), 9: ("-9", "--best")}.get(n, (f"-{n}",))
        default = {"default": True} if n == DEFAULT_LEVEL else {}  # one default: click takes the first it meets
        f = click.option(*names, "level", flag_value=n, hidden=n not in (1, 6, 9), **default,
                         help={1: LEVELS_HELP, 6: "The default level.", 9: "The smallest, slowest level."}.get(n))(f)
    return f


class Commands(click.Group):
    """The decoder's commands are defined here; the tools' are imported when they run, so
    compressing and decompressing never load training or benchmark code, and the help lists
    them from the summaries below without loading torch."""

    # name: (module, its command, the optional packages it needs, the summary)
    LAZY = {"train": ("shazip.train.trainer", "train_command", ("torch",), "Train a SHA-RNN on your own text."),
            "bench": ("shazip.bench.command", "bench", (), "Benchmark shazip beside the classic compressors."),
            "fetch-enwik8": ("shazip.bench.command", "fetch_enwik8", (), "Download enwik8 (checked by sha256).")}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*(n for n, c in self.commands.items() if not c.hidden), *self.LAZY])

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """gzip habits: arguments that do not start with a command name (files, -d, -t, ...,
        or nothing: a filter from stdin to stdout) go to the file command, and so does
        everything after `--` (`shazip -- info` compresses a file named info)."""
        if not args or (args[0] not in self.commands and args[0] not in self.LAZY
                        and args[0] not in ("-h", "--help", "-V", "--version")) or args[0] == "--":
            args = [FILES, *args]
        elif os.path.isfile(args[0]):  # `shazip info` with a file named info here: the command wins
            click.echo(f"shazip: '{args[0]}' is taken as the {args[0]} command; to compress the file of that "
                       f"name: shazip -- {args[0]}", err=True)
        for a in itertools.takewhile(lambda a: a != "--", args):
            if len(a) > 2 and a[0] == "-" and a[1:].isdigit():  # click would read -10 as -1 -0
                raise click.UsageError(f"no such level: {a} (the levels are -1 .. -9)", ctx)
        return super().parse_args(ctx, args)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in self.LAZY:
            module, attr, needs, _ = self.LAZY[name]
            try:
                for package in needs:  # a tool's dependency, left out of a plain install or broken
                    require(package, f"`shazip {name}`")
                return getattr(importlib.import_module(module), attr)
            except MissingDependency as e:
                click.echo(f"shazip: {e}", err=True)
                sys.exit(e.exit_code)
        return super().get_command(ctx, name)

    # `shazip --help`: the file command's options (gzip's, xz's, zstd's) under these headings, in
    # this order; every option of that command is under one (tests/test_cli.py checks it)
    GROUPS = {"Operation": ("mode", "recover"),
              "Where the output goes": ("to_stdout", "output", "keep", "remove", "force", "recursive", "suffix"),
              "Level and model": ("level", "model", "lanes", "block_size", "frame_size", "adapt", "engine"),
              "Machine": ("threads", "device", "scheduler"),
              "Messages": ("quiet", "progress", "verbose", "version", "help")}

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """A gzip-grade page: usage, what it does, every option grouped, then the commands."""
        formatter.write_usage(ctx.command_path, "[OPTION]... [FILE]...")
        formatter.write_usage(ctx.command_path, "COMMAND [ARGS]...", prefix="   or: ")
        self.format_help_text(ctx, formatter)
        files = self.commands[FILES]
        params = [*files.params, *self.params, self.get_help_option(ctx)]
        with click.Context(files, info_name=ctx.info_name, parent=ctx) as sub:
            for title, names in self.GROUPS.items():
                rows = [r for name in names for p in params if p.name == name
                        for r in [p.get_help_record(sub if p in files.params else ctx)] if r]
                with formatter.section(title):
                    formatter.write_dl(rows)
        self.format_commands(ctx, formatter)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, self.LAZY[name][3] if name in self.LAZY else
                 self.commands[name].get_short_help_str(formatter.width - 6 - len(name)))
                for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="shazip")
def main() -> None:
    """Compress or decompress FILEs with a neural text model (a SHA-RNN byte model, an adaptive
    context-mixing stage and an arithmetic coder), as gzip, xz and zstd do: each FILE becomes
    FILE.shz and is kept (--rm removes it); -d turns FILE.shz back into FILE (also: unshazip;
    shazcat writes to standard output). With no FILE, or FILE -, standard input goes to standard
    output. The commands below have their own --help."""


def compress_file(file: str, dest: str | None, force: bool, remove: bool, bar: bool | None, coding: dict) -> None:
    """FILE ("-": standard input) to dest (None: standard output). `bar`: as ProgressBar's `show`."""
    if dest is None and standard("stdout").isatty() and not force:
        raise FileTrouble("refusing to write compressed data to a terminal (use -o or redirect; -f forces)")
    from .codec.encode import compress_stream, level_model
    from .modelfile import load_model
    loaded = load_model(level_model(coding["level"], coding["model"]))  # before creating any output: a missing model leaves nothing behind
    with input_file(file, force) as src, output(dest, force, None if file == "-" else file) as dst:
        before = _identity(file, src)
        progress = ProgressBar(_size(file), _named(file), bar, ratio=True)
        read = compress_stream(src, dst, loaded, progress=progress if progress.enabled else None,  # unshown: not measured
                                **{k: v for k, v in coding.items() if k != "model"})
        progress.close()
    _unchanged(file, before, read)
    if remove and file != "-" and dest is not None:
        os.unlink(file)


def _identity(path: str, f: BinaryIO) -> os.stat_result | None:
    """The input's state as it is opened (None: standard input, or not a regular file, whose
    size means nothing)."""
    if path == "-":
        return None
    st = os.fstat(f.fileno())
    return st if stat.S_ISREG(st.st_mode) else None


def _unchanged(path: str, before: os.stat_result | None, read: int | None) -> None:
    """Raises InputChanged if the file at `path` is no longer the one opened as `before` or its
    bytes changed while they were read: its size, inode or modification time differ, or it
    does not hold `read` bytes (None: not counted). The output, already written, holds exactly
    what was read; the caller has not removed the input."""
    if before is None:
        return
    try:
        now = os.stat(path)
    except OSError:
        now = None
    same = (now is not None and (now.st_ino, now.st_dev, now.st_size, now.st_mtime_ns) ==
            (before.st_ino, before.st_dev, before.st_size, before.st_mtime_ns) and read in (None, now.st_size))
    if not same:
        what = "is gone" if now is None else f"now holds {now.st_size:,} bytes"
        counted = f"{read:,} bytes were read" if read is not None else f"{before.st_size:,} bytes at the start"
        raise InputChanged(f"{path}: changed while it was read ({counted}, the file {what}); "
                           f"the output holds what was read and the input is kept")


def _on_cluster(scheduler: str, file: str, dest: str | None, force: bool, coding: dict | None, model: str | None,
                device: str) -> None:
    """FILE to dest on a Dask cluster, one task per frame: compressed with `coding`, else decompressed."""
    if file == "-" or dest is None:
        raise UsageError("--scheduler reads and writes files (paths every worker sees, or URLs), not standard streams")
    if "://" not in dest and os.path.exists(dest) and not force:
        raise OutputExists(f"{dest}: already exists (use -f to overwrite)")
    Client = require("distributed", "--scheduler").Client
    from . import distributed
    logging.disable(logging.ERROR)  # Dask's logs: its failures reach the user as shazip's one line (the CLI owns its process)
    try:
        client = Client(scheduler, timeout="5s")
    except (OSError, TimeoutError) as e:
        raise UsageError(f"cannot reach the Dask scheduler {scheduler} ({e})") from None
    with client:
        try:
            if coding is not None:  # one thread a task, the int8 engine (portable across workers)
                options = {k: v for k, v in coding.items() if k not in ("threads", "engine")}
                distributed.compress(file, dest, client, replace=force, **options)
            else:
                distributed.decompress(file, dest, client, model=model, device=device, replace=force)
        except ArchiveError as e:
            raise type(e)(f"{file}: {e}") from None
        except FileExistsError:
            raise OutputExists(f"{dest}: already exists (made while this ran; use -f to overwrite)") from None
        except (CancelledError, OSError, TimeoutError) as e:  # the scheduler or a worker lost mid-run
            why = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise FileTrouble(f"{file}: the Dask cluster at {scheduler} failed while this ran ({why})") from None


FILES = "files"  # the hidden command behind the gzip-style use



class _ProgramContext(click.Context):
    """The file command's context: to its user it is the program itself, so its usage lines
    and errors say `shazip [OPTIONS] [FILES]...`, never the hidden command's name."""

    @property
    def command_path(self) -> str:
        return self.parent.command_path if self.parent is not None else super().command_path


def _walk(paths: tuple[str, ...], recursive: bool, want) -> list[str]:
    """The inputs: directories expanded (with -r) to their files that `want` accepts, sorted."""
    out = []
    for p in paths:
        if recursive and p != "-" and os.path.isdir(p):
            for root, dirs, files in os.walk(p):
                dirs.sort()
                out += [os.path.join(root, f) for f in sorted(files) if want(f)]
        else:
            out.append(p)
    return out


@main.command(FILES, hidden=True)
@click.argument("files", nargs=-1)
@click.option("-d", "--decompress", "mode", flag_value="decompress", help="Decompress.")
@click.option("-z", "--compress", "mode", flag_value="compress", default=True, help="Compress (the default).")
@click.option("-t", "--test", "mode", flag_value="test", help="Decode and verify; write nothing.")
@click.option("-l", "--list", "mode", flag_value="list",
              help="One line a file (sizes, bits/byte, model, name), as gzip -l; with -v each archive's header "
                   "and blocks.")
@click.option("-c", "--stdout", "to_stdout", is_flag=True, help="Write to standard output.")
@click.option("-k", "--keep", is_flag=True, help="Keep the inputs (the default).")
@click.option("--rm", "remove", is_flag=True, help="Remove each input after success.")
@click.option("-f", "--force", is_flag=True, help="Overwrite outputs; write compressed data to a terminal.")
@click.option("-o", "--output", metavar="FILE", help="Output file (one input only).")
@click.option("-r", "--recursive", is_flag=True, help="Process the files in directories.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar, no warnings (the exit status still says).")
@click.option("--progress/--no-progress", default=None,
              help="Show the progress bar even where stderr is not a terminal, or never.")
@click.option("-v", "--verbose", is_flag=True, help="Say what each file became.")
@click.option("-T", "--threads", default=0, show_default=True, metavar="N",
              help="CPU threads: up to N frames coded at once, a frame's model beside its stage; 0: every available core.")
@click.option("--device", type=click.Choice(DEVICES), default="cpu", show_default=True, help="Where the int8 engine runs: cpu (the native core), cuda (a GPU, through torch with CUDA), auto (cuda where there is one). Archives are the same bytes on every device.")
@_level_options
@click.option("--model", default=None, metavar="NAME|FILE",
              help="A model by name (`shazip models`) or file [compress: the level's; decompress: the one "
                   "the archive names].")
@click.option("--lanes", default=0, show_default=True, metavar="N", help=LANES_HELP)
@click.option("--block-size", default=DEFAULT_BLOCK_SIZE, show_default=True, metavar="BYTES",
              help="Input bytes per block, each coded by the best of the model, zstd and storing.")
@click.option("--frame-size", type=int, default=None, metavar="BYTES", help=FRAME_HELP)
@click.option("--adapt", type=click.Choice(ADAPT_CHOICES), default=None,
              help="cm: the adaptive stage learns the file as it is coded (the default); none: the model alone "
                   "(the default with --engine float32).")
@click.option("--engine", type=click.Choice(ENGINE_CHOICES), default="int8", show_default=True,
              help="int8: integer-exact, decodes on any machine. float32: the reference; its archives decode only "
                   "on this machine with the same -T.")
@click.option("-S", "--suffix", default=SUFFIX, show_default=True, metavar=".SUF",
              help="The archives' file name suffix.")
@click.option("--recover", is_flag=True, help="Decompress: write every intact frame of a damaged archive, name "
              "the byte ranges lost, and exit 1.")
@click.option("--scheduler", default=None, metavar="ADDRESS",
              help="A Dask scheduler (tcp://host:8786): compress or decompress each FILE as one task per frame on "
                   "its workers (pip install 'shazip[dask]'). FILE and its output must be paths every worker "
                   "sees, or fsspec URLs.")
def files_command(files: tuple[str, ...], mode: str, to_stdout: bool, keep: bool, remove: bool, force: bool,
                  output: str | None, recursive: bool, quiet: bool, progress: bool | None, verbose: bool, threads: int,
                  device: str,
                  level: int, model: str | None, lanes: int, block_size: int, frame_size: int | None, adapt: str | None,
                  engine: str, recover: bool, scheduler: str | None, suffix: str) -> None:
    """gzip-style use: every FILE in turn; one bad file does not stop the others, and the exit
    status is the worst one."""
    if not suffix or "/" in suffix or suffix in (".", ".."):
        raise click.BadParameter("a suffix is a non-empty file name ending, without '/'", param_hint="'-S'")
    archives_only = mode != "compress"
    inputs = _walk(files or ("-",), recursive,
                   (lambda f: f.endswith(suffix)) if archives_only else (lambda f: not f.endswith(suffix)))
    coding = dict(model=model, level=level, lanes=lanes or None, block_size=block_size,
                  frame_size=frame_size, threads=threads, engine=engine, adapt=adapt, device=device)
    bar = show_bar(quiet, progress)

    def one(file: str) -> None:
        dest = None
        if mode == "list" and not verbose:
            table.add(file, suffix)
        elif mode == "list":
            if len(inputs) > 1 and file != inputs[0]:
                click.echo()
            _list(file, as_json=False, several=len(inputs) > 1)
        elif mode == "test":
            decompress_file(file, None, force, False, bar, model, threads, device, test=True)
        elif mode == "decompress":
            dest = _destination(file, output, to_stdout, lambda src: _strip_suffix(src, suffix))
            if scheduler:
                _on_cluster(scheduler, file, dest, force, None, model, device)
            else:
                decompress_file(file, dest, force, remove, bar, model, threads, device, recover=recover)
        else:
            if file.endswith(suffix) and not force:
                raise Skipped(f"{file}: already has the {suffix} suffix -- unchanged (-f compresses it again)")
            dest = _destination(file, output, to_stdout, lambda src: src + suffix)
            if scheduler:
                _on_cluster(scheduler, file, dest, force, coding, None, device)
            else:
                compress_file(file, dest, force, remove, bar, coding)
        if verbose and file != "-" and mode != "list":
            click.echo(f"{shown(file)}: " + (_summary(file, dest, mode == "compress") if mode in ("compress", "decompress")
                                      else "OK"), err=True)

    def body() -> None:
        if output is not None and len(inputs) != 1:
            raise UsageError("-o names one output: give exactly one input")
        _removing(keep, remove)
        worst = 0
        for file in inputs:  # every failure of one file (its data, its model, the system) is its own
            try:
                one(file)
            except ShazipError as e:
                if not (quiet and isinstance(e, Skipped)):  # -q silences warnings, as gzip's
                    click.echo(f"shazip: {shown(_naming(file, str(e)))}", err=True)
                worst = _worse(worst, e.exit_code)
            except OSError as e:
                if isinstance(e, BrokenPipeError):
                    raise
                click.echo(f"shazip: {_naming(file, os_error(e))}", err=True)
                worst = _worse(worst, 1)
        table.close()
        if worst:
            sys.exit(worst)

    table = _Table()
    run_command(body)


files_command.context_class = _ProgramContext


def _with_mode(name: str, mode: str, summary: str) -> None:
    """`shazip compress` / `shazip decompress`: the file command with its mode set, taking every
    one of its other options and any number of files."""
    main.add_command(click.Command(name, params=[p for p in files_command.params if p.name != "mode"], help=summary,
                                   callback=lambda **options: files_command.callback(mode=mode, **options)))


_with_mode("compress", "compress", "Compress FILEs to FILE.shz (standard input with none, or -): `shazip FILE...`, "
           "with the same options.")
_with_mode("decompress", "decompress", "Decompress FILE.shz to FILE (standard input with none, or -): "
           "`shazip -d FILE...`, with the same options.")


def _worse(a: int, b: int) -> int:
    """The worse of two exit statuses, as gzip ranks them: an error (1) over a warning (2, an
    input skipped) over success (0)."""
    return max(a, b, key=lambda code: (code != 0, code != Skipped.exit_code))


def _named(file: str) -> str:
    """How a file is named on the progress line."""
    return "standard input" if file == "-" else shown(file)


def _naming(file: str, message: str) -> str:
    """A failure's message, led by the file it concerns unless it names it (or its output,
    whose name is the input's with the suffix added or taken off) already."""
    name = "standard input" if file == "-" else file
    first = message.split(": ", 1)[0]
    return message if ": " in message and (first.startswith(name) or name.startswith(first)) else f"{name}: {message}"


def _removing(keep: bool, remove: bool) -> bool:
    """--rm, unless -k contradicts it (then nothing is removed, and the user is told)."""
    if keep and remove:
        raise UsageError("-k (keep the input) and --rm (remove it) contradict each other")
    return remove


def _summary(src: str, dest: str | None, compressed: bool) -> str:
    """`-v`: what became of a file, e.g. "425,000 -> 80,000 bytes (1.506 bits/byte), a.txt.shz"."""
    if dest is None:
        return "done (to standard output)"
    a, b = os.path.getsize(src), os.path.getsize(dest)
    plain, packed = (a, b) if compressed else (b, a)
    rate = f" ({8 * packed / plain:.3f} bits/byte)" if plain else ""
    return f"{a:,} -> {_count(b, 'byte')}{rate}, {shown(dest)}"


def _strip_suffix(src: str, suffix: str = SUFFIX) -> str:
    if not src.endswith(suffix) or os.path.basename(src) == suffix:
        raise UsageError(f"{src}: unknown suffix (expected {suffix}; use -o to name the output)")
    return src[: -len(suffix)]


class _Discard(io.RawIOBase):
    """Where --test writes: nowhere (every block is still decoded and checked)."""

    def writable(self) -> bool:
        return True

    def write(self, b) -> int:
        return len(b)


def decompress_file(file: str, dest: str | None, force: bool, remove: bool, bar: bool | None, model: str | None,
                    threads: int, device: str = "cpu", test: bool = False, recover: bool = False) -> None:
    """FILE.shz ("-": standard input) to dest (None: standard output); with `test`, decode and
    verify every block, write nothing; with `recover`, write every intact frame of a damaged
    archive, then report each range lost (and exit 1), the input kept."""
    if file == "-" and standard("stdin").isatty():
        raise FileTrouble("refusing to read compressed data from a terminal (give a file or redirect)")
    if recover and file == "-":
        raise UsageError("--recover reads a file (it searches it for the frames after a damaged one), not a stream")
    from .codec.decode import decompress_stream
    from .codec.recover import recover_stream
    from .modelfile import load_model
    loaded = load_model(model) if model else None
    out = contextlib.nullcontext(_Discard()) if test else output(dest, force, None if file == "-" else file)
    lost = []
    with input_file(file, force) as src, out as dst:
        before = _identity(file, src)
        progress = ProgressBar(declared_size(src), _named(file), bar)
        try:
            if recover:
                lost = recover_stream(src, dst, loaded, progress=progress, threads=threads, device=device)
            else:
                decompress_stream(src, dst, loaded, progress=progress, threads=threads, device=device)
        except ArchiveError as e:  # name the user's file: "f.shz: archive is truncated"
            raise type(e)(f"{'standard input' if file == '-' else file}: {e}") from None
        progress.close()
    _unchanged(file, before, None)
    for i, x in enumerate(lost):  # the output is complete with what could be saved
        line = (f"{file}: lost archive bytes {x.start}-{x.end} (output from byte {x.output_at} on is missing data "
                f"there): {x.reason}")
        if i + 1 < len(lost):
            click.echo(f"shazip: {shown(line)}", err=True)
        else:
            raise CorruptArchive(line)
    if remove and file != "-" and dest is not None and not test:
        os.unlink(file)


@main.command()
@click.argument("file")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def info(file: str, as_json: bool) -> None:
    """Print an archive's header and block table (as -l). Of each archive, for a concatenation
    of them; --json: one object, or a list of them."""
    run_command(lambda: _list(file, as_json))


def _list(file: str, as_json: bool, several: bool = False) -> None:
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


class _Table:
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
    from .modelfile import BUNDLED_DIR, installed, installed_names
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
    from .stage.adaptive import AdaptiveParams
    methods = {b["method"] for b in d["blocks"]}
    if "model" in methods or "mixed" not in methods:
        return "model" in methods
    try:
        return AdaptiveParams.unpack(bytes.fromhex(d["adapt_params"]), d["adapt_version"]).nn
    except (ShazipError, KeyError):  # parameters this shazip does not know: assume the model runs
        return True


def _count(n: int, unit: str) -> str:
    """"1 byte", "2,048 bytes"."""
    return f"{n:,} {unit}{'' if n == 1 else 's'}"


def _stage_models(d: dict) -> str:
    """", the models of level -6" where a level's stage has the archive's models."""
    from .stage.adaptive import AdaptiveParams
    from .codec.encode import levels_of
    try:
        levels = levels_of(AdaptiveParams.unpack(bytes.fromhex(d["adapt_params"]), d["adapt_version"]))
    except ShazipError:  # parameters no level of this shazip writes (the listing shows them)
        return ""
    return f", the models of level{'s' * (len(levels) > 1)} {' / '.join(f'-{n}' for n in levels)}" if levels else ""


def _list_one(d: dict) -> None:
    from .codec.engines import BY_ID
    click.echo(f"format version {d['format_version']}, engine {d['engine']} "
               f"({BY_ID[d['engine']].description if d['engine'] in BY_ID else 'unknown'}) v{d['engine_version']}"
               + (f", {_count(d['threads'], 'thread')}" if d["threads"] else "")
               + (f", adaptive stage v{d['adapt_version']}{_stage_models(d)} (parameters {d['adapt_params']})"
                  if d["adapt_version"] else ", no adaptive stage"))
    click.echo(f"model {_model_of(d)[1]}")
    ratio = 8 * d["archive_bytes"] / d["total_len"] if d["total_len"] else 0.0
    click.echo(f"original {_count(d['total_len'], 'byte')}, archive {_count(d['archive_bytes'], 'byte')} "
               f"({ratio:.3f} bits/byte)")
    click.echo(f"block size {d['block_size']:,}, lanes {d['lanes']}, {_count(d['n_blocks'], 'block')}")
    for b in d["blocks"]:
        click.echo(f"  block {b['index']}: {b['method']:5s} lanes {b['lanes']:4d} "
                   f"{b['orig_len']:10d} -> {b['payload_len']:10d}")
    if d["skipped_bytes"]:
        click.echo(f"then {d['skipped_bytes']} bytes of skippable frames (the seek table of a framed file)")


@main.command()
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
    from .modelfile import BUNDLED_DIR, bundle_model, installed, user_models_dir
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
                     f"{b['decompress_KBps']} KB/s ({_count(b['threads'], 'thread')}, {b['lanes'] or 'auto'} lanes, {b['cpu']}, "
                     f"{b['date'][:10]})")
    return lines



if __name__ == "__main__":
    main()
