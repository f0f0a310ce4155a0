"""Shared fixtures: real text, and `tiny` models (random, and trained a few seconds).

Tests never need ../shared: the fixture text is committed (tests/data/README.md)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as `import shazip` does: before torch starts OpenMP
import torch  # noqa: E402

from shazip.model.config import get_config
from shazip.model.sharnn import SHARNN
from shazip.model.file import load_model, save_model

DATA = Path(__file__).parent / "data"

# One thread: the tests' models are tiny, and OpenMP threads that spin while another process
# holds the second core make everything many times slower.
torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def own_models_folder(tmp_path_factory, monkeypatch) -> Path:
    """Each test its own user models folder (`shazip models --add` writes there): a tester's own
    models never change a test, and no test writes into the tester's home."""
    folder = tmp_path_factory.mktemp("user-models")
    monkeypatch.setenv("SHAZIP_MODELS", str(folder))
    return folder


@pytest.fixture(scope="session")
def text() -> bytes:
    return (DATA / "wiki.xml").read_bytes()


@pytest.fixture(scope="session")
def trained():
    """The `tiny` preset trained on the fixture (tests/data/README.md): peaked, realistic rows."""
    return load_model(DATA / "tiny-trained.safetensors")


@pytest.fixture(scope="session")
def random_model_path(tmp_path_factory) -> Path:
    """A tiny model with random weights (gates randomized too, so every path is exercised)."""
    torch.manual_seed(7)
    m = SHARNN(get_config("tiny"))
    with torch.no_grad():
        for p in m.parameters():
            p.add_(0.1 * torch.randn_like(p))
    path = tmp_path_factory.mktemp("models") / "tiny-random.safetensors"
    save_model(m, path, "tiny-random")
    return path


@pytest.fixture(scope="session")
def random_model(random_model_path):
    return load_model(random_model_path)


@pytest.fixture(scope="session")
def other_model_path(tmp_path_factory) -> Path:
    """A second tiny model (different weights, same name) for model-mismatch tests."""
    torch.manual_seed(8)
    path = tmp_path_factory.mktemp("models") / "tiny-random.safetensors"
    save_model(SHARNN(get_config("tiny")), path, "tiny-random")
    return path
