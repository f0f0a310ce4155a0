"""The integer model in plain torch: the reference ("the twin") of the numerics contract.

The rules and constants are in numerics.py, their derivation for a model in exact.py (both
torch-free: the CPU path never imports torch). This module runs the same integers with torch operations on any device: tests
compare the native core with it on every kernel path, and it is the engine on a GPU (where
`torch._int_mm` and exact float32 `bmm`s over integer operands carry the matmuls, rule 2), whose
graphed and compiled steps are gpu.py's.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

from . import exact
from ..errors import ModelError
from .numerics import (
    C_MAX, EXP_ATT_RANGE, EXP_OUT_RANGE, FRAC, GATE_FRAC, LUT_RANGE, MIX_MASS, NORM_GAIN_BITS, ONE, R_MAX,
)

if TYPE_CHECKING:
    from .sharnn import SHARNN


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
    K, N multiples of 8, checked at load), so small batches are padded there; there `w` is the
    transposed view `device_weight` makes."""
    if a.is_cuda and a.shape[0] <= 16:
        pad = torch.zeros(17 + (-17 % 8) - a.shape[0], a.shape[1], dtype=a.dtype, device=a.device)
        return torch._int_mm(torch.cat([a, pad]), w)[: a.shape[0]]
    return torch._int_mm(a, w)


def device_weight(w: np.ndarray, device: torch.device | str) -> torch.Tensor:
    """An int8 weight matrix [K, N] for `int_mm` on `device`. On CUDA it is stored [N, K] and
    handed over as its transposed view: cuBLASLt's int8 matmul supports that layout (the "TN"
    of its IMMA kernels) at every shape, while the plain row-major pair is refused at some
    (CUBLAS_STATUS_NOT_SUPPORTED for K=32, N=128 on an H100, seen 2026-11-24)."""
    if torch.device(device).type != "cuda":
        return torch.from_numpy(w).to(device)
    return torch.from_numpy(np.ascontiguousarray(w.T)).to(device).t()


@dataclass
class QLinear:
    """exact.Linear's y = round((sum_i acc_i * e_i * mult_i + bias) / 2**shift) on torch tensors."""

    weights: list[torch.Tensor]
    mults: list[torch.Tensor]
    bias: torch.Tensor
    shift: int

    @staticmethod
    def of(lin: exact.Linear, device) -> "QLinear":
        return QLinear([device_weight(w, device) for w in lin.weights],
                       [torch.from_numpy(m).to(device) for m in lin.mults], torch.from_numpy(lin.bias).to(device),
                       lin.shift)

    def __call__(self, inputs: list[tuple[torch.Tensor, torch.Tensor | None]]) -> torch.Tensor:
        acc = self.bias
        for (q, e), w, m in zip(inputs, self.weights, self.mults):
            a = int_mm(q, w).to(torch.int64)
            acc = acc + (a * m if e is None else a * e * m)
        return rshift(acc, self.shift)


