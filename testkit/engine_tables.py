"""Integer-engine tables of real text, for tests that compare engines (the core, the torch twin,
the lane batch, a trained model's): each lane fed its own bytes, every step's frequency rows kept.

Not part of the package (it imports torch, which a plain install has not): the tests reach it on
pytest's pythonpath (pyproject.toml); testkit/README.md says why it lives here."""

from __future__ import annotations

import torch


def lanes_of(text: bytes, lanes: int, length: int) -> torch.Tensor:
    """[lanes, length] bytes: lane k is text[k*length:(k+1)*length]."""
    return torch.tensor(list(text[: lanes * length]), dtype=torch.int64).view(lanes, length)


def run(model, grid: torch.Tensor) -> torch.Tensor:
    """Frequency tables [steps, lanes, 256] of an integer model (IntModel or NativeModel) whose
    lanes are fed their own bytes (0 first)."""
    state = model.init_state(grid.shape[0])
    prev = torch.zeros(grid.shape[0], dtype=torch.int64)
    out = []
    for t in range(grid.shape[1]):
        state, freq = model.step(state, prev)
        out.append(freq.clone())
        prev = grid[:, t]
    return torch.stack(out)


def run_with_threads(model, grid: torch.Tensor, threads: int) -> torch.Tensor:
    old = torch.get_num_threads()
    try:
        torch.set_num_threads(threads)
        return run(model, grid)
    finally:
        torch.set_num_threads(old)
