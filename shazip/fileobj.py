"""`shazip.open`: archives as file objects, in the shape of `lzma.open` and `gzip.open`.

    with shazip.open("notes.txt.shz", "wt") as f:
        f.write("hello\n")
    with shazip.open("notes.txt.shz", "rt") as f:
        print(f.read())

Reading decodes one block at a time (memory bounded by the block size) and verifies each
before its bytes are returned; a file of several archives one after the other (frames, `cat
a.shz b.shz`, or appends: mode "a") reads as the concatenation of their contents, as with
gzip. Writing codes a block each time `block_size` bytes have come. `tarfile` reads and writes them in its stream modes ("r|", "w|"), and `shutil.copyfileobj`
copies through them.

A reader over a seekable file is seekable, as `gzip.GzipFile` and `lzma.LZMAFile` are, so
`tarfile`'s random-access mode ("r:") works too; but it is emulated, and can be slow: the
adaptive stage carries what it learnt from block to block, so no block decodes on its own, only
a frame (an archive) from its start. A seek finds the frame that holds the position from the
seek table at the end of a framed file, or else from the archives' structure (read once,
nothing decoded), decodes from that frame's start unless the position lies ahead in the frame
in hand, and discards up to the position. The size (a seek from the end) comes from the same
index. Writers are not seekable; their `tell()` counts the bytes written, as gzip's does.
"""

from __future__ import annotations

import bisect
import builtins
import io
import os
from typing import BinaryIO, Iterator

from .codec.decode import clear_frames, iter_decompress
from .codec.encode import Compressor, ShazipCompressor
from .codec.frames import hand_back
from .format.frames import Frame, scan
from .errors import ShazipError
from .format.container import Place
from .model.file import LoadedModel