@dataclass
class QNorm:
    """exact.Norm's LayerNorm on torch tensors."""

    gain: torch.Tensor
    bias: torch.Tensor

    @staticmethod
    def of(norm: exact.Norm, device) -> "QNorm":
        return QNorm(torch.from_numpy(norm.gain).to(device), torch.from_numpy(norm.bias).to(device))

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        d = x.shape[-1]
        xc = x - rdiv(x.sum(-1, keepdim=True), d)
        sd = isqrt(((xc * xc).sum(-1, keepdim=True) // d) << 8).clamp_min(1)
        return (rdiv(xc * self.gain, sd << NORM_GAIN_BITS) + self.bias).clamp(-R_MAX, R_MAX)


# ----------------------------------------------------------------------------------------------
# The integer model

@dataclass
class IntState:
    """Per-lane state of the integer step. h: int8 [B, d] (h * 127); c: int64 [B, d] (Q15);
    mem: the attention ring, int8 values held in float32 [B, M, d] (for the exact bmm, rule 2);
    mem_e: int64 [B, M], each slot's row scale; pos: int64 [B], the bytes each lane has
    consumed (its slots < min(pos, M) filled), on the device, so that a step has the same shapes
    and no host value at every position (a CUDA graph replays it), and lanes of different frames,
    at different positions, step in one batch (gpu.py)."""

    h: list[torch.Tensor]
    c: list[torch.Tensor]
    mem: torch.Tensor
    mem_e: torch.Tensor
    pos: torch.Tensor

    def tensors(self) -> list[torch.Tensor]:
        """Every tensor, each with the lanes as its first dimension."""
        return self.h + self.c + [self.mem, self.mem_e, self.pos]


class IntModel:
    """The SHA-RNN in integers (rules in numerics.py), in torch on any device. Built from a float
    model (an in-training one too), or from a model file's constants (`exact.IntWeights`, as
    `LoadedModel.int_weights()` gives them); `step` mirrors `SHARNN.step` and returns integer
    frequencies [B, 256] (all >= 1)."""

    def __init__(self, model: SHARNN | exact.IntWeights, device: torch.device | str = "cpu",
                 int8_rows: dict[str, exact.Rows] | None = None) -> None:
        weights = model if isinstance(model, exact.IntWeights) else exact.int_weights(
            model.cfg, float_params(model), int8_rows)
        cfg = weights.cfg
        if torch.device(device).type == "cuda" and (cfg.d_model % 8 or cfg.d_boom % 8):
            raise ModelError("the CUDA int8 matmul needs d_model and d_boom to be multiples of 8")
        self.cfg, self.device, self.weights = cfg, torch.device(device), weights
        self.embed = torch.from_numpy(weights.embed).to(self.device)
        self.blocks = [{k: QLinear.of(v, self.device) if isinstance(v, exact.Linear) else
                        QNorm.of(v, self.device) if isinstance(v, exact.Norm) else torch.from_numpy(v).to(self.device)
                        for k, v in b.items()} for b in weights.blocks]
        self.out = QLinear.of(weights.out, self.device)
        self.tables = {name: torch.from_numpy(t).to(self.device) for name, t in weights.tables.items()}
        self._slots = torch.arange(cfg.mem_len + 1, device=self.device)

    def init_state(self, batch: int) -> IntState:
        c, dev = self.cfg, self.device
        zeros = lambda *shape, dt=torch.int64: torch.zeros(*shape, dtype=dt, device=dev)  # noqa: E731
        return IntState([zeros(batch, c.d_model, dt=torch.int8) for _ in self.blocks],
                        [zeros(batch, c.d_model) for _ in self.blocks],
                        zeros(batch, c.mem_len, c.d_model, dt=torch.float32), zeros(batch, c.mem_len), zeros(batch))

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
        entry `m` (then stored in the ring), in residual units. Every slot takes part, an empty
        one with weight 0 (so the shapes never change): the integers are those of the filled
        slots alone. The float32 bmms are exact in any order (rule 2): a score sums d products
        below 127**2 (d * 127**2 < 2**24, checked at load); the mix sums integer weights u
        (sum u <= 2**17) times int8 values (< 2**17 * 127 < 2**24)."""
        M = self.cfg.mem_len
        qm, em = quantize_rows(m)
        qq, eq = quantize_rows(b["q_ln"](b["q"]([quantize_rows(mid)]).clamp(-R_MAX, R_MAX)))
        dots = torch.cat([torch.bmm(state.mem, qq.float()[:, :, None])[:, :, 0].to(torch.int64),
                          (qq.to(torch.int64) * qm).sum(-1, keepdim=True)], dim=1)
        es = torch.cat([state.mem_e, em], dim=1)
        keep = (self._slots < state.pos[:, None]) | (self._slots == M)  # [B, M + 1]: filled slots, current entry
        scores = rdiv(rshift(dots * es, FRAC) * eq, 127 * 127)  # units 2**-FRAC
        top = scores.masked_fill(~keep, torch.iinfo(torch.int64).min).amax(-1, keepdim=True)
        w = self.tables["exp_att"][(top - scores).clamp(0, EXP_ATT_RANGE * ONE)] * keep
        we = w * es
        we_sum = we.sum(-1, keepdim=True)
        u = torch.div(we * MIX_MASS, we_sum, rounding_mode="floor")
        mix = torch.bmm(u[:, None, :M].float(), state.mem)[:, 0].to(torch.int64) + u[:, M:] * qm
        ebar = torch.div(we_sum << 8, w.sum(-1, keepdim=True), rounding_mode="floor")  # mean scale * 2**8
        t = rshift(mix * ebar, 25)  # = mix * ebar / MIX_MASS / 2**8
        lane, slot = torch.arange(len(qm), device=qm.device), state.pos % M
        state.mem[lane, slot] = qm.float()
        state.mem_e[lane, slot] = em[:, 0]
        return rdiv(t * b["vs"], 127 << 20)

    def _boom(self, b: dict, x: torch.Tensor) -> torch.Tensor:
        pre = b["boom"]([quantize_rows(b["ln_xff"](x))])
        g = lookup(self.tables["gelu"], pre) + (pre - LUT_RANGE * ONE).clamp_min(0)  # GELU(x) = x beyond 8
        return sum(g.split(self.cfg.d_model, dim=1))


def float_params(model: SHARNN) -> dict[str, np.ndarray]:
    """A float model's weights as numpy float32 arrays by state-dict name, its value gate
    collapsed (on a copy: an in-training model keeps its own)."""
    if model.attn.vq is not None:
        model = copy.deepcopy(model)
        model.collapse_vs()
    return {k: v.detach().to("cpu", torch.float32).numpy() for k, v in model.state_dict().items()}
