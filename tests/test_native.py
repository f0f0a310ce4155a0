"""The compiled step (native.cpp) against quant.py's torch step: the same frequency tables,
step for step, through the ring's wrap, for any batch and thread count; and the same archives.
Skipped (with the reason) where the extension cannot be built, e.g. without a C++ compiler;
the engine then runs the torch step, which the rest of the suite covers."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import shazip
from shazip import native, quant
from shazip.codec import IntEngine, model_encode
from shazip.container import Method
from shazip.models import load_model

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def trained():
    if native.load() is None:
        pytest.skip(f"native engine not built here: {native.error()}")
    return load_model(DATA / "tiny-trained.safetensors")


def tables(m, grid: torch.Tensor) -> torch.Tensor:
    state, prev, out = m.init_state(grid.shape[0]), torch.zeros(grid.shape[0], dtype=torch.int64), []
    for t in range(grid.shape[1]):
        state, f = m.step(state, prev)
        out.append(f.clone())
        prev = grid[:, t]
    return torch.stack(out)


@pytest.mark.parametrize("lanes", [1, 5, 33])
def test_native_equals_torch_step(trained, text, lanes):
    steps = 70  # the tiny model's ring holds 24: it wraps twice
    grid = torch.tensor(list(text[: lanes * steps]), dtype=torch.int64).view(lanes, steps)
    im = quant.IntModel(trained.model)
    assert torch.equal(tables(native.NativeModel(im), grid), tables(im, grid))


def test_native_equal_across_threads(trained, text):
    grid = torch.tensor(list(text[: 40 * 50]), dtype=torch.int64).view(40, 50)
    nm = native.NativeModel(quant.IntModel(trained.model))
    old = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = tables(nm, grid)
        torch.set_num_threads(2)
        two = tables(nm, grid)
    finally:
        torch.set_num_threads(old)
    assert torch.equal(one, two)


def test_native_and_torch_engines_write_the_same_archive(trained, text):
    data = text[:3000]
    a = model_encode(IntEngine(trained, use_native=True), data, 4)
    b = model_encode(IntEngine(trained, use_native=False), data, 4)
    assert a == b
    blob = shazip.compress(data, model=trained, lanes=4, methods=frozenset({Method.MODEL}))
    assert shazip.decompress(blob, model=trained) == data
