"""The integer engine: exact equality of probability tables wherever it runs, integer kernels
against float references, and a golden archive that pins the arithmetic across machines.

`tiny-trained.safetensors` is the `tiny` preset trained 300 steps on the fixture (peaked,
varied distributions exercise more of the tables than random weights)."""

from __future__ import annotations

import io
import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings, strategies as st

import shazip
from shazip.model import exact, numerics, gpu, twin as quant
from shazip.codec.block import model_encode
from shazip.codec.engines import IntEngine, TwinEngine
from shazip.model.config import get_config
from shazip.errors import ModelError
from shazip.format.container import Method
from shazip.format.reader import ArchiveReader
from shazip.model.sharnn import SHARNN
from shazip.model.file import load_model

from archive_damage import payload_spans
from engine_tables import lanes_of, run, run_with_threads

DATA = Path(__file__).parent / "data"
MODEL_ONLY = frozenset({Method.MODEL})


@pytest.fixture(scope="module")
def int_model(trained):
    return quant.IntModel(trained.model)


# Steps past the memory length (tiny: 24) so the ring wraps.
STEPS = 60


def test_tables_equal_across_batch_shapes(int_model, text):
    """A lane's tables do not depend on its neighbours or on the batch size."""
    grid = lanes_of(text, 5, STEPS)
    many = run(int_model, grid)
    for k in (0, 3):
        assert torch.equal(run(int_model, grid[k:k + 1])[:, 0], many[:, k])
    assert torch.equal(run(int_model, grid[1:4]), many[:, 1:4])


def test_tables_equal_across_thread_counts(int_model, text):
    grid = lanes_of(text, 33, STEPS)  # wide enough for torch to split work between threads
    assert torch.equal(run_with_threads(int_model, grid, 1), run_with_threads(int_model, grid, 2))


def test_tables_equal_after_reload(trained, int_model, text, tmp_path):
    """A model file read again from disk into fresh objects gives the same tables."""
    path = tmp_path / "again.safetensors"
    path.write_bytes((DATA / "tiny-trained.safetensors").read_bytes())
    again = load_model(path)
    assert again.model_id == trained.model_id and again.model is not trained.model
    grid = lanes_of(text, 3, STEPS)
    assert torch.equal(run(quant.IntModel(again.model), grid), run(int_model, grid))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (none on the CI machine)")
def test_tables_equal_cpu_and_cuda(trained, int_model, text):
    grid = lanes_of(text, 4, STEPS)
    gpu = quant.IntModel(trained.model, device="cuda")
    assert torch.equal(run(gpu, grid.cuda()).cpu(), run(int_model, grid))


def test_encoder_and_decoder_see_the_same_rows(trained, text):
    """The decoder's rows are the encoder's, row for row (and the archive round-trips)."""
    data = text[:3000]
    seen = {"enc": [], "dec": []}

    class Recording(TwinEngine):
        def step(self, state, prev):
            state, p = super().step(state, prev)
            seen[self.side].append(p.copy())
            return state, p

    enc = Recording(trained, "cpu")
    enc.side = "enc"
    payload = model_encode(enc, data, 4)
    assert payload == model_encode(IntEngine(trained), data, 4)  # the twin's archive is the core's
    from shazip.codec.block import model_decode
    dec = Recording(trained, "cpu")
    dec.side = "dec"
    assert model_decode(dec, payload, len(data), 4) == data
    assert len(seen["enc"]) == len(seen["dec"]) > 0
    assert all(np.array_equal(a, b) for a, b in zip(seen["enc"], seen["dec"]))


def test_archives_identical_across_thread_counts(trained, text):
    data = text[:6000]
    base = shazip.compress(data, model=trained, lanes=4, methods=MODEL_ONLY, adapt="none", threads=1)
    assert shazip.compress(data, model=trained, lanes=4, methods=MODEL_ONLY, adapt="none", threads=2) == base
    assert shazip.decompress(base, model=trained, threads=2) == data


