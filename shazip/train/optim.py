"""Optimizers for training shazip models: LAMB with a minimum trust ratio, and AdamW.

LAMB (You et al. 2019, "Large Batch Optimization for Deep Learning: Training BERT in
76 minutes") as used by Merity's SHA-RNN (arXiv 1911.11423), whose reference code is
based on cybertronai/pytorch-lamb with a ``min_trust`` floor on the trust ratio.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch


class Lamb(torch.optim.Optimizer):
    """LAMB: Adam direction, rescaled per parameter tensor by a clamped trust ratio.

    For each parameter tensor ``w`` with gradient ``g``, at step ``t`` (1-based)::

        m = beta1 * m + (1 - beta1) * g            v = beta2 * v + (1 - beta2) * g * g
        m_hat = m / (1 - beta1**t)                 v_hat = v / (1 - beta2**t)
        (without bias_correction: m_hat = m, v_hat = v)
        update = m_hat / (sqrt(v_hat) + eps) + weight_decay * w
        trust  = ||w|| / ||update||   if ||w|| > 0 and ||update|| > 0   else 1.0
        trust  = clamp(trust, min_trust, max_trust)
        w      = w - lr * trust * update

    Norms are L2 norms over the whole tensor (taken before the step); ``lr`` is read
    from ``param_group['lr']`` each step, so ``torch.optim.lr_scheduler`` works.

    Why ``min_trust`` (SHA-RNN uses 0.25): tensors that start at zero or stay tiny --
    biases, gates, LayerNorm offsets -- have ``||w|| ~ 0``, so the plain LAMB ratio would
    be ~0 and they would effectively be frozen (and ``||w|| == 0`` exactly would divide
    into nothing). The floor guarantees every tensor moves at least ``lr * min_trust``
    times its Adam update. ``max_trust`` caps the step of tensors with a huge norm.
    Sparse gradients are rejected with ``RuntimeError``.
    """

    def __init__(self, params: Iterable[Any], lr: float = 2e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-6,
                 weight_decay: float = 0.0, min_trust: float = 0.25,
                 max_trust: float = 10.0, bias_correction: bool = True) -> None:
        if lr < 0.0:
            raise ValueError(f"invalid learning rate: {lr}")
        if eps < 0.0:
            raise ValueError(f"invalid eps: {eps}")
        if not (0.0 <= betas[0] < 1.0 and 0.0 <= betas[1] < 1.0):
            raise ValueError(f"invalid betas: {betas}")
        if weight_decay < 0.0:
            raise ValueError(f"invalid weight_decay: {weight_decay}")
        if not 0.0 <= min_trust <= max_trust:
            raise ValueError(f"need 0 <= min_trust <= max_trust, got {min_trust}, {max_trust}")
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        min_trust=min_trust, max_trust=max_trust,
                        bias_correction=bias_correction)
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self, closure: Callable[[], torch.Tensor] | None = None) -> torch.Tensor | None:
        """Perform one optimization step; ``closure`` re-evaluates and returns the loss."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = p.grad
                if grad.is_sparse:
                    raise RuntimeError("Lamb does not support sparse gradients")
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["step"] = t = int(state["step"]) + 1
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                exp_avg.mul_(beta1).add_(grad, alpha=1.0 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1.0 - beta2)
                m_hat, v_hat = exp_avg, exp_avg_sq
                if group["bias_correction"]:
                    m_hat = exp_avg / (1.0 - beta1 ** t)
                    v_hat = exp_avg_sq / (1.0 - beta2 ** t)
                update = m_hat / (v_hat.sqrt() + group["eps"])
                if group["weight_decay"] != 0.0:
                    update.add_(p, alpha=group["weight_decay"])
                w_norm, u_norm = p.norm(), update.norm()
                trust = torch.where((w_norm > 0) & (u_norm > 0), w_norm / u_norm,
                                    torch.ones_like(w_norm))
                trust = trust.clamp(group["min_trust"], group["max_trust"])
                p.add_(update * trust, alpha=-float(group["lr"]))
        return loss


def make_optimizer(name: str, params: Iterable[Any], lr: float,
                   weight_decay: float = 0.0) -> torch.optim.Optimizer:
    """Build the optimizer called ``name``: 'lamb' (min_trust 0.25) or 'adamw'."""
    if name == "lamb":
        return Lamb(params, lr=lr, weight_decay=weight_decay, min_trust=0.25)
    if name == "adamw":
        return torch.optim.AdamW(params, lr=lr, betas=(0.9, 0.999), weight_decay=weight_decay)
    raise ValueError(f"unknown optimizer '{name}' (choose lamb or adamw)")
