"""The command line's options, one row each: the file command (`shazip [OPTION]... [FILE]...`,
`compress`, `decompress`) takes every row, in the table's order; the tools' commands (`bench`,
`train`) take the rows they share with it by name (`flag`), so an option is declared, helped and
grouped in one place. The rows' groups are the headings of `shazip --help`, in their order."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import click

from ..options import (ADAPT_CHOICES, DEFAULT_BLOCK_SIZE, DEFAULT_LEVEL, DEVICES, ENGINE_CHOICES, FRAME_HELP,
                       LANES_HELP, LEVELS_HELP)

SUFFIX = ".shz"


@dataclass(frozen=True)
class Flag:
    """One option: its names, the parameter it sets, its heading in `shazip --help`, its help
    and the rest of click's settings."""

    names: tuple[str, ...]
    dest: str
    group: str
    help: str | None
    settings: dict[str, Any] = field(default_factory=dict)

    def params(self, **override: Any) -> list[click.Option]:
        """click's option for this row (`override`: settings a tool's command changes, e.g. a default)."""
        return [click.Option(list(self.names) + [self.dest], help=self.help, **{**self.settings, **override})]


class Levels(Flag):
    """-1 .. -9, --fast (-1) and --best (-9), as gzip, xz and zstd have them: nine options setting
    one parameter, of which the help shows the three that carry the meaning."""

    def params(self, **override: Any) -> list[click.Option]:
        out = []
        for n in range(1, 10):
            names = {1: ["-1", "--fast"], 9: ["-9", "--best"]}.get(n, [f"-{n}"])
            default = {"default": True} if n == DEFAULT_LEVEL else {}  # one default: click takes the first it meets
            out.append(click.Option(names + [self.dest], flag_value=n, hidden=n not in (1, 6, 9), **default,
                                    help={1: self.help, 6: "The default level.", 9: "The smallest, slowest level."}.get(n)))
        return out


FLAGS = (
    Flag(("-d", "--decompress"), "mode", "Operation", "Decompress.", {"flag_value": "decompress"}),
    Flag(("-z", "--compress"), "mode", "Operation", "Compress (the default).",
         {"flag_value": "compress", "default": True}),
    Flag(("-t", "--test"), "mode", "Operation", "Decode and verify; write nothing.", {"flag_value": "test"}),
    Flag(("-l", "--list"), "mode", "Operation", "One line a file (sizes, bits/byte, model, name), as gzip -l; with "
         "-v each archive's header and blocks.", {"flag_value": "list"}),
    Flag(("--recover",), "recover", "Operation", "Decompress: write every intact frame of a damaged archive, name "
         "the byte ranges lost, and exit 1.", {"is_flag": True}),
    Flag(("-c", "--stdout"), "to_stdout", "Where the output goes", "Write to standard output.", {"is_flag": True}),
    Flag(("-o", "--output"), "output", "Where the output goes", "Output file (one input only).", {"metavar": "FILE"}),
    Flag(("-k", "--keep"), "keep", "Where the output goes", "Keep the inputs (the default).", {"is_flag": True}),
    Flag(("--rm",), "remove", "Where the output goes", "Remove each input after success.", {"is_flag": True}),
    Flag(("-f", "--force"), "force", "Where the output goes",
         "Overwrite outputs; write compressed data to a terminal.", {"is_flag": True}),
    Flag(("-r", "--recursive"), "recursive", "Where the output goes", "Process the files in directories.",
         {"is_flag": True}),
    Flag(("-S", "--suffix"), "suffix", "Where the output goes", "The archives' file name suffix.",
         {"default": SUFFIX, "show_default": True, "metavar": ".SUF"}),
    Levels(("-1", "-9"), "level", "Level and model", LEVELS_HELP),
    Flag(("--model",), "model", "Level and model", "A model by name (`shazip models`) or file [compress: the "
         "level's; decompress: the one the archive names].", {"default": None, "metavar": "NAME|FILE"}),
    Flag(("--lanes",), "lanes", "Level and model", LANES_HELP, {"default": 0, "show_default": True, "metavar": "N"}),
    Flag(("--block-size",), "block_size", "Level and model", "Input bytes per block, each coded by the best of the "
         "model, zstd and storing.", {"default": DEFAULT_BLOCK_SIZE, "show_default": True, "metavar": "BYTES"}),
    Flag(("--frame-size",), "frame_size", "Level and model", FRAME_HELP,
         {"type": int, "default": None, "metavar": "BYTES"}),
    Flag(("--adapt",), "adapt", "Level and model", "cm: the adaptive stage learns the file as it is coded (the "
         "default); none: the model alone (the default with --engine float32).",
         {"type": click.Choice(ADAPT_CHOICES), "default": None}),
    Flag(("--engine",), "engine", "Level and model", "int8: integer-exact, decodes on any machine. float32: the "
         "reference; its archives decode only on this machine with the same -T.",
         {"type": click.Choice(ENGINE_CHOICES), "default": "int8", "show_default": True}),
    Flag(("-T", "--threads"), "threads", "Machine", "CPU threads: up to N frames coded at once, a frame's model "
         "beside its stage; 0: every available core.", {"default": 0, "show_default": True, "metavar": "N"}),
    Flag(("--device",), "device", "Machine", "Where the int8 engine runs: cpu (the native core), cuda (a GPU, "
         "through torch with CUDA), auto (cuda where there is one). Archives are the same bytes on every device.",
         {"type": click.Choice(DEVICES), "default": "cpu", "show_default": True}),
    Flag(("--scheduler",), "scheduler", "Machine", "A Dask scheduler (tcp://host:8786): compress or decompress each "
         "FILE as one task per frame on its workers (pip install 'shazip[dask]'). FILE and its output must be paths "
         "every worker sees, or fsspec URLs.", {"default": None, "metavar": "ADDRESS"}),
    Flag(("-q", "--quiet"), "quiet", "Messages", "No progress bar, no warnings (the exit status still says).",
         {"is_flag": True}),
    Flag(("--progress/--no-progress",), "progress", "Messages",
         "Show the progress bar even where stderr is not a terminal, or never.", {"default": None}),
    Flag(("-v", "--verbose"), "verbose", "Messages", "Say what each file became.", {"is_flag": True}),
)
BY_DEST = {f.dest: f for f in FLAGS if f.dest != "mode"}
# `shazip --help`'s headings in order, each with the parameters under it: the table's, then the
# program's own (-V, -h) under the last
GROUPS = {g: tuple(dict.fromkeys(f.dest for f in FLAGS if f.group == g)) for g in dict.fromkeys(f.group for f in FLAGS)}
GROUPS["Messages"] += ("version", "help")


def _attach(command: Callable, params: list[click.Parameter]) -> Callable:
    """`params` on the function that click's command decorator will make a command of, in this
    order where the decorator stands (click reverses what its option decorators collect)."""
    command.__dict__.setdefault("__click_params__", []).extend(reversed(params))
    return command


def file_options(command: Callable) -> Callable:
    """Every row on the file command, in the table's order."""
    return _attach(command, [p for f in FLAGS for p in f.params()])


def flag(dest: str, **override: Any) -> Callable[[Callable], Callable]:
    """The row of parameter `dest` on a tool's command, with its settings changed by `override`."""
    return lambda command: _attach(command, BY_DEST[dest].params(**override))
