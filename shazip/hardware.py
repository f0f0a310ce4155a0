"""What a call runs on: CPU threads (every core this process may use: its affinity and its
cgroup's quota) and the device (the CPU, or CUDA where torch sees a GPU), resolved once where a
call enters the API; torch's process-wide thread count for the torch engines."""

from __future__ import annotations

import math
import os
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from .errors import UsageError
from .optional import available, require
from .options import DEVICES

MAX_THREADS = 255  # the header's field is one byte


@dataclass(frozen=True)
class Hardware:
    """What one call runs on, resolved once where it enters the API and handed down as it is:
    `threads` CPU threads and `device`, "cpu" or "cuda"."""
    threads: int
    device: str

    @classmethod
    def of(cls, threads: int, device: str) -> Hardware:
        """From what a caller asked: threads 0 is every available core; device "auto" is CUDA
        where torch sees a GPU."""
        return cls(resolve_threads(threads), resolve_device(device))


def resolve_threads(threads: int) -> int:
    """threads, with 0 meaning every available core (at most MAX_THREADS)."""
    if not 0 <= threads <= MAX_THREADS:
        raise UsageError(f"threads must be between 0 (all available cores) and {MAX_THREADS}")
    return threads or min(available_cores(), MAX_THREADS)


def available_cores() -> int:
    """The cores this process may use: its CPU affinity (as taskset and cpusets set it), and no
    more than a cgroup CPU quota allows (as `docker --cpus` sets it), since threads beyond the
    quota are throttled and would stall the ones that wait for them."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1
    quota = cgroup_cpu_quota()
    return max(1, min(cores, math.ceil(quota))) if quota else cores


def cgroup_cpu_quota(root: Path = Path("/sys/fs/cgroup")) -> float | None:
    """CPUs' worth of time the cgroup quota grants (cgroup v2 `cpu.max`, or v1's cfs files);
    None without a quota."""
    try:
        quota, period = (root / "cpu.max").read_text().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        pass
    try:
        quota = int((root / "cpu" / "cpu.cfs_quota_us").read_text())
        period = int((root / "cpu" / "cpu.cfs_period_us").read_text())
        return quota / period if quota > 0 and period > 0 else None
    except (OSError, ValueError):
        return None


def resolve_device(device: str) -> str:
    """"cpu" or "cuda". "auto" looks for a GPU without importing torch where there can be none
    (no NVIDIA driver), so the CPU path stays free of torch; a torch that is absent or fails to
    load means the CPU for "auto", a one-line error for "cuda"."""
    if device not in DEVICES:
        raise UsageError(f"unknown device '{device}' (choose {', '.join(DEVICES)})")
    if device == "cpu" or (device == "auto" and not (Path("/proc/driver/nvidia").exists() and available("torch"))):
        return "cpu"
    torch = require("torch", "the CUDA engine")
    if torch.cuda.is_available():
        return "cuda"
    if device == "auto":
        return "cpu"
    raise UsageError("no CUDA device is available to torch (device 'cuda'); use --device cpu or auto")


@contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """torch's thread count is process-wide: set it for one call, then put it back. Only the
    torch engines (float32, the twin) use it: it imports torch."""
    torch = require("torch", "the float32 engine")
    old = torch.get_num_threads()
    if n:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(old)
