"""Tests for block coding (codec.py): lanes, the method choice, and damaged payloads of every
method, each refused with an error that names the block."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
import zstandard

import shazip
from shazip import core
from shazip.codec.block import LANE_FLOOR, MIN_LANE, effective_lanes, encode_block, lane_lengths
from shazip.codec.engines import IntEngine
from shazip.errors import ChecksumMismatch, CorruptArchive, ShazipError
from shazip.format.container import CODED, Method
from shazip.format.reader import ArchiveReader
from shazip.format.listing import describe
from shazip.options import (
    DEFAULT_LANES, DEFAULT_LEVEL, LEVELS, LONG_LANES, MAX_LANES, MIN_LANE_GPU, ONE_LANE, LanePolicy, lane_policy,
)
from shazip.stage.adaptive import EXTRA_FLAGS, MODEL_FLAGS, TABLE_FLAGS, AdaptiveParams, AdaptiveStage
from shazip.stage.adaptive import VERSIONS as STAGE_VERSIONS

from archive_damage import flip, payload_spans
from core_hooks import hooks

MODEL_ONLY = frozenset({Method.MODEL})
EIGHT = LanePolicy(8, LANE_FLOOR, LANE_FLOOR)  # 8 lanes asked for
DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def model_archive(random_model) -> bytes:
    """Three model-coded blocks of zero bytes (forced: the random model never beats zstd)."""
    a = shazip.compress(b"\x00" * 600, model=random_model, methods=MODEL_ONLY, adapt="none", block_size=200)
    assert [m for _, _, m in payload_spans(a)] == [Method.MODEL] * 3
    return a


@pytest.fixture(scope="module")
def zstd_archive(random_model, text) -> bytes:
    a = shazip.compress(text[:6000], model=random_model, methods=frozenset({Method.ZSTD}), block_size=2000)
    assert [m for _, _, m in payload_spans(a)] == [Method.ZSTD] * 3
    return a


@pytest.fixture(scope="module")
def raw_archive(random_model, text) -> bytes:
    a = shazip.compress(text[:600], model=random_model, methods=frozenset({Method.RAW}), block_size=200)
    assert [m for _, _, m in payload_spans(a)] == [Method.RAW] * 3
    return a


def refused(archive: bytes, model, kind: type[ShazipError] = ShazipError) -> str:
    with pytest.raises(kind) as e:
        shazip.decompress(archive, model=model)
    return str(e.value)


# ---------------------------------------------------------------- lanes and methods


@pytest.mark.parametrize("n, lanes", [(0, 1), (1, 1), (10, 3), (1000, 7), (1024, 32), (5, 8)])
def test_lane_lengths_cover_the_block_in_order(n, lanes):
    lengths = lane_lengths(n, lanes)
    assert lengths.sum() == n and len(lengths) == lanes
    assert (np.diff(lengths) <= 0).all()  # only the last lanes are shorter: active lanes are a prefix


def test_effective_lanes_keep_lanes_long():
    assert effective_lanes(100, 32) == 1
    assert effective_lanes(10 * LANE_FLOOR, 32) == 10
    assert effective_lanes(10 * MIN_LANE, 32, MIN_LANE) == 10
    assert effective_lanes(10**6, 32, MIN_LANE) == 32


def test_lane_policy_by_level_and_device():
    """Asked-for lanes go down to LANE_FLOOR bytes anywhere; automatic lanes on the CPU are at
    most DEFAULT_LANES, of the level's length or LONG_LANES times it for repetitive text; on a
    GPU up to MAX_LANES of at most MIN_LANE_GPU bytes (a batch); levels without the model get
    one lane per block everywhere."""
    for level in LEVELS.values():
        for on_gpu in (False, True):
            assert lane_policy(level, 5, on_gpu) == LanePolicy(5, LANE_FLOOR, LANE_FLOOR)
    six = LEVELS[6]
    assert lane_policy(six, None, False) == LanePolicy(DEFAULT_LANES, MIN_LANE, MIN_LANE * LONG_LANES)
    assert lane_policy(six, None, True) == LanePolicy(MAX_LANES, MIN_LANE_GPU, MIN_LANE_GPU)
    assert lane_policy(LEVELS[3], None, True).min_lane == min(LEVELS[3].min_lane, MIN_LANE_GPU)
    for on_gpu in (False, True):
        p = lane_policy(LEVELS[1], None, on_gpu)
        assert effective_lanes(10**7, p.most, p.min_lane) == effective_lanes(10**7, p.most, p.repetitive_min_lane) == 1
        assert p.min_lane == ONE_LANE


def test_method_choice_picks_the_smallest(random_model, text):
    engine = lambda: pytest.fail("the model is not tried on dense data")  # noqa: E731
    noise = np.random.default_rng(1).integers(0, 256, 5000, dtype=np.uint8).tobytes()
    method, lanes, payload = encode_block(engine, noise, EIGHT)
    assert method == Method.RAW and lanes == 1 and payload == noise
    method, _, payload = encode_block(lambda: None, text[:5000], EIGHT, methods=frozenset({Method.ZSTD, Method.RAW}))
    assert method == Method.ZSTD and len(payload) < 5000


def test_blocks_zstd_all_but_erases_skip_the_model(random_model):
    """Zeros and a repeated record: zstd leaves so little that the model cannot pay for its
    time, so it is not run (10 MB of zeros take a second, not minutes); asked for alone, it is."""
    untried = lambda: pytest.fail("the model is not tried on what zstd all but erases")  # noqa: E731
    for data in (bytes(1 << 20), b"2026-11-23 12:00:00 INFO request served in 3 ms\n" * 20000):
        method, lanes, payload = encode_block(untried, data, EIGHT, get_stage=untried)
        assert method == Method.ZSTD and lanes == 1 and len(payload) * 1024 <= len(data)
    method, _, _ = encode_block(lambda: IntEngine(random_model), bytes(4096), EIGHT, methods=frozenset({Method.MODEL}))
    assert method == Method.MODEL


# ---------------------------------------------------------------- damaged payloads name their block


def test_model_block_bitflip_names_the_block(random_model, model_archive):
    start, n, method = payload_spans(model_archive)[1]
    assert method == Method.MODEL and n > 5
    msg = refused(flip(model_archive, start + 5, 4), random_model)
    assert "block 1" in msg and ("checksum mismatch" in msg or "damaged" in msg)


def test_model_coder_failure_names_the_block(random_model, model_archive):
    """Some flips make the range decoder itself fail (not the checksum): that message must name
    the block too. Searches block 1's payload for such a flip."""
    start, n, _ = payload_spans(model_archive)[1]
    for pos, bit in ((p, b) for p in range(n) for b in (7, 0)):
        try:
            shazip.decompress(flip(model_archive, start + pos, bit), model=random_model)
        except CorruptArchive as e:
            if "model-coded data is damaged" in str(e):
                assert "block 1" in str(e)
                return
        except ShazipError:
            pass
    pytest.fail("no flip in block 1 reached the range decoder's own error")


