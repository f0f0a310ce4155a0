"""The SHA-RNN byte model (Merity 2019, "Single Headed Attention RNN", arXiv 1911.11423).

Structure, following the paper and its reference implementation (Smerity/sha-rnn):

    bytes -> tied embedding -> dropout -> Block x n_layers -> dropout -> tied softmax (256 bytes)

    Block:  h = LN_start(h)
            h = h + LSTM(h)                               (LSTM hidden size = d)
            [one block only, second-last by default:]
            m = LN_mem(h); h = LN_mid(h)
            h = h + Attention(query=h, keys=values=[memory of past m; m])
            h, x = LN_ff(h), LN_xff(h)
            h = h + Boom(x)                                Boom: d -> 4d, GELU, 4 chunks of d summed

Attention is single-headed with no key/value projections: keys and values are the
layer-normed hidden states themselves, kept in a memory of the last `mem_len` states.
The query goes through one Linear + LayerNorm. Sigmoid gates qs, ks scale query and key;
the value gate is over-parameterized during training, vs = sigmoid(f) * tanh(c) with
[c, f] = Linear(sigmoid(vs_raw)), and collapses to a constant vector at export
(`collapse_vs`), since it depends on no input.

Quantization-aware training (`set_qat(True)`): every matmul input is fake-quantized per row
and every matmul weight per output channel, as the integer engine (twin.py) quantizes them,
with straight-through gradients. (The LSTM's recurrent h, which the engine keeps at a fixed
1/127 step, is not: the fused LSTM kernel gives no hook inside the recurrence.)

Every query sees itself and at most `mem_len` earlier states (a sliding window). The same
window is used by the sequence forward (training) and by `step` (compression), so the two
produce the same predictions; `step` keeps the memory in a ring buffer because attention
has no positional term and is therefore invariant to the order of its keys.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch
import torch.nn as nn
import torch.nn.functional as F

from .config import VOCAB, Config

@dataclass
class State:
    """Per-lane recurrent state carried between calls.

    hidden: per block, LSTM (h, c), each [1, B, d].
    mem:    attention memory [B, M, d] of layer-normed states. In the sequence forward it is
            chronological with M <= mem_len; in `step` it is a ring of exactly mem_len slots.
    pos:    number of bytes consumed so far (all lanes move in lockstep).
    """

    hidden: list[tuple[torch.Tensor, torch.Tensor]]
    mem: torch.Tensor
    pos: int = 0

    def detach(self) -> "State":
        return State([(h.detach(), c.detach()) for h, c in self.hidden], self.mem.detach(), self.pos)


def fake_quant_rows(x: torch.Tensor) -> torch.Tensor:
    """Per-row dynamic int8 in float, as the integer engine quantizes every matmul input and
    weight (twin.quantize_rows: q = round(127 y / e), e = max|y| of the row), with a
    straight-through gradient."""
    e = x.detach().abs().amax(dim=-1, keepdim=True).clamp_min(1e-12)
    q = torch.round(x * (127 / e)) * (e / 127)
    return x + (q - x).detach()


class QAT:
    """Mixin: `qat` is set on every module by `SHARNN.set_qat`; `fq` is then the engine's int8
    rounding (per row), else the identity."""

    qat = False

    def fq(self, x: torch.Tensor) -> torch.Tensor:
        return fake_quant_rows(x) if self.qat else x


class Boom(QAT, nn.Module):
    """d -> d_boom, GELU, then the d_boom vector is cut into d_boom/d chunks that are summed."""

    def __init__(self, d: int, d_boom: int) -> None:
        super().__init__()
        self.up = nn.Linear(d, d_boom)
        self.d = d

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = F.gelu(F.linear(self.fq(x), self.fq(self.up.weight), self.up.bias), approximate="tanh")
        return z.view(*z.shape[:-1], -1, self.d).sum(dim=-2)


class Attention(QAT, nn.Module):
    """Single-head attention over a memory of past states; no key/value projections."""

    def __init__(self, cfg: Config) -> None:
        super().__init__()
        d = cfg.d_model
        self.q = nn.Linear(d, d)
        self.q_ln = nn.LayerNorm(d, eps=1e-12)
        self.qs = nn.Parameter(torch.zeros(d))
        self.ks = nn.Parameter(torch.zeros(d))
        self.vs = nn.Parameter(torch.zeros(d))
        # Over-parameterized value gate; replaced by its constant output in `collapse_vs`.
        self.vq = None if cfg.collapsed_vs else nn.Linear(d, 2 * d)
        self.drop = nn.Dropout(cfg.dropout)
        self.scale = 1.0 / math.sqrt(d)

    def gates(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        qs, ks = torch.sigmoid(self.qs), torch.sigmoid(self.ks)
        if self.vq is None:
            return qs, ks, self.vs
        c, f = self.vq(torch.sigmoid(self.vs)).chunk(2, dim=-1)
        return qs, ks, torch.sigmoid(f) * torch.tanh(c)

    @torch.no_grad()
    def collapse_vs(self) -> None:
        self.vs.copy_(self.gates()[2])
        self.vq = None

    def forward(self, h: torch.Tensor, keys: list[torch.Tensor], visible: torch.Tensor | None) -> torch.Tensor:
        """h: [B, T, d] queries; keys: segments [B, K_i, d] (keys are also the values), kept
        apart so the memory is never copied; visible: bool [1, T, sum K_i], or None for all."""
        # The per-dimension gates ks and vs are folded into the query and the output
        # ((qs*q).(ks*k) = (qs*ks*q).k and sum_j w_j (vs*k_j) = vs * sum_j w_j k_j), so the
        # memory itself is never rescaled: it is read as stored.
        qs, ks, vs = self.gates()
        q = self.q_ln(F.linear(self.fq(h), self.fq(self.q.weight), self.q.bias))
        q = self.drop(self.fq(qs * ks * q * self.scale))
        scores = torch.cat([torch.matmul(q, k.transpose(1, 2)) for k in keys], dim=-1)
        if visible is not None:
            scores = scores.masked_fill(~visible, float("-inf"))
        weights = self.drop(scores.softmax(dim=-1))
        parts = weights.split([k.shape[1] for k in keys], dim=-1)
        return self.drop(vs * sum(torch.matmul(w, k) for w, k in zip(parts, keys)))


class Block(QAT, nn.Module):
    def __init__(self, cfg: Config, use_attn: bool) -> None:
        super().__init__()
        d = cfg.d_model
        self.ln_start = nn.LayerNorm(d, eps=1e-12)
        self.rnn = nn.LSTM(d, d, batch_first=True)
        self.attn = Attention(cfg) if use_attn else None
        if use_attn:
            self.ln_mem = nn.LayerNorm(d, eps=1e-12)
            self.ln_mid = nn.LayerNorm(d, eps=1e-12)
        self.ln_ff = nn.LayerNorm(d, eps=1e-12)
        self.ln_xff = nn.LayerNorm(d, eps=1e-12)
        self.boom = Boom(d, cfg.d_boom)
        self.drop = nn.Dropout(cfg.dropout)

    def _lstm(self, x: torch.Tensor, hidden: tuple[torch.Tensor, torch.Tensor]):
        """nn.LSTM over a sequence; for a single step the plain cell, which is 2x faster on CPU.
        Under QAT the input and both weight matrices are fake-quantized."""
        r = self.rnn
        w_ih, w_hh = self.fq(r.weight_ih_l0), self.fq(r.weight_hh_l0)
        if x.shape[1] != 1:
            if not self.qat:
                return r(x, hidden)
            out, h, c = torch.lstm(self.fq(x), hidden, [w_ih, w_hh, r.bias_ih_l0, r.bias_hh_l0], True, 1, 0.0,
                                   self.training, False, True)
            return out, (h, c)
        h, c = torch.lstm_cell(self.fq(x[:, 0]), (hidden[0][0], hidden[1][0]), w_ih, w_hh, r.bias_ih_l0, r.bias_hh_l0)
        return h[:, None], (h[None], c[None])

    def forward(self, h, hidden, attend):
        """`attend(h, m) -> mix` supplies the memory handling (sequence window or step ring)."""
        h = self.ln_start(h)
        x, hidden = self._lstm(h, hidden)
        h = h + self.drop(x)
        if self.attn is not None:
            m = self.fq(self.ln_mem(h))
            h = self.ln_mid(h)
            h = h + self.drop(attend(h, m))
        h, x = self.ln_ff(h), self.ln_xff(h)
        return h + self.drop(self.boom(x)), hidden


class SHARNN(QAT, nn.Module):
    def __init__(self, cfg: Config) -> None:
        super().__init__()
        self.cfg = cfg
        # `_weight` skips nn.Embedding's own N(0, 1) draw, overwritten below anyway; on the meta
        # device (model files are checked by building there) no draw is made at all, since a
        # meta normal_ imports torch._dynamo, a second of every command's start-up.
        self.embed = nn.Embedding(VOCAB, cfg.d_model, _weight=torch.empty(VOCAB, cfg.d_model))
        self.blocks = nn.ModuleList(Block(cfg, i == cfg.attn_index) for i in range(cfg.n_layers))
        self.out_bias = nn.Parameter(torch.zeros(VOCAB))  # softmax weight is tied to `embed`
        self.drop_in = nn.Dropout(cfg.dropout_in)
        self.drop_out = nn.Dropout(cfg.dropout)
        # Small tied embedding: the input side is layer-normed anyway, and the output logits
        # start near zero (about 8 bits/byte) instead of saturating the softmax.
        if not self.embed.weight.is_meta:
            nn.init.normal_(self.embed.weight, std=0.02)

    @property
    def attn(self) -> Attention:
        return self.blocks[self.cfg.attn_index].attn

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def set_qat(self, on: bool) -> None:
        """Quantization-aware training on or off (see the module docstring)."""
        for m in self.modules():
            if isinstance(m, QAT):
                m.qat = on

    def collapse_vs(self) -> None:
        """Freeze the value gate into a constant (export); the config records it."""
        if self.attn.vq is not None:
            self.attn.collapse_vs()
            self.cfg = replace(self.cfg, collapsed_vs=True)

    def init_state(self, batch: int, device: torch.device | str = "cpu") -> State:
        d = self.cfg.d_model
        dtype = self.embed.weight.dtype
        zeros = lambda: torch.zeros(1, batch, d, device=device, dtype=dtype)  # noqa: E731
        return State([(zeros(), zeros()) for _ in self.blocks], torch.zeros(batch, 0, d, device=device, dtype=dtype))

    def _run(self, x: torch.Tensor, state: State, attend) -> tuple[torch.Tensor, list]:
        h = self.drop_in(self.embed(x))
        hidden = []
        for block, hc in zip(self.blocks, state.hidden):
            h, hc = block(h, hc, attend)
            hidden.append(hc)
        logits = F.linear(self.fq(self.drop_out(h)), self.fq(self.embed.weight), self.out_bias)
        return logits, hidden

    def forward(self, x: torch.Tensor, state: State) -> tuple[torch.Tensor, State]:
        """Sequence forward for training. x: [B, T] bytes (the inputs; targets are x shifted by
        one, handled by the caller). Returns logits [B, T, 256] and the state after x, whose
        memory holds the last mem_len attention states (callers detach it between segments)."""
        T, M = x.shape[1], self.cfg.mem_len
        new_mem = state.mem

        def attend(h: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
            nonlocal new_mem
            m0 = state.mem.shape[1]
            i = torch.arange(T, device=x.device)[:, None] + m0  # absolute key index of each query
            j = torch.arange(m0 + T, device=x.device)[None, :]
            visible = ((j <= i) & (j >= i - M))[None]
            new_mem = torch.cat([state.mem, m], dim=1)[:, -M:]
            return self.attn(h, [state.mem, m], visible)

        logits, hidden = self._run(x, state, attend)
        return logits, State(hidden, new_mem, state.pos + T)

    def init_ring(self, batch: int, device: torch.device | str = "cpu") -> State:
        """A fresh state for `step`: zero LSTM state and an empty ring of mem_len slots."""
        s = self.init_state(batch, device)
        s.mem = torch.zeros(batch, self.cfg.mem_len, self.cfg.d_model, device=device, dtype=s.mem.dtype)
        return s

    def step(self, state: State, x: torch.Tensor) -> tuple[State, torch.Tensor]:
        """One byte per lane: x [B] previous bytes -> (new state, logits [B, 256]).

        The ring holds the last mem_len states; the query sees the filled slots plus itself,
        which is exactly the sequence forward's window. The ring is updated in place (one
        slot overwritten) and shared with the returned state."""
        M = self.cfg.mem_len
        slot, filled = state.pos % M, min(state.pos, M)

        def attend(h: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
            # the ring fills from slot 0, so its filled slots are a prefix: no mask needed
            out = self.attn(h, [state.mem[:, :filled], m], None)
            state.mem[:, slot] = m[:, 0]
            return out

        logits, hidden = self._run(x[:, None], state, attend)
        return State(hidden, state.mem, state.pos + 1), logits[:, 0]
