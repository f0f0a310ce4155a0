"""Whether the neural model pays for its time on a block (format 5's `stage` blocks).

On prose the model is most of what the adaptive stage gains: shazip's reason to be. On
repetitive text (logs, tables, records) the stage's own contexts predict most bytes, and the
model, most of the coding time, saves from -3 % to +12 % against the stage alone in one lane
(measured on training logs and JSON, benchmarks/JOURNAL.md, "Stage blocks"; a trial on a block's
first KB says nothing of it: 13-42 % there, both cold). So a repetitive block is raced: the
stage alone codes it in one lane (then undone: the stage keeps no copy), its code length kept at
every point (`Ledger`); then the model codes it in the level's lanes (`Referee` watching). At
half the model's steps, where over the steps since a quarter (the lanes' cold starts behind
them, which the model's lanes pay and the stage's one lane does not) the model has saved less
than the level's share (options.Level.model_pays) of what the stage alone spent on the same
bytes, the model stops and the stage alone codes the block again, in one lane (`Method.STAGE`);
else the model's coding stands. Without the model a block has no reason for lanes, which only
cut the stage's view. The archive records the choice, so a decoder makes none.
block.encode_block runs the race with these.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .. import core
from ..options import REPETITIVE

if TYPE_CHECKING:
    from .block import Progress


def repetitive(data: bytes, quick: bytes | None = None) -> bool:
    """Whether zstd's fastest level (`quick`, if already made) shrinks `data` more than
    REPETITIVE-fold: logs, tables, JSON, XML, code, where prose stays under (options.py)."""
    return len(data) > REPETITIVE * len(quick or core.load().zstd_compress(data, 1))


CHECK_AT = 0.5  # the share of the model's steps after which it stops where it does not pay...
WINDOW_FROM = 0.25  # ...over the steps since this share


class Losing(Exception):
    """The model's pass stops: it saves less than it must."""


class Ledger:
    """The stage alone's code length at each point of the bytes it codes, as its one-lane pass goes."""

    def __init__(self) -> None:
        self.ends, self.bits = [0], [0.0]

    def __call__(self, n: int, bits: float = 0.0) -> None:
        self.ends.append(self.ends[-1] + n)
        self.bits.append(self.bits[-1] + bits)

    def spent(self, starts: np.ndarray, stops: np.ndarray) -> float:
        """The bits it spent on the bytes [starts[i], stops[i]) (interpolated within a chunk)."""
        return float((np.interp(stops, self.ends, self.bits) - np.interp(starts, self.ends, self.bits)).sum())


class Referee:
    """Passes the model's progress on, and stops it at CHECK_AT of its steps where, over the
    steps since WINDOW_FROM, it has saved less than `least` of what the stage alone, in one lane
    over the whole block, spent on the same bytes (its `ledger`, to be filled first). Both points
    are whole multiples of `chunk`, the steps between two progress calls of the core's loop (the
    torch engines' loop calls every step), and the check is made only where every lane is still
    active there (`armed`), so that the choice, like the archive, is the same on every device and
    thread count."""

    def __init__(self, n: int, lanes: int, least: float, chunk: int, progress: Progress | None) -> None:
        self.lanes, self.least, self.progress = lanes, least, progress
        self.span = -(-n // lanes)
        self.window_at, self.check_at = (-(-int(share * self.span) // chunk) * chunk
                                         for share in (WINDOW_FROM, CHECK_AT))
        self.armed = self.window_at < self.check_at <= n - self.span * (lanes - 1)  # the last lane's length
        self.ledger = Ledger()
        self.done, self.bits = 0, 0.0
        self.window_bits = 0.0

    def __call__(self, n: int, bits: float = 0.0) -> None:
        self.done += n
        self.bits += bits
        if self.progress is not None:
            self.progress(n, bits)
        if not self.armed:
            return
        steps = self.done // self.lanes  # exact: every lane is active up to check_at
        if steps == self.window_at:
            self.window_bits = self.bits
        elif steps == self.check_at:
            self.armed = False
            starts = np.arange(self.lanes) * self.span
            alone = self.ledger.spent(starts + self.window_at, starts + self.check_at)
            if self.bits - self.window_bits > (1 - self.least) * alone:
                raise Losing
