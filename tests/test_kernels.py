"""Single kernels on every path this CPU runs against the numerics contract's formulas in exact
integers, at the edges a trained model rarely reaches: LayerNorm rows whose products leave the
float64 fast path (so the path falls back to exact int64 arithmetic), widths that are no multiple
of the vector, gains and offsets at their bounds; GEMMs with the weight -128 (outside the sign
trick's range), every residue of K and N, and the extreme products; the stage's mixers.

Needs no torch (the formulas are written here in Python integers, and checked once against the
torch twin where torch is installed): benchmarks/aarch64.py runs this file under qemu-user for the
aarch64 paths."""

from __future__ import annotations

import functools
import math
import random

import numpy as np
import pytest

from shazip import _core
from shazip.model.numerics import MIX_MASS, NORM_GAIN_BITS, R_MAX
from shazip.stage.adaptive import AdaptiveParams, AdaptiveStage

from core_hooks import hooks

PATHS = _core.available_kernels()


@functools.cache
def on(path: str):
    """A small stage on kernel path `path`: a hook runs one kernel on the path of the stage it is
    given (the core's own tables of kernels, nothing compiled for the tests)."""
    return AdaptiveStage(AdaptiveParams(table_bits=16, history_bits=16, match_bits=12), kernels=path).native


def rdiv(a: int, b: int) -> int:
    """round(a / b) for b > 0, halves up (quant.rdiv)"""
    return (2 * a + b) // (2 * b)


