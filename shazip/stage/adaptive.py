"""The adaptive context-mixing stage: NN bit probabilities refined online, then arithmetic coded.

Each byte is coded as 8 binary decisions (most significant bit first). For each decision
logistic mixers combine the neural model's probability of the bit (exact subtree sums of its
integer frequencies) with hashed context models (orders 1-8 of each lane's own bytes, words,
columns of lines; since version 2 also the fields of records, brackets, byte shapes and the
lane's own statistics) and match models over the history of every lane and earlier block; two
APM stages refine the result, and a binary arithmetic coder codes the bit. The stage and coder are
integer-only C++ in the native core (csrc/stage, whose stage.h opens with the numerics
contract); this module supplies its one transcendental table (squash, computed here with
`decimal` so that it is identical everywhere, and cached) and wraps it.

The tables live in an `AdaptiveStage` that outlives blocks: lanes and blocks learn from each
other. A block coded by the stage on the encoder's side but finally stored another way is
never seen by the decoder's stage, so the encoder takes a `snapshot()` before such a block and
`restore()`s it afterwards. One block coder at a time per stage.
"""

from __future__ import annotations

import decimal
import struct
from dataclasses import asdict, dataclass, field, replace
from functools import lru_cache
from typing import TYPE_CHECKING

from .. import cache, core
from ..errors import CorruptArchive

if TYPE_CHECKING:
    import numpy as np

ST_MAX = 4095  # the stretch domain is [-ST_MAX, ST_MAX] in units of 1/256 nat