def test_raw_block_bitflip_names_the_block(random_model, raw_archive):
    start, n, _ = payload_spans(raw_archive)[1]
    msg = refused(flip(raw_archive, start + n // 2, 0), random_model, ChecksumMismatch)
    assert "block 1" in msg


def test_zstd_block_bitflip_names_the_block(random_model, zstd_archive):
    """A flip in the compressed body that zstd decodes to wrong bytes: caught by the checksum."""
    start, n, _ = payload_spans(zstd_archive)[1]
    for off in range(start + n // 2, start + n):
        try:
            shazip.decompress(flip(zstd_archive, off, 0), model=random_model)
        except ChecksumMismatch as e:
            assert "block 1" in str(e)
            return
        except ShazipError:
            continue
    pytest.fail("no flip in the second half of the zstd payload gave a checksum mismatch")


def test_zstd_frame_damage_names_the_block(random_model, zstd_archive):
    """A flip zstd itself rejects (here: in the frame magic) names the block as well."""
    start, _, _ = payload_spans(zstd_archive)[1]
    assert "block 1" in refused(flip(zstd_archive, start, 0), random_model, CorruptArchive)


def test_zstd_declared_size_bitflip_is_a_clean_error(random_model, zstd_archive):
    start, n, _ = payload_spans(zstd_archive)[1]
    # byte 4 of a zstd frame is the frame header descriptor; bit 7 turns a 2-byte content size
    # into an 8-byte one, read from the bytes that follow
    bad = flip(zstd_archive, start + 4, 7)
    declared = zstandard.get_frame_parameters(bad[start : start + n]).content_size
    if declared < 1 << 40:  # only run where the allocation is certain to fail fast
        pytest.skip(f"flipped frame declares only {declared} bytes")
    assert "block 1" in refused(bad, random_model, CorruptArchive)


def test_every_block_header_field_is_checked(random_model, raw_archive):
    """A flipped byte in block 1's header (index, lengths, crc) names block 1."""
    start, _, _ = payload_spans(raw_archive)[1]
    bh = start - 24
    for off in (bh + 1, bh + 9, bh + 17):
        assert "block 1" in refused(flip(raw_archive, off, 2), random_model, CorruptArchive)


# ---------------------------------------------------------------- the adaptive stage in archives


def methods_of(archive: bytes) -> list[Method]:
    return [m for _, _, m in payload_spans(archive)]


def test_mixed_blocks_round_trip_across_blocks_and_lanes(trained, text):
    """The stage's tables carry from block to block: every block decodes only if the decoder's
    stage learnt exactly what the encoder's did."""
    data = text[:9000]
    for lanes in (1, 3, 8):
        blob = shazip.compress(data, model=trained, lanes=lanes, block_size=3000, methods=frozenset({Method.MIXED}))
        assert methods_of(blob) == [Method.MIXED] * 3 and blob[4] == 5  # format 5: the stage is recorded
        assert shazip.decompress(blob, model=trained) == data


def test_mixed_archive_identical_across_threads_and_runs(trained, text):
    data = text[:6000]
    base = shazip.compress(data, model=trained, lanes=4, block_size=3000, threads=1)
    assert shazip.compress(data, model=trained, lanes=4, block_size=3000, threads=2) == base
    assert shazip.compress(data, model=trained, lanes=4, block_size=3000, threads=1) == base
    assert shazip.decompress(base, model=trained, threads=2) == data


@pytest.mark.parametrize("lanes,threads", [(1, 2), (1, 4), (2, 3), (3, 4), (8, 2), (5, 3)])
def test_the_model_ahead_of_the_coder_changes_no_byte(trained, text, lanes, threads):
    """Encoding with two threads or more, the model runs ahead of the coder on a thread of its own
    (its team the rest of the pool): the same archives as one thread, with the stage and with the
    model alone."""
    data = text[:7000]
    engine = IntEngine(trained, threads)
    pipelined = hooks().pipelined
    assert pipelined(core.load().Job(engine.model, engine.pool, 3000, lanes, data=data[:3000]))  # this test's path
    alone = IntEngine(trained, 1)
    assert not pipelined(core.load().Job(alone.model, alone.pool, 3000, lanes, data=data[:3000]))
    # decoding: the model steps one group of lanes while the stage decodes the other
    assert pipelined(core.load().Job(engine.model, engine.pool, 3000, lanes, payload=b"")) == (lanes >= 2)
    for adapt, method in (("cm", Method.MIXED), ("none", Method.MODEL)):
        coding = dict(model=trained, lanes=lanes, block_size=3000, adapt=adapt, methods=frozenset({method}))
        one = shazip.compress(data, threads=1, **coding)
        assert methods_of(one) == [method] * 3
        assert shazip.compress(data, threads=threads, **coding) == one
        assert shazip.decompress(one, model=trained, threads=threads) == data



@pytest.mark.parametrize("adapt", ["cm", "none"])
def test_how_far_the_model_runs_ahead_changes_no_byte(trained, text, adapt):
    """The model runs at most `ring` steps ahead of the coder (16 unless a test's hook sets it),
    and the coder steps the lanes past a cut itself: at any lead, and with the cut drawn at random
    every step (cut_seed: it moves both ways, to none and to all), on idle cores and on busy ones,
    the payload is the one coded without the model ahead, with the stage and with the model alone."""
    data = text[:3000]

    def coded(threads: int, lanes: int, **pipeline) -> tuple[bool, bytes]:
        engine = IntEngine(trained, threads)
        stage = AdaptiveStage(AdaptiveParams().fitted(len(data))).native if adapt == "cm" else None
        job = core.load().Job(engine.model, engine.pool, len(data), lanes, stage=stage, data=data)
        hooks().pipeline(job, **pipeline)
        while not job.done:
            job.run(7)
        return hooks().pipelined(job), job.result()

    for lanes in (2, 5):
        alone, payload = coded(1, lanes)
        assert not alone
        for ring in (1, 2, 5, 16):
            assert coded(3, lanes, ring=ring) == (True, payload), (lanes, ring)
            assert coded(2, lanes, ring=ring, cut_seed=ring) == (True, payload), (lanes, ring)
        with busy_cores():
            for ring in (1, 3):
                assert coded(2, lanes, ring=ring, cut_seed=ring + 10) == (True, payload), (lanes, ring)
    with pytest.raises(ValueError, match="at least one step"):
        coded(3, 2, ring=0)


@contextmanager
def busy_cores():
    """Every core kept busy by another process meanwhile, so that the threads under test are taken
    off their cores at any instruction (where a race between them shows)."""
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 2)]
    try:
        yield
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


@pytest.mark.parametrize("adapt,method", [("cm", Method.MIXED), ("none", Method.MODEL)])
def test_decoding_in_lane_groups_changes_no_byte(trained, text, adapt, method):
    """Decoding with two threads or more, the model's threads step one half of the lanes before a
    cut while the coder decodes the other, and the coder steps the lanes past the cut itself: the
    bytes of one thread at every lane count. The cut follows the time; drawn at random every step
    (cut_seed), it moves both ways by any number of lanes, to none and to all, and the bytes stay,
    on idle cores and on busy ones. A payload cut short is refused from the coder's side while the
    model's thread waits (no hang)."""
    data = text[:6000]
    for lanes in (2, 3, 7):
        blob = shazip.compress(data, model=trained, lanes=lanes, block_size=3000, adapt=adapt,
                               methods=frozenset({method}), threads=1)
        for threads in (2, 3, 4):
            assert shazip.decompress(blob, model=trained, threads=threads) == data, (lanes, threads)

    def job(threads: int, lanes: int, **kw) -> core.load().Job:
        engine = IntEngine(trained, threads)
        stage = AdaptiveStage(AdaptiveParams().fitted(3000)).native if adapt == "cm" else None
        return core.load().Job(engine.model, engine.pool, 3000, lanes, stage=stage, **kw)

    def decoded(threads: int, lanes: int, payload: bytes, seed: int) -> bytes:
        decoder = job(threads, lanes, payload=payload)
        hooks().pipeline(decoder, cut_seed=seed)
        assert hooks().pipelined(decoder)
        while not decoder.done:
            decoder.run(11)
        return decoder.result()

    for lanes in (2, 5, 9):
        encoder = job(1, lanes, data=data[:3000])
        encoder.run(3000)
        payload = encoder.result()
        for threads, seed in ((2, 1), (2, 2), (3, 3), (4, 4)):
            assert decoded(threads, lanes, payload, seed) == data[:3000], (lanes, threads, seed)
        with busy_cores():
            for threads, seed in ((2, 5), (2, 6), (3, 7)):
                assert decoded(threads, lanes, payload, seed) == data[:3000], (lanes, threads, seed)
    decoder = job(2, 4, payload=b"\x5a" * 40, overrun=0)
    assert hooks().pipelined(decoder)
    with pytest.raises(core.load().DataError):
        while not decoder.done:
            decoder.run(3)
    del decoder


def test_a_job_left_unfinished_stops_its_model_thread(trained, text):
    """The model's thread outlives each `run` call (it runs ahead across Python's chunks); a job
    dropped halfway, its ring full, must stop and join it, not hang or crash."""
    data = text[:3000]
    engine = IntEngine(trained, 2)
    for steps in (0, 1, 40):
        job = core.load().Job(engine.model, engine.pool, len(data), 4, data=data)
        hooks().pipeline(job, ring=2)
        assert hooks().pipelined(job)
        if steps:
            job.run(steps)
        del job
    blob = shazip.compress(data, model=trained, lanes=4, threads=1, adapt="none")
    for steps in (0, 1, 40):  # decoding: the model's thread waits on the coder's group
        job = core.load().Job(engine.model, engine.pool, len(data), 4, payload=blob[-200:])
        assert hooks().pipelined(job)
        try:
            if steps:
                job.run(steps)
        except core.load().DataError:
            pass
        del job
    assert shazip.compress(data, model=trained, lanes=4, threads=2) == shazip.compress(data, model=trained, lanes=4,
                                                                                        threads=1)

def test_stage_undoes_blocks_stored_another_way(trained, text):
    """The encoder's stage also saw the random block, which is then stored raw and never reaches
    the decoder's stage: the encoder must undo it, or the block after it would not decode."""
    noise = np.random.default_rng(5).integers(0, 256, 3000, dtype=np.uint8).tobytes()
    data = text[:3000] + noise + text[3000:6000]
    forced = frozenset({Method.MIXED, Method.RAW})  # the noise is tried with the stage, then stored
    blob = shazip.compress(data, model=trained, lanes=2, block_size=3000, methods=forced)
    assert methods_of(blob) == [Method.MIXED, Method.RAW, Method.MIXED]
    assert shazip.decompress(blob, model=trained) == data
    # and the third block is coded exactly as if the noise had never been there
    clean = shazip.compress(text[:3000] + text[3000:6000], model=trained, lanes=2, block_size=3000, methods=forced)
    assert payload_of(blob, 2) == payload_of(clean, 1)


def records(archive: bytes) -> tuple[dict, list]:
    """An archive's header fields but its format version, and each block's fields and payload:
    what a golden archive of an older format shares with today's writing of the same input
    (format 5 differs from 4 in its version byte, the crcs chained from it, and the head check
    before a model-coded payload's coder bytes, left out here)."""
    reader = ArchiveReader(io.BytesIO(archive))
    head = 4 if reader.header.format_version >= 5 else 0
    blocks = [(bh.method, bh.lanes, bh.orig_len, bh.data_crc, payload[head if bh.method in CODED else 0:])
              for bh, payload in reader.blocks()]
    return {k: v for k, v in vars(reader.header).items() if k != "format_version"}, blocks


def payload_of(archive: bytes, i: int) -> bytes:
    start, n, _ = payload_spans(archive)[i]
    return archive[start:start + n]


def test_without_the_stage_archives_are_format_5_without_its_parameters(trained, text):
    blob = shazip.compress(text[:3000], model=trained, lanes=2, adapt="none")
    assert blob[4] == 5 and Method.MIXED not in methods_of(blob)
    assert describe(io.BytesIO(blob))[0]["adapt_version"] == 0
    assert shazip.decompress(blob, model=trained) == text[:3000]


def test_golden_mixed_archives(trained, text):
    """Archives made when the stage's arithmetic (adaptive.VERSION) was fixed: they must decode,
    and compressing the same input must give the same bytes, on every machine. The format 2
    archive (shazip 0.4) and the format 3 ones hold the very payloads format 4 writes today
    (format 4 changes only how the checksums start), all with stage version 1, which today's
    stage reproduces without version 2's models (and format 5, today's, holds the same records).
    If the arithmetic changes on purpose, bump the version and add golden files (tests/data/README.md)."""
    mixed = dict(model=trained, lanes=3, block_size=2500, methods=frozenset({Method.MIXED}))
    v1 = dict(mixed, adapt=AdaptiveParams().at_version(1))
    v2 = (DATA / "golden-mixed.shz").read_bytes()
    v3, v4 = ((DATA / f"golden-mixed-v{v}.shz").read_bytes() for v in (3, 4))
    solo3, solo4 = ((DATA / f"golden-solo-v{v}.shz").read_bytes() for v in (3, 4))
    assert (v2[4], v3[4], solo3[4], v4[4], solo4[4]) == (2, 3, 3, 4, 4)
    for arc in (v2, v3, v4):
        assert shazip.decompress(arc, model=trained) == text[:6000]
    assert shazip.decompress(solo3, model=trained) == shazip.decompress(solo4, model=trained) == text[:2000]
    assert records(shazip.compress(text[:6000], **v1)) == records(v4)
    assert records(shazip.compress(text[:2000], **v1)) == records(solo4)
    payloads = [[arc[s:s + n] for s, n, _ in payload_spans(arc)] for arc in (v2, v3, v4)]
    assert payloads[0] == payloads[1] == payloads[2]


def test_golden_format_5_archives(trained, text):
    """Format 5 (a head check before every model-coded payload's coder bytes, and `stage` blocks):
    golden-mixed-v5 and golden-solo-v5 (stage version 17, mixed blocks) and golden-stage-v5 (the
    stage alone: three stage blocks of one lane) decode, and compressing again gives them byte for
    byte; the mixed ones hold the coder bytes of format 4's golden-*-s17 files."""
    call = dict(model=trained, lanes=3, block_size=2500, adapt=AdaptiveParams().at_version(17))
    for name, data, method in (("golden-mixed-v5.shz", text[:6000], Method.MIXED),
                               ("golden-solo-v5.shz", text[:2000], Method.MIXED),
                               ("golden-stage-v5.shz", text[:6000], Method.STAGE)):
        golden = (DATA / name).read_bytes()
        assert golden[4] == 5 and set(methods_of(golden)) == {method}
        assert shazip.decompress(golden, model=trained) == data
        assert shazip.compress(data, methods=frozenset({method}), **call) == golden
    for v5, s17 in (("golden-mixed-v5.shz", "golden-mixed-s17.shz"), ("golden-solo-v5.shz", "golden-solo-s17.shz")):
        assert records((DATA / v5).read_bytes()) == records((DATA / s17).read_bytes())


@pytest.mark.parametrize("version", STAGE_VERSIONS[1:])  # every version after the first: a new one needs its files
def test_golden_stage_version_archives(trained, text, version):
    """Stage versions 2 (the structured-text models), 3 (the match context), 4 (field values,
    repeats of the line above, the match APM), 5 (mixer sets by a number's digits), 6 (the
    recovering match), 7 (the line matches), 8 (the number and record contexts), 9 (the
    predicted-byte context, the class and state mixers; on by default), 10 (the table models; on
    by default for tables), 11 (the last-number context), 12 (the run inputs), 13 (the groups
    context), 14 (the group word, mixer and APM), 15 (the tokens and indirect contexts), 16 (the
    slow final mixer, the places, cell, current-token and nest contexts) and 17 (the seeded weight
    sets, the order, place and match mixers and the NN's final input; levels 2-9), 18 (the float
    tail and the line steps; levels 2-9) and 19 (the number echo; levels 2-9): the same two
    calls as the version 1 golden files, frozen in golden-mixed-sV.shz and golden-solo-sV.shz;
    each version's parameters without its models write the version before's."""
    adapt = AdaptiveParams().at_version(version)
    mixed = dict(model=trained, lanes=3, block_size=2500, methods=frozenset({Method.MIXED}), adapt=adapt)
    for name, data in ((f"golden-mixed-s{version}.shz", text[:6000]), (f"golden-solo-s{version}.shz", text[:2000])):
        golden = (DATA / name).read_bytes()
        assert describe(io.BytesIO(golden))[0]["adapt_version"] == version
        assert shazip.decompress(golden, model=trained) == data
        assert records(shazip.compress(data, **mixed)) == records(golden)


def test_a_level_uses_the_table_models_for_a_table_only(trained, text):
    """At the default level a CSV is coded with stage version 10's table models and prose without
    them (the same bytes as those parameters give); both round-trip."""
    table = b"".join(b"%d,K%c%c,Town %d,AK,%.5f,-%.5f\n" % (i, 65 + i // 26 % 26, 65 + i % 26, i % 9, 50 + i / 97,
                                                       140 + i / 89) for i in range(150))
    for data, tables in ((table, True), (text[:6000], False)):
        blob = shazip.compress(data, model=trained, lanes=2, methods=frozenset({Method.MIXED}))
        head = describe(io.BytesIO(blob))[0]
        params = AdaptiveParams.unpack(bytes.fromhex(head["adapt_params"]), head["adapt_version"])
        assert params.cell_left is params.cell_order is tables and params.last_number
        assert shazip.decompress(blob, model=trained) == data
    prose = AdaptiveParams(**{f: f in LEVELS[DEFAULT_LEVEL].models and f not in TABLE_FLAGS
                              for f in MODEL_FLAGS + EXTRA_FLAGS})
    assert blob == shazip.compress(text[:6000], model=trained, lanes=2, methods=frozenset({Method.MIXED}), adapt=prose)


def test_a_header_pairing_the_float_engine_with_the_stage_is_refused(trained, text):
    """Found by benchmarks/fuzz.py: the encoder never writes this pairing (the stage needs the
    int8 engine's integer rows); a damaged header that claims it is refused cleanly."""
    import struct
    import zlib
    from archive_damage import Layout
    blob = bytearray(shazip.compress(text[:2000], model=trained, lanes=2, methods=frozenset({Method.MIXED})))
    end = Layout.of(bytes(blob)).header_end
    blob[6] = 0x01  # engine: float32 (id 0 in the high nibble), version 1
    struct.pack_into("<I", blob, end, zlib.crc32(bytes(blob[:end])))
    with pytest.raises(CorruptArchive, match="cannot drive the adaptive stage"):
        shazip.decompress(bytes(blob), model=trained)


# Each level's stage parameters as archives record them (before they are sized to the input), for
# one lane and for several, for prose and for a table: written down when they were made, so that
# a change to how levels are described (options.LEVELS) cannot change what any level writes.
LEVEL_STAGES = {
    1: ("161814061000af37",) * 4,
    2: ("161814061000af37cfff27208403", "161814061000af37cfff3f208403", "161814061000af37ffff27208403",
        "161814061000af37ffff3f208403"),
    **dict.fromkeys((3, 4, 5, 6), ("161814061000af3bcfffe7208403", "161814061000af3bcfffff208403",
                                   "161814061000af3bffffe7208403", "161814061000af3bffffff208403")),
    **dict.fromkeys((7, 8, 9), ("161814061000af3fcfffe77fff03", "161814061000af3fcffffff7fc03",
                                "161814061000af3fffffe77fff03", "161814061000af3ffffffff7fc03")),
}


def test_every_levels_stage_is_pinned():
    from shazip.codec.encode import stage_params
    from shazip.options import LANE_FLOOR
    assert set(LEVEL_STAGES) == set(LEVELS)
    for n, level in LEVELS.items():
        made = tuple(stage_params("cm", level, LanePolicy(most, LANE_FLOOR, LANE_FLOOR)).for_kind(table).pack().hex()
                     for most in (1, DEFAULT_LANES) for table in (False, True))
        assert made == LEVEL_STAGES[n], n
