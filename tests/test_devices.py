"""The int8 engine on every device writes the same archives: the native core (CPU) and the torch
twin (quant.IntModel, the engine on a GPU) through the same stage and coders. On the CPU the
twin stands in for the GPU; on a machine with CUDA the GPU itself is tested, both ways."""

from __future__ import annotations

import pytest
import torch

import shazip
from shazip.codec.block import mixed_decode, mixed_encode, model_decode, model_encode
from shazip.codec.engines import IntEngine, LaneBatching, TwinEngine
from shazip.hardware import resolve_device
from shazip.errors import UsageError
from shazip.format.container import Method
from shazip.stage.adaptive import AdaptiveParams, AdaptiveStage

SMALL = AdaptiveParams(table_bits=16, history_bits=16, match_bits=12)
CUDA = torch.cuda.is_available()


@pytest.mark.parametrize("lanes", [1, 3, 8])
def test_twin_and_core_write_the_same_blocks(trained, text, lanes):
    data = text[:2500]
    core, twin = IntEngine(trained), TwinEngine(trained, "cpu")
    a = mixed_encode(core, AdaptiveStage(SMALL), data, lanes)
    b = mixed_encode(twin, AdaptiveStage(SMALL), data, lanes)
    assert a == b
    assert mixed_decode(twin, AdaptiveStage(SMALL), a, len(data), lanes) == data
    m = model_encode(core, data, lanes)
    assert m == model_encode(twin, data, lanes)
    assert model_decode(twin, m, len(data), lanes) == data


def test_cuda_needs_a_gpu():
    if CUDA:
        assert resolve_device("cuda") == "cuda"
    else:
        with pytest.raises(UsageError):
            resolve_device("cuda")
        assert resolve_device("auto") == "cpu"
    with pytest.raises(UsageError, match="unknown device"):
        resolve_device("tpu")


@pytest.mark.skipif(not CUDA, reason="no CUDA device")
@pytest.mark.parametrize("adapt", ["cm", "none"])
def test_gpu_archives_equal_cpu_archives_both_ways(trained, text, adapt):
    data = text[:20000]
    on_cpu = shazip.compress(data, model=trained, lanes=20, adapt=adapt, device="cpu")
    on_gpu = shazip.compress(data, model=trained, lanes=20, adapt=adapt, device="cuda")
    assert on_gpu == on_cpu
    assert shazip.decompress(on_gpu, model=trained, device="cpu") == data
    assert shazip.decompress(on_cpu, model=trained, device="cuda") == data


@pytest.mark.skipif(not CUDA, reason="no CUDA device")
def test_gpu_production_shape(text):
    """The bundled model (d_model 256: CUDA's int8 matmul path, more than 16 lanes)."""
    data = text[:40000]
    on_gpu = shazip.compress(data, lanes=32, device="cuda", methods=frozenset({Method.MIXED}))
    assert on_gpu == shazip.compress(data, lanes=32, methods=frozenset({Method.MIXED}))
    assert shazip.decompress(on_gpu, device="cuda") == data


def test_the_gpu_path_with_frames_at_once_writes_the_cpus_archives(trained, text, monkeypatch):
    """The API's GPU path (each frame its own twin engine, frames coded and decoded at once on
    threads, the stages on the cores), run with the twin on torch's CPU device: the native core's
    archives, byte for byte, and each decodes the other's."""
    from shazip.codec import engines
    data, options = text[:9000], dict(lanes=8, block_size=1500, frame_size=3000, level=6, threads=3)
    native = shazip.compress(data, model=trained, **options)
    made = []

    def twin(loaded, device, threads):
        made.append(TwinEngine(loaded, "cpu"))
        return made[-1]
    monkeypatch.setattr(engines, "int_engine", twin)
    assert shazip.compress(data, model=trained, **options) == native
    assert len(made) >= 2  # an engine a frame in flight, not one shared
    assert shazip.decompress(native, model=trained, threads=3) == data


@pytest.mark.parametrize("groups", [1, 2])
def test_frames_at_once_in_shared_lane_batches_write_the_cpus_archives(trained, text, monkeypatch, groups):
    """The GPU's frames at once with their lanes stepped in shared batches (model/gpu.py),
    run on torch's CPU device: frames at different positions, a shorter last block of fewer
    lanes, frames joining and leaving; the native core's archives byte for byte, both ways."""
    from shazip.codec import decode, encode
    data, options = text[:8500], dict(lanes=8, block_size=1500, frame_size=3000, level=6, threads=3)
    native = shazip.compress(data, model=trained, **options)
    made = []

    def of(hw):
        made.append(LaneBatching("cpu", groups))
        return made[-1]
    monkeypatch.setattr(LaneBatching, "of", staticmethod(of))
    for module in (encode, decode):  # three frames at once, as on the GPU's machine
        monkeypatch.setattr(module, "available_cores", lambda: 16)
    assert shazip.compress(data, model=trained, **options) == native
    assert shazip.decompress(native, model=trained, threads=3) == data
    for batching in made:  # every worker's lanes in one of `groups` batches
        (batches,) = batching._batches.values()
        assert len(batches) == groups and sum(len(b._members) for b in batches) == 3
