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
from shazip.codec import model_encode
from shazip.container import Method
from shazip.engines import IntEngine
from shazip.errors import ContractError
from shazip.model import SHARNN, Config
from shazip.testing import lanes_of, run, run_with_threads

DATA = Path(__file__).parent / "data"


@pytest.fixture(autouse=True)
def needs_native():
    if native.load() is None:
        pytest.skip(f"native engine not built here: {native.error()}")


@pytest.mark.parametrize("lanes", [1, 5, 33])
def test_native_equals_torch_step(trained, text, lanes):
    steps = 70  # the tiny model's ring holds 24: it wraps twice
    grid = lanes_of(text, lanes, steps)
    im = quant.IntModel(trained.model)
    assert torch.equal(run(native.NativeModel(im), grid), run(im, grid))


def test_native_equals_torch_step_wide_model(trained, text):
    """d_model 64: the width where the C++ dot products take their vector path (VNNI where the
    CPU has it), with random weights and gates so every path carries real values."""
    torch.manual_seed(3)
    m = SHARNN(Config(d_model=64, n_layers=2, d_boom=256, mem_len=40))
    with torch.no_grad():
        for p in m.parameters():
            p.add_(0.2 * torch.randn_like(p))
    m.collapse_vs()
    grid = lanes_of(text, 6, 90)
    im = quant.IntModel(m)
    assert torch.equal(run(native.NativeModel(im), grid), run(im, grid))


def test_native_equal_across_threads(trained, text):
    grid = lanes_of(text, 40, 50)
    nm = native.NativeModel(quant.IntModel(trained.model))
    assert torch.equal(run_with_threads(nm, grid, 1), run_with_threads(nm, grid, 2))


def test_native_and_torch_engines_write_the_same_archive(trained, text):
    data = text[:3000]
    a = model_encode(IntEngine(trained, use_native=True), data, 4)
    b = model_encode(IntEngine(trained, use_native=False), data, 4)
    assert a == b
    blob = shazip.compress(data, model=trained, lanes=4, methods=frozenset({Method.MODEL}), adapt="none")
    assert shazip.decompress(blob, model=trained) == data


def test_contract_of_the_compiled_step_is_checked():
    """The compiled step reports its constants and tables; they equal quant.py's, and any
    difference (here: one constant, one table name) is refused with a clear error."""
    compiled = native.load().contract()
    native.check_contract(compiled)
    for key, wrong in (("FRAC", quant.FRAC + 1), ("TABLES", list(quant.TABLES)[::-1])):
        with pytest.raises(ContractError, match=key):
            native.check_contract(dict(compiled, **{key: wrong}))


def test_tensor_layout_of_the_compiled_step_is_checked(trained, monkeypatch):
    """A block whose named tensors are not the compiled step's is refused, not run."""
    im = quant.IntModel(trained.model)
    real = native.block_tensors
    monkeypatch.setattr(native, "block_tensors", lambda b: ({**real(b)[0], "extra": torch.zeros(1)}, real(b)[1]))
    with pytest.raises(ContractError, match="extra"):
        native.NativeModel(im)
