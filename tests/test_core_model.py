"""The native core's int8 step (csrc/model, on every kernel path this CPU runs) against the torch
twin (quant.IntModel.step): the same frequency tables, step for step, through the attention ring's
wrap, for any lane count, thread count and set of active lanes, on the trained tiny model, random
models of odd widths (every vector tail) and the production shape. Also: the constants a model
is built from are checked (names, dtypes, shapes, ranges), and kernel paths are chosen as asked."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest
import torch

from shazip import _core, core
from shazip.model import exact, twin as quant
from shazip.model.config import Config
from shazip.errors import UsageError
from shazip.model.sharnn import SHARNN
from shazip.model.file import load_model

from engine_tables import lanes_of, run

DATA = Path(__file__).parent / "data"
PATHS = _core.available_kernels()
TEXT = (DATA / "wiki.xml").read_bytes()


@lru_cache(maxsize=None)
def trained_weights() -> exact.IntWeights:
    return load_model(DATA / "tiny-trained.safetensors").int_weights()


@lru_cache(maxsize=None)
def random_weights(d: int, boom: int, mem: int, seed: int) -> exact.IntWeights:
    """A random model with every parameter (gates too) perturbed, so every path carries real values."""
    torch.manual_seed(seed)
    m = SHARNN(Config(d_model=d, n_layers=2, d_boom=boom, mem_len=mem))
    with torch.no_grad():
        for p in m.parameters():
            p.add_(0.2 * torch.randn_like(p))
    m.collapse_vs()
    return quant.IntModel(m).weights


def weights(name: tuple) -> exact.IntWeights:
    """("trained",) or ("random", d, boom, mem, seed)"""
    return trained_weights() if name[0] == "trained" else random_weights(*name[1:])


@lru_cache(maxsize=None)
def twin(name: tuple, lanes: int, steps: int) -> torch.Tensor:
    """The twin's frequency tables [steps, lanes, 256] with each lane fed its own text."""
    return run(quant.IntModel(weights(name)), lanes_of(TEXT, lanes, steps))


def run_core(model, lanes: int, steps: int, threads: int = 1, length: int | None = None) -> torch.Tensor:
    """The core's tables [steps, lanes, 256] for lanes_of(TEXT, lanes, length or steps)."""
    grid = lanes_of(TEXT, lanes, length or steps).numpy().astype(np.uint8)
    state, pool = model.state(lanes), _core.ThreadPool(threads)
    prev = np.zeros(lanes, np.uint8)
    out = []
    for t in range(steps):
        out.append(model.step(state, prev, pool))
        prev = np.ascontiguousarray(grid[:, t])
    assert state.pos == steps
    return torch.from_numpy(np.stack(out))


def assert_same(got: torch.Tensor, want: torch.Tensor) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype
    bad = (got != want).nonzero()
    assert len(bad) == 0, f"{len(bad)} entries differ, first at [step, lane, byte] {bad[0].tolist()}"


def test_paths_listed():
    assert PATHS[0] == "portable" and len(set(PATHS)) == len(PATHS)
    assert set(PATHS) <= {"portable", "avx2", "avx512vnni", "amx", "dotprod", "i8mm"}


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("lanes", [1, 5, 33])
def test_trained_model_equals_twin(path, lanes):
    """The tiny model (d 32, ring of 24: 70 steps wrap it twice), on one thread and on two."""
    model = core.model(trained_weights(), path)
    assert model.kernels == path
    want = twin(("trained",), lanes, 70)
    assert_same(run_core(model, lanes, 70), want)
    assert_same(run_core(model, lanes, 70, threads=2), want)


@pytest.mark.parametrize("path", PATHS)
def test_wide_random_model_equals_twin(path):
    """d_model 64: the widths where the vector paths run whole vectors."""
    name = ("random", 64, 256, 40, 3)
    assert_same(run_core(core.model(weights(name), path), 6, 90), twin(name, 6, 90))


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("d", [37, 72])
def test_odd_widths_equal_twin(path, d):
    """Widths that are no multiple of 16, 32 or 64 (37 is odd: the matmuls' padded K), with 7 lanes
    (partial row tiles), so every kernel's tail runs."""
    name = ("random", d, 2 * d, 12, d)
    model = core.model(weights(name), path)
    want = twin(name, 7, 30)
    assert_same(run_core(model, 7, 30), want)
    assert_same(run_core(model, 7, 30, threads=3), want)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("lanes", [9, 40])
