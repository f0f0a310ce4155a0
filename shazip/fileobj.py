"""`shazip.open`: archives as file objects, in the shape of `lzma.open` and `gzip.open`.

    with shazip.open("notes.txt.shz", "wt") as f:
        f.write("hello\n")
    with shazip.open("notes.txt.shz", "rt") as f:
        print(f.read())

Reading decodes one block at a time (memory bounded by the block size) and verifies each
before its bytes are returned; writing codes a block each time `block_size` bytes have come.
The file objects are streams (not seekable): `tarfile` reads and writes them in its stream
modes ("r|", "w|"), and `shutil.copyfileobj` copies through them.
"""

from __future__ import annotations

import builtins
import io
import os
from typing import BinaryIO, Iterator

from .api import Compressor, ShazipCompressor, iter_decompress
from .modelfile import LoadedModel


class ShazipFile(io.BufferedIOBase):
    """An archive opened for reading ("rb") or writing ("wb", "xb"), over a file name or a
    binary file object. Closing a writer ends the archive; closing the file object it was
    given is left to the caller, as `gzip.GzipFile` does."""

    def __init__(self, file: str | bytes | os.PathLike | BinaryIO, mode: str = "rb", *,
                 model: str | LoadedModel | None = None, threads: int = 0, compressor: Compressor | None = None,
                 **options) -> None:
        mode = mode.replace("b", "")
        if mode not in ("r", "w", "x"):
            raise ValueError(f"invalid mode {mode!r}")
        if isinstance(file, (str, bytes, os.PathLike)):
            self._fp, self._own = builtins.open(file, mode + "b"), True
        else:
            self._fp, self._own = file, False
        self._mode = mode
        if mode == "r":
            if compressor is not None or options:
                raise TypeError("compression options given to a reader")
            self._blocks: Iterator[bytes] | None = iter_decompress(self._fp, model, None, threads)
            self._buf, self._pos = b"", 0
        else:
            if compressor is None:
                compressor = Compressor(model or "default", threads=threads, **options)
            self._writer: ShazipCompressor | None = compressor.compressobj()

    # -- reading
    def readable(self) -> bool:
        return self._mode == "r"

    def _fill(self) -> bool:
        """Decodes the next block into the buffer; False at the end of the archive."""
        for block in self._blocks:
            if block:
                self._buf, self._pos = block, 0
                return True
        return False

    def read(self, size: int | None = -1) -> bytes:
        self._check("r")
        if size is None or size < 0:
            parts = [self._buf[self._pos:]]
            while self._fill():
                parts.append(self._buf)
            self._buf, self._pos = b"", 0
            return b"".join(parts)
        return self.read1(size) if size else b""

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

    # -- writing
    def writable(self) -> bool:
        return self._mode != "r"

    def write(self, data) -> int:
        self._check("w")
        data = bytes(data)
        self._fp.write(self._writer.compress(data))
        return len(data)

    # -- both
    def _check(self, kind: str) -> None:
        if self.closed:
            raise ValueError("I/O operation on closed file")
        if (kind == "r") != (self._mode == "r"):
            raise io.UnsupportedOperation(f"not open for {'reading' if kind == 'r' else 'writing'}")

    def close(self) -> None:
        if self.closed:
            return
        try:
            if self._mode != "r" and self._writer is not None:
                self._fp.write(self._writer.flush())
                self._writer = None
        finally:
            try:
                if self._own:
                    self._fp.close()
            finally:
                super().close()


def open(file: str | bytes | os.PathLike | BinaryIO, mode: str = "rb", *, encoding: str | None = None,
         errors: str | None = None, newline: str | None = None, **options) -> ShazipFile | io.TextIOWrapper:
    """A shazip archive as a binary ("rb", "wb", "xb") or text ("rt", "wt", "xt") file
    object. Keyword options: `model`, `threads`, and for writing those of `Compressor` (`lanes`,
    `block_size`, `adapt`, ...) or a ready `compressor`."""
    if "t" in mode:
        if "b" in mode:
            raise ValueError(f"invalid mode {mode!r}")
        return io.TextIOWrapper(ShazipFile(file, mode.replace("t", ""), **options), encoding, errors, newline)
    if encoding is not None or errors is not None or newline is not None:
        raise ValueError("encoding, errors and newline are for text modes")
    return ShazipFile(file, mode, **options)
