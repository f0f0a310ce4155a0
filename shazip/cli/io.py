"""The command line's input and output: input files, outputs written to a temporary file and
renamed into place only when whole (`output`), writes that name their output when they fail
(`Sink`), the progress bar, names fit for a terminal, and the signals that end a run (cleanup as
for Ctrl-C; `run_command` turns every expected failure into one line and an exit status)."""

from __future__ import annotations

import contextlib
import errno
import os
import re
import select
import signal
import stat
import sys
import time
from pathlib import Path
from typing import BinaryIO, Callable, Iterator

import click

from ..errors import FileTrouble, OutputExists, ShazipError, Skipped
from ..publish import publish


class Terminated(BaseException):
    """Raised from the handler of a signal that ends the run (SIGTERM, SIGHUP, SIGQUIT), so
    cleanup (the temporary output) runs as for Ctrl-C; the exit status is 128 + the signal."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


_held: list[int] | None = None  # signals that arrived while held (None: not holding)


def _ending(signum: int) -> BaseException:
    return KeyboardInterrupt() if signum == signal.SIGINT else Terminated(signum)


def _on_signal(signum: int, _frame) -> None:
    if _held is not None:
        _held.append(signum)
        return
    raise _ending(signum)


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """An ending signal that arrives within is raised (Terminated, KeyboardInterrupt) as the block
    ends, not inside it: between a temporary file's creation and the assignment of its name, where
    nothing could remove it. Held in Python, not by the thread's signal mask: a signal that another
    thread receives still runs its handler here, on the main thread."""
    global _held
    _held = []
    try:
        yield
    finally:
        held, _held = _held, None
        if held:
            raise _ending(held[0])


ENDING_SIGNALS = tuple(getattr(signal, n) for n in ("SIGTERM", "SIGHUP", "SIGQUIT") if hasattr(signal, n))


class ProgressBar:
    """`NAME  MB done  KB/s  bits/byte`, with a known total also `%` and `ETA`, on stderr, redrawn
    at most 5 times a second. The rate and ETA wait for the first second: the model's load and the
    first block's start would make them wild. `show`: True always, False never, None where stderr
    is a terminal. `ratio` (compression): bits/byte of the output so far, from the bits coding
    reports with each count (codec.block.Progress, exact at each block's end), shown with the
    rate. It is what was written, not a forecast: a frame's first bytes cost most (the stage
    and every lane start cold), so on a file that reads alike throughout it falls towards the
    final figure."""

    def __init__(self, total: int | None, name: str, show: bool | None, ratio: bool = False) -> None:
        self.total, self.done, self.bits, self.ratio = total, 0, 0.0, ratio
        self.enabled = sys.stderr.isatty() if show is None else show
        self.name = name if len(name) <= 32 else "..." + name[-29:]
        self.t0 = self.last = time.time()
        self.width = 0  # the longest line drawn: a shorter one is padded over it

    def __call__(self, n: int, bits: float = 0.0) -> None:
        self.done += n
        self.bits += bits
        now = time.time()
        if self.enabled and now - self.last >= 0.2:
            self.last = now
            line = f"\r{self.name}  {self.done / 1e6:8.2f} MB"
            if self.total:
                line += f"  {100 * self.done / self.total:5.1f}%"
            if now - self.t0 >= 1:
                rate = self.done / (now - self.t0)
                line += f"  {rate / 1e3:7.1f} KB/s"
                if self.total:
                    eta = max(self.total - self.done, 0) / max(rate, 1e-9)  # a forged trailer may undercount
                    line += f"  ETA {int(eta) // 60}:{int(eta) % 60:02d}"
                if self.ratio and self.done:
                    line += f"  {self.bits / self.done:.3f} bits/byte"
            self.width = max(self.width, len(line))
            sys.stderr.write(line.ljust(self.width))
            sys.stderr.flush()

    def expect(self, total: int) -> None:
        """The bytes to come, once the decoder has found them (the frames' recorded sizes,
        nothing decoded): `decompress_stream` tells a progress that takes them."""
        self.total = total

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\r" + " " * max(self.width, 60) + "\r")
            sys.stderr.flush()


def show_bar(quiet: bool, progress: bool | None) -> bool | None:
    """--progress / --no-progress say; else -q hides the bar, and it shows where stderr is a terminal."""
    return progress if progress is not None else (False if quiet else None)


def shown(name: str) -> str:
    """A name (a file's, or one an archive records) as text fit for a terminal, as `ls -b`
    shows it: bytes that are not UTF-8 (which Python keeps as lone surrogates) and control
    characters as \\xNN escapes (a newline would forge a line of its own, an escape sequence
    command the terminal), and the marks that reorder text (bidi overrides) as \\uNNNN."""
    text = name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return _UNSHOWN.sub(lambda m: f"\\x{ord(m[0]):02x}" if ord(m[0]) < 0x100 else f"\\u{ord(m[0]):04x}", text)


_UNSHOWN = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def count(n: int, unit: str) -> str:
    """"1 byte", "2,048 bytes"."""
    return f"{n:,} {unit}{'' if n == 1 else 's'}"


def standard(name: str) -> BinaryIO:
    """sys.stdin's or sys.stdout's binary stream; Python sets them to None where the process
    was started with that descriptor closed (`shazip -c f >&-`)."""
    stream = getattr(sys, name)
    if stream is None:
        raise FileTrouble(f"standard {'input' if name == 'stdin' else 'output'} is closed")
    return stream.buffer


@contextlib.contextmanager
def input_file(path: str, force: bool = False) -> Iterator[BinaryIO]:
    """The input file (standard input for "-"). What is not a regular file (a FIFO, a device,
    a socket) is refused unless `force`, as gzip skips it: a FIFO would block and /dev/zero
    never end."""
    if path == "-":
        yield standard("stdin")
        return
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):  # as gzip: a warning, and the other inputs go on (-r over a tree)
            raise Skipped(f"{path}: a symbolic link to nothing ({os.readlink(path)}), skipped") from None
        raise FileTrouble(f"{path}: no such file") from None
    except OSError as e:
        raise FileTrouble(f"{path}: cannot read ({e.strerror})") from None
    if stat.S_ISDIR(st.st_mode):
        raise Skipped(f"{path}: is a directory -- ignored (-r goes into it)")
    if not stat.S_ISREG(st.st_mode) and not force:
        raise Skipped(f"{path}: not a regular file, skipped (-f reads it)")
    try:
        f = open(path, "rb")
    except OSError as e:
        raise FileTrouble(f"{path}: cannot read ({e.strerror})") from None
    with f:
        yield f


class Sink:
    """Where an output's bytes go: every write is whole (a raw standard output, under
    PYTHONUNBUFFERED=1, may take part of what it is given, and the rest would be lost), and a
    failure (disk full, a file size limit, a closed pipe's reader gone) names the output, never
    a temporary file."""

    def __init__(self, f: BinaryIO, name: str) -> None:
        self._f, self._name = f, name

    def write(self, data) -> int:
        view = memoryview(data).cast("B")
        try:
            while view:
                n = self._f.write(view)
                if n is None:  # a non-blocking descriptor that is full: wait until it takes more
                    select.select([], [self._f], [])
                    n = 0
                view = view[n:]
        except BrokenPipeError:
            raise
        except OSError as e:
            raise FileTrouble(f"{self._name}: cannot write ({e.strerror or e})") from None
        return len(data)

    def flush(self) -> None:
        try:
            self._f.flush()
        except BrokenPipeError:
            raise
        except OSError as e:
            raise FileTrouble(f"{self._name}: cannot write ({e.strerror or e})") from None


@contextlib.contextmanager
def output(path: str | None, force: bool, like: str | None = None) -> Iterator[Sink]:
    """stdout if path is None; else a temporary file that becomes `path` only if the body
    succeeds, and only if nothing is at `path` then (another run, a file made meanwhile, a
    dangling symlink) unless `force`. With `like` (the input file), the output gets its
    permission bits (never wider) and its access and modification times, as gzip, xz and zstd
    do; else the usual 0666 less umask. Errors name `path`, never the temporary file."""
    if path is None:
        sink = Sink(standard("stdout"), "standard output")
        yield sink
        sink.flush()
        return
    dest = Path(path)
    if dest.is_dir():
        raise FileTrouble(f"{path}: is a directory")
    if os.path.lexists(dest) and not force:
        raise OutputExists(f"{path}: already exists (use -f to overwrite)")
    src = os.stat(like) if like is not None else None
    leftovers(dest, force)
    tmp = None
    try:
        with signals_held():
            try:
                fd, tmp = temporary(dest)
            except OSError as e:
                raise FileTrouble(f"{path}: cannot write ({e.strerror})") from None
        with os.fdopen(fd, "wb") as f:
            if src is not None:
                mode = src.st_mode & 0o777
            else:
                umask = os.umask(0)
                os.umask(umask)
                mode = 0o666 & ~umask
            os.fchmod(f.fileno(), mode)  # mkstemp makes 0600
            sink = Sink(f, path)
            yield sink
            sink.flush()
            try:
                os.fsync(f.fileno())
            except OSError as e:
                raise FileTrouble(f"{path}: cannot write ({e.strerror})") from None
            if src is not None:
                os.utime(f.fileno(), ns=(src.st_atime_ns, src.st_mtime_ns))
        try:
            publish(tmp, path, replace=force)
        except FileExistsError:
            raise OutputExists(f"{path}: already exists (made while this ran; use -f to overwrite)") from None
        except OSError as e:
            raise FileTrouble(f"{path}: cannot write ({e.strerror})") from None
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)


def temporary_name(dest: Path, pid: int) -> Path:
    """Where the run of process `pid` writes `dest` until it is complete: NAME.PID.tmp beside it."""
    return dest.with_name(f"{dest.name}.{pid}.tmp")


def temporary(dest: Path) -> tuple[int, str]:
    """Creates this process's temporary file for `dest` (mode 0600, never an existing file: one
    of that name is a leftover of an ended run whose process id this one now has)."""
    tmp = temporary_name(dest, os.getpid())
    for _ in range(2):
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600), str(tmp)
        except FileExistsError:
            tmp.unlink(missing_ok=True)
    raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(tmp))


def leftovers(dest: Path, force: bool) -> None:
    """Says which temporary files of `dest` were left by runs that ended without cleaning up
    (SIGKILL, a power cut: their process is gone); -f removes them."""
    pattern = re.compile(re.escape(dest.name) + r"\.([0-9]+)\.tmp")
    try:
        names = os.listdir(dest.parent or ".")
    except OSError:
        return
    for name in names:
        m = pattern.fullmatch(name)
        if not m or int(m.group(1)) == os.getpid() or _alive(int(m.group(1))):
            continue
        left = dest.with_name(name)
        if force:
            left.unlink(missing_ok=True)
        click.echo(f"shazip: {shown(str(left))}: an unfinished output of an ended run (process {m.group(1)}), "
                   + ("removed" if force else "left in place (-f removes it)"), err=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process
        return True
    return True


def _bound_heap() -> None:
    """Frames pass through as buffers of many MB on worker threads. glibc's malloc raises its
    mmap threshold each time it frees such a buffer, after which the next ones come from the
    threads' heaps and fragment them: peak memory crept up with the input's length. A fixed
    threshold keeps big buffers mapped and returned at once. The command line owns its process;
    the library leaves malloc alone."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes
            ctypes.CDLL(None).mallopt(-3, 1 << 20)  # M_MMAP_THRESHOLD = 1 MiB
        except (OSError, AttributeError):  # not glibc
            pass


