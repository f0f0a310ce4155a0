"""Benchmark tools, apart from the decoder: `shazip bench` (shazip beside the standard
compressors, with Hutter-style totals) and `shazip fetch-enwik8`. Nothing in compression or
decompression imports this package."""

from .enwik8 import fetch_enwik8
from .report import markdown
from .runner import bench

__all__ = ["bench", "fetch_enwik8", "markdown"]
