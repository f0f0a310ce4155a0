"""Tests for shazip.optim: LAMB trust-ratio rule, convergence, checkpoint resume, factory."""

from __future__ import annotations

import copy
import io

import pytest
import torch

from shazip.train.optim import Lamb, make_optimizer

LR = 0.1
EPS = 1e-6


@pytest.fixture(autouse=True)
def _single_thread():
    """Tiny tensors: intra-op threads only add contention (keeps the file fast)."""
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


def _one_step(w0: torch.Tensor, g: torch.Tensor, **kw) -> torch.Tensor:
    """Take one Lamb step from w0 with gradient g; return the displacement w1 - w0."""
    p = torch.nn.Parameter(w0.clone())
    opt = Lamb([p], lr=LR, eps=EPS, **kw)
    p.grad = g.clone()
    opt.step()
    return p.detach() - w0


def _adam_first_update(g: torch.Tensor) -> torch.Tensor:
    # Step 1 with bias correction: m_hat = g, v_hat = g*g, so m_hat/(sqrt(v_hat)+eps) = g/(|g|+eps).
    return g / (g.abs() + EPS)


G = torch.tensor([3.0, -0.5, 2.0, -7.0, 1e-3, 0.25], dtype=torch.float64)


def test_zero_param_uses_trust_one():
    d = _one_step(torch.zeros(6, dtype=torch.float64), G)
    expected = -LR * 1.0 * _adam_first_update(G)
    torch.testing.assert_close(d, expected, rtol=1e-12, atol=1e-15)
    assert d.abs().max() > 0.09  # it really moved, by ~lr per element


def test_tiny_param_clamped_to_min_trust():
    w0 = 1e-6 * torch.ones(6, dtype=torch.float64)
    u = _adam_first_update(G)
    raw_trust = w0.norm() / u.norm()
    assert raw_trust < 2e-6  # would be frozen without the floor
    d = _one_step(w0, G)  # default min_trust = 0.25
    torch.testing.assert_close(d, -LR * 0.25 * u, rtol=1e-12, atol=1e-18)
    # The step's norm is lr * min_trust * ||update||.
    assert d.norm().item() == pytest.approx(LR * 0.25 * u.norm().item(), rel=1e-12)


def test_tiny_param_without_min_trust_barely_moves():
    w0 = 1e-6 * torch.ones(6, dtype=torch.float64)
    u = _adam_first_update(G)
    raw_trust = w0.norm() / u.norm()
    d = _one_step(w0, G, min_trust=0.0)
    torch.testing.assert_close(d, -LR * raw_trust * u, rtol=1e-10, atol=1e-20)
    assert d.norm().item() < 1e-6
    # Its step has the same norm as the weight itself times lr (plain LAMB).
    assert d.norm().item() == pytest.approx(LR * w0.norm().item(), rel=1e-10)


def test_huge_param_clamped_to_max_trust():
    w0 = 1e6 * torch.ones(6, dtype=torch.float64)
    u = _adam_first_update(G)
    d = _one_step(w0, G)  # default max_trust = 10
    torch.testing.assert_close(d, -LR * 10.0 * u, rtol=1e-9, atol=1e-9)
    d5 = _one_step(w0, G, max_trust=5.0)
    torch.testing.assert_close(d5, -LR * 5.0 * u, rtol=1e-9, atol=1e-9)


def test_unclamped_trust_with_weight_decay():
    w0 = torch.tensor([1.0, -2.0, 0.5, 0.0, 1.5, -1.0], dtype=torch.float64)
    wd = 0.01
    u = _adam_first_update(G) + wd * w0
    trust = w0.norm() / u.norm()
    assert 0.25 < trust < 10.0
    d = _one_step(w0, G, weight_decay=wd)
    torch.testing.assert_close(d, -LR * trust * u, rtol=1e-12, atol=1e-15)


def test_zero_gradient_zero_update_trust_one():
    w0 = torch.tensor([1.0, 2.0], dtype=torch.float64)
    d = _one_step(w0, torch.zeros(2, dtype=torch.float64))
    assert torch.equal(d, torch.zeros(2, dtype=torch.float64))


def test_lamb_minimizes_least_squares():
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(64, 8, generator=gen)
    b = a @ torch.randn(8, 1, generator=gen)
    x = torch.nn.Parameter(torch.zeros(8, 1))
    opt = Lamb([x], lr=0.02)
    losses = []
    for _ in range(300):
        opt.zero_grad()
        loss = ((a @ x - b) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0] / 10


