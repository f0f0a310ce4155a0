"""The categorical range coder of MODEL blocks (csrc/coder/categorical.cpp, `_core.Categorical*`).

It replaces constriction's `stream.queue.RangeEncoder`/`RangeDecoder` with the model family
`stream.model.Categorical(perfect=False)`, and archives written through constriction must keep
decoding: so the compressed bytes must be identical to constriction's for any rows and symbols,
and damaged data must decode the same way (same symbols, an error at the same step). constriction
is only needed here, to compare with; without it those comparisons are skipped.
"""

from __future__ import annotations

import numpy as np
import pytest

from shazip import _core

from core_hooks import hooks

N = 256
TOTAL = 1 << 24


def _constriction():
    return pytest.importorskip("constriction")


# --- rows of every kind the coder meets (and some it should not, but must handle) -----------

def _softmax(rng, k):
    temp = rng.choice([0.05, 1.0, 4.0, 15.0, 40.0, 120.0])
    logits = rng.normal(size=(k, N)) * temp
    p = np.exp(logits - logits.max(1, keepdims=True))
    return p / p.sum(1, keepdims=True)


def _int8(rng, k):
    """The int8 engine's rows: integer frequencies in [1, 2**30] over their sum (float64)."""
    top = 2 ** int(rng.integers(1, 31))
    f = rng.integers(1, top, size=(k, N), endpoint=True, dtype=np.int64)
    peaked = rng.random(k) < 0.5  # one symbol takes (nearly) everything
    f[peaked] = rng.integers(1, 4, size=(int(peaked.sum()), N))
    f[peaked, rng.integers(0, N, size=int(peaked.sum()))] = 2 ** 30
    return f.astype(np.float64) / f.sum(1, keepdims=True).astype(np.float64)


def _extreme(rng, k):
    """Very peaked: tiny entries (1e-30, subnormals, exact zeros) beside one of 1 - 1e-12."""
    tiny = np.array([1e-30, 1e-300, 5e-324, 0.0, -0.0, 1e-12, 1e-17])
    p = rng.choice(tiny, size=(k, N))
    p[np.arange(k), rng.integers(0, N, size=k)] = 1 - 1e-12
    return p


def _sparse(rng, k):
    p = np.zeros((k, N))
    for i in range(k):
        idx = rng.choice(N, size=int(rng.integers(1, 6)), replace=False)
        p[i, idx] = rng.random(len(idx)) + 1e-3
    return p


def _unnormalized(rng, k):
    """Rows need not sum to 1: any positive normal sum that leaves a finite scale."""
    return rng.dirichlet(np.full(N, 0.3), size=k) * 10.0 ** rng.uniform(-280, 300, size=(k, 1))


KINDS = [_softmax, _int8, _extreme, _sparse, _unnormalized]


def _rows(rng, k):
    return KINDS[int(rng.integers(len(KINDS)))](rng, k)


def _symbols(rng, p):
    """Mostly drawn from the row; sometimes any symbol, even one of probability 0 (it codes:
    the quantization gives every symbol at least 1/2**24)."""
    k = len(p)
    c = np.cumsum(p / p.sum(1, keepdims=True), axis=1)
    s = np.minimum((c < rng.random((k, 1))).sum(1), N - 1)
    anyone = rng.random(k) < 0.15
    s[anyone] = rng.integers(0, N, size=int(anyone.sum()))
    return s.astype(np.int64)


def _ref_cdf(row):
    """The quantization, written out in Python floats (IEEE float64, same operations)."""
    total = 0.0
    for x in row:
        total += x
    scale = float(TOTAL - N) / total
    cdf, cum = [], 0.0
    for s, x in enumerate(row):
        cdf.append(int(cum * scale) + s)
        cum += x
    return cdf + [TOTAL]


# --- quantization ------------------------------------------------------------------------------

def test_cdf_matches_reference_and_is_leaky():
    rng = np.random.default_rng(1)
    for kind in KINDS:
        p = kind(rng, 24)
        cdf = hooks().categorical_cdf(p)
        assert cdf.shape == (24, N + 1) and cdf.dtype == np.uint32
        for i in range(len(p)):
            assert cdf[i].tolist() == _ref_cdf(p[i].tolist())
        assert (cdf[:, 0] == 0).all() and (cdf[:, -1] == TOTAL).all()
        assert (np.diff(cdf.astype(np.int64), axis=1) >= 1).all()  # every symbol codable


# --- bit-identical to constriction -------------------------------------------------------------

