"""The `shazip` command: compress, decompress, info, models; train and bench (tools, imported
only when their command runs).

Outputs go to a temporary file beside the destination (NAME.PID.tmp) and are renamed into place
only after the whole archive was written (or every block decoded and verified); on any error,
Ctrl-C or SIGTERM the temporary file is removed and the input is left untouched. One that a
killed run left (SIGKILL, a power cut) is named by the next run for that destination. Errors are one line on
stderr with a non-zero exit code (130 after SIGINT, 128 + N after SIGTERM, SIGHUP or SIGQUIT).
"""

from __future__ import annotations

import importlib
import itertools
import os
import sys

import click

from .. import __version__
from ..errors import MissingDependency
from ..optional import require
from .files import FILES, compress_command, decompress_command, files_command
from .flags import GROUPS
from .info import info
from .models import models


class Commands(click.Group):
    """The decoder's commands are defined here; the tools' are imported when they run, so
    compressing and decompressing never load training or benchmark code, and the help lists
    them from the summaries below without loading torch."""

    # name: (module, its command, the optional packages it needs, the summary)
    LAZY = {"train": ("shazip.train.command", "train_command", ("torch",), "Train a SHA-RNN on your own text."),
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

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """A gzip-grade page: usage, what it does, every option grouped, then the commands."""
        formatter.write_usage(ctx.command_path, "[OPTION]... [FILE]...")
        formatter.write_usage(ctx.command_path, "COMMAND [ARGS]...", prefix="   or: ")
        self.format_help_text(ctx, formatter)
        files = self.commands[FILES]
        params = [*files.params, *self.params, self.get_help_option(ctx)]
        with click.Context(files, info_name=ctx.info_name, parent=ctx) as sub:
            for title, names in GROUPS.items():
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


for command in (files_command, compress_command, decompress_command, info, models):
    main.add_command(command)
