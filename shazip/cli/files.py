"""The file command, gzip's habits: `shazip [OPTION]... [FILE]...` (and `shazip compress` /
`shazip decompress`, the same with the mode set) compresses, decompresses, tests or lists each
FILE in turn, here or on a Dask cluster, its options read from the table in flags.py."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import stat
import sys
from concurrent.futures import CancelledError
from dataclasses import make_dataclass
from typing import BinaryIO, Callable

import click

from ..errors import (ArchiveError, CorruptArchive, FileTrouble, InputChanged, OutputExists, ShazipError, Skipped,
                      UsageError)
from ..optional import require
from .flags import FLAGS, SUFFIX, file_options
from .info import Table, list_archives
from .io import ProgressBar, count, input_file, os_error, output, run_command, show_bar, shown, standard


def _coding(run) -> dict:
    """What the API's compress_stream takes of a run's settings (lanes 0: the automatic choice)."""
    return dict(model=run.model, level=run.level, lanes=run.lanes or None, block_size=run.block_size,
                frame_size=run.frame_size, threads=run.threads, engine=run.engine, adapt=run.adapt, device=run.device)


# One run's options, a field for each parameter of the table
Settings = make_dataclass("Settings", [(d, object) for d in dict.fromkeys(f.dest for f in FLAGS)], frozen=True,
                          namespace={"coding": _coding})


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


def compress_file(file: str, dest: str | None, force: bool, remove: bool, bar: bool | None, coding: dict) -> None:
    """FILE ("-": standard input) to dest (None: standard output). `bar`: as ProgressBar's `show`."""
    if dest is None and standard("stdout").isatty() and not force:
        raise FileTrouble("refusing to write compressed data to a terminal (use -o or redirect; -f forces)")
    from ..codec.encode import compress_stream, level_model
    from ..model.file import load_model
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


def _on_cluster(run: Settings, file: str, dest: str | None, compress: bool) -> None:
    """FILE to dest on the Dask cluster of `run.scheduler`, one task per frame: compressed with
    `run`'s coding settings (one thread a task, the int8 engine: portable across workers), else
    decompressed."""
    scheduler, force = run.scheduler, run.force
    if file == "-" or dest is None:
        raise UsageError("--scheduler reads and writes files (paths every worker sees, or URLs), not standard streams")
    if "://" not in dest and os.path.exists(dest) and not force:
        raise OutputExists(f"{dest}: already exists (use -f to overwrite)")
    Client = require("distributed", "--scheduler").Client
    from .. import distributed
    logging.disable(logging.ERROR)  # Dask's logs: its failures reach the user as shazip's one line (the CLI owns its process)
    try:
        client = Client(scheduler, timeout="5s")
    except (OSError, TimeoutError) as e:
        raise UsageError(f"cannot reach the Dask scheduler {scheduler} ({e})") from None
    with client:
        try:
            if compress:
                options = {k: v for k, v in run.coding().items() if k not in ("threads", "engine")}
                distributed.compress(file, dest, client, replace=force, **options)
            else:
                distributed.decompress(file, dest, client, model=run.model, device=run.device, replace=force)
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


class _FileCommand(click.Command):
    """The file command, whose context is the program's (`_ProgramContext`)."""

    context_class = _ProgramContext


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