def test_production_shape_equals_twin(path, lanes):
    """d_model 256, d_boom 1024 (the bundled model's shape) with a short ring that wraps; 40 lanes
    fill whole matmul tiles of 16 and 32 rows and end in a part of one."""
    name = ("random", 256, 1024, 24, 5)
    model = core.model(weights(name), path)
    want = twin(name, lanes, 40)
    assert_same(run_core(model, lanes, 40), want)
    assert_same(run_core(model, lanes, 40, threads=2), want)


@pytest.mark.parametrize("path", PATHS)
def test_threads_and_finished_lanes(path):
    """Any thread count gives the same tables; lanes past `active` are left alone, and the active
    ones go on exactly as if every lane had run."""
    model = core.model(trained_weights(), path)
    lanes, steps, active = 33, 50, 20
    want = twin(("trained",), lanes, steps)
    for threads in (1, 2, 3, 8, 16):  # 16: 33 lanes on 8 of them (4 lanes a member at least)
        assert_same(run_core(model, lanes, 30, threads=threads, length=steps), want[:30])
    grid = lanes_of(TEXT, lanes, steps).numpy().astype(np.uint8)
    state, pool = model.state(lanes), _core.ThreadPool(2)
    prev = np.zeros(lanes, np.int64)
    for t in range(steps):
        k = lanes if t < 30 else active
        freq = model.step(state, prev[:k], pool)
        assert freq.shape == (k, 256)
        assert_same(torch.from_numpy(freq), want[t, :k])
        prev = grid[:, t].astype(np.int64)


def test_steps_with_no_lanes_advance():
    model = core.model(trained_weights(), "portable")
    state, pool = model.state(3), _core.ThreadPool(1)
    assert model.step(state, np.zeros(0, np.uint8), pool).shape == (0, 256)
    assert state.pos == 1 and state.lanes == 3


# ----------------------------------------------------------------------------------------------
# Construction: the constants are checked


def core_args(w: exact.IntWeights) -> dict:
    """_core.Model's arguments for these constants, as core.model passes them."""
    def linear(name, lin):
        return ({f"{name}.w{p}": x for p, x in enumerate(lin.weights)}
                | {f"{name}.m{p}": x for p, x in enumerate(lin.mults)} | {f"{name}.bias": lin.bias})

    blocks, shifts = [], []
    for b in w.blocks:
        arrays, sh = {}, {}
        for name, v in b.items():
            if isinstance(v, exact.Linear):
                arrays |= linear(name, v)
                sh[name] = v.shift
            elif isinstance(v, exact.Norm):
                arrays |= {f"{name}.gain": v.gain, f"{name}.bias": v.bias}
            else:
                arrays[name] = v
        blocks.append(arrays)
        shifts.append(sh)
    c = w.cfg
    return dict(d_model=c.d_model, d_boom=c.d_boom, mem_len=c.mem_len, embed=w.embed, blocks=blocks, shifts=shifts,
                out=linear("out", w.out), out_shift=w.out.shift, tables=dict(w.tables))


def test_contract_matches_numerics():
    c = _core.contract()
    core.check_contract(c)
    layout = sorted(c["BLOCK_TENSORS"] + c["ATTN_TENSORS"])
    assert sorted(core_args(trained_weights())["blocks"][0]) == layout  # the tiny model's attention block


def test_arguments_as_core_passes_them_build():
    args = core_args(trained_weights())
    model = _core.Model(**args, kernels="portable")
    assert (model.d_model, model.d_boom, model.mem_len, model.n_layers) == (32, 128, 24, 2)
    a = run_core(model, 3, 10)
    assert_same(a, twin(("trained",), 3, 10))


def _broken(edit) -> dict:
    args = core_args(trained_weights())
    args["blocks"] = [dict(b) for b in args["blocks"]]
    args["tables"] = dict(args["tables"])
    args["out"] = dict(args["out"])
    edit(args)
    return args


