"""Frames: a large input cut into archives coded apart, made and decoded several at once.

A frame is a complete archive (its own header and adaptive stage) of `frame_size` bytes of the
input; a framed input is the concatenation of its frames (docs/format.md), tied in one chain by
their headers and trailers (format/frames.py). Frames share no coding state, so `-T N` codes up to N of
them at once, on threads over the native core (it releases the GIL for the whole block loop),
each frame on its share of them (`Shares`: more than one thread where the frames are fewer than
the threads, or outlast the others): the bytes written depend on neither. The parts here know
nothing of the codec: an ordered map over a bounded number of workers, how the threads are
shared out, and the memory the workers held handed back; where each archive of a seekable file
lies is format/frames.py's.
"""

from __future__ import annotations

import ctypes
import sys
import threading
from collections import deque
from contextlib import contextmanager
from concurrent.futures import Future, ThreadPoolExecutor, TimeoutError
from typing import Callable, Iterable, Iterator, TypeVar


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

    try:
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
    finally:
        hand_back()


class Shares:
    """The threads of the frames coded at once, shared out anew as frames start and end: each
    frame's engine asks for its share at each of its blocks (`of`). `usable` threads: at most the
    cores this process may use, since beyond them threads only wait for turns (a frame's threads
    wait on each other: one frame at -T 8 on 2 cores took 1.5x the time of -T 2) and each frame
    at once holds its stage's tables. The threads go equally to the frames in progress, or to be
    started while others are: where the frames are fewer than the threads (2 frames at -T 8 on 8
    cores: 4 threads each) and once the last frames outlast the others, a frame runs its model
    beside its stage (csrc/block/job.h) on threads that would otherwise idle."""

    def __init__(self, threads: int, cores: int, frames: int | None = None) -> None:
        self.usable = max(1, min(threads, cores))
        self.workers = self.usable if frames is None else max(1, min(self.usable, frames))
        self._lock = threading.Lock()
        self._active: list[int] = []  # workers with a frame in progress, in the order they started
        self._finished = 0
        self._left = frames  # frames not yet finished (None: not known yet, more than the workers)

    def counted(self, frames: Iterable[T]) -> Iterator[T]:
        """`frames`, and once they are all taken, their number known here."""
        n = 0
        for n, frame in enumerate(frames, 1):
            yield frame
        with self._lock:
            self._left = n - self._finished

    @contextmanager
    def frame(self, worker: int) -> Iterator[None]:
        """While worker `worker` codes a frame."""
        with self._lock:
            self._active.append(worker)
        try:
            yield
        finally:
            with self._lock:
                self._active.remove(worker)
                self._finished += 1
                if self._left is not None:
                    self._left -= 1

    def of(self, worker: int) -> int:
        """Worker `worker`'s threads now."""
        with self._lock:
            if worker not in self._active:
                return 1
            soon = self.workers if self._left is None else min(self.workers, self._left)
            n, i = max(len(self._active), soon), self._active.index(worker)
        return self.usable // n + (i < self.usable % n)


def hand_back() -> None:
    """Returns to the system the memory the workers' heaps hold free. glibc gives each thread
    an arena of its own and keeps what a thread freed in it: a process that decodes frames at
    once call after call (a server) grew to hundreds of MB and more, and kept them (100 calls
    at -T 2 on a 10 KB archive of 3 frames: 269 MB at level 1, 413 MB at level 3; with the
    trim 36 and 38 MB). The cost is the next call's first touch of its tables' pages again:
    tens of ms a call, nothing beside a frame's seconds. (Elsewhere than glibc: nothing.)"""
    global _TRIM
    if _TRIM is None:
        try:
            _TRIM = ctypes.CDLL(None).malloc_trim if sys.platform.startswith("linux") else False
        except (OSError, AttributeError):  # not glibc
            _TRIM = False
    if _TRIM:
        _TRIM(0)


_TRIM = None  # glibc's malloc_trim, once looked up (False: none)


def _result(future: Future[R]) -> R:
    """The future's result, waited for in short turns: a signal (SIGTERM, Ctrl-C) delivered to a
    worker thread does not wake a main thread blocked on a lock, so it is only noticed when the
    main thread wakes (here, at once rather than when the frame ends, minutes later)."""
    while True:
        try:
            return future.result(timeout=0.1)
        except TimeoutError:
            continue