MODEL_FLAGS = ("word", "column", "sparse", "nn", "match", "apm")  # bit i of the `models` byte: version 1's
# The models beyond version 1's (bit i of `extras`: the i-th), each with the version that added it and
# what it needs: the core's list (csrc/stage/models.def), the one source of them.
STAGE_MODELS: list[dict] = core.load().stage_models()
EXTRA_FLAGS = tuple(m["name"] for m in STAGE_MODELS)
NEEDS = {m["name"]: tuple(m["needs"]) for m in STAGE_MODELS if m["needs"]}
VERSION = max(m["version"] for m in STAGE_MODELS)  # the newest stage: each version added models
VERSIONS = tuple(range(1, VERSION + 1))  # what this shazip decodes: each the next without the models it added
EXTRAS_OF = {v: sum(m["version"] <= v for m in STAGE_MODELS) for v in VERSIONS}  # how many of EXTRA_FLAGS
PARAMS_BYTES = {v: 8 + -(-EXTRAS_OF[v] // 8) for v in VERSIONS}  # 8 bytes, then the extras' bits
# version 10's models and version 16's cell context, for tables only (`for_data`)
TABLE_FLAGS = EXTRA_FLAGS[EXTRAS_OF[9]:EXTRAS_OF[10]] + ("cell_up",)
TEXT_FLAGS = ("tokens", "this_token", "nest")  # versions 15's and 16's token models, for what is no table (`for_data`)
# What archives may ask for: at most 35 hashed tables of 2**24 bytes (7 orders, 2 word, column,
# sparse, version 2's 5, version 3's 1, version 4's 1, version 8's 2, version 9's 1, version 10's 1,
# version 11's 1, version 13's 1, version 14's 1, version 15's 6 and version 16's 4) with version 12's
# run tables of 2**19 entries each, version 15's order-3 indirect table of 2**23 u16, a 2**26-byte
# history and 2**24 match entries (about 0.85 GB), beside the mixers' weights (at most 311,000 sets of 90
# inputs, 112 MB, version 17's four mixers 94 MB of them), whatever a damaged or hostile header says.
ARCHIVE_LIMITS = {"table_bits": (12, 24), "history_bits": (12, 26), "match_bits": (10, 24), "match_min": (2, 8),
                  "mixer_lr": (1, 64)}
TABULAR_SAMPLE = 1 << 16  # bytes of an input's start that `looks_tabular` reads


class AdaptiveParams:
    """Everything that shapes the stage's predictions: an archive records these, and a
    decoder must use the same values.

    table_bits: log2 of the bytes of each hashed context table (16-byte buckets of bit-history
        states); order 1 is a direct 64 KB table whatever this is.
    history_bits: log2 of the match model's history ring (bytes of this and earlier blocks).
    match_bits: log2 of the entries of the match model's hash of recent contexts.
    match_min: bytes of context that start a match (2..8).
    mixer_lr: the mixer's learning rate, in units of 2**-20 per input * error product.
    orders: context orders of the hashed models (1..8 bytes of the lane's own history).
    word: contexts of the current alphabetic word (with the last byte), and of it with the word
        before. column: the byte above in the previous line, the column and the last byte.
    sparse: the two bytes before the last one.
    nn, match, apm: the NN's inputs, the match model, the APM stages.
    Then a bool field for each later model (EXTRA_FLAGS: csrc/stage/models.def's names, in its
    order), made from that list below the class, True unless a level or a caller turns it off:
    models.def says what each adds and what it needs, and its component in csrc/stage states its
    rules (docs/format.md's table lists them).
    """

    table_bits: int = 22
    history_bits: int = 24
    match_bits: int = 20
    match_min: int = 6
    mixer_lr: int = 16
    orders: tuple[int, ...] = (1, 2, 3, 4, 6, 8)
    word: bool = True
    column: bool = True
    sparse: bool = True
    nn: bool = True
    match: bool = True
    apm: bool = True

    def fitted(self, n: int) -> AdaptiveParams:
        """These parameters with tables sized for an input known to be `n` bytes in all: a few
        KB need neither 77 MiB of tables (and their snapshot) nor the time to clear them. Each
        hashed table keeps at least 256 bytes per input byte, the history the whole input and
        the match hash 4 entries per byte: measured on the suite's files under 64 KB, the
        archives stay within 2 bytes of full-size tables' (hash collisions fall differently)."""
        bits = max(n - 1, 1).bit_length()  # ceil(log2 n)
        return replace(self, table_bits=min(max(bits + 8, 16), self.table_bits),
                       history_bits=min(max(bits + 1, 16), self.history_bits),
                       match_bits=min(max(bits + 2, 12), self.match_bits))

    def for_data(self, data: bytes) -> AdaptiveParams:
        """These parameters for an input that begins with `data`: without version 10's table models
        (and version 16's cell context) unless it looks like a table (`looks_tabular`), and without
        the token models (version 15's tokens, version 16's current token and nest) where it does.
        Measured (benchmarks/JOURNAL.md, "Stage version 10", "Stage version 15", "Stage version 16"):
        the table models shrink a CSV 5.2 % and an access log 1.0 %, but would cost prose up to
        0.04 %; the tokens context shrinks code 0.3-0.7 %, but costs tables up to 0.6 %."""
        return self.for_kind(looks_tabular(data))

    def for_kind(self, tabular: bool) -> AdaptiveParams:
        """`for_data`'s choice for an input that looks like a table (`tabular`) or not."""
        return replace(self, **dict.fromkeys(TEXT_FLAGS if tabular else TABLE_FLAGS, False))

    def to_dict(self) -> dict:
        d = asdict(self)
        d["orders"] = list(self.orders)
        return d

    def at_version(self, version: int) -> AdaptiveParams:
        """These parameters without the models of stage versions after `version` (EXTRAS_OF):
        what that version's shazip wrote (version 1: shazip 0.5, 2: 0.6, 3: 0.7, 4: 0.8, 5: 0.9, 6: 0.10,
        7: 0.11, 8: 0.12, 9: 0.13, 10: 0.14, 11: 0.15, 12: 0.16, 13 and 14: 0.17, 15: 0.18, 16: 0.19, 17: 0.20, 18: 0.22)."""
        return replace(self, **dict.fromkeys(EXTRA_FLAGS[EXTRAS_OF[version]:], False))

    @property
    def version(self) -> int:
        """The stage version these parameters need: the newest whose models (EXTRA_FLAGS) they use."""
        extras = self.extras
        return next(v for v in VERSIONS if extras >> EXTRAS_OF[v] == 0)

    @property
    def extras(self) -> int:
        """Version 2's models as the core's bit mask (bit i: EXTRA_FLAGS[i])."""
        return sum(int(getattr(self, name)) << i for i, name in enumerate(EXTRA_FLAGS))

    def pack(self) -> bytes:
        """What an archive's header records (docs/format.md): 8 bytes for version 1, 9 for 2 and 3,
        10 for 4 to 8, 11 for 9 to 13, 12 for 14 and 15, 13 for 16 and 17, 14 for 18 (`extras` as a little-endian
        integer of PARAMS_BYTES - 8 bytes)."""
        orders = sum(1 << (o - 1) for o in self.orders)
        models = sum(int(getattr(self, name)) << i for i, name in enumerate(MODEL_FLAGS))
        blob = struct.pack("<BBBBHBB", self.table_bits, self.history_bits, self.match_bits, self.match_min,
                           self.mixer_lr, orders, models)
        return blob + self.extras.to_bytes(PARAMS_BYTES[self.version] - 8, "little")

    @staticmethod
    def unpack(blob: bytes, version: int) -> AdaptiveParams:
        """Parameters of stage `version` read from an archive, each checked against the bounds
        the encoder keeps (ARCHIVE_LIMITS): a damaged header must not make the decoder allocate
        gigabytes."""
        size = PARAMS_BYTES[version]
        if len(blob) != size:
            raise CorruptArchive(f"adaptive stage parameters of {len(blob)} bytes (expected {size})")
        tb, hb, mb, mm, lr, orders, models = struct.unpack("<BBBBHBB", blob[:8])
        extras = int.from_bytes(blob[8:], "little")
        if models >> len(MODEL_FLAGS) or extras >> EXTRAS_OF[version] or not orders or (
                version >= 2 and not extras >> EXTRAS_OF[version - 1]):
            raise CorruptArchive(f"adaptive stage parameters are damaged (unknown models, no context order, or no "
                                 f"model of version {version})")
        flags = {name: bool(models >> i & 1) for i, name in enumerate(MODEL_FLAGS)}
        flags.update({name: bool(extras >> i & 1) for i, name in enumerate(EXTRA_FLAGS)})
        missing = [f"{name} without {need}" for name, needs in NEEDS.items() if flags[name]
                   for need in needs if not flags[need]]
        if missing:
            raise CorruptArchive(f"adaptive stage parameters are damaged ({', '.join(missing)})")
        p = AdaptiveParams(tb, hb, mb, mm, lr, tuple(o for o in range(1, 9) if orders >> (o - 1) & 1), **flags)
        for name, (lo, hi) in ARCHIVE_LIMITS.items():
            if not lo <= getattr(p, name) <= hi:
                raise CorruptArchive(f"adaptive stage parameter {name} = {getattr(p, name)} is outside {lo}..{hi}")
        return p


for _name in EXTRA_FLAGS:  # a field for each later model, in the registry's order
    AdaptiveParams.__annotations__[_name] = "bool"
    setattr(AdaptiveParams, _name, True)
AdaptiveParams = dataclass(frozen=True)(AdaptiveParams)




def looks_tabular(data: bytes) -> bool:
    """Whether `data` reads as a table: of the whole lines in its first TABULAR_SAMPLE bytes, at
    least half have two or more of one cell separator (',', tab, ';' or '|') and as many as the
    line before. CSV, TSV, access logs and JSON lines do; prose and code seldom keep such a count
    from line to line (on the suite: 0.71 or more against 0.02 or less)."""
    lines = bytes(data[:TABULAR_SAMPLE]).split(b"\n")[:-1]
    if len(lines) < 4:
        return False
    for sep in b",\t;|":
        counts = [line.count(sep) for line in lines]
        same = sum(1 for a, b in zip(counts, counts[1:]) if a >= 2 and a == b)
        if 2 * same >= len(lines) - 1:
            return True
    return False


def squash_table() -> list[int]:
    """squash(x) = clamp(round(65536 / (1 + exp(-x / 256))), 1, 65535) for x in [-4095, 4095],
    rounded half to even in decimal arithmetic of 24 significant digits: the same integers on
    every machine (a float exp could differ in the last place between libms). Derived once per
    machine (a tenth of a second) and kept in the user's cache, checked."""
    return list(_squash())


@lru_cache(maxsize=1)
def _squash() -> tuple[int, ...]:
    name = "squash-v1.i32"  # the derivation below is fixed: a change to it needs a new name
    blob = cache.read("tables", name)
    if blob is not None and len(blob) == 4 * (2 * ST_MAX + 1):
        table = struct.unpack(f"<{2 * ST_MAX + 1}i", blob)
        # a cache edited with its checksum made again: what the core checks, and entries derived anew
        if (all(1 <= a <= b <= 65535 for a, b in zip(table, table[1:]))
                and all(table[x + ST_MAX] == _squash_at(x) for x in range(-ST_MAX, ST_MAX + 1, 127))):
            return table
    out = [_squash_at(x) for x in range(-ST_MAX, ST_MAX + 1)]
    cache.write("tables", name, struct.pack(f"<{len(out)}i", *out))
    return tuple(out)


def _squash_at(x: int) -> int:
    ctx = decimal.Context(prec=24, rounding=decimal.ROUND_HALF_EVEN)
    e = ctx.exp(ctx.divide(decimal.Decimal(-x), decimal.Decimal(256)))
    p = ctx.divide(decimal.Decimal(65536), ctx.add(decimal.Decimal(1), e))
    return min(max(int(p.to_integral_value(rounding=decimal.ROUND_HALF_EVEN)), 1), 65535)


@dataclass
class AdaptiveStage:
    """The stage's tables and history, shared by every lane and kept across blocks."""

    params: AdaptiveParams = field(default_factory=AdaptiveParams)
    # the kernel path of the mixers' arithmetic ("auto": SHAZIP_KERNELS, else the best this CPU
    # runs); every path gives the same archives, so only tests choose
    kernels: str = "auto"

    def __post_init__(self) -> None:
        p = self.params
        self._stage = core.load().Stage(squash_table(), p.table_bits, p.history_bits, p.match_bits, p.match_min,
                                   p.mixer_lr, list(p.orders), p.word, p.column, p.sparse, p.nn, p.match, p.apm, p.extras,
                                   self.kernels)

    @property
    def native(self):
        """The core's stage (the block loop drives it; tests reach single components: squash,
        stretch, ...)."""
        return self._stage

    @property
    def position(self) -> int:
        """Bytes coded so far by this stage (the global position of the next block)."""
        return self._stage.position

    @property
    def nbytes(self) -> int:
        """Bytes held by the stage's tables and history."""
        return self._stage.bytes

    def snapshot(self) -> object:
        """A copy of every table (a memcpy of `nbytes`), for `restore`; None for a stage that has
        coded nothing yet (restoring it makes the stage fresh again, without the copy: the first
        block of every archive, and the only one of a small file)."""
        return None if self.position == 0 else self._stage.snapshot()

    def restore(self, snapshot: object) -> None:
        if snapshot is None:  # fresh again: the old tables freed before the new are made (one stage's memory)
            self._stage = None
            self.__post_init__()
        else:
            self._stage.restore(snapshot)

    def encoder(self, lanes: int, span: int, measure: bool = False) -> AdaptiveEncoder:
        """A coder for one block of `lanes` lanes of at most `span` bytes (lane i is the block's
        bytes [i * span, (i + 1) * span)). With `measure`, it sums the ideal code length."""
        return AdaptiveEncoder(core.load().StageEncoder(self._stage, lanes, span, measure))

    def decoder(self, lanes: int, span: int, payload: bytes, overrun: int = -1) -> AdaptiveDecoder:
        """`overrun`: the most bytes it may read past the payload (-1: any number)."""
        return AdaptiveDecoder(core.load().StageDecoder(self._stage, lanes, span, payload, overrun))


class AdaptiveEncoder:
    def __init__(self, native) -> None:
        self._enc = native

    def code(self, freq: np.ndarray, symbols: np.ndarray) -> np.ndarray:
        """Codes one step: symbols[i] (bytes, [k]) of the k active lanes (a prefix) under the
        NN's rows freq (int64 [k, 256], entries in [1, 2**30]); returns the symbols."""
        self._enc.code(freq, symbols)
        return symbols

    def finish(self) -> bytes:
        return self._enc.finish()

    @property
    def bits(self) -> float:
        """Ideal code length of what was coded, in bits (if measured): sum of -log2 p(bit)."""
        return self._enc.bits


class AdaptiveDecoder:
    def __init__(self, native) -> None:
        self._dec = native

    def code(self, freq: np.ndarray) -> np.ndarray:
        """Decodes one step: the k active lanes' bytes (int64 [k]) given their rows [k, 256].
        A damaged payload gives wrong bytes (which the block's checksum catches), never a fault."""
        return self._dec.code(freq)