class ShazipFile(io.BufferedIOBase):
    """An archive opened for reading ("rb") or writing ("wb", "xb"; "ab" writes a new archive
    after those the file holds), over a file name or a binary file object. Closing a writer ends
    the archive; closing the file object it was given is left to the caller, as
    `gzip.GzipFile` does."""

    def __init__(self, file: str | bytes | os.PathLike | BinaryIO, mode: str = "rb", *,
                 model: str | LoadedModel | None = None, threads: int = 0, compressor: Compressor | None = None,
                 **options) -> None:
        mode = mode.replace("b", "")
        if mode not in ("r", "w", "x", "a"):
            raise ValueError(f"invalid mode {mode!r}")
        if mode == "r" and (compressor is not None or options):
            raise TypeError("compression options given to a reader")
        if mode != "r" and compressor is None:  # the options are checked (and the model read) before the
            compressor = Compressor(model, threads=threads, **options)  # file is touched
        if isinstance(file, (str, bytes, os.PathLike)):
            self._fp, self._own = builtins.open(file, mode + "b"), True
        elif not hasattr(file, "read" if mode == "r" else "write"):  # as lzma.open: not later, at the first read
            raise TypeError("file must be a str, bytes or PathLike name, or a file object, "
                            f"not {type(file).__name__!r}")
        else:
            self._fp, self._own = file, False
        self._mode = mode
        if mode == "r":
            self._model, self._threads = model, threads
            try:  # where the archive starts, to decode it again after a seek backwards (None: cannot seek)
                self._start: int | None = self._fp.tell() if self._fp.seekable() else None
            except (AttributeError, OSError):  # an object with only read() is a stream, as before
                self._start = None
            self._index: list[tuple[Frame, int]] = []  # the frames proven so far, for seeking (`_proven`)
            self._scan: Iterator[Frame] | None = None  # the scan that proves them, and where it stands
            self._scan_at, self._scan_error = self._start, None
            self._begin()
        else:
            self._writer: ShazipCompressor | None = compressor.compressobj()
            self._written = 0

    # -- reading
    def readable(self) -> bool:
        return self._mode == "r"

    def _begin(self, at: int = 0, place: Place | None = None) -> None:
        """Starts decoding at an archive's first block (the file being positioned there), `at`
        bytes into the decoded data, the archive being the frame at `place` of its output (None:
        an output's start): `_buf` is the block in hand, `_at` its offset in the decoded data,
        `_pos` the position in it."""
        self._blocks: Iterator[bytes] = iter_decompress(self._fp, self._model, None, self._threads, resume=place)
        self._buf, self._pos, self._at = b"", 0, at
        self._error: ShazipError | None = None  # raised again by every read until a seek starts afresh

    def _proven(self, upto: int | None) -> list[tuple[Frame, int]]:
        """The frames, each with its offset in the decoded data, proven (frames.scan: every
        checksum, each frame's place and link to the one before) from the archive's start until
        one holds decoded offset `upto` (None: all of them). A seek decodes a frame alone, so
        the frames before it must be proven as a stream would prove them; those after are not
        read. The file is left where decoding needs it; a scan that failed fails again."""
        if self._scan is None:
            self._scan = scan(self._fp, self._start)
        while self._scan_error is None and self._scan_at is not None and (upto is None or self._proven_end() <= upto):
            where = self._fp.tell()
            self._fp.seek(self._scan_at)
            try:
                frame = next(self._scan, None)
            except ShazipError as e:
                self._scan_error = e
                frame = None
            finally:
                self._scan_at = self._fp.tell() if self._scan_error is None else None
                self._fp.seek(where)
            if frame is None:
                self._scan_at = None
            else:
                self._index.append((frame, self._proven_end()))
        if self._scan_error is not None:
            raise self._scan_error
        return self._index

    def _proven_end(self) -> int:
        """Where the decoded data of the frames proven so far ends."""
        return self._index[-1][1] + self._index[-1][0].decoded if self._index else 0

    def _fill(self) -> bool:
        """Decodes the next block into the buffer; False at the end of the archive. A damaged
        archive's error is raised again by every later read: it never ends as a clean EOF."""
        if self._error is not None:
            raise self._error
        try:
            for block in self._blocks:
                if block:
                    self._at += len(self._buf)
                    self._buf, self._pos = block, 0
                    return True
        except ShazipError as e:
            self._error = e
            clear_frames(e)
            hand_back()
            raise
        return False

    def read(self, size: int | None = -1) -> bytes:
        self._check("r")
        if size is None or size < 0:
            parts = [self._buf[self._pos:]]
            while self._fill():
                parts.append(self._buf)
            self._pos = len(self._buf)
            return b"".join(parts)
        parts = []  # `size` bytes unless the archive ends first, across blocks (tarfile's "r:" relies on it)
        while size > 0 and (part := self.read1(size)):
            parts.append(part)
            size -= len(part)
        return b"".join(parts)

    def read1(self, size: int = -1) -> bytes:
        self._check("r")
        if self._pos >= len(self._buf) and not self._fill():
            return b""
        end = len(self._buf) if size is None or size < 0 else self._pos + size
        out = self._buf[self._pos:end]
        self._pos += len(out)
        return out

    def readinto(self, b) -> int:
        data = self.read(len(b))
        b[:len(data)] = data
        return len(data)

    def seekable(self) -> bool:
        return self._mode == "r" and self._start is not None

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        """Moves to a position in the decoded data (emulated: see the module's note on cost).
        A position past the end stops at the end, as in `gzip` and `lzma`."""
        self._check_open()
        if not self.seekable():
            raise io.UnsupportedOperation("seek needs a reader over a seekable file")
        if whence == io.SEEK_CUR:
            offset += self.tell()
        elif whence == io.SEEK_END:
            offset += sum(f.decoded for f, _ in self._proven(None))
        elif whence != io.SEEK_SET:
            raise ValueError(f"invalid whence ({whence}, should be 0, 1 or 2)")
        if offset < 0:
            raise ValueError(f"negative seek position {offset}")
        if not self._at <= offset <= self._at + len(self._buf):  # not in the block in hand
            frames = self._proven(offset)
            k = max(bisect.bisect_right([start for _, start in frames], offset) - 1, 0)
            frame, start = frames[k]
            if offset < self._at or start > self._at + len(self._buf):  # behind, or frames ahead: jump there
                self._blocks.close()
                self._fp.seek(frame.start)
                self._begin(start, frame.place)
        while offset > self._at + len(self._buf) and self._fill():
            pass
        self._pos = min(offset - self._at, len(self._buf))
        return self.tell()

    def tell(self) -> int:
        """The position in the decoded data (reading) or the bytes written so far (writing)."""
        self._check_open()
        return self._at + self._pos if self._mode == "r" else self._written

    # -- writing
    def writable(self) -> bool:
        return self._mode != "r"

    def write(self, data) -> int:
        self._check("w")
        data = bytes(data)
        self._fp.write(self._writer.compress(data))
        self._written += len(data)
        return len(data)

    # -- both
    def _check_open(self) -> None:
        if self.closed:
            raise ValueError("I/O operation on closed file")

    def _check(self, kind: str) -> None:
        self._check_open()
        if (kind == "r") != (self._mode == "r"):
            raise io.UnsupportedOperation(f"not open for {'reading' if kind == 'r' else 'writing'}")

    def close(self) -> None:
        if self.closed:
            return
        try:
            if self._mode != "r" and self._writer is not None:
                self._fp.write(self._writer.flush())
                self._writer = None
            elif self._mode == "r":
                self._blocks.close()  # the frame in hand's stage, freed now rather than when the object goes
        finally:
            try:
                if self._own:
                    self._fp.close()
            finally:
                super().close()


def open(file: str | bytes | os.PathLike | BinaryIO, mode: str = "rb", *, encoding: str | None = None,
         errors: str | None = None, newline: str | None = None, **options) -> ShazipFile | io.TextIOWrapper:
    """A shazip archive as a binary ("rb", "wb", "xb", "ab") or text ("rt", "wt", "xt", "at")
    file object. Keyword options: `model`, `threads`, and for writing those of `Compressor` (`lanes`,
    `block_size`, `adapt`, ...) or a ready `compressor`."""
    if "t" in mode:
        if "b" in mode:
            raise ValueError(f"invalid mode {mode!r}")
        return io.TextIOWrapper(ShazipFile(file, mode.replace("t", ""), **options), encoding, errors, newline)
    if encoding is not None or errors is not None or newline is not None:
        raise ValueError("encoding, errors and newline are for text modes")
    return ShazipFile(file, mode, **options)
