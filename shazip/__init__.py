"""shazip: a neural text compressor (SHA-RNN byte model, adaptive context mixing, arithmetic coding)."""

import os

__version__ = "0.21.0"

# OpenMP threads that spin while they wait hold a core each: with another process busy on the
# machine, torch's `--threads 2` on 2 cores ran 36x slower than one thread (475 s vs 13 s for
# 100 KB, measured with a training run and a fuzzer on the cores); waiting passively, 12 s. It
# matters where torch runs (training, the float engine, the GPU engine); the native core's own
# threads always wait passively. It must be set before the OpenMP runtime starts (the first
# torch import), and a user's own setting wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from .errors import (  # noqa: E402
    ChecksumMismatch, ContractError, CoreUnavailable, CorruptArchive, FileTrouble, ModelError, NotAnArchive,
    OutputExists, ShazipError, Skipped, Truncated, UnsupportedVersion, UsageError,
)

__all__ = ["open", "ShazipFile", "compress", "decompress", "Compressor", "ShazipCompressor", "ShazipDecompressor",
           "compressobj", "decompressobj", "compress_stream",
           "decompress_stream", "iter_decompress", "recover_stream", "Lost", "load", "ShazipError", "NotAnArchive",
           "UnsupportedVersion", "Truncated", "CorruptArchive", "ChecksumMismatch", "ModelError", "ContractError", "CoreUnavailable",
           "OutputExists", "FileTrouble", "Skipped", "UsageError", "__version__"]

_API = {"compress": "api", "decompress": "api", "compress_stream": "api", "decompress_stream": "api",
        "iter_decompress": "api", "load": "api", "Compressor": "api", "ShazipCompressor": "api",
        "ShazipDecompressor": "api", "compressobj": "api", "decompressobj": "api", "recover_stream": "api",
        "Lost": "api",
        "open": "fileobj", "ShazipFile": "fileobj"}


def __getattr__(name: str):
    """The API, imported at first use: `import shazip` (and `shazip --help`) stays light until
    something is compressed."""
    if name in _API:
        import importlib
        return getattr(importlib.import_module(f".{_API[name]}", __name__), name)
    raise AttributeError(f"module 'shazip' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The module's names and the lazily imported API, for dir() and tab completion."""
    return sorted(set(globals()) | set(_API))