def run_command(body: Callable[[], None]) -> None:
    """Runs a command body, turning every expected failure into one line + exit code."""
    _bound_heap()
    # Ctrl-C too, where it raises KeyboardInterrupt (not where it is ignored: a background job)
    ending = ENDING_SIGNALS + ((signal.SIGINT,) if signal.getsignal(signal.SIGINT) is signal.default_int_handler else ())
    old = {n: signal.signal(n, _on_signal) for n in ending}
    try:
        body()
    except ShazipError as e:
        click.echo(f"shazip: {shown(str(e))}", err=True)
        sys.exit(e.exit_code)
    except KeyboardInterrupt:
        click.echo("shazip: interrupted", err=True)
        sys.exit(130)
    except Terminated as e:
        click.echo(f"shazip: terminated ({signal.Signals(e.signum).name})", err=True)
        sys.exit(128 + e.signum)
    except BrokenPipeError:
        sys.exit(141)
    except OSError as e:
        click.echo(f"shazip: {os_error(e)}", err=True)
        sys.exit(1)
    finally:
        for n, handler in old.items():
            signal.signal(n, handler)


def os_error(e: OSError) -> str:
    """An OSError as one line naming its file."""
    name = f"{shown(os.fsdecode(e.filename))}: " if e.filename is not None else ""
    return f"{name}{e.strerror or e}"
