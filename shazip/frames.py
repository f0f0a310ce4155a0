"""Frames: a large input cut into independent archives, made and decoded several at once.

A frame is a complete archive (its own header and adaptive stage) of `frame_size` bytes of the
input; a framed input is the concatenation of its frames (docs/format.md), which every reader
decodes. Frames share nothing, so `-T N` codes N of them at once, on threads over the native
core (it releases the GIL for the whole block loop), each frame on one thread: the bytes written
do not depend on N. The parts here know nothing of the codec: an ordered map over a bounded
number of workers, and where each archive of a seekable file lies.
"""

from __future__ import annotations

import threading
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from typing import BinaryIO, Callable, Iterable, Iterator, TypeVar

from .container import ArchiveReader

T = TypeVar("T")
R = TypeVar("R")


def ordered_map(fn: Callable[[int, T], R], items: Iterable[T], workers: int) -> Iterator[R]:
    """fn(worker, item) for each item, `workers` at a time, results in the items' order. At most
    workers + 1 items are taken from `items` ahead of the result in hand (memory stays bounded
    for a stream of frames); `worker` (0 .. workers-1) names a slot no other running call holds,
    for per-worker engines. The first exception, in order, is raised; the calls still running
    are waited for, and no later result is yielded."""
    free = deque(range(workers))
    lock = threading.Lock()

    def run(item: T) -> R:
        with lock:
            slot = free.popleft()
        try:
            return fn(slot, item)
        finally:
            with lock:
                free.append(slot)

    with ThreadPoolExecutor(workers, thread_name_prefix="shazip-frame") as pool:
        pending = deque()
        try:
            for item in items:
                pending.append(pool.submit(run, item))
                if len(pending) > workers:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            for f in pending:
                f.cancel()


def archive_spans(src: BinaryIO, limit: int) -> list[tuple[int, int]] | None:
    """(start, end) of each archive in a seekable src, from its structure alone (headers, block
    headers, trailers: nothing is decoded), then back to where src was. None where the frames
    cannot be split out cheaply: src cannot seek, or an archive is larger than `limit` bytes
    (one old unframed archive: it streams instead of being held in memory). A damaged archive
    raises here, before anything is written, as the streaming decoder would at that point."""
    try:
        if not src.seekable():
            return None
        start = src.tell()
    except (AttributeError, OSError, ValueError):
        return None
    spans, lead, at = [], b"", start
    try:
        while True:
            reader = ArchiveReader(src, lead, more=True)
            for _ in reader.blocks():
                if reader.bytes_read > limit:
                    return None
            end = at + reader.bytes_read - len(reader.after)
            spans.append((at, end))
            at, lead = end, reader.after
            if not lead:
                return spans
    finally:
        src.seek(start)