def test_golden_archive(trained, text):
    """Archives made when this engine version was fixed: they must decode, and compressing the
    same input must give the same bytes, on every machine: format 5 today, holding the very
    payloads of the format 1 archive shazip 0.3 wrote and of format 4's (each led by format 5's
    head check). If the arithmetic changes on purpose, bump numerics.ENGINE_VERSION and
    regenerate (see tests/data/README.md)."""
    golden, golden4, golden5 = ((DATA / name).read_bytes()
                                for name in ("golden-int8.shz", "golden-int8-v4.shz", "golden-int8-v5.shz"))
    data = text[:4000]
    assert (golden[4], golden4[4], golden5[4]) == (1, 4, 5)
    for arc in (golden, golden4, golden5):
        assert shazip.decompress(arc, model=trained) == data
        assert [b.method for b, _ in ArchiveReader(io.BytesIO(arc)).blocks()] == [Method.MODEL] * 2
    assert shazip.compress(data, model=trained, lanes=4, block_size=2500, methods=MODEL_ONLY, adapt="none") == golden5
    payloads = [[arc[s + head:s + n] for s, n, _ in payload_spans(arc)] for arc, head in
                ((golden, 0), (golden4, 0), (golden5, 4))]
    assert payloads[0] == payloads[1] == payloads[2]


# ---------------------------------------------------------------------------- integer kernels

def test_int8_close_to_float_model(trained, text):
    """Whole-model check: int8 cross-entropy within a few hundredths of a bit of the float model."""
    grid = lanes_of(text[1000:], 4, 400)
    freq = run(quant.IntModel(trained.model), grid).double()
    bits_int = -torch.log2(freq.gather(2, grid.T[:, :, None])[..., 0] / freq.sum(-1)).mean()
    with torch.no_grad():
        logits, _ = trained.model(torch.cat([torch.zeros(4, 1, dtype=torch.int64), grid[:, :-1]], 1),
                                  trained.model.init_state(4))
    bits_float = F.cross_entropy(logits.reshape(-1, 256), grid.reshape(-1)) / math.log(2)
    assert abs(float(bits_int) - float(bits_float)) < 0.03


@settings(max_examples=200, deadline=None)
@given(st.integers(0, (1 << 52) - 1))
def test_isqrt_exact(v):
    assert int(quant.isqrt(torch.tensor([v]))[0]) == math.isqrt(v)


@settings(max_examples=200, deadline=None)
@given(st.integers(-(1 << 40), 1 << 40), st.integers(1, 1 << 20))
def test_rdiv_rounds_half_up(a, b):
    want = math.floor(Fraction(a, b) + Fraction(1, 2))  # exact rational arithmetic
    assert int(quant.rdiv(torch.tensor([a]), b)[0]) == want


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 2**31 - 1), st.floats(1, 50))
def test_layernorm_matches_float(seed, spread):
    """Inputs with a standard deviation of at least 1 (1024 units), as residual streams have:
    the integer mean and isqrt then err by a few units of 2**-10 at most."""
    g = torch.Generator().manual_seed(seed)
    ln = torch.nn.LayerNorm(64)
    with torch.no_grad():
        ln.weight.copy_(torch.rand(64, generator=g) * 3)
        ln.bias.copy_(torch.randn(64, generator=g))
    x = torch.randn(8, 64, generator=g, dtype=torch.float64) * spread
    xi = torch.round(x * numerics.ONE).to(torch.int64)
    norm = exact.Norm.build(ln.weight.detach().numpy(), ln.bias.detach().numpy(), "test")
    got = quant.QNorm.of(norm, "cpu")(xi).double() / numerics.ONE
    want = F.layer_norm(xi.double() / numerics.ONE, (64,), ln.weight.double(), ln.bias.double(), 1e-12)
    assert (got - want).abs().max() < 3 / numerics.ONE


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 2**31 - 1))
def test_qlinear_matches_float(seed):
    """Per-channel int8 weights x per-row int8 inputs: error within the int8 quantization
    bound (|w| |x| K / 127 per output, loosely)."""
    g = torch.Generator().manual_seed(seed)
    w, b = torch.randn(48, 32, generator=g), torch.randn(48, generator=g)
    x = torch.randn(5, 32, generator=g) * 3
    xi = torch.round(x.double() * numerics.ONE).to(torch.int64)
    lin = quant.QLinear.of(exact.Linear.build([(w.numpy(), 1 / numerics.ONE, numerics.R_MAX, None)], b.numpy(), "test"), "cpu")
    got = lin([quant.quantize_rows(xi)]).double() / numerics.ONE
    want = xi.double() / numerics.ONE @ w.double().T + b.double()
    bound = (w.abs().sum(1)[None] * x.abs().amax(1, keepdim=True) / 127).double()
    assert ((got - want).abs() <= bound + 1e-3).all()


