"""Integer-exact inference: the numerics contract of shazip archives.

An archive decodes only if the decoder reproduces the encoder's probability tables bit for
bit. Floats cannot promise that (summation order, thread count, batch shape, FMA contraction
under a compiler, CPU vs GPU all move the last bits), so the shipped engine follows these rules:

1. THE STEP IS INTEGER ONLY. int8 weights and activations, int32/int64 accumulators; integer
   +, -, *, floor division, shifts, comparisons, max, and table lookups (the one float64 sqrt,
   in `isqrt`, is corrected to the exact integer root). Exact integers do not depend on
   summation order, threads, batch shape, compiler or device.
2. MATMULS: int8 x int8 -> int32 with `torch._int_mm`, or float32 `bmm` over integer-valued
   operands when every partial sum is provably below 2**24 in magnitude (float32 then adds
   exactly, in any order). The bounds are stated where it is used and checked at load.
3. CONSTANTS from the float model (int8 weights, per-channel multipliers, biases, LayerNorm
   gains, lookup tables) are derived once at load, on the CPU, in float64 with only + - * /
   and sqrt (correctly rounded by IEEE 754; numpy applies them one by one, never fused), or in
   Python's `decimal`, whose exp is correctly rounded; then rounded half-to-even to integers.
   No libm call (exp, tanh, log) that could differ between platforms touches a constant.
4. Every integer is range-bounded: activations are clamped, and load checks that no product
   can leave int64 (ModelError otherwise).
5. The coder gets integer frequencies divided by their sum in float64 (one correctly rounded
   division per entry).

Fixed point. The residual stream is int32 in units of 2**-FRAC (FRAC = 10), clamped to
+-R_MAX. The lookup tables take inputs in the same units over [-8, 8] (sigmoid, tanh, GELU)
or [0, EXP_RANGE) (exp). A matmul input is quantized per row (per lane) with a dynamic scale:
q = round(127 y / e), e = max|y| of the row, so no calibration data is needed; weights are
quantized per output channel, w = s_j q_j, s_j = max|w_j| / 127. Training's QAT phase
(`model.fake_quant_rows`) applies the same two quantizers in float so the model learns to live
with them.

The step has two implementations that must give the same integers: `IntModel.step` below (plain
torch, any device) and `native.cpp` (CPU, compiled on first use); tests/test_native.py compares
them. Engine version ENGINE_VERSION names this exact arithmetic; any change to it must bump it,
and tests/data/golden-int8.shz pins it.
"""

from __future__ import annotations

import copy
import decimal
import hashlib
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from . import cache
from .errors import ModelError

if TYPE_CHECKING:
    from .model import SHARNN

ENGINE_VERSION = 1
FRAC = 10  # fixed-point fraction bits of the residual stream and of table inputs
ONE = 1 << FRAC
R_MAX = (1 << 20) - 1  # residual clamp: |x| < 1024
LUT_RANGE = 8  # sigmoid/tanh/GELU tables cover [-8, 8]
GATE_FRAC = 15  # sigmoid/tanh outputs and the LSTM cell are Q15
C_MAX = (1 << 22) - 1  # LSTM cell clamp: |c| < 128
EXP_ATT_RANGE = 16  # attention weights below e^-16 of the largest are zero
EXP_ATT_FRAC = 16
EXP_OUT_RANGE = 24  # output frequencies below e^-24 of the largest are floored at 1
EXP_OUT_FRAC = 30
MIX_MASS = 1 << 17  # attention weights are integers summing to at most this (see `_attend`)
MULT_BITS = 15  # per-channel multipliers are scaled to at most 2**15
INT64_SAFE = 1 << 62
NORM_GAIN_BITS = 16  # LayerNorm gains carry 16 extra bits (QNorm)
TABLES = ("sigmoid", "tanh", "gelu", "exp_att", "exp_out")
# What the compiled step (native.cpp) must have been built with: native.py compares its
# `contract()` with this and refuses to run on any difference.
CONTRACT = {"FRAC": FRAC, "R_MAX": R_MAX, "LUT_RANGE": LUT_RANGE, "GATE_FRAC": GATE_FRAC, "C_MAX": C_MAX,
            "EXP_ATT_RANGE": EXP_ATT_RANGE, "EXP_OUT_RANGE": EXP_OUT_RANGE, "MIX_MASS": MIX_MASS,
            "NORM_GAIN_BITS": NORM_GAIN_BITS}

Rows = tuple[torch.Tensor, torch.Tensor]  # an int8 file's matrix: int8 q [N, K], float32 scale [N]


