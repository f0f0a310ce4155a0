"""crc32 (zlib's, CRC-32/ISO-HDLC) of data joined from pieces whose crcs and lengths alone are
known: the crc of a frame's data from its blocks' headers, without decoding a byte.

`combine(crc_a, crc_b, len_b)` is crc32(a + b), as zlib's crc32_combine (which Python's zlib
does not expose): crc_a carried through len_b zero bytes (a product by x^(8 len_b) modulo the
polynomial, in the reflected bit order crc32 uses), then crc_b added. Cost: O(log len_b).
`repeated(byte, n)` is crc32(byte * n) in O(log n), without the n bytes.
"""

from __future__ import annotations

import zlib

_POLY = 0xEDB88320  # the crc32 polynomial, reflected
_ONE = 1 << 31  # x^0, reflected


def _times(a: int, b: int) -> int:
    """a * b modulo the polynomial (reflected)."""
    product, m = 0, _ONE
    while a:
        if a & m:
            product ^= b
            a ^= m
        m >>= 1
        b = (b >> 1) ^ _POLY if b & 1 else b >> 1
    return product


def _powers() -> list[int]:
    """x^(2^k) modulo the polynomial, k = 0 .. 31 (reflected): squares of x = 1 << 30."""
    out = [1 << 30]
    for _ in range(31):
        out.append(_times(out[-1], out[-1]))
    return out


_X2K = _powers()


def combine(crc_a: int, crc_b: int, len_b: int) -> int:
    """crc32(a + b) from crc32(a), crc32(b) and len(b)."""
    shift, k, n = _ONE, 3, len_b  # x^(8 n): the bits of n from x^(2^3)
    while n:
        if n & 1:
            shift = _times(_X2K[k & 31], shift)
        n >>= 1
        k += 1
    return _times(shift, crc_a) ^ crc_b


def repeated(byte: int, n: int) -> int:
    """crc32(bytes([byte]) * n), by doubling."""
    out, piece, length = 0, zlib.crc32(bytes([byte])), 1  # piece: the crc of `length` such bytes
    while n:
        if n & 1:
            out = combine(out, piece, length)
        piece, length, n = combine(piece, piece, length), 2 * length, n >> 1
    return out
