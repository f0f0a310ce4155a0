"""Format 5's `stage` blocks: a repetitive block coded by the adaptive stage alone, in one lane,
where the model does not pay for its time (shazip/codec/kind.py), recorded so that the decoder
makes no choice."""

from __future__ import annotations

import io
import random
import zlib

import pytest

import shazip
from shazip.codec import kind
from shazip.codec.block import encode_block
from shazip.codec.engines import IntEngine
from shazip.errors import CorruptArchive
from shazip.format.container import Method
from shazip.format.reader import ArchiveReader
from shazip.format.writer import ArchiveWriter
from shazip.format.header import Header, Solo
from shazip.options import LanePolicy
from shazip.stage.adaptive import AdaptiveParams, AdaptiveStage

FOUR = LanePolicy(4, 256, 256)  # four lanes where the block has 1 KB for each


def log_lines(n: int, seed: int = 0) -> bytes:
    """A server log's shape: timestamps, levels, a few messages with numbers and addresses."""
    rng = random.Random(seed)
    messages = ["Accepted publickey for {} from 10.0.{}.{} port {} ssh2", "session opened for user {} by (uid={})",
                "GET /api/v1/items/{} HTTP/1.1 200 {} {}ms", "worker {} finished job {} in {} ms",
                "connection from 192.168.{}.{} closed after {} requests"]
    out = []
    for i in range(n):
        m = rng.choice(messages)
        fields = [rng.choice(["alice", "bob", "deploy", "root"]) if "{}" in m and k == 0 and "user" in m
                  else str(rng.randrange(1, 5000)) for k in range(m.count("{}"))]
        out.append(f"2026-11-29 03:{i // 60 % 60:02d}:{i % 60:02d} {rng.choice(['INFO', 'INFO', 'DEBUG', 'WARN'])} "
                   f"[{rng.choice(['sshd', 'nginx', 'worker'])}] " + m.format(*fields))
    return ("\n".join(out) + "\n").encode()


def blocks_of(archive: bytes) -> list[tuple[Method, int]]:
    return [(bh.method, bh.lanes) for bh, _ in ArchiveReader(io.BytesIO(archive)).blocks()]


