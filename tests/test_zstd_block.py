"""The ZSTD block method on the core's own libzstd: the frames earlier shazip versions wrote with
python-zstandard, and clean errors on damaged ones."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from shazip import _core

zstandard = pytest.importorskip("zstandard")  # the dev extra has it; the base install does not


def test_core_links_its_own_libzstd():
    """The core carries csrc/third_party/zstd, not whatever libzstd the build machine has (a
    system libzstd.so once took its place, version 1.5.5: its frames differ from 1.5.7's)."""
    header = Path(__file__).parents[1] / "csrc/third_party/zstd/zstd.h"
    parts = [re.search(rf"#define ZSTD_VERSION_{p}\s+(\d+)", header.read_text())[1] for p in ("MAJOR", "MINOR", "RELEASE")]
    assert _core.ZSTD_VERSION == ".".join(parts)


@pytest.mark.parametrize("level", [1, 19])
def test_frames_equal_python_zstandards(text, level):
    """Same libzstd, same parameters: the same bytes, so re-encoding an old archive gives it back."""
    for data in (b"", b"a", text[:20000], os.urandom(3000), bytes(70000)):
        frame = _core.zstd_compress(data, level)
        assert frame == zstandard.ZstdCompressor(level=level).compress(data)
        assert _core.zstd_decompress(frame, len(data)) == data
        assert zstandard.ZstdDecompressor().decompress(frame) == data


def test_damaged_frames_are_data_errors(text):
    data = text[:5000]
    frame = _core.zstd_compress(data, 19)
    bad = {
        "wrong size": (frame, len(data) + 1),
        "not a frame": (b"\0" * len(frame), len(data)),
        "cut short": (frame[:-3], len(data)),
        "trailing bytes": (frame + b"x", len(data)),
        "two frames": (frame + frame, len(data)),
        "empty": (b"", 0),
        "body damaged": (frame[:20] + bytes(b ^ 0x55 for b in frame[20:40]) + frame[40:], len(data)),
    }
    for what, (payload, n) in bad.items():
        with pytest.raises(_core.DataError):
            _core.zstd_decompress(payload, n)
            pytest.fail(what)


def test_a_huge_claimed_size_allocates_nothing():
    """A frame whose header claims exabytes is refused from the header, before any allocation."""
    frame = bytearray(zstandard.ZstdCompressor(level=1).compress(b"x" * 100))
    claim = zstandard.ZstdCompressor(level=1, write_content_size=False).compress(b"x" * 100)
    for payload in (bytes(frame), claim):
        with pytest.raises(_core.DataError):
            _core.zstd_decompress(payload, 1 << 62)


def test_bad_levels_are_refused():
    for level in (0, 23, -1):
        with pytest.raises(ValueError):
            _core.zstd_compress(b"abc", level)
