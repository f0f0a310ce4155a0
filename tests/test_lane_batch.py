"""The lanes of several frames in one batch (model/gpu.py): each frame's rows are those of
its lanes stepped alone, whatever the others do (their positions, their lane counts, joining,
growing and leaving at any step), and a failed step fails every frame waiting on it instead of
leaving them waiting, and only those. Run with the eager step on torch's CPU device, and where there is CUDA with
the graphed step on the GPU, against the CPU's integers."""

from __future__ import annotations

import random
import threading

import numpy as np
import pytest
import torch

from shazip.model import twin as quant
from shazip.model.gpu import LaneBatch

from engine_tables import lanes_of, run

STEPS = 30  # past the ring of `tiny` (24): lanes wrap at different steps


@pytest.fixture(scope="module")
def int_model(trained):
    return quant.IntModel(trained.int_weights(), "cpu")


def frame_thread(batch: LaneBatch, blocks: list[tuple[int, int]], grids: list[torch.Tensor], seed: int,
                 out: list, errors: list) -> threading.Thread:
    """A frame's worker: blocks of (lanes, steps), each joined, stepped on its grid's bytes and left,
    with random pauses between steps so the members interleave differently in every run."""
    def work() -> None:
        rng, member = random.Random(seed), batch.member()
        try:
            for (lanes, steps), grid in zip(blocks, grids):
                member.join(lanes)
                prev, rows = np.zeros(lanes, dtype=np.int64), []
                try:
                    for t in range(steps):
                        if rng.random() < 0.2:
                            threading.Event().wait(rng.random() * 0.002)
                        rows.append(torch.from_numpy(member.step(prev).copy()))
                        prev = grid[:, t].numpy()
                finally:
                    member.leave()
                out.append(torch.stack(rows))
        except BaseException as e:  # noqa: BLE001 (handed to the test)
            errors.append(e)
    return threading.Thread(target=work)


# (device, CUDA graphs, the compiled step)
DEVICES = [("cpu", False, False), ("cpu", False, True)] + (
    [("cuda", True, False), ("cuda", True, True)] if torch.cuda.is_available() else [])


@pytest.mark.parametrize("device,graphs,compiled", DEVICES)
@pytest.mark.parametrize("seed", range(3))
def test_each_frames_rows_are_its_lanes_stepped_alone(trained, int_model, text, seed, device, graphs, compiled):
    # frames of blocks with lanes growing and shrinking and steps of every length: the batch
    # re-lays its regions out as frames grow, and lanes join at other lanes' every position
    plans = [[(2, STEPS), (5, 11), (3, STEPS)], [(4, 7), (4, STEPS), (1, 3)], [(6, STEPS + 5)], [(1, 9), (7, 20)]]
    on = int_model if device == "cpu" else quant.IntModel(trained.int_weights(), device)
    batch, outs, errors, threads, expected = LaneBatch(on, graphs, compiled), [], [], [], []
    for k, plan in enumerate(plans):
        grids = [lanes_of(text[(k * 7 + j) * 400:], lanes, steps) for j, (lanes, steps) in enumerate(plan)]
        expected.append([run(int_model, g) for g in grids])
        outs.append([])
        threads.append(frame_thread(batch, plan, grids, seed * 10 + k, outs[-1], errors))
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads) and not errors
    assert batch.lanes == sum(max(lanes for lanes, _ in plan) for plan in plans)  # regions grew, never shrank
    for got, want in zip(outs, expected):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert torch.equal(g, w)


def test_a_failed_step_fails_every_waiting_frame(int_model, text):
    batch, errors, outs = LaneBatch(int_model, graphs=False), [], [[], []]
    step = batch._make_step

    def failing() -> object:
        real = step()
        calls = iter(range(1 << 30))
        return lambda prev: real(prev) if next(calls) < 5 else (_ for _ in ()).throw(RuntimeError("device lost"))
    batch._make_step = failing
    grids = [lanes_of(text, 3, STEPS)]
    threads = [frame_thread(batch, [(3, STEPS)], grids, k, outs[k], errors) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads)
    assert len(errors) == 2 and all("device lost" in str(e) for e in errors)
    batch._make_step, batch._step = step, None  # the device back: the next blocks step again
    outs, errors = [[]], []
    again = frame_thread(batch, [(3, STEPS)], grids, 0, outs[0], errors)
    again.start()
    again.join(timeout=60)
    assert not errors and torch.equal(outs[0][0], run(int_model, grids[0]))