def test_stage_blocks_round_trip_in_one_lane_and_never_run_the_model(trained, random_model):
    data = log_lines(600)
    blob = shazip.compress(data, model=trained, block_size=len(data) // 3 + 1, methods=frozenset({Method.STAGE}))
    assert blob[4] == 5 and blocks_of(blob) == [(Method.STAGE, 1)] * 3
    assert shazip.decompress(blob, model=trained) == data
    # the model is never loaded for them: a decoder given another model still decodes (as stored blocks)
    assert shazip.decompress(blob, model=random_model) == data


def _fresh(n: int) -> AdaptiveStage:
    return AdaptiveStage(AdaptiveParams().fitted(n))


@pytest.mark.parametrize("least", [1.0, -1.0])  # the model always stopped half-way; never stopped
def test_the_race_leaves_the_stage_as_the_chosen_coding_does(trained, text, least):
    """A log block raced (then a prose block coded by the model) gives the very payloads of the
    chosen method forced, block after block: the stage ends as the chosen coding leaves it."""
    log, prose = log_lines(400), text[:6000]
    engine = lambda: IntEngine(trained)  # noqa: E731
    raced = _fresh(len(log) + len(prose))
    method, lanes, payload = encode_block(engine, log, FOUR, get_stage=lambda: raced, model_pays=least,
                                          methods=frozenset({Method.MIXED, Method.STAGE}))
    after = encode_block(engine, prose, FOUR, get_stage=lambda: raced, methods=frozenset({Method.MIXED}))
    forced = {}
    for m in (Method.MIXED, Method.STAGE):
        stage = _fresh(len(log) + len(prose))
        forced[m] = (encode_block(engine, log, FOUR, get_stage=lambda: stage, methods=frozenset({m})),
                     encode_block(engine, prose, FOUR, get_stage=lambda: stage, methods=frozenset({Method.MIXED})))
    assert method == (Method.STAGE if least > 0 else Method.MIXED)
    assert ((method, lanes, payload), after) == forced[method]
    assert forced[Method.STAGE][0][1] == 1 and forced[Method.MIXED][0][1] == 4


def test_a_level_races_repetitive_blocks_and_every_choice_decodes(trained, text, monkeypatch):
    """At a level with a race (-6) the log's blocks are raced, and the archive, whatever was
    chosen, decodes; the same bytes at -T 1 and -T 2."""
    raced = []
    monkeypatch.setattr(kind.Ledger, "__init__", lambda self, f=kind.Ledger.__init__: raced.append(1) or f(self))
    log = log_lines(3000)
    data = text[:40000] + log
    c = shazip.Compressor(model=trained, level=6, block_size=40000, threads=1)
    assert c.model_pays is not None
    blob = c.compress(data)
    got = blocks_of(blob)
    assert len(raced) >= len(log) // 40000 and {m for m, _ in got} <= {Method.MIXED, Method.STAGE}
    assert all(k == 1 for m, k in got if m == Method.STAGE)
    assert shazip.decompress(blob, model=trained) == data
    assert shazip.Compressor(model=trained, level=6, block_size=40000, threads=2).compress(data) == blob
    assert shazip.decompress(blob, model=trained, threads=2) == data
    assert shazip.Compressor(model=trained, level=6, lanes=2).model_pays is None  # the caller's lanes: no race


def test_a_level_that_always_stops_the_model_writes_stage_blocks(trained, monkeypatch):
    """With a share no model can save, every repetitive block of the level is a stage block."""
    from shazip import options
    monkeypatch.setitem(options.LEVELS, 6, options.Level(options.DEFAULT_STAGE, 16384, model_pays=1.0))
    data = log_lines(3000)
    blob = shazip.Compressor(model=trained, level=6, block_size=60000).compress(data)
    assert set(blocks_of(blob)) == {(Method.STAGE, 1)}
    assert shazip.decompress(blob, model=trained) == data


def _stage_header(version: int) -> Header:
    return Header(engine=1, engine_version=1, threads=0, model_id=bytes(range(32)), model_name="", block_size=1 << 16,
                  lanes=1, adapt_version=1, adapt_params=bytes(range(8)), format_version=version)


def test_the_stage_method_is_format_5s():
    """A stage block, framed in the header (its method's bit 2 is flag bit 7) or as a record,
    reads back in format 5; a format 4 header or block that claims it is refused as damaged."""
    solo = Solo(int(Method.STAGE), 1, 100, 10, 0)
    packed = _stage_header(5).pack(solo)
    assert packed[5] & 0x80
    reader = ArchiveReader(io.BytesIO(packed + bytes(10)))
    assert [bh.method for bh, _ in reader.blocks()] == [Method.STAGE]
    with pytest.raises(ValueError, match="solo method"):
        _stage_header(4).pack(solo)
    forged = bytearray(_stage_header(4).pack(Solo(int(Method.MIXED), 1, 100, 10, 0)))
    forged[5] |= 0x80  # and the crc made right: refused by the flag itself
    forged[-4:] = zlib.crc32(bytes(forged[:-4])).to_bytes(4, "little")
    with pytest.raises(CorruptArchive, match="unknown flags"):
        ArchiveReader(io.BytesIO(bytes(forged) + bytes(10)))
    out = io.BytesIO()
    writer = ArchiveWriter(out, _stage_header(4))
    writer.add_block(Method.MIXED, 1, b"x" * 100, bytes(10))
    with pytest.raises(ValueError, match="unknown method 4"):
        writer.add_block(Method.STAGE, 1, b"y" * 100, bytes(10))


@pytest.mark.parametrize("engine", ["core", "twin"])
def test_a_payload_whose_first_bytes_miss_their_check_is_refused(trained, text, monkeypatch, engine):
    """Format 5's head check, on the core's loop and on the torch twin's (the GPU's, here on
    the CPU): a head crc that is not the block's first bytes' is refused once they are decoded,
    naming the block."""
    from shazip.codec import engines
    from archive_damage import flip, payload_spans
    blob = shazip.compress(text[:6000], model=trained, lanes=3, block_size=3000, methods=frozenset({Method.MIXED}))
    if engine == "twin":
        monkeypatch.setattr(engines, "int_engine", lambda loaded, device, threads: engines.TwinEngine(loaded, "cpu"))
    assert shazip.decompress(blob, model=trained) == text[:6000]
    start, _, _ = payload_spans(blob)[1]
    with pytest.raises(CorruptArchive, match="block 1: its first bytes do not match their check"):
        shazip.decompress(flip(blob, start, 0), model=trained)
