"""Python API: compress/decompress bytes or streams, block by block in bounded memory.

    import shazip
    blob = shazip.compress(b"some text", 9, model="default")
    assert shazip.decompress(blob) == b"some text"

Every failure is a `shazip.ShazipError` with a one-line message. The work is done in codec/, by
direction: encode.py, decode.py and recover.py; this module names what a caller uses.
"""

from __future__ import annotations

from .codec.decode import (
    ShazipDecompressor, decode_frame, decompress, decompress_stream, decompressobj, iter_decompress, linked,
)
from .codec.encode import Compressor, ShazipCompressor, compress, compress_stream, compressobj, level_model, levels_of
from .codec.recover import Lost, recover_stream
from .model.file import LoadedModel, load_model, model_from_bytes

__all__ = ["compress", "decompress", "compress_stream", "decompress_stream", "iter_decompress", "recover_stream",
           "Compressor", "ShazipCompressor", "ShazipDecompressor", "compressobj", "decompressobj", "Lost", "load",
           "decode_frame", "linked", "level_model", "levels_of"]


def load(path_or_bytes: str | bytes) -> LoadedModel:
    """Loads a model from a path, a bundled name, or the bytes of a model file."""
    if isinstance(path_or_bytes, bytes):
        return model_from_bytes(path_or_bytes, "model bytes")
    return load_model(path_or_bytes)
