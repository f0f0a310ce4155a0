"""The adaptive context-mixing stage (csrc/stage, through shazip/stage/adaptive.py): round trips through
lanes and blocks, determinism, snapshot/restore, damaged payloads, and single components against
hand-computed cases."""

from __future__ import annotations

import math
import random
from dataclasses import replace

import numpy as np
import pytest

from shazip import _core
from shazip.errors import CorruptArchive
from shazip.stage.adaptive import (EXTRA_FLAGS, EXTRAS_OF, NEEDS, PARAMS_BYTES, TABLE_FLAGS, VERSION, AdaptiveParams,
                              AdaptiveStage, looks_tabular, squash_table)

from core_hooks import hooks

SMALL = AdaptiveParams(table_bits=16, history_bits=16, match_bits=12)  # fast to allocate and copy


def bigram_rows(text: bytes) -> np.ndarray:
    """Peaked NN-like rows: byte bigram counts of the text (+1), scaled up, int64 [256, 256]."""
    counts = np.ones((256, 256), dtype=np.int64)
    np.add.at(counts, (np.frombuffer(text[:-1], np.uint8), np.frombuffer(text[1:], np.uint8)), 1)
    return counts * 997


def lane_steps(data: bytes, lanes: int, rows: np.ndarray | None, seed: int = 0):
    """Yields (freq [k, 256], symbols [k]) per step as the codec's lanes do (lane i is data
    [i*span, (i+1)*span), a prefix of lanes active); rows None: random rows."""
    n = len(data)
    span = -(-n // lanes)
    rng = np.random.default_rng(seed)
    prev = np.zeros(lanes, dtype=np.int64)
    for t in range(span):
        idx = [i for i in range(lanes) if i * span + t < n]
        k = len(idx)
        sym = np.array([data[i * span + t] for i in idx], dtype=np.int64)
        if rows is None:
            freq = rng.integers(1, 1 << 30, size=(k, 256), dtype=np.int64, endpoint=True)
        else:
            freq = rows[prev[:k]]
        prev[:k] = sym
        yield np.ascontiguousarray(freq), sym


def encode(stage: AdaptiveStage, data: bytes, lanes: int, rows, measure: bool = False):
    enc = stage.encoder(lanes, -(-len(data) // lanes), measure)
    for freq, sym in lane_steps(data, lanes, rows):
        enc.code(freq, sym)
    return enc.finish(), enc.bits


def decode(stage: AdaptiveStage, payload: bytes, n: int, lanes: int, rows, like: bytes) -> bytes:
    """Decodes with the rows the encoder saw (taken from `like`, the true data)."""
    dec = stage.decoder(lanes, -(-n // lanes), payload)
    out = bytearray(n)
    span = -(-n // lanes)
    for t, (freq, _) in enumerate(lane_steps(like, lanes, rows)):
        got = dec.code(freq)
        assert got.dtype == np.int64 and got.shape == (freq.shape[0],)
        for i, b in enumerate(got.tolist()):
            out[i * span + t] = b
    return bytes(out)


@pytest.mark.parametrize("lanes, peaked", [(1, True), (3, True), (7, False)])
def test_round_trip_across_blocks(text, lanes, peaked):
    rows = bigram_rows(text) if peaked else None
    blocks = [text[:9000], text[9000:14001], text[:3000]]  # the last repeats: the match model's case
    enc_stage, dec_stage = AdaptiveStage(SMALL), AdaptiveStage(SMALL)
    for block in blocks:
        payload, _ = encode(enc_stage, block, lanes, rows)
        assert decode(dec_stage, payload, len(block), lanes, rows, block) == block
    assert enc_stage.position == dec_stage.position == sum(map(len, blocks))


def test_round_trip_history_smaller_than_block(text):
    """A 1 KB history ring under 8 KB blocks: the match model must skip positions that a later
    byte of the block has overwritten, identically on both sides."""
    params = AdaptiveParams(table_bits=12, history_bits=10, match_bits=10, match_min=3)
    rows = bigram_rows(text)
    enc_stage, dec_stage = AdaptiveStage(params), AdaptiveStage(params)
    for block in (text[:8000], text[2000:10000]):
        payload, _ = encode(enc_stage, block, 5, rows)
        assert decode(dec_stage, payload, len(block), 5, rows, block) == block


def test_default_params_round_trip_and_gain(text):
    """At the defaults: a round trip, the stage beating the rows' own code length on text that
    repeats, and the coder within 0.1 % (plus a few bytes) of the ideal code length."""
    data = text[:6000] * 2
    rows = bigram_rows(text)
    model_bits = 0.0
    for freq, sym in lane_steps(data, 4, rows):
        f = freq.astype(np.float64)
        model_bits -= float(np.log2(f[np.arange(len(sym)), sym] / f.sum(1)).sum())
    payload, bits = encode(AdaptiveStage(), data, 4, rows, measure=True)
    assert decode(AdaptiveStage(), payload, len(data), 4, rows, data) == data
    assert bits < 0.7 * model_bits
    assert 8 * len(payload) <= bits * 1.001 + 32


def test_same_payload_every_run(text):
    data = text[:5000]
    rows = bigram_rows(text)
    first, _ = encode(AdaptiveStage(SMALL), data, 5, rows)
    again, _ = encode(AdaptiveStage(SMALL), data, 5, rows)
    assert first == again


def test_snapshot_restore(text):
    """A block coded and then dropped (stored another way) leaves no trace after restore."""
    rows = bigram_rows(text)
    a, dropped, b = text[:4000], text[4000:8000], text[8000:11000]
    stage = AdaptiveStage(SMALL)
    encode(stage, a, 3, rows)
    snap = stage.snapshot()
    encode(stage, dropped, 3, rows)
    stage.restore(snap)
    assert stage.position == len(a)
    with_restore, _ = encode(stage, b, 3, rows)
    clean = AdaptiveStage(SMALL)
    encode(clean, a, 3, rows)
    without, _ = encode(clean, b, 3, rows)
    assert with_restore == without
    with pytest.raises(ValueError):
        AdaptiveStage(AdaptiveParams(table_bits=17, history_bits=16, match_bits=12)).restore(snap)


def test_restoring_a_fresh_stage_makes_it_fresh(text):
    """A stage that has coded nothing snapshots as nothing; restoring that undoes a block."""
    rows = bigram_rows(text)
    stage = AdaptiveStage(SMALL)
    snap = stage.snapshot()
    encode(stage, text[:4000], 3, rows)
    stage.restore(snap)
    assert stage.position == 0
    assert encode(stage, text[4000:7000], 3, rows) == encode(AdaptiveStage(SMALL), text[4000:7000], 3, rows)


def test_damaged_payload_never_crashes(text):
    data = text[:3000]
    rows = bigram_rows(text)
    payload, _ = encode(AdaptiveStage(SMALL), data, 3, rows)
    rnd = random.Random(5)
    damaged = [b"", payload[: len(payload) // 2], bytes(rnd.randrange(256) for _ in range(len(payload))),
               b"\xff" * len(payload)]
    for _ in range(6):
        p = bytearray(payload)
        p[rnd.randrange(len(p))] ^= 1 << rnd.randrange(8)
        damaged.append(bytes(p))
    wrong = 0
    for p in damaged:
        out = decode(AdaptiveStage(SMALL), p, len(data), 3, rows, data)
        assert len(out) == len(data)
        wrong += out != data
    assert wrong >= len(damaged) - 1  # a flipped last bit may be harmless; the CRC catches the rest


def test_rejects_bad_rows():
    stage = AdaptiveStage(SMALL)
    enc = stage.encoder(2, 4)
    freq = np.ones((2, 256), dtype=np.int64)
    with pytest.raises(ValueError, match="frequencies"):
        enc.code(freq * 0, np.zeros(2, dtype=np.int64))
    with pytest.raises(ValueError, match="frequencies"):
        enc.code(freq * (2**30 + 1), np.zeros(2, dtype=np.int64))
    with pytest.raises(ValueError, match="lanes"):
        enc.code(np.ones((3, 256), dtype=np.int64), np.zeros(3, dtype=np.int64))
    with pytest.raises(ValueError, match="bytes"):
        enc.code(freq, np.array([0, 256]))


# ---- single components against hand-computed cases ----------------------------------------

def test_squash_table():
    sq = squash_table()
    assert len(sq) == 8191 and sq[4095] == 32768  # x = 0
    assert sq[0] == 1 and sq[-1] == 65535  # clamped at +-16 nats
    for x in (-3000, -700, -1, 1, 256, 1000, 2500):
        assert abs(sq[x + 4095] - 65536 / (1 + math.exp(-x / 256))) <= 0.5 + 1e-6
        assert sq[x + 4095] + sq[-x + 4095] == 65536 or abs(x) > 2700  # symmetric below the clamp
    assert all(a <= b for a, b in zip(sq, sq[1:]))


def test_stretch_inverts_squash():
    native = AdaptiveStage(SMALL).native
    squash, stretch = (lambda x: hooks().squash(native, x)), (lambda p: hooks().stretch(native, p))  # noqa: E731
    sq = squash_table()
    assert stretch(32768) == 0 and squash(0) == 32768
    for x in range(-3000, 3001, 37):  # where squash is strictly increasing, an exact inverse
        if sq[x + 4094] < sq[x + 4095] < sq[x + 4096]:
            assert stretch(sq[x + 4095]) == x
        else:
            assert sq[stretch(sq[x + 4095]) + 4095] == sq[x + 4095]
    assert stretch(65535) == -stretch(1) > 2700  # symmetric at the ends
    assert squash(99999) == 65535 and squash(-99999) == 1  # inputs are clamped


def test_counter_update_by_hand():
    stage = AdaptiveStage(SMALL).native
    # P22 = 2**21, n = 0, bit 1: rate 1/1.5 -> RECIP[0] = 131072 // 3 = 43690;
    # 2**21 + floor(2**21 * 43690 / 65536) = 2097152 + 1398080 = 3495232, n = 1
    cell = hooks().counter_update(stage, (2**21) << 10, 1, 1023)
    assert cell == (3495232 << 10) | 1
    # then bit 0 at n = 5: RECIP[5] = 131072 // 13 = 10082; floor(-3495232 * 10082 / 65536) = -537704
    cell = hooks().counter_update(stage, (3495232 << 10) | 5, 0, 1023)
    assert cell == ((3495232 - 537704) << 10) | 6
    # the count stops at the limit
    assert hooks().counter_update(stage, (3495232 << 10) | 3, 0, 3) & 1023 == 3


def test_mixer_step_by_hand():
    stage = AdaptiveStage(SMALL).native
    sq = squash_table()
    w, x, lr = [65536, 32768, -16384], [100, -400, 256], 16
    # dot = 65536*100 - 32768*400 - 16384*256 = -10747904 -> floor(/65536) = -164
    p, new_w = hooks().mixer_step(stage, w, x, 1, lr)
    assert p == sq[-164 + 4095]
    err = 65536 - p
    assert new_w == [wi + ((xi * err * lr + 2**19) >> 20) for wi, xi in zip(w, x)]


def test_apm_step_by_hand():
    stage = AdaptiveStage(SMALL).native
    cells = [j * 120000 for j in range(33)]
    # x = 300: u = 4396, cell j = 17, weight w = 44 (nearer to 17: it is the one trained)
    p, new = hooks().apm_step(stage, cells, 300, 1)
    assert p == ((cells[17] * 212 + cells[18] * 44) >> 8) >> 6
    assert new[17] == cells[17] + (((1 << 22) - cells[17]) >> 7)
    assert new[:17] + new[18:] == cells[:17] + cells[18:]


def test_bit_history_states():
    stage = AdaptiveStage(SMALL).native
    hist = hooks().bit_history
    n0, n1, after0, after1 = hist(stage, 0)
    assert (n0, n1) == (0, 0)
    assert hist(stage, after0)[:2] == [1, 0] and hist(stage, after1)[:2] == [0, 1]
    s = after0
    s = hist(stage, s)[2]  # two zeros: (2, 0); then a one discounts the zeros: (2, 1)
    assert hist(stage, hist(stage, s)[3])[:2] == [2, 1]


# ---------------------------------------------------------------------------------------------
# Version 2's models (csrc/stage/stage.h states their rules)

RECORDS = b"".join(b"2024-05-%02d 10:%02d:%02d host%d [%d] GET /api/v1/items/%d?q=\"a b\" {\"n\": [%d, %d]}\n"
                   % (d % 28 + 1, d % 60, (7 * d) % 60, d % 3, 1000 + d, 17 * d, d, d * d) for d in range(120))


def test_byte_classes_by_hand():
    marks = " \n\t\"&'()*+,-./:;<=>?@[]_{|}"
    want = {c: 0 if chr(c).isdigit() and c < 128 else 1 if 97 <= c <= 122 else 2 if 65 <= c <= 90 else
            3 if c >= 128 else 4 + marks.index(chr(c)) if chr(c) in marks else 31 for c in range(256)}
    assert [hooks().byte_class(c) for c in range(256)] == [want[c] for c in range(256)]


def test_fields_by_hand():
    after = hooks().structure_after
    # a field starts after each separator; a space right after a separator starts none
    field, starts, prev, *_ = after(b"ab,c,, d  e")
    assert (field, starts, prev) == (4, [0, 3, 5, 6, 9], [])
    # a newline ends the line: its starts become the previous line's
    field, starts, prev, *_ = after(b"x=1 (y)\nz")
    assert (field, starts, prev) == (0, [8], [0, 2, 4, 5, 7])
    # at most 16 fields: the 16th takes the rest of the line
    field, starts, _, *_ = after(b",".join([b"f"] * 20))
    assert field == 15 and starts == [0] + [2 * i for i in range(1, 16)]


def test_brackets_and_shape_by_hand():
    after = hooks().structure_after
    stack, depth, quoted = after(b'{"a": [1, "x]\\"y"')[3:6]
    assert (stack, depth, quoted) == (ord("{") << 8 | ord("["), 2, False)  # "]" inside a string is text
    stack, depth, quoted = after(b'(a))) <"')[3:6]
    assert (stack, depth, quoted) == (ord("<"), 1, True)  # closing at depth 0 is ignored
    shape = after(b"Ab9 ,")[6]
    assert shape & (2**30 - 1) == (2 << 20) | (1 << 15) | (0 << 10) | (4 << 5) | (4 + 10)


def hash32(x: int) -> int:
    """csrc/stage/components.h's hash32, in Python."""
    x ^= x >> 16
    x = x * 0x7FEB352D & 0xFFFFFFFF
    x ^= x >> 15
    x = x * 0x846CA68B & 0xFFFFFFFF
    return x ^ x >> 16


def test_field_above_eq_and_value_by_hand():
    """Version 4's record state: the byte above in the same field (256 + byte), whether the field
    so far repeats the line above's, and the hash of the field's bytes so far."""
    after = hooks().structure_after
    # "12:07" under "12:05": field 1 ("07") so far "0" equals "0" above; the next byte above is "5"
    above, eq, value = after(b"12:05 x\n12:0")[7:10]
    assert (above, eq) == (256 + ord("5"), True)
    assert value == hash32(ord("0")) | 1
    # "7" differs from the "5" above: the field no longer repeats it
    above, eq, value = after(b"12:05 x\n12:07")[7:10]
    assert (above, eq, value) == (256 + ord(" "), False, hash32((hash32(ord("0")) | 1) + ord("7")) | 1)
    # a separator starts a new field: it repeats the line above again (so far: nothing); its
    # field is longer here than above ("05" is 2 bytes): past its end there is no byte above
    above, eq, value = after(b"12:05 x\n12:077")[7:10]
    assert (above, eq) == (0, False)
    above, eq, value = after(b"12:05 x\n12:07 ")[7:10]
    assert (above, eq, value) == (256 + ord("x"), True, 0)
    # the first line has no line above
    assert after(b"ab")[7:9] == (0, False)


def test_warm_mixer_rate_by_hand():
    stage = AdaptiveStage(SMALL).native
    w, x, lr = [65536, 32768, -16384], [100, -400, 256], 16
    for seen in (0, 1, 1024, 10**6):
        p, new_w = hooks().mixer_step(stage, w, x, 1, lr, warm=1024, seen=seen)
        rate = lr + lr * 3 * 1024 // (1024 + seen)  # 4x at first, 2.5x after 1024 updates
        assert new_w == [wi + ((xi * (65536 - p) * rate + 2**19) >> 20) for wi, xi in zip(w, x)]


def records_payloads(p: AdaptiveParams, kernels: str = "auto", data: bytes = RECORDS) -> list[bytes]:
    """`data` (RECORDS) coded by one stage in two blocks (its first 7000 bytes in 3 lanes, then the
    rest in 1), each decoded by another stage and checked: the payloads."""
    rows = bigram_rows(data)
    enc_stage, dec_stage = AdaptiveStage(p, kernels), AdaptiveStage(p, kernels)
    payloads = []
    for lanes, block in ((3, data[:7000]), (1, data[7000:])):
        payload, _ = encode(enc_stage, block, lanes, rows)
        assert decode(dec_stage, payload, len(block), lanes, rows, block) == block
        payloads.append(payload)
    return payloads


@pytest.mark.parametrize("flag", ["fields", "brackets", "layered", "shape", "local_match", "local_ctx", "warm"])
def test_each_version_2_model_round_trips_and_counts(flag):
    """Each model alone on version 1's stage: encoder and decoder agree across lanes and blocks,
    and the model changes the code (it is wired in)."""
    base = SMALL.at_version(1)
    params = replace(base, **{flag: True})
    assert params.version == 2 and AdaptiveParams.unpack(params.pack(), 2) == params
    assert records_payloads(base) != records_payloads(params)


def test_version_2_packs_its_models_in_a_ninth_byte():
    p = AdaptiveParams().at_version(2)
    assert p.version == 2 and len(p.pack()) == 9 and AdaptiveParams.unpack(p.pack(), 2) == p
    v1 = p.at_version(1)
    assert v1.version == 1 and v1.pack() == p.pack()[:8] and AdaptiveParams.unpack(v1.pack(), 1) == v1
    with pytest.raises(CorruptArchive):
        AdaptiveParams.unpack(p.pack(), 1)  # a version 1 header has 8 bytes
    with pytest.raises(CorruptArchive):
        AdaptiveParams.unpack(v1.pack() + b"\x00", 2)  # version 2 with none of its models
    with pytest.raises(CorruptArchive):
        AdaptiveParams.unpack(v1.pack() + b"\x80", 2)  # version 3's model in a version 2 header


def test_version_3_adds_the_match_context():
    """match_ctx alone on version 2's stage: version 3, bit 7 of the ninth byte; encoder and
    decoder agree across lanes and blocks, and it changes the code. A version 3 header without
    it, or of the wrong size, is damaged; it alone on version 1's models is a version 3 stage."""
    v2 = replace(SMALL, match=True).at_version(2)
    v3 = replace(v2, match_ctx=True)
    assert (v2.version, v3.version) == (2, 3) and AdaptiveParams().at_version(3).version == 3
    assert v3.pack() == v2.pack()[:8] + bytes([v2.pack()[8] | 0x80])
    assert AdaptiveParams.unpack(v3.pack(), 3) == v3
    for bad in (v2.pack(), v3.pack()[:8] + b"\xff\x00", v3.pack()[:8]):
        with pytest.raises(CorruptArchive):
            AdaptiveParams.unpack(bad, 3)
    alone = replace(v3.at_version(1), match_ctx=True)
    assert alone.version == 3 and AdaptiveParams.unpack(alone.pack(), 3) == alone
    no_match = replace(v3, match=False)  # a context of the last two bytes alone
    assert AdaptiveParams.unpack(no_match.pack(), 3) == no_match
    records_payloads(no_match)
    assert records_payloads(v2) != records_payloads(v3)


@pytest.mark.parametrize("flag", ["field_value", "field_eq", "match_apm"])
def test_each_version_4_model_round_trips_and_counts(flag):
    """Each of version 4's models alone on version 3's stage, and alone on version 1's models
    with neither the match model nor the line models (whose history ring field_eq then needs
    on its own): version 4, extras in two bytes; encoder and decoder agree across lanes and
    blocks, and the model changes the code."""
    v3 = SMALL.at_version(3)
    params = replace(v3, **{flag: True})
    assert params.version == 4 and len(params.pack()) == 10
    assert params.pack() == v3.pack()[:8] + (v3.extras | 1 << EXTRA_FLAGS.index(flag)).to_bytes(2, "little")
    assert AdaptiveParams.unpack(params.pack(), 4) == params
    assert records_payloads(v3) != records_payloads(params)
    bare = replace(SMALL.at_version(1), match=False, column=False, **{flag: True})
    assert bare.version == 4 and AdaptiveParams.unpack(bare.pack(), 4) == bare
    assert records_payloads(replace(bare, **{flag: False})) != records_payloads(bare)


def test_version_4_headers():
    """A version 4 header holds one of its models, in 10 bytes."""
    p = AdaptiveParams().at_version(4)
    assert p.version == 4 and AdaptiveParams.unpack(p.pack(), 4) == p
    v3 = p.at_version(3)
    assert v3.version == 3 and v3.pack() == p.pack()[:8] + p.pack()[8:9]
    for bad in (v3.pack() + b"\x00", p.pack()[:9], p.pack() + b"\x00", p.pack()[:8] + b"\xff\x08"):
        with pytest.raises(CorruptArchive):
            AdaptiveParams.unpack(bad, 4)


def test_digits_by_hand():
    """Version 5's state: the digits ending at the last byte (at most 16), and mixer 3's weight
    set at bit 0: 256 + (digits - 1) * 8 + 128 * min(field, 7) within a number, else c1."""
    after = hooks().structure_after
    assert after(b"ab,123")[10:12] == (3, 256 + 2 * 8 + 128 * 1)
    assert after(b"x " + b"9" * 20)[10:12] == (16, 256 + 15 * 8 + 128 * 1)  # counted up to 16
    assert after(b"7")[10:12] == (1, 256)  # the first field of the first line
    assert after(b"12a")[10:12] == (0, ord("a"))  # any other byte ends the number
    assert after(b"1\n")[10:12] == (0, ord("\n"))
    assert after(b"a,b,c,d,e,f,g,h,i,9")[10:12] == (1, 256 + 128 * 7)  # fields 7 and later share sets


def assert_refused_without(params: AdaptiveParams, model: str, needed: str, version: int):
    """`params` without the model `needed`, which their `model` requires (csrc/stage/models.def):
    a header saying so is damaged, and the stage refuses to be built."""
    lone = replace(params, **{needed: False})
    with pytest.raises(CorruptArchive, match=f"{model} without {needed}"):
        AdaptiveParams.unpack(lone.pack(), version)
    with pytest.raises(ValueError, match=f"the {model} model needs {needed}"):
        AdaptiveStage(lone)


def assert_adds_model(flag: str, version: int, bare: AdaptiveParams) -> None:
    """`flag` on the stage of the version before, and on `bare` (version 1's models, with what the
    model needs): stage `version`, extras in its header's bytes; encoder and decoder agree across lanes and
    blocks, and the model changes the code."""
    before = SMALL.at_version(version - 1)
    params = replace(before, **{flag: True})
    size = PARAMS_BYTES[version]
    assert params.version == version and len(params.pack()) == size
    extras = before.extras | 1 << EXTRA_FLAGS.index(flag)
    assert params.pack() == before.pack()[:8] + extras.to_bytes(size - 8, "little")
    assert AdaptiveParams.unpack(params.pack(), version) == params
    assert records_payloads(before) != records_payloads(params)
    lone = replace(bare, **{flag: True})
    assert lone.version == version and AdaptiveParams.unpack(lone.pack(), version) == lone
    assert records_payloads(bare) != records_payloads(lone)


def test_version_5_model_round_trips_and_counts():
    """The digits model on version 4's stage, and on version 1's models with only the layered
    mixers (which it needs); without them it is refused."""
    bare = replace(SMALL.at_version(1), layered=True)
    assert_adds_model("digits", 5, bare)
    assert_refused_without(replace(bare, digits=True), "digits", "layered", 5)


@pytest.mark.parametrize("version", [5, 6, 7, 8])
def test_version_5_to_8_headers(version):
    """A version 5, 6, 7 or 8 header is the version before's with its models' bits of extras (11,
    12, 13; 14 and 15), and holds no later version's; the default parameters are the newest
    version's."""
    p = AdaptiveParams().at_version(version)
    assert p.version == version and AdaptiveParams.unpack(p.pack(), version) == p
    bits = ((1 << EXTRAS_OF[version]) - (1 << EXTRAS_OF[version - 1])) >> 8  # in the tenth byte
    before = p.at_version(version - 1)
    assert before.pack() == p.pack()[:9] + bytes([p.pack()[9] & ~bits])
    later = [p.pack()[:8] + bytes([0xFF, bits << 1 & 0xFF])] if bits < 0x80 else []  # version 8 fills the byte
    for bad in [before.pack(), p.pack()[:9], p.pack() + b"\x00"] + later:
        with pytest.raises(CorruptArchive):
            AdaptiveParams.unpack(bad, version)
    assert AdaptiveParams().version == VERSION


def test_version_9_header():
    """A version 9 header is version 8's with an eleventh byte holding its models' bits of extras
    (16-18), not 0; version 8 cannot hold them, and a version 9 header without them is damaged."""
    p, before = AdaptiveParams().at_version(9), AdaptiveParams().at_version(8)
    assert p.version == 9 and AdaptiveParams.unpack(p.pack(), 9) == p
    assert p.pack() == before.pack() + bytes([0b111]) and len(before.pack()) == 10
    for bad in [before.pack() + b"\x00", before.pack() + b"\x08", p.pack()[:10], p.pack() + b"\x00"]:
        with pytest.raises(CorruptArchive):
            AdaptiveParams.unpack(bad, 9)
    with pytest.raises(CorruptArchive):
        AdaptiveParams.unpack(p.pack(), 8)


def test_recover_by_hand():
    """Version 6's recovering match, step by step: (ptr, len, misses) after byte c from its own
    state and predicted byte, and the match models' (len, ptr, predicted byte) before c."""
    step = hooks().recover_step
    a, b, x, y = (ord(ch) for ch in "abxy")
    assert step(0, 0, 0, -1, [(16, 100, a)], b) == (101, 0, 1)  # a 16-byte match mispredicts: followed on
    assert step(0, 0, 0, -1, [(15, 100, a)], b) == (0, 0, 0)  # 15 bytes are not enough
    assert step(0, 0, 0, -1, [(40, 100, b)], b) == (0, 0, 0)  # it predicted c
    assert step(0, 0, 0, -1, [(40, 100, -1)], b) == (0, 0, 0)  # its byte unknown to the decoder
    assert step(0, 0, 0, -1, [(20, 100, a), (30, 500, x)], b) == (101, 0, 1)  # the first model's first
    assert step(0, 0, 0, -1, [(20, 100, b), (30, 500, x)], b) == (501, 0, 1)
    assert step(200, 3, 2, x, [], x) == (201, 4, 2)  # a hit lengthens it
    assert step(200, 3, 2, y, [], x) == (201, 0, 3)  # a miss counts
    assert step(200, 3, 2, -1, [], x) == (201, 0, 3)  # so does a byte the decoder cannot know
    assert step(200, 0, 15, y, [], x) == (201, 0, 16)
    assert step(200, 0, 16, y, [], x) == (201, 0, 0)  # the 16th miss ends it
    assert step(200, 65535, 1, x, [], x) == (201, 65535, 1)  # its length saturates
    assert step(200, 5, 3, x, [(40, 900, a)], x) == (901, 0, 1)  # a new mispredicting match replaces it
    assert step(200, 0, 0, x, [], x) == (200, 0, 0)  # none stays none


def test_version_6_model_round_trips_and_counts():
    """The recovering match on version 5's stage, and on version 1's models (it needs only the
    match model); without the match model it is refused."""
    assert_adds_model("recover", 6, SMALL.at_version(1))
    assert_refused_without(replace(SMALL.at_version(1), recover=True), "recover", "match", 6)


def test_line_match_by_hand():
    """Version 7's line matchers after each byte, ((ptr, len) of the first, of the second): the
    latest occurrence of the last 2 bytes, taken in this line by the first, in this line or the
    one before by the second, followed while it predicts, ended by a miss or a newline."""
    def last(data: bytes):
        return hooks().line_match_trace(AdaptiveStage(SMALL).native, squash_table(), data)[-1]
    assert last(b"abXab") == ((2, 2), (2, 2))  # "ab" at 0-1: both predict the X at 2
    assert last(b"abXabX") == ((3, 3), (3, 3))  # a hit lengthens both
    assert last(b"abXabY") == ((0, 0), (0, 0))  # a miss ends them ("bY" never seen)
    assert last(b"abXabYab") == ((5, 2), (5, 2))  # the latest occurrence, at 3-4
    assert last(b"abX\nab") == ((0, 0), (2, 2))  # only the second looks in the line before
    assert last(b"abX\nY\nab") == ((0, 0), (0, 0))  # neither two lines back
    assert last(b"abX\nabX\n") == ((0, 0), (0, 0))  # a newline ends them
    assert last(b"abcd\nabcd") == ((0, 0), (4, 4))  # the second follows on into the line before's end
    assert last(b"a") == ((0, 0), (0, 0))
    trace = hooks().line_match_trace(AdaptiveStage(SMALL).native, squash_table(), b"k=v,k=v")
    assert [row[0] for row in trace] == [(0, 0)] * 5 + [(2, 2), (3, 3)]


def test_number_by_hand():
    """Version 8's number state: digits before the point, after it, and whether it has one (all
    counted to at most 15); any byte but a digit or a number's first point ends the number."""
    after = hooks().structure_after
    assert after(b"x -31.95")[12:15] == (2, 2, True)
    assert after(b"x 104.")[12:15] == (3, 0, True)
    assert after(b"x 104.5.")[12:15] == (0, 0, False)  # a second point ends it
    assert after(b".5")[12:15] == (1, 0, False)  # a point before any digit is no number's
    assert after(b"12a")[12:15] == (0, 0, False)
    assert after(b"9" * 20 + b"." + b"1" * 17)[12:15] == (15, 15, True)
    assert after(b"1,2")[12:15] == (1, 0, False)  # a new number after the comma


def test_version_8_models_round_trip_and_count():
    """The number and record contexts, each on version 7's stage and on version 1's models."""
    for flag in ("number", "record"):
        assert_adds_model(flag, 8, SMALL.at_version(1))


@pytest.mark.parametrize("path", _core.available_kernels())
def test_mixer_on_every_kernel_path_by_hand(path):
    """The mixers' dot product and training on each kernel path, at the bounds the contract keeps
    (weights +-2**24, inputs +-4095, the fastest warm rate 4 * 64) and on random values, against
    the contract's formulas; lengths up to the stage's most inputs (86), so that every vector tail
    is met."""
    stage = AdaptiveStage(SMALL, kernels=path).native
    assert stage.kernels == path
    sq, rng = squash_table(), random.Random(5)
    cases = [([2**24, -(2**24)] * 15 + [2**24], [4095, -4095] * 15 + [4095], 0, 64),
             ([-(2**24)] * 31, [4095] * 31, 1, 64), ([2**24] * 86, [-4095] * 86, 1, 64)]
    for _ in range(300):
        n = rng.randint(1, 86)
        cases.append(([rng.randint(-(2**24), 2**24) for _ in range(n)], [rng.randint(-4095, 4095) for _ in range(n)],
                      rng.randint(0, 1), rng.randint(1, 64)))
    for w, x, y, lr in cases:
        p, new_w = hooks().mixer_step(stage, w, x, y, lr, warm=1024, seen=0)  # rate 4 lr
        assert p == sq[min(max(sum(wi * xi for wi, xi in zip(w, x)) >> 16, -4095), 4095) + 4095]
        e = (y * 65536 - p) * 4 * lr
        assert new_w == [min(max(wi + ((xi * e + 2**19) >> 20), -(2**24)), 2**24) for wi, xi in zip(w, x)]


def test_kernel_paths_code_alike():
    """Every kernel path this CPU runs makes the same payloads, and decodes them."""
    payloads = {path: records_payloads(SMALL, path) for path in _core.available_kernels()}
    assert len(set(map(tuple, payloads.values()))) == 1


def test_version_7_model_round_trips_and_counts():
    """The line matchers on version 6's stage, and on version 1's models without the match model
    or the column model (the history ring is then its own)."""
    assert_adds_model("line_match", 7, replace(SMALL.at_version(1), match=False, column=False))


def test_version_9_mixer_sets_by_hand():
    """Version 9's fifth and sixth mixers' weight sets at bit 0: by the classes of the last two
    bytes ((class(c1) * 32 + class(c2)) * 8), and by the field, the brackets' depth (to 3), being
    in a string and in a number (((field * 16 + depth * 4) + quoted * 2 + number) * 8)."""
    after = hooks().structure_after
    assert after(b"ab1")[15] == (0 * 32 + 1) * 8  # a digit after a lower-case letter
    assert after(b"A ")[15] == (4 * 32 + 2) * 8  # a space (class 4) after an upper-case letter
    assert after(b"x")[15] == (1 * 32 + 31) * 8  # before the first byte c2 is 0, of class 31
    assert after(b"k 12")[16] == (1 * 16 + 0 + 0 + 1) * 8  # field 1, in a number
    assert after(b'{"a')[16] == (2 * 16 + 1 * 4 + 2) * 8  # field 2 (after '{' and '"'), depth 1, in a string
    assert after(b"[[[[[x")[16] == (5 * 16 + 3 * 4) * 8  # depth counts to 3
    assert after(b"a b c d e f g h i j k l m n o p q r 7")[16] == (15 * 16 + 1) * 8  # fields count to 15


def test_version_9_models_round_trip_and_count():
    """The predicted-byte context on version 8's stage and on version 1's models; the class and
    state mixers on version 8's and on version 1's with the layered mixers, which they need
    (without them they are refused)."""
    assert_adds_model("predicted", 9, SMALL.at_version(1))
    bare = replace(SMALL.at_version(1), layered=True)
    for flag in ("class_mix", "state_mix"):
        assert_adds_model(flag, 9, bare)
        assert_refused_without(replace(bare, **{flag: True}), flag, "layered", 9)


@pytest.mark.parametrize("version, bits, unknown", [(10, 0b11111, 0b100111), (11, 0b111111, 0b1011111),
                                                  (12, 0b1111111, 0b10111111), (13, 0b11111111, None)])
def test_version_10_to_13_headers(version, bits, unknown):
    """A version 10 (11, 12, 13) header is the version before's with its models' bits (19 and 20; 21;
    22; 23) added to the eleventh byte; the version before cannot hold them, and a header without
    them, or with a later version's bit (none fits in version 13's byte), is damaged."""
    p, before = AdaptiveParams().at_version(version), AdaptiveParams().at_version(version - 1)
    assert p.version == version and AdaptiveParams.unpack(p.pack(), version) == p
    assert p.pack() == before.pack()[:10] + bytes([bits]) and len(p.pack()) == PARAMS_BYTES[version] == 11
    later = [] if unknown is None else [before.pack()[:10] + bytes([unknown])]
    for bad in [before.pack(), p.pack()[:10], p.pack() + b"\x00"] + later:
        with pytest.raises(CorruptArchive):
            AdaptiveParams.unpack(bad, version)
    with pytest.raises(CorruptArchive):
        AdaptiveParams.unpack(p.pack(), version - 1)


def test_cells_by_hand():
    """Version 10's cells (split by , tab ; | only) and, before the next byte, the bytes at its
    offset in the previous cell (left) and in this cell of the line above (up), as 256 + byte or
    0, with whether the cell so far repeats each (structure_after's items 17-22)."""
    after = hooks().structure_after
    cells = lambda data: after(data)[17:23]  # noqa: E731
    # "Liv" repeats the name's first cell-bytes: left is the name's 4th byte, 'i'
    assert cells(b"00R,Livingston Municipal,Liv") == (2, [0, 4, 25], 256 + ord("i"), True, 0, False)
    # a cell as long as the one before: left is that cell's separator; a space splits no cell
    assert cells(b"a b,a b") == (1, [0, 4], 256 + ord(","), True, 0, False)
    assert cells(b"ab,abc") == (1, [0, 3], 0, False, 0, False)  # past the left cell's separator: none
    assert cells(b"ab,x")[2:4] == (256 + ord("b"), False)  # one byte that differs ends left_eq
    # the line above: this cell's byte there (its newline at its end), whatever the widths before
    assert cells(b"x,KTS,1\nlong,KV") == (1, [8, 13], 256 + ord("n"), False, 256 + ord("S"), False)
    assert cells(b"x,KTS,1\nlong,KTS") == (1, [8, 13], 256 + ord("g"), False, 256 + ord(","), True)
    assert cells(b"ab\nab") == (0, [3], 0, False, 256 + ord("\n"), True)
    assert cells(b"a,b\nc,d,e")[0:2] == (2, [4, 6, 8]) and cells(b"a,b\nc,d,e")[4] == 0  # no cell 2 above
    assert cells(b"," * 20)[0:1] == (15,)  # at most 16 cells: the last takes the rest
    # CELL_ORDER's map context (((min(cell, 7) * 2 + up_eq) * 4 + r) * 2 + u) * 8 + k and CELL_LEFT's
    # band min(cell, 7) * 2 + left_eq; up 'M' = 0b01001101 under "00M" / "00"
    ctx = lambda data, k, c0: hooks().cell_contexts(data, k, c0)[:2]  # noqa: E731
    up_m = b"00M,x\n00"
    assert ctx(up_m, 0, 1) == ((((0 * 2 + 1) * 4 + 1) * 2 + 0) * 8 + 0, 0)  # r = 1 (equal so far), u = 0
    assert ctx(up_m, 2, 0b101) == ((((0 * 2 + 1) * 4 + 1) * 2 + 0) * 8 + 2, 0)  # bits 01 as up's, its bit 2 is 0
    assert ctx(up_m, 2, 0b110) == ((((0 * 2 + 1) * 4 + 2) * 2 + 0) * 8 + 2, 0)  # 10 > 01: greater
    assert ctx(up_m, 2, 0b100) == ((((0 * 2 + 1) * 4 + 3) * 2 + 0) * 8 + 2, 0)  # 00 < 01: less
    assert ctx(up_m, 1, 0b10) == ((((0 * 2 + 1) * 4 + 1) * 2 + 1) * 8 + 1, 0)  # equal, up's bit 1 is 1
    assert ctx(b"x,y", 3, 0b1010) == (((2 * 4 + 0) * 2 + 0) * 8 + 3, 1 * 2 + 0)  # cell 1, no up: r = u = 0
    assert ctx(b"ab,a", 0, 1)[1] == 1 * 2 + 1  # cell 1 repeating the cell before
    assert ctx(b"," * 12 + b"\n" + b"," * 12, 0, 1) == ((((7 * 2 + 1) * 4 + 1) * 2 + 0) * 8, 7 * 2 + 1)


def test_version_10_models_round_trip_and_count():
    """Each table model on version 9's stage, and on version 1's models without the match model or
    the column model (the history ring is then theirs)."""
    for flag in EXTRA_FLAGS[EXTRAS_OF[9]:EXTRAS_OF[10]]:
        assert_adds_model(flag, 10, replace(SMALL.at_version(1), match=False, column=False))


def test_table_models_follow_the_input():
    """A level's stage keeps version 10's table models (and version 16's cell context) for a table
    and leaves them out elsewhere (its archive is then version 9's, byte for byte), and leaves the
    token models (versions 15's and 16's) out of a table only; explicit parameters are kept as they
    are."""
    rows = b"".join(b"%d,KX%c,Town %d,AK,%.4f\n" % (i, 65 + i % 26, i % 7, i / 7) for i in range(40))
    assert looks_tabular(rows) and looks_tabular(rows.replace(b",", b"\t"))
    prose = b"".join(b"so, " * (i % 4) + b"the wind blew; it was cold\n" for i in range(40))
    assert not looks_tabular(prose)  # commas, but never as many as in the line before
    assert not looks_tabular(b"one, two, three\nfour\n" * 40)
    assert looks_tabular(b"one, two, three\n" * 40)  # a count kept from line to line
    assert not looks_tabular(rows.split(b"\n", 3)[0] + b"\n")  # too few lines to tell
    assert AdaptiveParams().for_data(rows) == replace(AdaptiveParams(), tokens=False, this_token=False, nest=False)
    assert AdaptiveParams().for_data(prose) == replace(AdaptiveParams(), cell_left=False, cell_order=False,
                                                       cell_up=False)
    assert AdaptiveParams().at_version(14).for_data(rows) == AdaptiveParams().at_version(14)
    assert AdaptiveParams().at_version(10).for_data(prose) == AdaptiveParams().at_version(9)
    assert AdaptiveParams().at_version(1).for_data(rows) == AdaptiveParams().at_version(1)


def test_last_number_by_hand():
    """Version 11's last number (structure_after's item 23): the digits before its point << 8 | the
    first two of them, once a byte ends it; 0 before any number has ended."""
    last = lambda data: hooks().structure_after(data)[23]  # noqa: E731
    assert last(b"x 307,") == 3 << 8 | 30
    assert last(b'"Horsepower":130,\n') == 3 << 8 | 13
    assert last(b"x 1.5 ") == 1 << 8 | 1  # the digits after the point do not count
    assert last(b"12.34.5") == 2 << 8 | 12  # a second point ends the number; "5" has not ended
    assert last(b"a 9 b") == 1 << 8 | 9
    assert last(b"12345x") == 5 << 8 | 12
    assert last(b"7" * 20 + b" ") == 15 << 8 | 77  # its digits counted to 15
    assert last(b"1") == 0 and last(b"abc") == 0
    assert last(b"10 20 x") == 2 << 8 | 20  # the latest


def test_version_11_model_round_trips_and_counts():
    """The last-number context on version 10's stage and on version 1's models."""
    assert_adds_model("last_number", 11, SMALL.at_version(1))


def test_runs_by_hand():
    """Version 12's run entry (chk << 24 | last byte << 16 | the different byte before << 8 | run
    length) after each byte seen in its context."""
    after = hooks().run_after
    e = after(0, 7, ord("a"))  # empty: the context's first byte
    assert e == 7 << 24 | ord("a") << 16 | ord("a") << 8 | 1
    e = after(e, 7, ord("a"))
    assert e == 7 << 24 | ord("a") << 16 | ord("a") << 8 | 2
    e = after(e, 7, ord("b"))  # another byte: the run starts over, the last one kept before it
    assert e == 7 << 24 | ord("b") << 16 | ord("a") << 8 | 1
    assert after(e, 9, ord("c")) == 9 << 24 | ord("c") << 16 | ord("c") << 8 | 1  # another context's entry
    full = 7 << 24 | ord("b") << 16 | ord("a") << 8 | 255
    assert after(full, 7, ord("b")) == full  # the run is counted to 255
    with pytest.raises(ValueError):
        after(0, 256, 0)


def test_version_12_model_round_trips_and_counts():
    """The run inputs on version 11's stage and on version 1's models (order 1 alone has no run
    table: its direct table is not hashed)."""
    assert_adds_model("runs", 12, SMALL.at_version(1))


def test_groups_by_hand():
    """Version 13's groups (structure_after's items 24 and 25): the last 8 byte groups, the latest
    lowest, a digit's or letter's group not added again after one of its own, and whether the last
    byte was such a repeat."""
    after = lambda data: hooks().structure_after(data)[24:26]  # noqa: E731
    pack = lambda gs: sum(g << 8 * i for i, g in enumerate(reversed(gs)))  # noqa: E731
    assert after(b"") == (0, False)
    assert after(b'"key": 12,') == (pack(b'"a": 0,'), False)
    assert after(b'"other_key": 3405,') == (pack(b'a_a": 0,'), False)  # '_' is its own group; 8 kept
    assert after(b"x = 12") == (pack(b"a = 0"), True)  # the 2 repeated the digits' group
    assert after(b"Ab") == (pack(b"Aa"), False)  # case changes the group
    assert after(b"AB") == (pack(b"A"), True)
    assert after("é".encode() * 3) == (pack(bytes([128] * 6)), False)  # bytes >= 128: one group, each added
    assert after(b"((((((((((") == (pack(b"(" * 8), False)  # punctuation is always added
    assert after(b"a1b2c3d4e5") == (pack(b"a0a0a0a0"), False)  # 8 kept


def test_version_13_model_round_trips_and_counts():
    """The groups context on version 12's stage and on version 1's models."""
    assert_adds_model("groups", 13, SMALL.at_version(1))


def test_version_14_header():
    """A version 14 header is version 13's with its three models' bits (24 to 26) in a twelfth
    byte; version 13's eleven bytes cannot hold them, and a header without them, or with a later
    version's bit, is damaged."""
    p, before = AdaptiveParams().at_version(14), AdaptiveParams().at_version(13)
    assert p.version == 14 and AdaptiveParams.unpack(p.pack(), 14) == p
    assert p.pack() == before.pack() + bytes([0b111]) and len(p.pack()) == PARAMS_BYTES[14] == 12
    for bad in [before.pack(), before.pack() + b"\x00", p.pack()[:11] + bytes([0b1000]), p.pack() + b"\x00"]:
        with pytest.raises(CorruptArchive):
            AdaptiveParams.unpack(bad, 14)
    with pytest.raises(CorruptArchive):
        AdaptiveParams.unpack(p.pack(), 13)


def test_version_14_models_round_trip_and_count():
    """The group-word context on version 13's stage and on version 1's models; the group mixer on
    version 13's and on version 1's with the layered mixers, the group APM with the APMs, which
    they need (without them they are refused)."""
    assert_adds_model("group_word", 14, SMALL.at_version(1))
    bare = replace(SMALL.at_version(1), layered=True)
    assert_adds_model("group_mix", 14, bare)
    assert_refused_without(replace(bare, group_mix=True), "group_mix", "layered", 14)
    assert SMALL.at_version(1).apm
    assert_adds_model("group_apm", 14, SMALL.at_version(1))
    assert_refused_without(replace(SMALL.at_version(1), group_apm=True), "group_apm", "apm", 14)


def test_tokens_by_hand():
    """Version 15's tokens (structure_after's items 26 and 27): the hash of the current token (a
    run of letters, digits, '_', '$' and bytes >= 128; 0 outside one) and the last 3 tokens ended,
    the latest first, a punctuation byte being a token of its own (256 + byte) and spaces none."""
    after = lambda data: hooks().structure_after(data)[26:28]  # noqa: E731

    def tok(word: bytes) -> int:
        t = 0
        for c in word:
            t = hash32((t + c + 1) & 0xFFFFFFFF) | 1
        return t

    assert after(b"") == (0, [0, 0, 0])
    assert after(b"ab") == (tok(b"ab"), [0, 0, 0])
    assert after(b"x = y") == (tok(b"y"), [256 + ord("="), tok(b"x"), 0])
    assert after(b"a.b(") == (0, [256 + ord("("), tok(b"b"), 256 + ord(".")])
    assert after(b"$el_2\r\n\t") == (0, [tok(b"$el_2"), 0, 0])
    assert after("é1".encode()) == (tok("é1".encode()), [0, 0, 0])  # bytes >= 128 belong to tokens
    assert after(b"if (a) {") == (0, [256 + ord("{"), 256 + ord(")"), tok(b"a")])  # 3 kept


def test_indirect_by_hand():
    """Version 15's indirect tables: for the byte after the input, the last 2 bytes (the latest
    low) that followed its last byte, its last 2 bytes and (hashed) its last 3 bytes."""
    after = hooks().indirect_after
    assert after(b"", 16) == [0, 0, 0]
    assert after(b"abab", 16) == [ord("a"), ord("a"), 0]  # "b" and "ab" were followed by "a"; "bab" never
    assert after(b"xaxbx", 16)[0] == ord("a") << 8 | ord("b")  # two bytes kept, the latest low
    assert after(b"xyzaxyzbxyz", 16) == [ord("a") << 8 | ord("b")] * 3
    assert after(b"xaxbxcx", 12)[0] == ord("b") << 8 | ord("c")  # the older ones shifted out


def test_version_15_header():
    """A version 15 header is version 14's twelve bytes with its two models' bits (27 and 28);
    one without them, or with a later version's bit, is damaged, and version 14 does not know them."""
    p, before = AdaptiveParams().at_version(15), AdaptiveParams().at_version(14)
    assert p.version == 15 and AdaptiveParams.unpack(p.pack(), 15) == p
    assert p.pack() == before.pack()[:11] + bytes([before.pack()[11] | 0b11000]) and len(p.pack()) == PARAMS_BYTES[15]
    for bad in [before.pack(), p.pack()[:11] + bytes([p.pack()[11] | 0b100000]), p.pack() + b"\x00"]:
        with pytest.raises(CorruptArchive):
            AdaptiveParams.unpack(bad, 15)
    with pytest.raises(CorruptArchive):
        AdaptiveParams.unpack(p.pack(), 14)


def test_version_15_models_round_trip_and_count():
    """The tokens and indirect contexts, each on version 14's stage and on version 1's models."""
    for flag in ("tokens", "indirect"):
        assert_adds_model(flag, 15, SMALL.at_version(1))


def test_places_context_by_hand():
    """Version 16's places context: in a number, its digits before and after the point, whether it
    has one, and the last byte alone; outside a number 0 (order 0)."""
    ctx = hooks().places_context
    assert ctx(b"x -31.953") == 2 << 32 | 3 << 24 | 1 << 20 | ord("3")
    assert ctx(b"x 104.") == 3 << 32 | 0 << 24 | 1 << 20 | ord(".")
    assert ctx(b"id 7") == 1 << 32 | ord("7")
    assert ctx(b"x 12a") == ctx(b"") == ctx(b"1,") == 0


def test_this_token_context_by_hand():
    """Version 16's current-token context: the current token's hash (as TOKENS forms it) while in a
    token, else 2**40 | the last token ended (256 + byte for a one-byte token)."""
    ctx, after = hooks().this_token_context, hooks().structure_after
    assert ctx(b"x = ab") == after(b"x = ab")[26] != 0
    assert ctx(b"x = ") == 1 << 40 | 256 + ord("=")
    assert ctx(b"a.b") == after(b"b")[26]  # the token alone, whatever came before it
    assert ctx(b"") == 1 << 40


def test_nest_context_by_hand():
    """Version 16's nest context: the innermost open bracket << 40 | min(depth, 15) << 32 | the
    current token (between tokens, the last one), brackets and tokens as BRACKETS and TOKENS track them."""
    ctx, after = hooks().nest_context, hooks().structure_after
    tok = after(b"f(a, bc")[26]
    assert ctx(b"f(a, bc") == ord("(") << 40 | 1 << 32 | tok
    assert ctx(b"x = [{") == ord("{") << 40 | 2 << 32 | 256 + ord("{")  # '{' the last token
    assert ctx(b"a)") == 256 + ord(")")  # a ')' with none open pops nothing
    assert ctx(b"(" * 20) == ord("(") << 40 | 15 << 32 | 256 + ord("(")  # depth counted to 15


def test_cell_up_context_by_hand():
    """Version 16's cell context (cell_contexts' third item): the byte above in this cell (256 +
    byte, 0: none), whether the cell so far repeats it, the cell and the byte's offset in it (to 15)."""
    ctx = lambda data: hooks().cell_contexts(data, 0, 1)[2]  # noqa: E731
    up = lambda byte, eq, cell, offset: (256 + byte if byte else 0) << 24 | eq << 20 | cell << 12 | offset  # noqa: E731
    assert ctx(b"00M,Thigpen\n00R,Li") == up(ord("i"), False, 1, 2)  # after "Li" under "Thigpen": 'i' above
    assert ctx(b"00M,x\n00") == up(ord("M"), True, 0, 2)  # "00" repeats "00M" so far
    assert ctx(b"00M,x\n01") == up(ord("M"), False, 0, 2)
    assert ctx(b"a,b\nc,d,") == up(0, True, 2, 0)  # no cell 2 above
    assert ctx(b"x," + b"y" * 40) == up(0, False, 1, 15)  # offsets counted to 15; no byte above to repeat
    assert ctx(b"") == up(0, True, 0, 0)


def test_slow_final_mixer_rate():
    """Version 16's slow final mixer learns at a quarter of the mixers' rate, at least 1; without
    it at theirs."""
    for lr, slow in ((16, 4), (3, 1), (64, 16), (7, 1)):
        p = replace(SMALL, mixer_lr=lr)
        assert hooks().final_rate(AdaptiveStage(p).native) == slow
        assert hooks().final_rate(AdaptiveStage(replace(p, slow_final=False)).native) == lr


def test_version_16_header():
    """A version 16 header is version 15's twelve bytes with its five models' bits: 29 to 31 in the
    twelfth byte, 32 and 33 in a thirteenth; one without them, or with a later version's bit, is
    damaged, and version 15 does not know them."""
    p, before = AdaptiveParams().at_version(16), AdaptiveParams().at_version(15)
    assert p.version == 16 and AdaptiveParams.unpack(p.pack(), 16) == p
    assert p.pack() == before.pack()[:11] + bytes([before.pack()[11] | 0b11100000, 0b11])
    assert len(p.pack()) == PARAMS_BYTES[16] == 13
    for bad in [before.pack(), before.pack() + b"\x00", p.pack()[:12] + b"\x07", p.pack() + b"\x00"]:
        with pytest.raises(CorruptArchive):
            AdaptiveParams.unpack(bad, 16)
    with pytest.raises(CorruptArchive):
        AdaptiveParams.unpack(p.pack(), 15)


def test_version_16_models_round_trip_and_count():
    """The slow final mixer on version 15's stage and on version 1's models with the layered mixers
    (which it needs: without them it is refused); the places, current-token and nest contexts on
    version 1's models; the cell context on version 1's without the match model or the column model (the
    history ring is then its own)."""
    bare = replace(SMALL.at_version(1), layered=True)
    assert_adds_model("slow_final", 16, bare)
    assert_refused_without(replace(bare, slow_final=True), "slow_final", "layered", 16)
    assert_adds_model("places", 16, SMALL.at_version(1))
    assert_adds_model("cell_up", 16, replace(SMALL.at_version(1), match=False, column=False))
    assert_adds_model("this_token", 16, SMALL.at_version(1))
    assert_adds_model("nest", 16, SMALL.at_version(1))


def test_seeded_weight_sets_by_hand():
    """Version 17's seeded sets: a set never updated takes the source set's weights before its first
    prediction, one updated keeps its own; without warm (whose counts tell) nothing is seeded."""
    stage = AdaptiveStage(SMALL).native
    sq = squash_table()
    init, x, lr = [65536, 0, 0], [300, -200, 256], 16

    def step(w, y, rate):  # one prediction and update (test_mixer_step_by_hand's arithmetic)
        p = sq[min(max(sum(a * b for a, b in zip(w, x)) >> 16, -4095), 4095) + 4095]
        e = (y * 65536 - p) * rate
        return [min(max(a + ((b * e + 2**19) >> 20), -(2**24)), 2**24) for a, b in zip(w, x)]

    steps = [(0, 0, 1), (1, 0, 0), (1, 2, 1), (2, 1, 0)]  # (set, seeded from, bit)
    first, second = 4 * lr, lr + 3 * lr * 1024 // 1025  # warm rates of a set's first and second update
    w0 = step(init, 1, first)
    w1 = step(step(w0, 0, first), 1, second)  # seeded from set 0 (never updated), then its own
    w2 = step(w1, 0, first)  # seeded from set 1
    assert hooks().mixer_seed_steps(stage, 3, init, x, steps, lr, 1024) == w0 + w1 + w2
    cold = step(step(init, 0, lr), 1, lr)  # without warm: set 1 starts from the initial weights
    assert hooks().mixer_seed_steps(stage, 3, init, x, steps, lr, 0) == step(init, 1, lr) + cold + step(init, 0, lr)


def test_order_mixer_set_by_hand():
    """Version 17's second order mixer picks its weight set by a hash of the last two bytes and the
    bits so far (the first by c1 << 8 | c0, formed inline)."""
    for data, c0 in ((b"xth", 1), (b'x":', 0b101), (b"\x00\xff", 255)):
        c2c1 = data[-2] << 8 | data[-1]
        want = hash32((c2c1 * 0x9E3779B1 + c0 * 0x3C6EF372) & 0xFFFFFFFF) >> 16
        assert hooks().order2_set(data, c0) == want


def test_place_and_match_mixer_sets_by_hand():
    """Version 17's place mixer picks its weight set by the field (a separator starts the next one),
    the column (bytes since the line began) and the bits so far, each counted to 15; its match mixer
    by the predicted byte and the bits so far (without a prediction by those bits alone)."""
    for data, field, column in ((b"ab\nx", 0, 1), (b"a,b c=d", 3, 7), (b"\n" + b"x:" * 20, 15, 15)):
        assert hooks().place_set(data, 0b110) == field << 12 | column << 8 | 0b110
    assert hooks().predicted_set(ord("e"), 0b101) == (ord("e") + 1) << 8 | 0b101
    assert hooks().predicted_set(255, 1) == 256 << 8 | 1 and hooks().predicted_set(-1, 0b11) == 0b11


def test_version_17_header():
    """A version 17 header is version 16's thirteen bytes with its five models' bits, 34 to 38 in the
    thirteenth byte; one without them, or with a later bit, is damaged, and version 16 does not know them."""
    p, before = AdaptiveParams().at_version(17), AdaptiveParams().at_version(16)
    assert p.version == 17 and AdaptiveParams.unpack(p.pack(), 17) == p
    assert p.pack() == before.pack()[:12] + bytes([before.pack()[12] | 0b1111100])
    assert len(p.pack()) == PARAMS_BYTES[17] == 13
    for bad in [before.pack(), p.pack()[:12] + b"\xff", p.pack() + b"\x00"]:
        with pytest.raises(CorruptArchive):
            AdaptiveParams.unpack(bad, 17)
    with pytest.raises(CorruptArchive):
        AdaptiveParams.unpack(p.pack(), 16)


def test_version_17_models_round_trip_and_count():
    """The seeded sets on version 16's stage and on version 1's models with warm mixers, the order,
    place and match mixers and the NN's final input on version 1's with the layered mixers; each
    refused without what it needs."""
    warm, bare = replace(SMALL.at_version(1), warm=True), replace(SMALL.at_version(1), layered=True)
    assert_adds_model("seed_sets", 17, warm)
    assert_refused_without(replace(warm, seed_sets=True), "seed_sets", "warm", 17)
    for flag in ("order_mix", "place_mix", "match_mix"):
        assert_adds_model(flag, 17, bare)
        assert_refused_without(replace(bare, **{flag: True}), flag, "layered", 17)
    assert_refused_without(replace(bare, match_mix=True), "match_mix", "match", 17)
    assert_adds_model("nn_final", 17, bare)
    assert_refused_without(replace(bare, nn_final=True), "nn_final", "layered", 17)
    assert_refused_without(replace(bare, nn_final=True), "nn_final", "nn", 17)


def test_the_stage_models_have_one_list():
    """csrc/stage/models.def is the list (the core hands it over): the parameters' fields, the
    levels' choices and the spec's table follow it, and nothing else keeps one of its own."""
    import importlib.util
    from dataclasses import fields
    from pathlib import Path

    from shazip import options
    from shazip.stage.adaptive import MODEL_FLAGS, NEEDS, STAGE_MODELS, TEXT_FLAGS
    names = [f.name for f in fields(AdaptiveParams)]
    assert names[names.index(MODEL_FLAGS[0]):] == [*MODEL_FLAGS, *EXTRA_FLAGS]
    versions = [m["version"] for m in STAGE_MODELS]
    assert versions == sorted(versions) and set(versions) == set(range(2, VERSION + 1))  # each version adds models
    assert all(set(n) <= set(EXTRA_FLAGS) | {"nn", "match", "apm"} for n in NEEDS.values())
    drops = {d for lv in options.LEVELS.values() for d in lv.models} | set(TABLE_FLAGS) | set(TEXT_FLAGS)
    assert drops <= set(EXTRA_FLAGS) | set(MODEL_FLAGS), drops - set(EXTRA_FLAGS) - set(MODEL_FLAGS)
    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("stage_models", root / "docs" / "stage_models.py")
    doc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(doc)
    text = (root / "docs" / "format.md").read_text()
    assert text[text.index(doc.HEAD) + len(doc.HEAD):text.index(doc.TAIL)].strip() == doc.render()


def test_every_registered_model_changes_what_the_stage_codes(text):
    """models.def is the one list of the stage's models, and a line there without its component
    would be accepted and do nothing: each model, with what it needs, codes a mixed sample (prose,
    markup, a table of numbers, code, log lines) into another payload than the same stage without it."""
    table = b"".join(b"%d,K%c%c,Town %d,AK,%.5f,-%.5f\n" % (i, 65 + i % 26, 66 + i % 7, i % 9, 50 + i / 97, 140 + i / 89)
                     for i in range(60))
    code = b"".join(b"    if (options.value_%d > limit) { this.total += options.value_%d * %d; }\n" % (i, i, i % 7)
                    for i in range(30))
    logs = b"".join(b"2026-11-27 01:%02d:%02d host%d sshd[%d]: session opened for user admin%d\n" % (i, 3 * i % 60, i % 3,
                    4000 + 17 * i, i % 4) for i in range(40))
    data = text[:2500] + table + code + logs
    rows = bigram_rows(text)

    def with_needs(names: set[str]) -> set[str]:
        more = names | {n for name in names for n in NEEDS.get(name, ())}
        return more if more == names else with_needs(more)

    base = {flag: True for flag in ("word", "column", "sparse", "nn", "match", "apm")}
    for name in EXTRA_FLAGS:
        on = with_needs({name}) - set(base)
        payloads = [encode(AdaptiveStage(replace(SMALL, **base, **{m: True for m in models}, **{
            f: False for f in EXTRA_FLAGS if f not in models})), data, 2, rows)[0] for models in (on, on - {name})]
        assert payloads[0] != payloads[1], f"the {name} model changes nothing"
