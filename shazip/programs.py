"""The three programs, shazip, unshazip and shazcat, as their console scripts and `python -m
shazip` start them: the command line (shazip/cli/) imported and run inside one guard, so that Ctrl-C
while a program starts (its imports and its arguments: about its first tenth of a second) ends
as it does later, in one line with exit status 130, never a traceback."""

from __future__ import annotations

import sys


def _run(program: str, args: list[str]) -> None:
    try:
        from .cli import main
        main(args, prog_name=program)
    except KeyboardInterrupt:
        sys.stderr.write("shazip: interrupted\n")
        sys.exit(130)


def shazip() -> None:
    """`shazip ARGS`."""
    _run("shazip", sys.argv[1:])


def unshazip() -> None:
    """`unshazip FILE...`: `shazip -d FILE...`."""
    _run("unshazip", ["-d", *sys.argv[1:]])


def shazcat() -> None:
    """`shazcat FILE...`: `shazip -dc FILE...`."""
    _run("shazcat", ["-d", "-c", *sys.argv[1:]])
