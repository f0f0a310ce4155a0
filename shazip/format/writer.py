"""Writing an archive: its header, blocks and trailer as container.py lays them out, checked by
the same bounds the reader applies (`block_problem`), so that no archive written is one the
reader refuses."""

from __future__ import annotations

import zlib
from dataclasses import replace
from typing import BinaryIO

from .container import BlockHeader, Method, Trailer, block_problem
from .header import COMPACT, Header, Solo, chained


def _solo_of(bh: BlockHeader) -> Solo:
    """The fields of an archive's only block, as its header holds them."""
    return Solo(bh.method, bh.lanes, bh.orig_len, bh.payload_len, bh.data_crc)



class ArchiveWriter:
    """Writes the header, then add_block(...) appends, and finish() writes the trailer.

    Never seeks or buffers whole archives, so dst may be a pipe. dst.write must write everything
    it is given (true of buffered binary streams such as sys.stdout.buffer and open(..., "wb")).
    In formats 3 and 4 the header and the first block wait until a second block or finish()
    shows whether the archive has one block (then framed in the header) or several.
    """

    def __init__(self, dst: BinaryIO, header: Header) -> None:
        self.header = header
        self.bytes_written = 0
        self._dst = dst
        self._n_blocks = 0
        self._total_len = 0
        self._finished = False
        self._held: tuple[BlockHeader, bytes] | None = None  # formats 3, 4: the first block, not yet written
        self._compact, self._chained = header.format_version in COMPACT, chained(header.format_version)
        self._chain = 0  # format 4: the crc the next record's starts from
        if not self._compact:
            self._write(header.pack())

    def _write(self, data: bytes) -> None:
        self._dst.write(data)
        self.bytes_written += len(data)

    def _unstaged(self) -> None:
        """Format 4, an archive whose only block is stored (raw, zstd) or that has none: no
        stage codes anything, so the header records none (a small file pays 8 bytes less)."""
        if self._chained:
            self.header = replace(self.header, adapt_version=0, adapt_params=b"")

    def _record(self, packed: bytes) -> None:
        """Writes a header, block header or trailer; in format 4 its crc seeds the next one's."""
        self._write(packed)
        if self._chained:
            self._chain = int.from_bytes(packed[-4:], "little")  # the record's crc, its last 4 bytes

    def add_block(self, method: Method, lanes: int, original: bytes, payload: bytes) -> None:
        """Append one block; index and data_crc are derived here, never trusted from callers."""
        if self._finished:
            raise ValueError("cannot add a block after finish()")
        if self._n_blocks >= 1 << 32:
            raise ValueError("too many blocks for a u32 index")
        method = Method(method)
        problem = block_problem(
            self._n_blocks, self.header,
            self._n_blocks, method, lanes, len(original), len(payload),
        )
        if problem:
            raise ValueError(problem)
        if method is Method.RAW and payload != original:
            raise ValueError(f"block {self._n_blocks}: raw payload differs from original")
        bh = BlockHeader(
            index=self._n_blocks, method=method, lanes=lanes, orig_len=len(original),
            payload_len=len(payload), data_crc=zlib.crc32(original),
        )
        if self._compact and self._n_blocks == 0:
            self._held = bh, payload
        else:
            self._release()
            self._record(bh.pack(self._chain))
            self._write(payload)
        self._n_blocks += 1
        self._total_len += len(original)

    def _release(self, solo: bool = False, more: bool = False) -> None:
        """Formats 3, 4: the held first block, after the header that now can be written: holding
        that block (`solo`, the archive's only block, and `more`) or followed by it (several
        blocks)."""
        if self._held is not None:
            bh, payload = self._held
            self._held = None
            if solo and bh.method in (Method.RAW, Method.ZSTD):
                self._unstaged()
            self._record(self.header.pack(solo=_solo_of(bh) if solo else None, more=more))
            if not solo:
                self._record(bh.pack(self._chain))
            self._write(payload)

    def finish(self, more: bool = False) -> Trailer:
        """Write the trailer (or, for a format 3/4 archive of one block, the header holding it);
        until then the archive is incomplete (and reads as Truncated). `more` (format 4, an
        archive of one or more blocks): it is a frame that more frames of its output follow."""
        if self._finished:
            raise ValueError("finish() called twice")
        if more and not (self._chained and self._n_blocks):
            raise ValueError("only a format 4 archive of one or more blocks is followed by more frames")
        self._finished = True
        trailer = Trailer(n_blocks=self._n_blocks, total_len=self._total_len, more=more)
        if self._compact and self._n_blocks == 1:
            self._release(solo=True, more=more)
            return trailer
        if self._n_blocks == 0 and self._chained:
            self._unstaged()
            self._record(self.header.pack(empty=True))
            return trailer
        if self._compact and self._n_blocks == 0:
            self._record(self.header.pack())
        self._release()
        self._record(trailer.pack(self._chain))
        return trailer
