"""Compressing and decompressing on many machines with Dask distributed: one task per frame.

    from dask.distributed import Client
    import shazip.distributed
    client = Client("tcp://scheduler:8786")  # or LocalCluster(), dask-jobqueue, dask-kubernetes
    shazip.distributed.compress("s3://bucket/big.txt", "s3://bucket/big.txt.shz", client)
    shazip.distributed.decompress("s3://bucket/big.txt.shz", "big.txt", client)

A frame is an independent archive (frames.py), so the archive Dask makes is the very bytes
`shazip -T N` makes with the same options and frame size, and either decodes the other's.
Each task reads its own frame from the input (a path every worker sees, or an fsspec URL:
s3://, gs://, http://...), so the input never passes through the client; the coded frames come
back to the client, which writes them in order, a bounded number ahead. Each worker thread
builds the model and engine once and keeps them for every later task with the same options. The
model is a bundled name (every worker has the bundled models) or a model file every worker can
read at the same path. Workers with a GPU (`resources={"GPU": 1}`) run `device="cuda"`.

Needs the `dask` extra (`pip install "shazip[dask]"`); nothing else in shazip imports this.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
import zlib
from collections import deque
from typing import Any, Callable, Iterator

import fsspec

from .codec.decode import decode_frame, linked
from .codec.encode import Compressor
from .format.frames import Frame, index
from .errors import ShazipError
from .format.frames import pack_table
from .format.container import Place
from .options import DEFAULT_BLOCK_SIZE, DEFAULT_FRAME_SIZE, MAX_FRAME_IN_MEMORY
from .publish import publish

_CACHE: dict[tuple, Compressor] = {}  # per worker thread and options: the model and engine, built once
_LOCK = threading.Lock()


def _compressor(options: dict[str, Any]) -> Compressor:
    key = (threading.get_ident(), tuple(sorted(options.items())))
    with _LOCK:
        if key not in _CACHE:
            _CACHE[key] = Compressor(threads=1, **options)
        return _CACHE[key]


def _compress_frame(url: str, offset: int, length: int, options: dict[str, Any], index: int, output_id: int,
                    more: bool) -> bytes:
    """Frame `index` of the input, read by the worker itself, as an archive; its link to the
    frame before (the crc of that frame's data) from the input too."""
    c = _compressor(options)
    with fsspec.open(url, "rb") as f:
        f.seek(max(offset - c.frame_blocks * c.header.block_size, 0))  # the frame before (none for the first)
        link = zlib.crc32(f.read(offset - f.tell()))
        data = f.read(length)
    return b"".join(c.compress_frame(data, Place(index, output_id, link, more)))


def _decompress_frame(url: str, frame: Frame, model: str | None, device: str) -> list[bytes]:
    with fsspec.open(url, "rb") as f:
        f.seek(frame.start)
        archive = f.read(frame.end - frame.start)
    return decode_frame(archive, frame.place, model, None, device, frame.opened)


WORKERLESS_S = 30.0  # how long a run waits on a cluster without a worker before it gives up


def _in_order(client, fn: Callable, tasks: Iterator[tuple], device: str) -> Iterator[bytes]:
    """fn(*args) for each args of `tasks` on the cluster, results in order, at most two per
    worker thread submitted beyond the one awaited. CUDA tasks go to workers with a GPU."""
    ahead = 2 * max(1, sum(client.nthreads().values()))
    resources = {"GPU": 1} if device == "cuda" else None
    pending: deque = deque()
    for args in tasks:
        pending.append(client.submit(fn, *args, pure=False, resources=resources))
        if len(pending) > ahead:
            yield _awaited(client, pending.popleft())
    while pending:
        yield _awaited(client, pending.popleft())


def _awaited(client, future) -> Any:
    """The task's result. The scheduler keeps a task whose workers all died until another
    worker comes, so a cluster left without workers would hold the run forever: after
    WORKERLESS_S without one, it fails."""
    alone_since = None
    while True:
        try:
            return future.result(timeout=1)
        except TimeoutError:
            pass
        if client.nthreads():
            alone_since = None
        elif alone_since is None:
            alone_since = time.monotonic()
        elif time.monotonic() - alone_since > WORKERLESS_S:
            raise ShazipError(f"the Dask cluster at {client.scheduler.address} has had no worker for "
                              f"{WORKERLESS_S:.0f} s (start some: dask worker {client.scheduler.address})")


def _write(url: str, parts: Iterator[bytes], replace: bool) -> int:
    """Writes the parts to url; a local file appears only complete (a temporary file given its
    name at the end), and replaces one that is there only with `replace` (FileExistsError)."""
    total = 0
    if "://" in url:
        with fsspec.open(url, "wb") as f:
            for part in parts:
                f.write(part)
                total += len(part)
        return total
    tmp = f"{url}.tmp{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            for part in parts:
                f.write(part)
                total += len(part)
        publish(tmp, url, replace)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return total


def compress(src: str, dst: str, client, *, model: str | None = None, frame_size: int | None = None,
             block_size: int = DEFAULT_BLOCK_SIZE, device: str = "cpu", replace: bool = True, **options) -> int:
    """Compresses src (a path every worker sees, or an fsspec URL) to dst, one task per frame;
    returns the input bytes. Options as `shazip.Compressor`'s (not `threads`: one a task).
    `replace`: a local dst that exists (or appears meanwhile) is replaced, as open(..., "wb")
    does; False raises FileExistsError instead. `frame_size` None: DEFAULT_FRAME_SIZE (a task a
    frame, on whatever device: the GPU's smaller default serves the cores of one machine)."""
    frame_size = DEFAULT_FRAME_SIZE if frame_size is None else frame_size
    if frame_size <= 0:
        raise ValueError("distributed compression needs frames (frame_size > 0)")
    options = dict(options, model=model, frame_size=frame_size, block_size=block_size, device=device)
    frame = Compressor(**options).frame_blocks * block_size  # also checks the options here, once
    fs, path = fsspec.core.url_to_fs(src)
    n = fs.size(path)
    lengths = [min(frame, n - at) for at in range(0, n, frame)] or [0]
    with fsspec.open(src, "rb") as f:  # the output's id: the crc of its first block
        output_id = zlib.crc32(f.read(block_size))
    tasks = ((src, at, length, options, i, output_id, i + 1 < len(lengths))
             for i, (at, length) in enumerate(zip(itertools.accumulate(lengths, initial=0), lengths)))
    _write(dst, _with_table(_in_order(client, _compress_frame, tasks, device), lengths), replace)
    return n


def _with_table(archives: Iterator[bytes], lengths: list[int]) -> Iterator[bytes]:
    """The frames' archives, then the seek table a local run writes after them."""
    sizes = []
    for archive, length in zip(archives, lengths):
        sizes.append((len(archive), length))
        yield archive
    yield pack_table(sizes)


def decompress(src: str, dst: str, client, *, model: str | None = None, device: str = "cpu",
               replace: bool = True) -> int:
    """Decompresses src (a framed archive: a path every worker sees, or an fsspec URL) to dst,
    one task per frame; returns the bytes written. The client finds the frames from the seek
    table at the end of src (else from the archives' structure: headers, block headers,
    trailers); the workers decode them. `replace` as `compress`'s."""
    with fsspec.open(src, "rb") as f:
        frames = index(f, MAX_FRAME_IN_MEMORY)
    if frames is None:
        raise ValueError(f"{src}: a frame is too large to decode as one task ({MAX_FRAME_IN_MEMORY} bytes at most)")
    tasks = ((src, f, model, device) for f in frames)
    return _write(dst, linked(frames, _in_order(client, _decompress_frame, tasks, device)), replace)