def _stream(rng, steps, kmax, constriction):
    """Codes `steps` steps of 1..kmax lanes both ways; returns (rows, symbols, bytes)."""
    family = constriction.stream.model.Categorical(perfect=False)
    theirs = constriction.stream.queue.RangeEncoder()
    ours = _core.CategoricalEncoder()
    rows, syms = [], []
    for _ in range(steps):
        k = int(rng.integers(1, kmax + 1))
        p = _rows(rng, k)
        s = _symbols(rng, p)
        theirs.encode(s.astype(np.int32), family, p)
        ours.encode(p, s)
        rows.append(p)
        syms.append(s)
    expected = theirs.get_compressed().astype("<u4").tobytes()
    got = ours.finish()
    assert got == expected
    return rows, syms, got


@pytest.mark.parametrize("seed,steps,kmax", [(0, 1, 1), (1, 3, 2), (2, 400, 1), (3, 600, 8), (4, 300, 64),
                                             (5, 500, 64), (6, 1000, 4)])
def test_same_bytes_as_constriction_and_round_trip(seed, steps, kmax):
    constriction = _constriction()
    rng = np.random.default_rng(seed)
    rows, syms, payload = _stream(rng, steps, kmax, constriction)
    dec = _core.CategoricalDecoder(payload)
    family = constriction.stream.model.Categorical(perfect=False)
    theirs = constriction.stream.queue.RangeDecoder(np.frombuffer(payload, dtype="<u4").astype(np.uint32))
    for p, s in zip(rows, syms):
        got = dec.decode(p)
        assert got.dtype == np.int64 and got.tolist() == s.tolist()
        assert theirs.decode(family, p).tolist() == s.tolist()
    assert dec.maybe_exhausted()


def test_single_kinds_long_streams():
    """Each kind alone over a long stream: many carries and word boundaries."""
    constriction = _constriction()
    for i, kind in enumerate(KINDS):
        rng = np.random.default_rng(100 + i)
        family = constriction.stream.model.Categorical(perfect=False)
        theirs = constriction.stream.queue.RangeEncoder()
        ours = _core.CategoricalEncoder()
        p = kind(rng, 2000)
        s = _symbols(rng, p)
        theirs.encode(s.astype(np.int32), family, p)
        ours.encode(p, s)
        payload = ours.finish()
        assert payload == theirs.get_compressed().astype("<u4").tobytes()
        assert _core.CategoricalDecoder(payload).decode(p).tolist() == s.tolist()


def test_every_symbol_at_both_ends():
    """The first and last symbols (the last one's interval is closed at 2**24 specially), and
    symbols of probability 0 between probability-1 ones."""
    constriction = _constriction()
    family = constriction.stream.model.Categorical(perfect=False)
    p = np.zeros((4 * N, N))
    p[:, 0] = 1.0
    p[N:2 * N, :] = 1.0
    p[2 * N:3 * N, N - 1] = 1.0
    p[3 * N:, 17] = 1.0
    p[3 * N:, 200] = 1e-300
    s = np.tile(np.arange(N), 4)
    theirs = constriction.stream.queue.RangeEncoder()
    theirs.encode(s.astype(np.int32), family, p)
    ours = _core.CategoricalEncoder()
    ours.encode(p, s)
    payload = ours.finish()
    assert payload == theirs.get_compressed().astype("<u4").tobytes()
    assert _core.CategoricalDecoder(payload).decode(p).tolist() == s.tolist()


def test_empty_stream():
    enc = _core.CategoricalEncoder()
    assert enc.finish() == b""
    enc = _core.CategoricalEncoder()
    enc.encode(np.zeros((0, N)), np.zeros(0, dtype=np.int64))
    assert enc.finish() == b""
    assert _core.CategoricalDecoder(b"").maybe_exhausted()


def test_batches_split_anyhow_give_the_same_bytes():
    rng = np.random.default_rng(9)
    p = _rows(rng, 300)
    s = _symbols(rng, p)
    whole = _core.CategoricalEncoder()
    whole.encode(p, s)
    parts = _core.CategoricalEncoder()
    for a, b in [(0, 1), (1, 50), (50, 50), (50, 299), (299, 300)]:
        parts.encode(p[a:b], s[a:b].astype(np.int32))
    payload = whole.finish()
    assert parts.finish() == payload
    dec = _core.CategoricalDecoder(bytearray(payload))  # any bytes-like payload
    assert np.concatenate([dec.decode(p[:7]), dec.decode(p[7:])]).tolist() == s.tolist()


def _row_for(c, w=1):
    """A row summing to 2**24 - 256 (so its scale is exactly 1.0) whose symbol j codes as the
    interval [c, c + w) (w = 1, j = 255: [c, 2**24); w > 1 needs c + w <= 2**24 - 256)."""
    free = TOTAL - N
    p = np.zeros(N)
    if c == 0 and w == 1:
        p[1] = free
        return p, 0
    j = max(1, c - free) if w == 1 else 1
    p[0] = c - j
    p[j] = w - 1
    if j < N - 1:
        p[N - 1] = free - (c - j) - (w - 1)
    return p, j