def test_lamb_trains_small_mlp():
    torch.manual_seed(0)
    xs = torch.linspace(-2, 2, 128).unsqueeze(1)
    ys = torch.sin(2 * xs)
    model = torch.nn.Sequential(torch.nn.Linear(1, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
    opt = make_optimizer("lamb", model.parameters(), lr=0.01)
    first = None
    for _ in range(400):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(xs), ys)
        loss.backward()
        opt.step()
        first = loss.item() if first is None else first
    final = torch.nn.functional.mse_loss(model(xs), ys).item()
    assert final < first / 10


def _train(model: torch.nn.Module, opt: torch.optim.Optimizer, steps: int, seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        x = torch.randn(16, 4, generator=gen)
        y = x.sum(dim=1, keepdim=True)
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()


def test_state_dict_round_trip_resumes_exactly():
    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    kw = dict(lr=0.01, weight_decay=0.01, min_trust=0.25)
    opt = Lamb(model.parameters(), **kw)
    _train(model, opt, 5, seed=10)

    buf = io.BytesIO()
    torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, buf)
    buf.seek(0)
    ckpt = torch.load(buf, weights_only=True)
    clone = copy.deepcopy(model)
    clone.load_state_dict(ckpt["model"])
    opt2 = Lamb(clone.parameters(), lr=0.5)  # hyperparameters come from the checkpoint
    opt2.load_state_dict(ckpt["opt"])
    assert opt2.param_groups[0]["lr"] == 0.01

    _train(model, opt, 7, seed=20)
    _train(clone, opt2, 7, seed=20)
    for p, q in zip(model.parameters(), clone.parameters()):
        assert torch.equal(p, q)
    for p, q in zip(model.parameters(), clone.parameters()):
        assert opt.state[p]["step"] == opt2.state[q]["step"] == 12
        assert torch.equal(opt.state[p]["exp_avg"], opt2.state[q]["exp_avg"])
        assert torch.equal(opt.state[p]["exp_avg_sq"], opt2.state[q]["exp_avg_sq"])


def test_uses_param_group_lr_with_scheduler():
    g = torch.tensor([1.0, -2.0], dtype=torch.float64)
    p = torch.nn.Parameter(torch.zeros(2, dtype=torch.float64))
    opt = Lamb([p], lr=0.1)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    p.grad = g.clone()
    opt.step()
    sched.step()
    assert opt.param_groups[0]["lr"] == pytest.approx(0.05)
    w1 = p.detach().clone()
    p.grad = g.clone()
    opt.step()
    # Step 2 with a constant gradient: m_hat = g, v_hat = g*g again; trust = ||w1||/||u||.
    u = g / (g.abs() + 1e-6)
    trust = (w1.norm() / u.norm()).clamp(0.25, 10.0)
    torch.testing.assert_close(p.detach() - w1, -0.05 * trust * u, rtol=1e-10, atol=1e-15)


def test_sparse_grad_rejected():
    emb = torch.nn.Embedding(10, 3, sparse=True)
    opt = Lamb(emb.parameters())
    emb(torch.tensor([1, 2])).sum().backward()
    with pytest.raises(RuntimeError, match="sparse"):
        opt.step()


def test_closure_and_invalid_args():
    p = torch.nn.Parameter(torch.ones(3))
    opt = Lamb([p])

    def closure():
        opt.zero_grad()
        loss = (p ** 2).sum()
        loss.backward()
        return loss

    assert opt.step(closure).item() == pytest.approx(3.0)
    assert not torch.equal(p.detach(), torch.ones(3))
    for bad in (dict(lr=-1.0), dict(betas=(1.0, 0.9)), dict(min_trust=2.0, max_trust=1.0),
                dict(weight_decay=-0.1), dict(eps=-1.0)):
        with pytest.raises(ValueError):
            Lamb([p], **bad)


def test_make_optimizer():
    p = [torch.nn.Parameter(torch.zeros(2))]
    lamb = make_optimizer("lamb", p, lr=1e-3, weight_decay=0.1)
    assert type(lamb) is Lamb
    assert lamb.param_groups[0]["min_trust"] == 0.25
    assert lamb.param_groups[0]["lr"] == 1e-3
    assert lamb.param_groups[0]["weight_decay"] == 0.1
    adamw = make_optimizer("adamw", p, lr=1e-3)
    assert type(adamw) is torch.optim.AdamW
    assert adamw.param_groups[0]["betas"] == (0.9, 0.999)
    with pytest.raises(ValueError, match=r"unknown optimizer 'sgd' \(choose lamb or adamw\)"):
        make_optimizer("sgd", p, lr=1e-3)