# ----------------------------------------------------------------------------------------------
# Exact constants (rule 3)

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
    """The cache key of this file's text: any change to a rule or constant is a new key."""
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]


@lru_cache(maxsize=None)
def _table(kind: str) -> np.ndarray:
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


def _f64(t: torch.Tensor) -> np.ndarray:
    return t.detach().to("cpu", torch.float64).numpy()


def _exact_sigmoid(x: np.ndarray) -> np.ndarray:
    with decimal.localcontext(_CTX):
        return np.array([float(_d_sigmoid(Decimal(float(v)))) for v in x], dtype=np.float64)


def _rint(x: np.ndarray) -> np.ndarray:
    return np.rint(x).astype(np.int64)


def _fits(what: str, bound: float) -> None:
    if not bound < INT64_SAFE:
        raise ModelError(f"model cannot be run exactly: {what} could overflow int64 (weights too large)")


def quantize_weight(w: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """Per-row int8: (q [N, K], scale [N] float64) with w ~ scale * q; the rows' max is 127."""
    wf = _f64(w)
    s = np.abs(wf).max(axis=1) / 127
    s[s == 0] = 1.0
    return np.clip(_rint(wf / s[:, None]), -127, 127).astype(np.int8), s


def stored_weight(q: torch.Tensor, scale: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """`quantize_weight` of an int8 file's matrix, straight from its integers: q as stored, and
    the scale quantizing the float32 weights q * scale would derive, max_j |f32(q_j scale)| / 127
    = f32(max_j |q_j| scale) / 127 (float32 rounding is monotonic and symmetric). Saving checks
    that those weights quantize back to q, so both paths give the same constants."""
    m = q.to(torch.int32).abs().amax(dim=1).float()
    s = _f64(m * scale.float()) / 127
    s[s == 0] = 1.0
    return q.numpy().astype(np.int8), s


def _shift_for(total_at_shift0: float, what: str) -> int:
    """The largest shift (most precision) keeping a sum whose bound at shift 0 is given below 2**61."""
    _fits(what, total_at_shift0)
    shift = 0
    while shift < 62 and total_at_shift0 * 2.0 ** (shift + 1) < 2.0 ** 61:
        shift += 1
    return shift


# ----------------------------------------------------------------------------------------------
# Integer building blocks

def rshift(x: torch.Tensor, s: int) -> torch.Tensor:
    """round(x / 2**s), halves up (an arithmetic shift is a floor)."""
    return (x + (1 << (s - 1))) >> s if s > 0 else x


def rdiv(a: torch.Tensor, b: torch.Tensor | int) -> torch.Tensor:
    """round(a / b) for b > 0, halves up, by exact integer floor division."""
    return torch.div(2 * a + b, 2 * b, rounding_mode="floor")


def lookup(table: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """table over [-LUT_RANGE, LUT_RANGE] in units of 2**-FRAC, clamped at both ends."""
    return table[x.clamp(-LUT_RANGE * ONE, LUT_RANGE * ONE) + LUT_RANGE * ONE]


def quantize_rows(y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Dynamic per-row int8: q = round(127 y / e), e = max|y| per row (>= 1). Returns int8 q
    and int64 e [B, 1]; |q| <= 127 since |y| <= e."""
    e = y.abs().amax(dim=-1, keepdim=True).clamp_min(1)
    return rdiv(127 * y, e).to(torch.int8), e


def isqrt(v: torch.Tensor) -> torch.Tensor:
    """floor(sqrt(v)) for 0 <= v < 2**52: float64 sqrt of an exactly converted integer is within
    one of the answer, and the integer fix-ups make it exact."""
    s = torch.sqrt(v.to(torch.float64)).floor().to(torch.int64)
    s = s - (s * s > v).to(torch.int64)
    return s + ((s + 1) * (s + 1) <= v).to(torch.int64)


def int_mm(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """int8 [B, K] x int8 [K, N] -> int32, exact. CUDA's kernel needs more than 16 rows (and
    K, N multiples of 8, checked at load), so small batches are padded there."""
    if a.is_cuda and a.shape[0] <= 16:
        pad = torch.zeros(17 + (-17 % 8) - a.shape[0], a.shape[1], dtype=a.dtype, device=a.device)
        return torch._int_mm(torch.cat([a, pad]), w)[: a.shape[0]]
    return torch._int_mm(a, w)


@dataclass
class QLinear:
    """y = round((sum_i acc_i * e_i * mult_i + bias) / 2**shift) in residual units (2**-FRAC),
    where acc_i = int8 input_i x int8 weights_i and input_i's real value is q * e_i * unit_i / 127.
    Several inputs summed into one output (the LSTM's x and h) share bias and shift."""

    weights: list[torch.Tensor]  # int8 [K_i, N]
    mults: list[torch.Tensor]  # int64 [N]
    bias: torch.Tensor  # int64 [N]
    shift: int

    @staticmethod
    def build(parts: list[tuple[torch.Tensor, float, int, Rows | None]], bias: torch.Tensor | None,
              what: str) -> "QLinear":
        """parts: (float weight [N, K], unit, e_max, the int8 file's (q, scale) or None) per input."""
        quantized = [quantize_weight(w) if rows is None else stored_weight(*rows) for w, _, _, rows in parts]
        factors = [s * unit * ONE / 127 for (_, s), (_, unit, _, _) in zip(quantized, parts)]
        b = _f64(bias) * ONE if bias is not None else np.zeros(parts[0][0].shape[0])
        total = sum(w.shape[1] * 127 * 127 * e_max * float(f.max()) for f, (w, _, e_max, _) in zip(factors, parts))
        shift = _shift_for(total + float(np.abs(b).max()) + 1, what)
        scale = 2.0 ** shift
        return QLinear([torch.from_numpy(q.T.copy()) for q, _ in quantized],
                       [torch.from_numpy(_rint(f * scale)) for f in factors],
                       torch.from_numpy(_rint(b * scale)), shift)

    def __call__(self, inputs: list[tuple[torch.Tensor, torch.Tensor | None]]) -> torch.Tensor:
        acc = self.bias
        for (q, e), w, m in zip(inputs, self.weights, self.mults):
            a = int_mm(q, w).to(torch.int64)
            acc = acc + (a * m if e is None else a * e * m)
        return rshift(acc, self.shift)

    def to(self, device) -> "QLinear":
        return QLinear([w.to(device) for w in self.weights], [m.to(device) for m in self.mults],
                       self.bias.to(device), self.shift)


@dataclass
class QNorm:
    """LayerNorm of a residual-unit row, output in residual units:
    y = gain * (x - mean) / (16 std) / 2**16 + bias, with 16 std = isqrt(256 var) exactly."""

    gain: torch.Tensor  # int64 [d]: round(gamma * ONE * 16 * 2**16)
    bias: torch.Tensor  # int64 [d]: round(beta * ONE)

    @staticmethod
    def build(ln: torch.nn.LayerNorm, what: str, gamma_scale: np.ndarray | float = 1.0) -> "QNorm":
        g = _f64(ln.weight) * gamma_scale * (ONE * 16 * 2 ** NORM_GAIN_BITS)
        b = _f64(ln.bias) * gamma_scale * ONE
        _fits(what, float(np.abs(g).max()) * 2 * (R_MAX + 1))  # gain * |x - mean|
        if np.abs(b).max() >= R_MAX:
            raise ModelError(f"model cannot be run exactly: {what} bias exceeds the residual range")
        return QNorm(torch.from_numpy(_rint(g)), torch.from_numpy(_rint(b)))

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        d = x.shape[-1]
        xc = x - rdiv(x.sum(-1, keepdim=True), d)
        sd = isqrt(((xc * xc).sum(-1, keepdim=True) // d) << 8).clamp_min(1)
        return (rdiv(xc * self.gain, sd << NORM_GAIN_BITS) + self.bias).clamp(-R_MAX, R_MAX)

    def to(self, device) -> "QNorm":
        return QNorm(self.gain.to(device), self.bias.to(device))


# ----------------------------------------------------------------------------------------------
# The integer model

@dataclass
class IntState:
    """Per-lane state of the integer step. h: int8 [B, d] (h * 127); c: int64 [B, d] (Q15);
    mem: the attention ring, int8 values held in float32 [B, M, d] (for the exact bmm, rule 2);
    mem_e: int64 [B, M], each slot's row scale; pos: bytes consumed (slots < min(pos, M) filled)."""

    h: list[torch.Tensor]
    c: list[torch.Tensor]
    mem: torch.Tensor
    mem_e: torch.Tensor
    pos: int = 0


class IntModel:
    """The SHA-RNN in integers (rules at the top of this module). Built from a float model, and
    from an int8 file's stored integers where it has them (`int8_rows`, by state-dict name);
    `step` mirrors `SHARNN.step` and returns integer frequencies [B, 256] (all >= 1)."""

    def __init__(self, model: SHARNN, device: torch.device | str = "cpu",
                 int8_rows: dict[str, Rows] | None = None) -> None:
        rows = (int8_rows or {}).get
        cfg = model.cfg
        if model.attn.vq is not None:  # in-training model: collapse a copy (exact only via files)
            model = copy.deepcopy(model)
            model.collapse_vs()
        d = cfg.d_model
        if d * 127 * 127 >= 1 << 24:
            raise ModelError(f"d_model {d} is too wide for the exact float32 attention sums")
        if torch.device(device).type == "cuda" and (d % 8 or cfg.d_boom % 8):
            raise ModelError("the CUDA int8 matmul needs d_model and d_boom to be multiples of 8")
        self.cfg, self.device = cfg, torch.device(device)
        dyn, unit = R_MAX, 1.0 / ONE  # dynamic-scale inputs: real = q * e * unit / 127, e <= R_MAX
        emb = _f64(model.embed.weight)
        k = 0
        while np.abs(emb).max() * 2.0 ** (k + 1) < 2 ** 15:
            k += 1  # LayerNorm follows, which is scale-invariant: use the precision
        self.embed = torch.from_numpy(_rint(emb * 2.0 ** k))
        self.blocks = []
        for i, blk in enumerate(model.blocks):
            r = blk.rnn
            b = {"ln_start": QNorm.build(blk.ln_start, f"block {i} ln_start"),
                 # (one float32 addition of the two biases: a single IEEE operation, the same everywhere)
                 "lstm": QLinear.build([(r.weight_ih_l0, unit, dyn, rows(f"blocks.{i}.rnn.weight_ih_l0")),
                                        (r.weight_hh_l0, 1.0, 1, rows(f"blocks.{i}.rnn.weight_hh_l0"))],
                                       r.bias_ih_l0 + r.bias_hh_l0, f"block {i} lstm"),
                 "ln_ff": QNorm.build(blk.ln_ff, f"block {i} ln_ff"),
                 "ln_xff": QNorm.build(blk.ln_xff, f"block {i} ln_xff"),
                 "boom": QLinear.build([(blk.boom.up.weight, unit, dyn, rows(f"blocks.{i}.boom.up.weight"))],
                                       blk.boom.up.bias, f"block {i} boom")}
            if blk.attn is not None:
                a = blk.attn
                # (qs*q).(ks*k)/sqrt(d): the gates and the scale fold into the query's LayerNorm.
                fold = _exact_sigmoid(_f64(a.qs)) * _exact_sigmoid(_f64(a.ks)) / np.sqrt(np.float64(d))
                b |= {"ln_mem": QNorm.build(blk.ln_mem, f"block {i} ln_mem"),
                      "ln_mid": QNorm.build(blk.ln_mid, f"block {i} ln_mid"),
                      "q": QLinear.build([(a.q.weight, unit, dyn, rows(f"blocks.{i}.attn.q.weight"))], a.q.bias,
                                         f"block {i} query"),
                      "q_ln": QNorm.build(a.q_ln, f"block {i} q_ln", fold),
                      "vs": torch.from_numpy(_rint(_f64(a.vs) * 2.0 ** 20))}
                if np.abs(_f64(a.vs)).max() > 1:
                    raise ModelError("value gate outside [-1, 1]")
            self.blocks.append({k_: (v.to(self.device) if hasattr(v, "to") else v) for k_, v in b.items()})
        self.out = QLinear.build([(model.embed.weight, unit, dyn, None)], model.out_bias, "output").to(self.device)
        self.embed = self.embed.to(self.device)
        self.tables = {name: torch.from_numpy(_table(name)).to(self.device) for name in TABLES}

    def init_state(self, batch: int) -> IntState:
        c, dev = self.cfg, self.device
        zeros = lambda *shape, dt=torch.int64: torch.zeros(*shape, dtype=dt, device=dev)  # noqa: E731
        return IntState([zeros(batch, c.d_model, dt=torch.int8) for _ in self.blocks],
                        [zeros(batch, c.d_model) for _ in self.blocks],
                        zeros(batch, c.mem_len, c.d_model, dt=torch.float32), zeros(batch, c.mem_len))

    def step(self, state: IntState, x: torch.Tensor) -> tuple[IntState, torch.Tensor]:
        """x: int64 [B] previous bytes -> (state, int64 frequencies [B, 256], every entry >= 1).
        The ring is updated in place and shared with the returned state."""
        h = self.embed[x]
        hs, cs = [], []
        for b, hq, c in zip(self.blocks, state.h, state.c):
            h = b["ln_start"](h)
            hr, hq, c = self._lstm(b, h, hq, c)
            hs.append(hq)
            cs.append(c)
            h = (h + hr).clamp(-R_MAX, R_MAX)
            if "q" in b:
                mid = b["ln_mid"](h)
                h = (mid + self._attend(b, mid, b["ln_mem"](h), state)).clamp(-R_MAX, R_MAX)
            h = (b["ln_ff"](h) + self._boom(b, h)).clamp(-R_MAX, R_MAX)
        logits = self.out([quantize_rows(h)])
        freq = self.tables["exp_out"][(logits.amax(-1, keepdim=True) - logits).clamp_max(EXP_OUT_RANGE * ONE)]
        return IntState(hs, cs, state.mem, state.mem_e, state.pos + 1), freq.clamp_min(1)

    def _lstm(self, b: dict, x: torch.Tensor, h: torch.Tensor, c: torch.Tensor):
        t, d = self.tables, self.cfg.d_model
        gates = b["lstm"]([quantize_rows(x), (h, None)])
        i, f, o = (lookup(t["sigmoid"], gates[:, k * d:(k + 1) * d]) for k in (0, 1, 3))
        g = lookup(t["tanh"], gates[:, 2 * d:3 * d])
        c = rshift(f * c + i * g, GATE_FRAC).clamp(-C_MAX, C_MAX)
        hh = o * lookup(t["tanh"], rshift(c, GATE_FRAC - FRAC))  # Q30
        return rshift(hh, 2 * GATE_FRAC - FRAC), rshift(hh * 127, 2 * GATE_FRAC).to(torch.int8), c

    def _attend(self, b: dict, mid: torch.Tensor, m: torch.Tensor, state: IntState) -> torch.Tensor:
        """Attention of query input `mid` over the ring's filled slots and the current memory
        entry `m` (then stored in the ring), in residual units. The float32 bmms are exact in
        any order (rule 2): a score sums d products below 127**2 (d * 127**2 < 2**24, checked
        at load); the mix sums integer weights u (sum u <= 2**17) times int8 values
        (< 2**17 * 127 < 2**24)."""
        M = self.cfg.mem_len
        slot, filled = state.pos % M, min(state.pos, M)
        qm, em = quantize_rows(m)
        qq, eq = quantize_rows(b["q_ln"](b["q"]([quantize_rows(mid)]).clamp(-R_MAX, R_MAX)))
        mem = state.mem[:, :filled]
        dots = torch.cat([torch.bmm(mem, qq.float()[:, :, None])[:, :, 0].to(torch.int64),
                          (qq.to(torch.int64) * qm).sum(-1, keepdim=True)], dim=1)
        es = torch.cat([state.mem_e[:, :filled], em], dim=1)
        scores = rdiv(rshift(dots * es, FRAC) * eq, 127 * 127)  # units 2**-FRAC
        w = self.tables["exp_att"][(scores.amax(-1, keepdim=True) - scores).clamp_max(EXP_ATT_RANGE * ONE)]
        we = w * es
        we_sum = we.sum(-1, keepdim=True)
        u = torch.div(we * MIX_MASS, we_sum, rounding_mode="floor")
        mix = torch.bmm(u[:, None, :filled].float(), mem)[:, 0].to(torch.int64) + u[:, filled:] * qm
        ebar = torch.div(we_sum << 8, w.sum(-1, keepdim=True), rounding_mode="floor")  # mean scale * 2**8
        t = rshift(mix * ebar, 25)  # = mix * ebar / MIX_MASS / 2**8
        state.mem[:, slot] = qm.float()
        state.mem_e[:, slot] = em[:, 0]
        return rdiv(t * b["vs"], 127 << 20)

    def _boom(self, b: dict, x: torch.Tensor) -> torch.Tensor:
        pre = b["boom"]([quantize_rows(b["ln_xff"](x))])
        g = lookup(self.tables["gelu"], pre) + (pre - LUT_RANGE * ONE).clamp_min(0)  # GELU(x) = x beyond 8
        return sum(g.split(self.cfg.d_model, dim=1))


def probabilities(freq: torch.Tensor) -> np.ndarray:
    """Rows for the coder: integer frequencies over their sum, one float64 division each (exact
    inputs below 2**53, correctly rounded result)."""
    f = freq.cpu().numpy()
    return f / f.sum(axis=1, keepdims=True).astype(np.float64)
