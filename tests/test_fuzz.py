"""Fuzzing: damaged real archives end in a clean ShazipError or the exact original, never in
another exception, a hang or a huge allocation. `benchmarks/fuzz.py` runs the same mutations
10,000 times outside CI."""

from __future__ import annotations

import random
import resource
import time

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import shazip
from shazip.errors import ShazipError
from shazip.format.container import Method
from shazip.stage.adaptive import AdaptiveParams

from archive_damage import MUTATIONS, Layout, mutate

FUZZED = [(frozenset({Method.MODEL, Method.RAW}), "none"), (frozenset({Method.MIXED, Method.RAW}), "cm"),
          (frozenset(Method), "cm"),
          (frozenset({Method.MIXED, Method.RAW}), AdaptiveParams(nn=False, nn_final=False))]  # -1, -2


@pytest.fixture(scope="module")
def archives(trained, text):
    """Model-coded (with and without the adaptive stage), raw and zstd blocks, over real text,
    random bytes, and random bytes repeated (which zstd takes: dense data skips the model)."""
    rng = random.Random(1)
    data = text[:2000] + rng.randbytes(600) + rng.randbytes(300) * 3 + text[2000:3000]
    return [(data, shazip.compress(data, model=trained, block_size=900, lanes=3, methods=methods, adapt=adapt))
            for methods, adapt in FUZZED]


def decode_outcome(blob: bytes, original: bytes, model) -> str:
    try:
        out = shazip.decompress(blob, model=model)
    except ShazipError:
        return "refused"
    assert out == original, "damaged archive decoded to different bytes without an error"
    return "intact"


def test_archives_hold_every_block_method(archives):
    from shazip.format.listing import describe
    import io
    methods = {b["method"] for _, blob in archives for a in describe(io.BytesIO(blob)) for b in a["blocks"]}
    assert methods == {"model", "mixed", "raw", "zstd"}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), which=st.integers(0, len(FUZZED) - 1))
def test_damaged_archives_fail_cleanly_or_decode_exactly(archives, trained, seed, which):
    original, blob = archives[which]
    name, bad = mutate(blob, random.Random(seed))
    t = time.perf_counter()
    decode_outcome(bad, original, trained)
    assert time.perf_counter() - t < 20, name


@pytest.mark.parametrize("mutation", MUTATIONS, ids=lambda m: m.__name__)
def test_each_mutation_is_refused_at_least_sometimes(archives, trained, mutation):
    """Each mutation reaches the decoder and is caught (so none of them is a no-op)."""
    original, blob = archives[0]
    outcomes = {decode_outcome(mutation(blob, Layout.of(blob), random.Random(s))[1], original, trained)
                for s in range(12)}
    assert "refused" in outcomes


def test_declared_lengths_do_not_allocate(archives, trained):
    """A block header (crc resealed) that declares the largest payload is refused after reading
    what is there, not by allocating what it claims."""
    import struct
    import zlib
    original, blob = archives[0]
    lay = Layout.of(blob)
    pos, _ = lay.blocks[0]
    for field, off in (("payload_len", 12), ("orig_len", 8)):
        b = bytearray(blob)
        struct.pack_into("<I", b, pos + off, 0xFFFFFFF0)
        struct.pack_into("<I", b, pos + 20, zlib.crc32(bytes(b[pos:pos + 20])))
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        with pytest.raises(ShazipError):
            shazip.decompress(bytes(b), model=trained)
        assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200_000, field  # KiB