def test_lookup_tables_match_functions():
    def table(name: str) -> torch.Tensor:
        return torch.from_numpy(exact.table(name)).double()

    xs = torch.arange(-numerics.LUT_RANGE * numerics.ONE, numerics.LUT_RANGE * numerics.ONE + 1).double() / numerics.ONE
    q15 = float(1 << numerics.GATE_FRAC)
    assert (table("sigmoid") / q15 - torch.sigmoid(xs)).abs().max() <= 0.5 / q15 + 1e-12
    assert (table("tanh") / q15 - torch.tanh(xs)).abs().max() <= 0.5 / q15 + 1e-12
    gelu = F.gelu(xs, approximate="tanh")
    assert (table("gelu") / numerics.ONE - gelu).abs().max() <= 0.5 / numerics.ONE + 1e-12
    e = torch.arange(numerics.EXP_OUT_RANGE * numerics.ONE + 1).double() / numerics.ONE
    assert (table("exp_out") / 2.0 ** numerics.EXP_OUT_FRAC - torch.exp(-e)).abs().max() \
        <= 0.5 / 2 ** numerics.EXP_OUT_FRAC + 1e-15


def test_quantize_rows_bounds():
    y = torch.tensor([[0, 0, 0], [5, -10, 3], [-(numerics.R_MAX), 1, numerics.R_MAX]])
    q, e = quant.quantize_rows(y)
    assert q.dtype == torch.int8 and q.abs().max() <= 127
    assert e[:, 0].tolist() == [1, 10, numerics.R_MAX]
    assert q[1].tolist() == [round(127 * 5 / 10 + 1e-9), -127, round(127 * 3 / 10)]


def test_weights_too_large_are_refused():
    m = SHARNN(get_config("tiny"))
    with torch.no_grad():
        m.blocks[0].ln_start.weight.fill_(1e12)
    with pytest.raises(ModelError, match="overflow"):
        quant.IntModel(m)


def test_the_in_place_step_a_cuda_graph_replays_equals_the_step(int_model, text):
    """gpu.advance (what GraphedStep captures) keeps the state in its own tensors and gives
    the step's very integers, through the ring's wrap."""
    grid = lanes_of(text, 3, STEPS)
    state, prev, out = int_model.init_state(3), torch.zeros(3, dtype=torch.int64), []
    tensors = [id(t) for t in state.h + state.c + [state.mem, state.mem_e, state.pos]]
    for t in range(STEPS):
        out.append(gpu.advance(int_model, state, prev).clone())
        prev = grid[:, t]
    assert [id(t) for t in state.h + state.c + [state.mem, state.mem_e, state.pos]] == tensors
    assert state.pos.tolist() == [STEPS] * 3
    assert torch.equal(torch.stack(out), run(int_model, grid))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("compiled", [False, True])
def test_graphed_step_equals_the_eager_step_on_cuda(trained, text, compiled):
    model = quant.IntModel(trained.int_weights(), "cuda")
    grid = lanes_of(text, 20, STEPS)  # more than 16 lanes: int_mm's unpadded path; 3 lanes below
    for lanes in (20, 3):
        graphed, prev, out = gpu.GraphedStep(model, lanes, compiled=compiled), np.zeros(lanes, np.int64), []
        for t in range(STEPS):
            out.append(torch.from_numpy(graphed(prev)).to(torch.int64))
            prev = grid[:lanes, t].numpy()
        assert torch.equal(torch.stack(out), run(model, grid[:lanes].cuda()).cpu())


@pytest.mark.parametrize("device", ["cpu"] + (["cuda"] if torch.cuda.is_available() else []))
def test_the_compiled_step_equals_the_eager_step(trained, random_model, text, device):
    """gpu.compiled_advance (inductor's code: C++ on the CPU, Triton on a GPU) gives the eager
    step's integers for two models in turn (other shapes' and shifts' compilations must stay
    static: symbolic ones gave other integers) at every number of lanes, through the ring's wrap."""
    compiled = gpu.compiled_advance()
    for loaded in (trained, random_model, trained):
        model = quant.IntModel(loaded.int_weights(), device)
        for lanes in (20, 3, 9):
            grid = lanes_of(text, lanes, STEPS)
            state, prev, out = model.init_state(lanes), torch.zeros(lanes, dtype=torch.int64, device=device), []
            gpu.lanes_dynamic(prev, *state.tensors())
            with torch.no_grad():
                for t in range(STEPS):
                    out.append(compiled(model, state, prev).clone())
                    prev.copy_(grid[:, t])
            assert torch.equal(torch.stack(out).cpu(), run(model, grid.to(device)).cpu()), (loaded.name, lanes)
