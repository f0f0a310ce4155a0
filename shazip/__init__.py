"""shazip: a neural text compressor (SHA-RNN byte model + range coder)."""

__version__ = "0.1.0"

from .api import compress, compress_stream, decompress, decompress_stream, load  # noqa: E402
from .errors import ShazipError  # noqa: E402

__all__ = ["compress", "decompress", "compress_stream", "decompress_stream", "load", "ShazipError", "__version__"]
