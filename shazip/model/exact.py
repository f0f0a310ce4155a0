"""The exact constants of a model under the rules of numerics.py: the lookup tables and the
integer model's weights, multipliers, biases and shifts, derived from float weights (numpy arrays)
in float64 with only + - * / and sqrt, or in `decimal` (rule 3), then rounded half to even."""

from __future__ import annotations

import decimal
import hashlib
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache
from pathlib import Path

import numpy as np

from .. import cache
from ..errors import ModelError
from .config import Config
from .numerics import (
    EXP_ATT_FRAC, EXP_ATT_RANGE, EXP_OUT_FRAC, EXP_OUT_RANGE, GATE_FRAC, INT64_SAFE, LUT_RANGE, NORM_GAIN_BITS, ONE,
    R_MAX, TABLES,
)

_CTX = decimal.Context(prec=24, rounding=decimal.ROUND_HALF_EVEN)  # decimal results are the same everywhere
_PI = Decimal("3.14159265358979323846264338")


def _round(x: Decimal) -> int:
    return int(x.to_integral_value(rounding=decimal.ROUND_HALF_EVEN, context=_CTX))


def _d_sigmoid(x: Decimal) -> Decimal:
    return _CTX.divide(1, _CTX.add(1, _CTX.exp(-x)))


@lru_cache(maxsize=None)
def _exp_grid() -> tuple[Decimal, ...]:
    """exp(-i / ONE) for i = 0 .. EXP_OUT_RANGE * ONE, by repeated multiplication (fast, and as
    deterministic as any decimal arithmetic; relative error < 1e-18)."""
    r, e, out = _CTX.exp(Decimal(-1) / ONE), Decimal(1), []
    for _ in range(EXP_OUT_RANGE * ONE + 1):
        out.append(e)
        e = _CTX.multiply(e, r)
    return tuple(out)


def _d_gelu(x: Decimal) -> Decimal:
    """The tanh form the model uses: x/2 (1 + tanh(z)) = x sigmoid(2z), z = sqrt(2/pi)(x + 0.044715 x^3)."""
    z = _CTX.multiply(_CTX.sqrt(_CTX.divide(2, _PI)), _CTX.add(x, _CTX.multiply(Decimal("0.044715"), x ** 3)))
    return _CTX.multiply(x, _d_sigmoid(2 * z))


@lru_cache(maxsize=None)
def _source_key() -> str:
    """The cache key of the rules' and this derivation's text: any change to either is a new key."""
    here = Path(__file__).parent
    return hashlib.sha256((here / "numerics.py").read_bytes() + Path(__file__).read_bytes()).hexdigest()[:16]


@lru_cache(maxsize=None)
def table(kind: str) -> np.ndarray:
    """Lookup tables as int64 arrays, identical on every platform (rule 3). Derived once per
    machine and kept in the user's cache under a key that covers this file's text (any change
    to a rule or constant is a new key); a damaged cache entry is derived again."""
    name = f"{kind}-{_source_key()}.i64"
    blob = cache.read("tables", name)
    if blob is not None:
        return np.frombuffer(blob, dtype="<i8").astype(np.int64)
    with decimal.localcontext(_CTX):
        table = np.array([_round(v) for v in _table_values(kind)], dtype=np.int64)
    cache.write("tables", name, table.astype("<i8").tobytes())
    return table


def _table_values(kind: str) -> list[Decimal]:
    E, n = _exp_grid(), LUT_RANGE * ONE
    q15 = Decimal(1 << GATE_FRAC)
    if kind == "sigmoid":  # sigmoid(x) = 1/(1 + e^-x); sigmoid(-x) = e^-x/(1 + e^-x)
        vals = [(E[-i] if i < 0 else 1) / (1 + E[abs(i)]) * q15 for i in range(-n, n + 1)]
    elif kind == "tanh":  # tanh(|x|) = (1 - e^-2|x|)/(1 + e^-2|x|), odd
        vals = [(-1 if i < 0 else 1) * (1 - E[2 * abs(i)]) / (1 + E[2 * abs(i)]) * q15 for i in range(-n, n + 1)]
    elif kind == "gelu":  # output in residual units
        vals = [_d_gelu(Decimal(i) / ONE) * ONE for i in range(-n, n + 1)]
    else:
        rng, frac = (EXP_ATT_RANGE, EXP_ATT_FRAC) if kind == "exp_att" else (EXP_OUT_RANGE, EXP_OUT_FRAC)
        vals = [E[i] * (1 << frac) for i in range(rng * ONE + 1)]
    return vals


