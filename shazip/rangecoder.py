"""Range coding of B lanes per step with constriction.

Each step codes B symbols, one per lane, with B probability rows (float64 [B, 256]) through
one `Categorical(perfect=False)` model family, so the lanes interleave in one stream. The
encoder's and decoder's rows must be bit-identical: constriction quantizes each row to
fixed-point frequencies deterministically, so identical rows give identical streams.
The compressed words are uint32, stored little-endian whatever the host order.
"""

from __future__ import annotations

import constriction
import numpy as np

from .errors import CorruptArchive

RangeEncoder = constriction.stream.queue.RangeEncoder
RangeDecoder = constriction.stream.queue.RangeDecoder
_FAMILY = constriction.stream.model.Categorical(perfect=False)


class Encoder:
    def __init__(self, measure: bool = False) -> None:
        self._enc = RangeEncoder()
        self.measure = measure  # off by default: it is per-step work only benchmarks want
        self.bits = 0.0  # if measured, the model's cross-entropy of what was coded: sum of -log2 p(symbol)

    def code(self, probs: np.ndarray, symbols: np.ndarray) -> np.ndarray:
        """Encodes symbols[i] under probs[i]; returns the symbols (the step loop's next input)."""
        self._enc.encode(symbols.astype(np.int32), _FAMILY, probs)
        if self.measure:
            self.bits -= float(np.log2(probs[np.arange(len(symbols)), symbols]).sum())
        return symbols

    def finish(self) -> bytes:
        return self._enc.get_compressed().astype("<u4").tobytes()


class Decoder:
    def __init__(self, payload: bytes) -> None:
        self._dec = RangeDecoder(np.frombuffer(payload, dtype="<u4").astype(np.uint32))

    def code(self, probs: np.ndarray, symbols: np.ndarray | None = None) -> np.ndarray:
        """Decodes one symbol per probability row."""
        try:
            return self._dec.decode(_FAMILY, probs)
        except Exception as e:  # constriction reports a damaged stream with a generic error
            raise CorruptArchive(f"model-coded data is damaged ({e})") from None
