"""The API's argument checks, shared by both directions: keywords a call does not take, and
buffers."""

from __future__ import annotations

import inspect
from typing import Callable


def known_keywords(caller: str, kw: dict, options: Callable) -> None:
    """A keyword `options` does not take, named as the caller's own (not an inner function's)."""
    unknown = set(kw) - set(inspect.signature(options).parameters)
    if unknown:
        raise TypeError(f"{caller}() got an unexpected keyword argument {sorted(unknown)[0]!r}")


def as_buffer(data) -> memoryview:
    """data as a buffer, or TypeError (io.BytesIO(None) would be an empty input)."""
    try:
        return memoryview(data)
    except TypeError:
        raise TypeError(f"a bytes-like object is required, not {type(data).__name__!r}") from None

