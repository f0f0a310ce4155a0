"""Training corpora as one long byte sequence, memory-mapped so size does not cost RAM.

Plain files are memory-mapped in place. `.zst` files are decompressed once, streaming, into a
cache file (keyed by the source's path, size and mtime) and memory-mapped from there; a 1 GB
corpus therefore trains with the page cache, not with copies in the Python heap.

`ByteStreams` cuts the training part of the corpus into B contiguous streams read in lockstep
(truncated BPTT: stream b at step t continues where it stopped at step t-1), which is how the
SHA-RNN reference batches text; the last `valid_bytes` of the corpus are held out. On a GPU the
streams are made resident: copied to the card once, so that a batch is a slice there and a step
never waits on the host for its bytes.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..errors import UsageError
from ..optional import require


def _cache_dir() -> Path:
    base = os.environ.get("SHAZIP_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "shazip")
    return Path(base) / "corpus"


def _copy_frames(src, dst) -> bool:
    """Decompresses every zstd frame of src into dst; False if the last frame is cut short
    (zstandard's copy_stream accepts a truncated file silently, yielding a shorter corpus).
    Raises ValueError on bytes that are not zstd frames."""
    # only .zst corpora need it: a GPU machine trains on plain text without it
    zstandard = require("zstandard", "a .zst corpus")
    dctx = zstandard.ZstdDecompressor()
    dobj, pending = dctx.decompressobj(), False
    try:
        while chunk := src.read(1 << 20):
            while chunk:
                dst.write(dobj.decompress(chunk))
                pending, chunk = not dobj.eof, b""
                if dobj.eof:  # next frame, if any, starts in the unused input
                    chunk, dobj = dobj.unused_data, dctx.decompressobj()
    except zstandard.ZstdError as e:
        raise ValueError(e) from None
    return not pending


def _decompressed(path: Path) -> Path:
    st = path.stat()
    key = hashlib.sha256(f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}".encode()).hexdigest()[:24]
    out = _cache_dir() / f"{path.name}.{key}.bin"
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(f".tmp{os.getpid()}")
    try:
        with open(path, "rb") as src, open(tmp, "wb") as dst:
            complete = _copy_frames(src, dst)
        if not complete:
            raise UsageError(f"{path}: truncated zstd file (the last frame is incomplete)")
        os.replace(tmp, out)
    except ValueError as e:
        raise UsageError(f"{path}: not a valid zstd file ({e})") from None
    finally:
        tmp.unlink(missing_ok=True)
    return out


class Corpus:
    """The concatenation of several files, readable by absolute byte range."""

    def __init__(self, paths: list[str | Path]) -> None:
        if not paths:
            raise UsageError("no corpus files given")
        self.parts: list[np.ndarray] = []
        for p in map(Path, paths):
            if not p.is_file():
                raise UsageError(f"corpus file not found: {p}")
            src = _decompressed(p) if p.suffix == ".zst" else p
            if src.stat().st_size == 0:
                raise UsageError(f"corpus file is empty: {p}")
            self.parts.append(np.memmap(src, dtype=np.uint8, mode="r"))
        self.starts = np.cumsum([0] + [len(a) for a in self.parts])

    def __len__(self) -> int:
        return int(self.starts[-1])

    def read(self, start: int, stop: int) -> np.ndarray:
        """Bytes [start, stop) of the concatenation, as a fresh uint8 array."""
        out = np.empty(stop - start, dtype=np.uint8)
        i = int(np.searchsorted(self.starts, start, side="right")) - 1
        pos = start
        while pos < stop:
            a, off = self.parts[i], pos - int(self.starts[i])
            n = min(stop - pos, len(a) - off)
            out[pos - start : pos - start + n] = a[off : off + n]
            pos += n
            i += 1
        return out


@dataclass
class ByteStreams:
    """B contiguous streams over corpus bytes [lo, hi), advanced together by `pos`.

    Each stream is a slice of length `span`; a batch is bytes [pos, pos+T+1) of every stream
    (inputs and the next-byte targets). When a segment would run past the end of the slices,
    `pos` wraps to 0 and the caller resets the carried state (a new pass begins). Batches are
    int64 tensors on `device`; with `resident`, this rank's streams ([n_streams, span] bytes) are
    copied there once and each batch is sliced from them.
    """

    corpus: Corpus
    lo: int
    hi: int
    n_streams: int
    first_stream: int = 0  # for data-parallel ranks: which of the global streams are ours
    total_streams: int | None = None
    pos: int = 0
    device: torch.device = torch.device("cpu")
    resident: bool = False

    def __post_init__(self) -> None:
        self._rows: torch.Tensor | None = None
        if self.resident:
            span = self.span
            starts = [self.lo + (self.first_stream + b) * span for b in range(self.n_streams)]
            rows = np.stack([self.corpus.read(r, r + span) for r in starts])
            self._rows = torch.from_numpy(rows).to(self.device)

    @property
    def span(self) -> int:
        return (self.hi - self.lo) // (self.total_streams or self.n_streams)

    def next_batch(self, seq_len: int) -> tuple[torch.Tensor, bool]:
        """Returns ([n_streams, seq_len + 1] bytes as int64 on `device`, wrapped) and advances by seq_len."""
        if seq_len + 1 > self.span:
            raise UsageError(f"corpus too short: {self.hi - self.lo} bytes cannot feed "
                             f"{self.total_streams or self.n_streams} streams of {seq_len + 1} bytes")
        wrapped = self.pos + seq_len + 1 > self.span
        if wrapped:
            self.pos = 0
        if self._rows is not None:
            batch = self._rows[:, self.pos:self.pos + seq_len + 1].long()
        else:
            rows = [self.lo + (self.first_stream + b) * self.span + self.pos for b in range(self.n_streams)]
            batch = torch.from_numpy(np.stack([self.corpus.read(r, r + seq_len + 1) for r in rows]).astype(np.int64))
            batch = batch.to(self.device, non_blocking=True)
        self.pos += seq_len
        return batch, wrapped