def ints_norm(x: np.ndarray, gain: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """quant.QNorm of each row, in Python integers"""
    out = []
    for row in x.tolist():
        d = len(row)
        xc = [v - rdiv(sum(row), d) for v in row]
        sd = max(math.isqrt((sum(v * v for v in xc) // d) << 8), 1)
        out.append([min(max(rdiv(v * int(g), sd << NORM_GAIN_BITS) + int(b), -R_MAX), R_MAX)
                    for v, g, b in zip(xc, gain, bias)])
    return np.array(out, np.int64).reshape(x.shape)


def ints_quantize(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """quant.quantize_rows in Python integers: q = round(127 y / e), e = max(1, max |y|)"""
    e = [max(1, max(abs(v) for v in row)) for row in y.tolist()]
    q = [[rdiv(127 * v, er) for v in row] for row, er in zip(y.tolist(), e)]
    return np.array(q, np.int8).reshape(y.shape), np.array(e, np.int64)


def test_the_integer_formulas_are_the_twins():
    """The references below are the torch twin's own arithmetic."""
    torch = pytest.importorskip("torch")
    from shazip.model import twin as quant
    rng = np.random.default_rng(5)
    for d, x_bits, gain_bits in ((256, 20, 30), (7, 21, 39), (96, 3, 2)):
        x, gain, bias = norm_case(rng, 4, d, x_bits, gain_bits)
        twin = quant.QNorm(torch.from_numpy(gain), torch.from_numpy(bias))(torch.from_numpy(x)).numpy()
        np.testing.assert_array_equal(ints_norm(x, gain, bias), twin)
        y = rng.integers(-R_MAX, R_MAX + 1, (3, d))
        q, e = quant.quantize_rows(torch.from_numpy(y))
        np.testing.assert_array_equal(ints_quantize(y)[0], q.numpy())
        np.testing.assert_array_equal(ints_quantize(y)[1], e.reshape(-1).numpy())


def norm_case(rng: np.random.Generator, rows: int, d: int, x_bits: int, gain_bits: int) -> tuple:
    x = rng.integers(-(1 << x_bits), 1 << x_bits, (rows, d)).clip(-R_MAX, R_MAX)
    gain = rng.integers(-(1 << gain_bits), 1 << gain_bits, d)
    bias = rng.integers(-R_MAX, R_MAX + 1, d)
    return x, gain, bias


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("d", [256, 4, 7, 96, 2052])
@pytest.mark.parametrize("x_bits,gain_bits", [(14, 30), (20, 30), (21, 39), (3, 39), (1, 2)])
def test_layer_norm_equals_integers(path, d, x_bits, gain_bits):
    """(21, 39): products near 2**60, past float64's exact range: the fallback must give the same."""
    x, gain, bias = norm_case(np.random.default_rng(d * 100 + x_bits), 6, d, x_bits, gain_bits)
    np.testing.assert_array_equal(hooks().kernel_layer_norm(on(path), x, gain, bias), ints_norm(x, gain, bias))


@pytest.mark.parametrize("path", PATHS)
def test_layer_norm_one_large_product_in_a_row(path):
    """One entry whose product crosses 2**50 sends the whole row to exact arithmetic; a constant
    row (variance 0) and a row at the clamp are exact too."""
    d = 64
    x = np.zeros((3, d), np.int64)
    x[0, :] = 5
    x[0, 17] = R_MAX  # |x - mean| ~ 2**20 times a gain near 2**39
    x[1, :] = -R_MAX
    x[2, ::2], x[2, 1::2] = R_MAX, -R_MAX
    gain = np.full(d, (1 << 39) - 1, np.int64)
    gain[::3] *= -1
    bias = np.arange(d, dtype=np.int64) * 1000 - 32000
    np.testing.assert_array_equal(hooks().kernel_layer_norm(on(path), x, gain, bias), ints_norm(x, gain, bias))


def float64_norm(x: list[int], gain: list[int], bias: list[int]) -> list[int]:
    """norm256.h's float64 arithmetic without its range check: what a path would give if it never
    fell back to exact int64 arithmetic."""
    d, mean = len(x), (2 * sum(x) + len(x)) // (2 * len(x))
    xc = np.array(x, np.float64) - mean
    sd = max(math.isqrt((int((xc * xc).sum()) // d) << 8), 1)
    B, p = float(sd << 17), xc * np.array(gain, np.float64)
    v = (p + p) + float(sd << 16)
    q = np.floor(v * (1.0 / B))
    r = v - q * B
    q = q - (r < 0) + (r >= B)
    return list(np.clip(q + np.array(bias, np.float64), -R_MAX, R_MAX).astype(np.int64))


@pytest.mark.parametrize("path", PATHS)
def test_layer_norm_product_rounded_across_a_multiple(path):
    """A gain chosen so that 2 (x - mean) g + B / 2 is 2 below a multiple of the divisor B while
    the product is near 2**56, where float64 rounds it up onto the multiple: float64 alone is one
    off (checked below), the path must not be."""
    x = [R_MAX - 2, -R_MAX + 1, 3, -5, 1000, -1000, 77, 12345]
    d = len(x)
    mean = (2 * sum(x) + d) // (2 * d)
    xc = [v - mean for v in x]
    sd = math.isqrt((sum(v * v for v in xc) // d) << 8)
    B = sd << 17
    gain = [1000] * d
    gain[0] = (B // 2 - 2) // 2 * pow(xc[0], -1, B // 2) % (B // 2)  # 2 xc g = -B/2 - 2 (mod B)
    assert xc[0] % 2 == 1 and (2 * xc[0] * gain[0] + B // 2) % B == B - 2 and gain[0] < 1 << 40
    xa, ga, ba = np.array([x]), np.array(gain), np.zeros(d, np.int64)
    exact = ints_norm(xa, ga, ba)
    assert float64_norm(x, gain, [0] * d)[0] == exact[0, 0] + 1
    np.testing.assert_array_equal(hooks().kernel_layer_norm(on(path), xa, ga, ba), exact)


def ints_gemm(a: np.ndarray, w: np.ndarray) -> np.ndarray:
    return a.astype(np.int64) @ w.astype(np.int64)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("rows,K,N", [(1, 256, 1024), (5, 256, 256), (3, 7, 9), (2, 33, 17), (7, 64, 48),
                                      (4, 1, 1), (9, 130, 40), (32, 256, 1024), (48, 128, 48), (17, 320, 33),
                                      (65, 64, 16)])
def test_gemm_equals_integers(path, rows, K, N):
    """Odd shapes for every tail; whole tiles (AMX: 16 rows x 64 K x 16 columns) and their tails."""
    rng = np.random.default_rng(rows * 1000 + K + N)
    a = rng.integers(-127, 128, (rows, K)).astype(np.int8)
    w = rng.integers(-127, 128, (K, N)).astype(np.int8)
    np.testing.assert_array_equal(hooks().kernel_gemm(on(path), a, w), ints_gemm(a, w))


@pytest.mark.parametrize("path", PATHS)
def test_gemm_extreme_products_and_the_weight_minus_128(path):
    """All products at +-127 * 127 (the sign trick's largest pair sums), then a matrix holding
    -128, which the sign trick cannot negate: the path must still give the exact integers."""
    K, N = 96, 40
    for fill in (127, -127):
        a = np.full((5, K), 127, np.int8)
        a[1] *= -1
        a[2, ::2] = -127
        w = np.full((K, N), fill, np.int8)
        np.testing.assert_array_equal(hooks().kernel_gemm(on(path), a, w), ints_gemm(a, w))
    rng = np.random.default_rng(3)
    a = rng.integers(-127, 128, (6, K)).astype(np.int8)
    w = rng.integers(-128, 128, (K, N)).astype(np.int8)
    w[::5, ::3] = -128
    a[:, ::2] = -127
    np.testing.assert_array_equal(hooks().kernel_gemm(on(path), a, w), ints_gemm(a, w))


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("d", [256, 8, 7, 100, 1040])
def test_quantize_equals_integers(path, d):
    """Random rows of every size, a zero row (scale 1), rows at +-R_MAX, rows of exact halves, and
    rows where 254 y + e is a multiple of 2e whose float64 quotient falls just short of it."""
    rng = np.random.default_rng(d)
    y = rng.integers(-R_MAX, R_MAX + 1, (10, d))
    y[1] = rng.integers(-3, 4, d)
    y[2] = 0
    y[3] = R_MAX
    y[3, ::2] = -R_MAX
    y[4] = np.arange(d) % 255 - 127  # e = 127: q = y exactly
    y[5] = np.arange(d) % 509 - 254  # e = 254: 127 y / e = y / 2, a half at every odd y
    y[6] = (np.arange(d) % 7) * (R_MAX // 7)
    y[7] = rng.integers(-1000, 1001, d) * 1024
    for row, (e, v) in zip((8, 9), ((98, 49), (150, -75))):  # a float64 estimate of 64 and -63 falls short
        y[row] = v
        y[row, 0] = e
    got_q, got_e = hooks().kernel_quantize(on(path), y)
    want_q, want_e = ints_quantize(y)
    np.testing.assert_array_equal(got_q, want_q)
    np.testing.assert_array_equal(got_e, want_e)


def ints_mix(keys: np.ndarray, u: np.ndarray, extra: np.ndarray, u_extra: int) -> np.ndarray:
    return (u.astype(np.int64) @ keys.astype(np.int64) + u_extra * extra.astype(np.int64)).astype(np.int32)


def weights(rng: np.random.Generator, n: int, zeros: float) -> tuple[np.ndarray, int]:
    """n + 1 attention weights (the last one the current entry's) summing to at most MIX_MASS,
    a fraction `zeros` of them zero, as attention_weights makes them."""
    w = rng.exponential(1.0, n + 1) * (rng.random(n + 1) >= zeros)
    u = np.floor(w * MIX_MASS / max(w.sum(), 1e-9)).astype(np.int64)
    return u[:n].astype(np.int32), int(u[n])


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("n,d", [(0, 256), (1, 7), (2, 64), (5, 100), (37, 300), (512, 256), (9, 1040)])
@pytest.mark.parametrize("zeros", [0.0, 0.6, 1.0])
def test_mix_equals_integers(path, n, d, zeros):
    rng = np.random.default_rng(n * 7 + d)
    keys = rng.integers(-127, 128, (n, d)).astype(np.int8)
    extra = rng.integers(-127, 128, d).astype(np.int8)
    u, u_extra = weights(rng, n, zeros)
    np.testing.assert_array_equal(hooks().kernel_mix(on(path), keys, u, extra, u_extra), ints_mix(keys, u, extra, u_extra))


@pytest.mark.parametrize("path", PATHS)
def test_mix_weights_at_their_bounds(path):
    """All the mass on one key (MIX_MASS = 2**17: a weight past two bytes), on two keys of 2**16,
    weights whose low bytes are 255, on the current entry alone; keys at +-127."""
    n, d = 11, 96
    keys = np.full((n, d), 127, np.int8)
    keys[::2] *= -1
    keys[3, ::3] = -127
    extra = np.full(d, -127, np.int8)
    cases = [({4: MIX_MASS}, 0), ({0: 1 << 16, 10: 1 << 16}, 0), ({1: 65535, 2: 65535, 7: 1}, 1),
             ({5: 255, 6: 257}, MIX_MASS - 512), ({}, MIX_MASS), ({9: 1 << 16}, (1 << 16) - 1)]
    for at, u_extra in cases:
        u = np.zeros(n, np.int32)
        for j, v in at.items():
            u[j] = v
        np.testing.assert_array_equal(hooks().kernel_mix(on(path), keys, u, extra, u_extra), ints_mix(keys, u, extra, u_extra))


@pytest.mark.parametrize("path", PATHS)
def test_mixer_rows_at_once_on_every_kernel_path(path):
    """A bit's mixers go through the kernels in one call (their rows a few at a time): each row's
    sum and training equal the contract's formulas, for 1 .. 9 rows (every remainder of the
    kernels' groups of rows) of lengths from 1 to 86 (full vectors and tails), at the bounds and at
    random."""
    rng = random.Random(11)
    for m in range(1, 10):
        for n in (1, 15, 16, 17, 31, 33, 63, 86, rng.randint(1, 86)):
            x = [rng.choice([4095, -4095, rng.randint(-4095, 4095)]) for _ in range(n)]
            w = [[rng.choice([2**24, -(2**24), rng.randint(-(2**24), 2**24)]) for _ in range(n)] for _ in range(m)]
            e = [rng.choice([2**24 - 1, -(2**24 - 1), rng.randint(-(2**24 - 1), 2**24 - 1)]) for _ in range(m)]
            sums, rows = hooks().mixer_rows(on(path), w, x, e)
            assert sums == [sum(wi * xi for wi, xi in zip(r, x)) for r in w]
            assert rows == [[min(max(wi + ((xi * ej + 2**19) >> 20), -(2**24)), 2**24) for wi, xi in zip(r, x)]
                            for r, ej in zip(w, e)]


def test_kernel_arguments_are_checked():
    with pytest.raises(ValueError, match="residual range"):
        hooks().kernel_layer_norm(on("portable"), np.full((1, 4), R_MAX + 1), np.ones(4, np.int64), np.zeros(4, np.int64))
    with pytest.raises(ValueError, match="within"):
        hooks().kernel_gemm(on("portable"), np.full((1, 4), -128, np.int8), np.ones((4, 4), np.int8))
    with pytest.raises(ValueError, match="MIX_MASS"):
        hooks().kernel_mix(on("portable"), np.ones((2, 4), np.int8), np.full(2, MIX_MASS, np.int32), np.ones(4, np.int8), 0)