def test_carries_steered():
    """Steers the encoder (its state read from constriction's `pos()`) into the rare paths:
    intervals straddling a word boundary or 2**64, so a carry stays undecided across several
    words, resolves with and without a carry, or is still pending at the seal, also where the
    seal's point wraps; and a last range just above 2**32, where the seal takes two words.
    (Checked with an instrumented build: this seed reaches every branch of encoder and seal.)"""
    constriction = _constriction()
    family = constriction.stream.model.Categorical(perfect=False)
    for c, w in [(0, 1), (1, 1), (2, 1), (12345, 1), (TOTAL - N, 1), (TOTAL - N + 1, 1), (TOTAL - 2, 1),
                 (TOTAL - 1, 1), (1, 2), (77, 5000), (TOTAL - N - 9, 9)]:
        p, j = _row_for(c, w)
        cdf = hooks().categorical_cdf(p[None])[0]
        assert cdf[j] == c and (j == N - 1 or cdf[j + 1] == c + w)
    rng = np.random.default_rng(0)
    for _ in range(3000):
        theirs = constriction.stream.queue.RangeEncoder()
        ours = _core.CategoricalEncoder()
        rows, syms = [], []
        steps = int(rng.integers(1, 40))
        two_word_seal = rng.random() < 0.3
        for t in range(steps):
            _, (lower, range_) = theirs.pos()
            scale = range_ >> 24
            w = 1
            if two_word_seal and t == steps - 1:  # the last range in [2**32, 2**33)
                w = max(1, -(-(1 << 32) // scale))
                c = int(rng.integers(1, TOTAL - N - w))
            elif rng.random() < 0.15:
                c = int(rng.integers(0, TOTAL))
            else:  # a 1/2**24 interval just across 2**64 or the next multiple of 2**32
                target = 1 << 64 if rng.random() < 0.5 else ((lower >> 32) + 1) << 32
                d = (target - lower) % (1 << 64)
                c = min((d - 1) // scale, TOTAL - 1) if d else 0
            p, j = _row_for(c, w)
            theirs.encode(np.array([j], dtype=np.int32), family, p[None])
            ours.encode(p[None], np.array([j]))
            rows.append(p)
            syms.append(j)
        payload = ours.finish()
        assert payload == theirs.get_compressed().astype("<u4").tobytes()
        assert _core.CategoricalDecoder(payload).decode(np.array(rows)).tolist() == syms


# --- damaged payloads: the same symbols and errors as constriction, never a crash or hang ------

def _decode_both(payload, rows, constriction):
    """Decodes one row at a time with both decoders; returns the two outcome lists."""
    family = constriction.stream.model.Categorical(perfect=False)
    ours = _core.CategoricalDecoder(payload)
    theirs = constriction.stream.queue.RangeDecoder(np.frombuffer(payload, dtype="<u4").astype(np.uint32))
    a, b = [], []
    for row in rows:
        try:
            a.append(int(ours.decode(row[None])[0]))
        except _core.DataError:
            a.append("error")
        try:
            b.append(int(theirs.decode(family, row[None])[0]))
        except Exception:  # constriction reports invalid data as AssertionError
            b.append("error")
        if a[-1] == "error" or b[-1] == "error":
            break
    return a, b


def test_damaged_payloads_decode_like_constriction():
    constriction = _constriction()
    rng = np.random.default_rng(11)
    rows, syms, payload = _stream(rng, 120, 3, constriction)
    flat = np.concatenate(rows)
    words = len(payload) // 4
    cases = [payload[: 4 * w] for w in range(min(words, 6))] + [payload[: 4 * (words // 2)], payload[:-4]]
    for _ in range(40):
        b = bytearray(payload)
        for _ in range(int(rng.integers(1, 4))):
            b[int(rng.integers(len(b)))] ^= 1 << int(rng.integers(8))
        cases.append(bytes(b))
    for _ in range(40):  # garbage, including the all-ones words that are invalid at once
        n = int(rng.integers(0, 40))
        cases.append(rng.integers(0, 256, size=4 * n, dtype=np.uint8).tobytes())
    cases += [b"\xff" * 8, b"\xff" * 4, b"\xff" * 64, b"\x00" * 64]
    errors = 0
    for case in cases:
        a, b = _decode_both(case, flat, constriction)
        assert a == b
        errors += a[-1] == "error"
    assert errors > 0  # the DataError path ran


def test_invalid_data_raises_dataerror_and_keeps_raising():
    dec = _core.CategoricalDecoder(b"\xff" * 8)
    p = np.full((1, N), 1.0 / N)
    for _ in range(3):
        with pytest.raises(_core.DataError):
            dec.decode(p)
    assert issubclass(_core.DataError, ValueError)


def test_decoding_past_the_end_terminates():
    rng = np.random.default_rng(12)
    for payload in [b"", b"\x12\x34\x56\x78", bytes(range(64))]:
        dec = _core.CategoricalDecoder(payload)
        p = _rows(rng, 5000)
        try:
            out = dec.decode(p)
            assert ((out >= 0) & (out < N)).all()
        except _core.DataError:
            pass


def test_payload_not_whole_words_is_damaged():
    for n in (1, 2, 3, 5, 7, 9):
        with pytest.raises(_core.DataError):
            _core.CategoricalDecoder(b"\x00" * n)


# --- bad arguments ------------------------------------------------------------------------------

def _bad_rows():
    ok = np.full(N, 1.0 / N)
    rows = []
    for value in (np.nan, np.inf, -np.inf, -1e-9):
        r = ok.copy()
        r[5] = value
        rows.append(r)
    rows.append(np.zeros(N))  # sums to 0
    rows.append(np.full(N, 1e-320))  # subnormal sum
    rows.append(np.full(N, 1e-304))  # normal sum, but the scale overflows
    rows.append(np.full(N, 1e307))  # the sum overflows
    return rows


def test_bad_rows_raise_valueerror_and_code_nothing():
    constriction = _constriction()
    family = constriction.stream.model.Categorical(perfect=False)
    rng = np.random.default_rng(13)
    good = _rows(rng, 10)
    sym = _symbols(rng, good)
    for bad in _bad_rows():
        enc = _core.CategoricalEncoder()
        enc.encode(good[:3], sym[:3])
        batch = np.concatenate([good[3:6], bad[None], good[6:]])
        with pytest.raises(ValueError):
            enc.encode(batch, np.concatenate([sym[3:6], [0], sym[6:]]))  # all or nothing
        enc.encode(good[3:], sym[3:])
        payload = enc.finish()
        theirs = constriction.stream.queue.RangeEncoder()
        theirs.encode(sym.astype(np.int32), family, good)
        assert payload == theirs.get_compressed().astype("<u4").tobytes()

        dec = _core.CategoricalDecoder(payload)
        assert dec.decode(good[:3]).tolist() == sym[:3].tolist()
        with pytest.raises(ValueError):
            dec.decode(np.concatenate([good[3:5], bad[None]]))  # all or nothing
        assert dec.decode(good[3:]).tolist() == sym[3:].tolist()


def test_constriction_also_refuses_what_it_can_detect():
    """NaN, infinite and zero sums: constriction raised too (it did not check negative entries
    or sums too small for a finite scale, which it could mis-code or panic on)."""
    constriction = _constriction()
    family = constriction.stream.model.Categorical(perfect=False)
    bad_rows = _bad_rows()
    for bad in [bad_rows[i] for i in (0, 1, 2, 4, 5, 7)]:
        with pytest.raises(Exception):
            constriction.stream.queue.RangeEncoder().encode(np.array([0], dtype=np.int32), family, bad[None])


def test_bad_arguments():
    p = np.full((2, N), 1.0 / N)
    enc = _core.CategoricalEncoder()
    for s in ([-1, 0], [0, 256], [0, 2 ** 40]):
        with pytest.raises(ValueError):
            enc.encode(p, np.array(s))
    with pytest.raises(ValueError):
        enc.encode(p, np.array([2 ** 64 - 1, 0], dtype=np.uint64))
    with pytest.raises(ValueError):
        enc.encode(p, np.array([0]))  # one symbol per row
    with pytest.raises(ValueError):
        enc.encode(np.full((2, 255), 1.0), np.array([0, 0]))
    with pytest.raises(ValueError):
        enc.encode(np.full(N, 1.0), np.array([0]))  # rank 1
    with pytest.raises(TypeError):
        enc.encode(p.astype(np.float32), np.array([0, 0]))  # float32 rows would quantize differently
    with pytest.raises(TypeError):
        enc.encode(p, np.array([0.0, 1.0]))
    enc.encode(p[:, ::-1], np.array([1, 2], dtype=np.uint8))  # strided rows, small ints: fine
    enc.encode(p.astype(">f8"), np.array([3, 4], dtype=">i2"))  # any byte order
    assert enc.finish()
    with pytest.raises(ValueError):
        enc.encode(p, np.array([0, 0]))  # after finish
    with pytest.raises(ValueError):
        enc.finish()
    dec = _core.CategoricalDecoder(b"")
    with pytest.raises(ValueError):
        dec.decode(np.full((1, 3), 1.0))
    with pytest.raises(TypeError):
        _core.CategoricalDecoder("not bytes")