@pytest.mark.parametrize("edit, message", [
    (lambda a: a["blocks"][1].pop("lstm.m1"), "missing arrays: lstm.m1"),
    (lambda a: a["blocks"][1].update(extra=np.zeros(3, np.int64)), "unexpected arrays: extra"),
    (lambda a: a["blocks"][0].pop("vs"), "unexpected arrays"),  # the attention block's others remain
    (lambda a: a["out"].update({"out.m0": a["out"]["out.m0"].astype(np.int32)}), "dtype int32"),
    (lambda a: a["blocks"][1].update({"lstm.w0": a["blocks"][1]["lstm.w0"].astype(np.int64)}), "must be int8"),
    (lambda a: a["blocks"][1].update({"boom.bias": a["blocks"][1]["boom.bias"][:-1]}), "has shape [127]"),
    (lambda a: a["blocks"][1].update({"lstm.w1": a["blocks"][1]["lstm.w1"].T.copy()}), "expected [32, 128]"),
    (lambda a: a.update(embed=a["embed"][:100]), "embed must be int64 [256, 32]"),
    (lambda a: a["tables"].pop("gelu"), "missing arrays: gelu"),
    (lambda a: a["tables"].update(exp_out=a["tables"]["exp_out"] + (1 << 31)), "does not fit int32"),
    (lambda a: a["tables"].update(tanh=a["tables"]["tanh"] * 2), "tanh"),
    (lambda a: a["tables"].update(exp_att=a["tables"]["exp_att"][:-1]), "exp_att"),
    (lambda a: a["shifts"][1].pop("boom"), "shifts must be exactly"),
    (lambda a: a["shifts"][1].update(boom=70), "shift of boom out of range"),
    (lambda a: a["blocks"][1].update({"lstm.m0": a["blocks"][1]["lstm.m0"] << 30}), "could overflow int64"),
    (lambda a: a["blocks"][1].update({"ln_ff.gain": a["blocks"][1]["ln_ff.gain"] << 20}), "gain too large"),
    (lambda a: a.update(d_boom=48), "d_boom must be a positive multiple of d_model"),
    (lambda a: a.update(mem_len=0), "mem_len must be positive"),
    (lambda a: a.update(d_model=2000), "d_model"),
    (lambda a: a.update(blocks=[]), "at least one block"),
    (lambda a: a["blocks"][1].update({"ln_start.gain": "nonsense"}), "not an array|dtype"),
])
def test_bad_constants_are_refused(edit, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        _core.Model(**_broken(edit), kernels="portable")


def test_step_arguments_are_checked():
    model = core.model(trained_weights(), "portable")
    other = core.model(trained_weights(), "portable")
    state, pool = model.state(4), _core.ThreadPool(1)
    with pytest.raises(ValueError, match="more entries than the state has lanes"):
        model.step(state, np.zeros(5, np.uint8), pool)
    with pytest.raises(ValueError, match=r"\[0, 255\]"):
        model.step(state, np.array([0, 256], np.int64), pool)
    with pytest.raises(ValueError, match="dtype"):
        model.step(state, np.zeros(2, np.float32), pool)
    with pytest.raises(ValueError, match="another model"):
        other.step(state, np.zeros(2, np.uint8), pool)
    with pytest.raises(ValueError, match="threads"):
        _core.ThreadPool(0)
    assert state.pos == 0  # nothing ran
    assert _core.ThreadPool(3).threads == 3


# ----------------------------------------------------------------------------------------------
# Kernel paths


def test_auto_picks_the_best_path(monkeypatch):
    monkeypatch.delenv("SHAZIP_KERNELS", raising=False)
    assert core.model(trained_weights()).kernels == PATHS[-1]


@pytest.mark.parametrize("path", PATHS)
def test_environment_forces_a_path(monkeypatch, path):
    monkeypatch.setenv("SHAZIP_KERNELS", path)
    assert core.model(trained_weights(), "auto").kernels == path
    monkeypatch.setenv("SHAZIP_KERNELS", "auto")
    assert core.model(trained_weights(), "auto").kernels == PATHS[-1]


def test_unknown_or_unavailable_path_is_refused(monkeypatch):
    monkeypatch.setenv("SHAZIP_KERNELS", "sse9")
    with pytest.raises(UsageError, match="SHAZIP_KERNELS=sse9: no such kernel path on this machine .*it runs portable"):
        core.model(trained_weights())  # one line for the user, before the core is asked for anything
    monkeypatch.delenv("SHAZIP_KERNELS")
    with pytest.raises(ValueError, match="kernels=sse9: no such kernel path"):
        core.model(trained_weights(), "sse9")
    missing = [p for p in ("avx2", "avx512vnni", "amx", "dotprod", "i8mm") if p not in PATHS]
    for p in missing:  # a path this CPU lacks (or, off x86-64, that this build lacks)
        with pytest.raises(ValueError, match=f"{p}"):
            core.model(trained_weights(), p)
