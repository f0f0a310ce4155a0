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
from concurrent.futures import Future, ThreadPoolExecutor, TimeoutError
from typing import BinaryIO, Callable, Iterable, Iterator, TypeVar

from .container import ArchiveReader

T = TypeVar("T")
R = TypeVar("R")


class Stopped(Exception):
    """Raised in a worker whose results are no longer wanted (`ordered_map`'s `stop`)."""


def ordered_map(fn: Callable[[int, T, Callable[[], None]], R], items: Iterable[T], workers: int) -> Iterator[R]:
    """fn(worker, item, check) for each item, `workers` at a time, results in the items' order.
    At most workers + 1 items are taken from `items` ahead of the result in hand (memory stays
    bounded for a stream of frames); `worker` (0 .. workers-1) names a slot no other running call
    holds, for per-worker engines. The first exception, in order, is raised. When the consumer
    stops early (an error, Ctrl-C, SIGTERM, a full disk), the calls still running end at their
    next `check()`, which raises `Stopped` once their results are no longer wanted: a frame takes
    minutes, and nobody should wait for it."""
    free = deque(range(workers))
    lock = threading.Lock()
    stop = threading.Event()

    def check() -> None:
        if stop.is_set():
            raise Stopped

    def run(item: T) -> R:
        with lock:
            slot = free.popleft()
        try:
            return fn(slot, item, check)
        finally:
            with lock:
                free.append(slot)

    with ThreadPoolExecutor(workers, thread_name_prefix="shazip-frame") as pool:
        pending = deque()
        try:
            for item in items:
                pending.append(pool.submit(run, item))
                if len(pending) > workers:
                    yield _result(pending.popleft())
            while pending:
                yield _result(pending.popleft())
        finally:
            stop.set()
            for f in pending:
                f.cancel()


def _result(future: Future[R]) -> R:
    """The future's result, waited for in short turns: a signal (SIGTERM, Ctrl-C) delivered to a
    worker thread does not wake a main thread blocked on a lock, so it is only noticed when the
    main thread wakes (here, at once rather than when the frame ends, minutes later)."""
    while True:
        try:
            return future.result(timeout=0.1)
        except TimeoutError:
            continue


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