@click.command(FILES, cls=_FileCommand, hidden=True)
@click.argument("files", nargs=-1)
@file_options
def files_command(files: tuple[str, ...], mode: str, output: str | None, suffix: str, **options) -> None:
    """gzip-style use: every FILE in turn; one bad file does not stop the others, and the exit
    status is the worst one."""
    run = Settings(mode=mode, output=output, suffix=suffix, **options)
    if not suffix or "/" in suffix or suffix in (".", ".."):
        raise click.BadParameter("a suffix is a non-empty file name ending, without '/'", param_hint="'-S'")
    archives_only = mode != "compress"
    inputs = _walk(files or ("-",), run.recursive,
                   (lambda f: f.endswith(suffix)) if archives_only else (lambda f: not f.endswith(suffix)))
    bar = show_bar(run.quiet, run.progress)
    table = Table() if mode == "list" and not run.verbose else None  # gzip -l's table

    def one(file: str) -> None:
        dest = None
        if mode == "list" and not run.verbose:
            table.add(file, suffix)
        elif mode == "list":
            if len(inputs) > 1 and file != inputs[0]:
                click.echo()
            list_archives(file, as_json=False, several=len(inputs) > 1)
        elif mode == "test":
            decompress_file(file, None, run.force, False, bar, run.model, run.threads, run.device, test=True)
        elif mode == "decompress":
            dest = _destination(file, output, run.to_stdout, lambda src: _strip_suffix(src, suffix))
            if run.scheduler:
                _on_cluster(run, file, dest, compress=False)
            else:
                decompress_file(file, dest, run.force, run.remove, bar, run.model, run.threads, run.device,
                                recover=run.recover)
        else:
            if file.endswith(suffix) and not run.force:
                raise Skipped(f"{file}: already has the {suffix} suffix -- unchanged (-f compresses it again)")
            dest = _destination(file, output, run.to_stdout, lambda src: src + suffix)
            if run.scheduler:
                _on_cluster(run, file, dest, compress=True)
            else:
                compress_file(file, dest, run.force, run.remove, bar, run.coding())
        if run.verbose and file != "-" and mode != "list":
            click.echo(f"{shown(file)}: " + (_summary(file, dest, mode == "compress") if mode in ("compress", "decompress")
                                      else "OK"), err=True)

    def body() -> None:
        if output is not None and len(inputs) != 1:
            raise UsageError("-o names one output: give exactly one input")
        if run.keep and run.remove:
            raise UsageError("-k (keep the input) and --rm (remove it) contradict each other")
        worst = 0
        for file in inputs:  # every failure of one file (its data, its model, the system) is its own
            try:
                one(file)
            except ShazipError as e:
                if not (run.quiet and isinstance(e, Skipped)):  # -q silences warnings, as gzip's
                    click.echo(f"shazip: {shown(_naming(file, str(e)))}", err=True)
                worst = _worse(worst, e.exit_code)
            except OSError as e:
                if isinstance(e, BrokenPipeError):
                    raise
                click.echo(f"shazip: {_naming(file, os_error(e))}", err=True)
                worst = _worse(worst, 1)
        if table is not None:
            table.close()
        if worst:
            sys.exit(worst)

    run_command(body)


def _with_mode(name: str, mode: str, summary: str) -> click.Command:
    """`shazip compress` / `shazip decompress`: the file command with its mode set, taking every
    one of its other options and any number of files."""
    return click.Command(name, params=[p for p in files_command.params if p.name != "mode"], help=summary,
                         callback=lambda **options: files_command.callback(mode=mode, **options))


compress_command = _with_mode("compress", "compress", "Compress FILEs to FILE.shz (standard input with none, or "
                              "-): `shazip FILE...`, with the same options.")
decompress_command = _with_mode("decompress", "decompress", "Decompress FILE.shz to FILE (standard input with "
                                "none, or -): `shazip -d FILE...`, with the same options.")


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


def _summary(src: str, dest: str | None, compressed: bool) -> str:
    """`-v`: what became of a file, e.g. "425,000 -> 80,000 bytes (1.506 bits/byte), a.txt.shz"."""
    if dest is None:
        return "done (to standard output)"
    a, b = os.path.getsize(src), os.path.getsize(dest)
    plain, packed = (a, b) if compressed else (b, a)
    rate = f" ({8 * packed / plain:.3f} bits/byte)" if plain else ""
    return f"{a:,} -> {count(b, 'byte')}{rate}, {shown(dest)}"


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
    from ..codec.decode import decompress_stream
    from ..codec.recover import recover_stream
    from ..model.file import load_model
    loaded = load_model(model) if model else None
    out = contextlib.nullcontext(_Discard()) if test else output(dest, force, None if file == "-" else file)
    lost = []
    with input_file(file, force) as src, out as dst:
        before = _identity(file, src)
        progress = ProgressBar(None, _named(file), bar)  # its total: decompress_stream's, from the frames it finds
        shown_bar = progress if progress.enabled else None  # unshown: not measured
        try:
            if recover:
                lost = recover_stream(src, dst, loaded, progress=shown_bar, threads=threads, device=device)
            else:
                decompress_stream(src, dst, loaded, progress=shown_bar, threads=threads, device=device)
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
