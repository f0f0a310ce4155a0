"""The per-user cache ($SHAZIP_CACHE or ~/.cache/shazip): what is slow to make and the same on
every run, kept between runs: the integer lookup tables (exact.py, adaptive.py), whose exact
derivation in `decimal` takes half a second. Never code: the native core is built at install.

A cached blob is stored with its sha256 and read back only if that matches, so a torn or
damaged file is rebuilt, never used; writes are atomic (a temporary file renamed into place)
and best-effort: an unwritable cache only costs time."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path


def root() -> Path:
    return Path(os.environ.get("SHAZIP_CACHE") or Path.home() / ".cache" / "shazip")


def read(kind: str, name: str) -> bytes | None:
    """The blob stored as `name`, or None when it is missing or fails its checksum."""
    try:
        blob = (root() / kind / name).read_bytes()
    except OSError:
        return None
    data, digest = blob[:-32], blob[-32:]
    return data if len(blob) >= 32 and hashlib.sha256(data).digest() == digest else None


def write(kind: str, name: str, data: bytes) -> None:
    folder = root() / kind
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data + hashlib.sha256(data).digest())
            os.replace(tmp, folder / name)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:
        pass