def _exact_sigmoid(x: np.ndarray) -> np.ndarray:
    with decimal.localcontext(_CTX):
        return np.array([float(_d_sigmoid(Decimal(float(v)))) for v in x], dtype=np.float64)


def _rint(x: np.ndarray) -> np.ndarray:
    return np.rint(x).astype(np.int64)


def _fits(what: str, bound: float) -> None:
    if not bound < INT64_SAFE:
        raise ModelError(f"model cannot be run exactly: {what} could overflow int64 (weights too large)")


def quantize_weight(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-row int8: (q [N, K], scale [N] float64) with w ~ scale * q; the rows' max is 127."""
    wf = w.astype(np.float64)
    s = np.abs(wf).max(axis=1) / 127
    s[s == 0] = 1.0
    return np.clip(_rint(wf / s[:, None]), -127, 127).astype(np.int8), s


def stored_weight(q: np.ndarray, scale: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`quantize_weight` of an int8 file's matrix, straight from its integers: q as stored, and
    the scale quantizing the float32 weights q * scale would derive, max_j |f32(q_j scale)| / 127
    = f32(max_j |q_j| scale) / 127 (float32 rounding is monotonic and symmetric). Saving checks
    that those weights quantize back to q, so both paths give the same constants."""
    m = np.abs(q.astype(np.int32)).max(axis=1).astype(np.float32)
    s = (m * scale.astype(np.float32)).astype(np.float64) / 127
    s[s == 0] = 1.0
    return q.astype(np.int8), s


def _shift_for(total_at_shift0: float, what: str) -> int:
    """The largest shift (most precision) keeping a sum whose bound at shift 0 is given below 2**61."""
    _fits(what, total_at_shift0)
    shift = 0
    while shift < 62 and total_at_shift0 * 2.0 ** (shift + 1) < 2.0 ** 61:
        shift += 1
    return shift


# ----------------------------------------------------------------------------------------------
# The integer model's constants

Rows = tuple[np.ndarray, np.ndarray]  # an int8 file's matrix: int8 q [N, K], float32 scale [N]


@dataclass
class Linear:
    """The constants of y = round((sum_i acc_i * e_i * mult_i + bias) / 2**shift) in residual units
    (2**-FRAC), where acc_i = int8 input_i x int8 weights_i and input_i's real value is
    q * e_i * unit_i / 127. Several inputs summed into one output (the LSTM's x and h) share bias
    and shift."""

    weights: list[np.ndarray]  # int8 [K_i, N]
    mults: list[np.ndarray]  # int64 [N]
    bias: np.ndarray  # int64 [N]
    shift: int

    @staticmethod
    def build(parts: list[tuple[np.ndarray, float, int, Rows | None]], bias: np.ndarray | None, what: str) -> Linear:
        """parts: (float weight [N, K], unit, e_max, the int8 file's (q, scale) or None) per input."""
        quantized = [quantize_weight(w) if rows is None else stored_weight(*rows) for w, _, _, rows in parts]
        factors = [s * unit * ONE / 127 for (_, s), (_, unit, _, _) in zip(quantized, parts)]
        b = bias.astype(np.float64) * ONE if bias is not None else np.zeros(parts[0][0].shape[0])
        total = sum(w.shape[1] * 127 * 127 * e_max * float(f.max()) for f, (w, _, e_max, _) in zip(factors, parts))
        shift = _shift_for(total + float(np.abs(b).max()) + 1, what)
        scale = 2.0 ** shift
        return Linear([np.ascontiguousarray(q.T) for q, _ in quantized], [_rint(f * scale) for f in factors],
                      _rint(b * scale), shift)


@dataclass
class Norm:
    """LayerNorm of a residual-unit row, output in residual units:
    y = gain * (x - mean) / (16 std) / 2**16 + bias, with 16 std = isqrt(256 var) exactly."""

    gain: np.ndarray  # int64 [d]: round(gamma * ONE * 16 * 2**16)
    bias: np.ndarray  # int64 [d]: round(beta * ONE)

    @staticmethod
    def build(weight: np.ndarray, bias: np.ndarray, what: str, gamma_scale: np.ndarray | float = 1.0) -> Norm:
        g = weight.astype(np.float64) * gamma_scale * (ONE * 16 * 2 ** NORM_GAIN_BITS)
        b = bias.astype(np.float64) * gamma_scale * ONE
        _fits(what, float(np.abs(g).max()) * 2 * (R_MAX + 1))  # gain * |x - mean|
        if np.abs(b).max() >= R_MAX:
            raise ModelError(f"model cannot be run exactly: {what} bias exceeds the residual range")
        return Norm(_rint(g), _rint(b))


@dataclass
class IntWeights:
    """Every constant of the integer model: the embedding (int64 [256, d], scaled to 15 bits),
    per block its norms and linears (and, in the attention block, the query's, and the value
    gate `vs`, int64 [d] in units of 2**-20), the output layer, and the lookup tables."""

    cfg: Config
    embed: np.ndarray
    blocks: list[dict[str, Linear | Norm | np.ndarray]]
    out: Linear
    tables: dict[str, np.ndarray]


def int_weights(cfg: Config, params: dict[str, np.ndarray], int8_rows: dict[str, Rows] | None = None) -> IntWeights:
    """The integer model of float weights `params` (float32 arrays by state-dict name, the value
    gate collapsed), taking an int8 file's stored integers where it has them (`int8_rows`)."""
    rows = (int8_rows or {}).get
    if any(".vq." in k for k in params):
        raise ModelError("the value gate is not collapsed (export the model first)")
    d = cfg.d_model
    if d * 127 * 127 >= 1 << 24:
        raise ModelError(f"d_model {d} is too wide for the exact float32 attention sums")
    dyn, unit = R_MAX, 1.0 / ONE  # dynamic-scale inputs: real = q * e * unit / 127, e <= R_MAX
    emb = params["embed.weight"].astype(np.float64)
    k = 0
    while np.abs(emb).max() * 2.0 ** (k + 1) < 2 ** 15:
        k += 1  # LayerNorm follows, which is scale-invariant: use the precision
    blocks = []
    for i in range(cfg.n_layers):
        p = f"blocks.{i}."

        def norm(name: str, scale: np.ndarray | float = 1.0) -> Norm:
            return Norm.build(params[p + name + ".weight"], params[p + name + ".bias"], f"block {i} {name}", scale)

        ih, hh = p + "rnn.weight_ih_l0", p + "rnn.weight_hh_l0"
        # (one float32 addition of the two biases: a single IEEE operation, the same everywhere)
        lstm_bias = params[p + "rnn.bias_ih_l0"] + params[p + "rnn.bias_hh_l0"]
        b = {"ln_start": norm("ln_start"),
             "lstm": Linear.build([(params[ih], unit, dyn, rows(ih)), (params[hh], 1.0, 1, rows(hh))], lstm_bias,
                                  f"block {i} lstm"),
             "ln_ff": norm("ln_ff"), "ln_xff": norm("ln_xff"),
             "boom": Linear.build([(params[p + "boom.up.weight"], unit, dyn, rows(p + "boom.up.weight"))],
                                  params[p + "boom.up.bias"], f"block {i} boom")}
        if i == cfg.attn_index:
            a = p + "attn."
            # (qs*q).(ks*k)/sqrt(d): the gates and the scale fold into the query's LayerNorm.
            fold = _exact_sigmoid(params[a + "qs"]) * _exact_sigmoid(params[a + "ks"]) / np.sqrt(np.float64(d))
            vs = params[a + "vs"].astype(np.float64)
            if np.abs(vs).max() > 1:
                raise ModelError("value gate outside [-1, 1]")
            b |= {"ln_mem": norm("ln_mem"), "ln_mid": norm("ln_mid"),
                  "q": Linear.build([(params[a + "q.weight"], unit, dyn, rows(a + "q.weight"))], params[a + "q.bias"],
                                    f"block {i} query"),
                  "q_ln": Norm.build(params[a + "q_ln.weight"], params[a + "q_ln.bias"], f"block {i} q_ln", fold),
                  "vs": _rint(vs * 2.0 ** 20)}
        blocks.append(b)
    out = Linear.build([(params["embed.weight"], unit, dyn, None)], params["out_bias"], "output")
    return IntWeights(cfg, _rint(emb * 2.0 ** k), blocks, out, {name: table(name) for name in TABLES})
