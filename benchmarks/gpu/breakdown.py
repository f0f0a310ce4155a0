"""Where the GPU engine's time goes: the integer model's step on the card by lanes, the twin's
kernels and the compiled step's (the CUDA graph's replay alone, and with the previous bytes in
and the rows out), the kernels of one step by device time, the adaptive stage's ceiling on the
machine's cores (µs a lane-step on the model's real rows, one stage alone and one a core at
once), and the ceiling of the frames' own loop (the same rows handed out by the lane batch: what
N frames at once reach when the step costs nothing). A frame's stage codes its lanes one after
another while the card steps, so the engine cannot outrun the loop's ceiling, nor a position's
two batched steps' replays; `bench.py` measures what it reaches. Each part is written as it
ends (the cheap ceilings first).

    python benchmarks/gpu/breakdown.py --input gpu-run/mixed.txt.xz --out $OUT/breakdown.json

Run by benchmarks/gpu/run.sh before the bench; checked here with `--device cpu` (the eager step,
no graphs; e.g. `--lanes 16 --steps 3 --profile-lanes 16 --compiled 0 --stage-lanes 128
--stage-steps 400 --stage-threads 1 2`).
"""

from __future__ import annotations

import argparse
import json
import lzma
import os
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from shazip.codec.encode import stage_params
from shazip.model.file import load_model
from shazip.options import DEFAULT_LEVEL, GPU_FRAME_SIZE, LEVELS, lane_policy
from shazip.codec.block import mixed_encode
from shazip.codec.engines import TwinEngine
from shazip.model.gpu import LaneBatch
from shazip.model.gpu import GraphedStep, advance, stepper
from shazip.model.twin import IntModel
from shazip.stage.adaptive import AdaptiveParams, AdaptiveStage


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def step_times(model: IntModel, lanes: int, steps: int, compiled: bool) -> dict:
    """ms a step at `lanes`, the twin's kernels or the compiled step's: the whole call (bytes in,
    rows out) and, on CUDA, the graph's replay alone."""
    prev = np.random.default_rng(lanes).integers(0, 256, lanes, dtype=np.int64)
    if model.device.type == "cuda":
        step = GraphedStep(model, lanes, compiled=compiled)
        replay = lambda: step.graph.replay()  # noqa: E731
    else:
        state, x = model.init_state(lanes), torch.zeros(lanes, dtype=torch.int64)
        fn = stepper(compiled, x, *state.tensors())

        def step(p: np.ndarray) -> np.ndarray:
            x.copy_(torch.from_numpy(p))
            with torch.no_grad():
                return fn(model, state, x).to(torch.int32).numpy()
        replay = None
    t = time.perf_counter()
    for _ in range(3):
        step(prev)
    out = {"lanes": lanes, "compiled": compiled, "first_3_s": round(time.perf_counter() - t, 2)}
    t = time.perf_counter()
    for _ in range(steps):
        step(prev)
    out["call_ms"] = round(1e3 * (time.perf_counter() - t) / steps, 4)
    if replay is not None:
        sync(model.device)
        t = time.perf_counter()
        for _ in range(steps):
            replay()
        sync(model.device)
        out["replay_ms"] = round(1e3 * (time.perf_counter() - t) / steps, 4)
    out["us_per_lane"] = round(1e3 * out.get("replay_ms", out["call_ms"]) / lanes, 4)
    return out


def kernels(model: IntModel, lanes: int, compiled: bool, steps: int = 3, top: int = 20) -> dict:
    """The step's kernels (ops on the CPU) by total device time over `steps` steps, the twin's
    or the compiled step's."""
    from torch.profiler import ProfilerActivity, profile
    state, x = model.init_state(lanes), torch.zeros(lanes, dtype=torch.int64, device=model.device)
    fn = stepper(compiled, x, *state.tensors())
    with torch.no_grad():
        fn(model, state, x)
        sync(model.device)
        cuda = model.device.type == "cuda"
        with profile(activities=[ProfilerActivity.CUDA] if cuda else [ProfilerActivity.CPU]) as prof:
            for _ in range(steps):
                fn(model, state, x)
            sync(model.device)
    events = [e for e in prof.key_averages() if (e.device_time_total if cuda else e.self_cpu_time_total) > 0]
    total = lambda e: e.device_time_total if cuda else e.self_cpu_time_total  # noqa: E731
    events.sort(key=total, reverse=True)
    return {"lanes": lanes, "compiled": compiled, "per_step_us": round(sum(map(total, events)) / steps, 1),
            "launches_per_step": round(sum(e.count for e in events) / steps, 1),
            "top": [{"name": e.key[:90], "per_step": round(e.count / steps, 1), "us": round(total(e) / steps, 1)}
                    for e in events[:top]]}


def real_rows(model: IntModel, text: bytes, lanes: int, span: int) -> tuple[np.ndarray, np.ndarray]:
    """The model's rows (int64 [span, lanes, 256]) for `lanes` lanes of real text and the
    lanes' bytes (int64 [span, lanes])."""
    sym = np.frombuffer(text[:lanes * span], dtype=np.uint8).reshape(lanes, span).T.astype(np.int64)
    state, x = model.init_state(lanes), torch.zeros(lanes, dtype=torch.int64, device=model.device)
    rows = np.empty((span, lanes, 256), dtype=np.int64)
    with torch.no_grad():
        for t in range(span):
            rows[t] = advance(model, state, x).cpu().numpy()
            x.copy_(torch.from_numpy(sym[t]))
    return rows, sym


def gpu_stage_params(text: bytes) -> AdaptiveParams:
    """The default level's stage on a GPU, for a frame of GPU_FRAME_SIZE."""
    level = LEVELS[DEFAULT_LEVEL]
    params = stage_params("cm", level, lane_policy(level, None, True)).for_data(text[:GPU_FRAME_SIZE])
    return params.fitted(GPU_FRAME_SIZE)


def together(work: Callable[[int], None], n: int) -> float:
    """Seconds `work(i)` takes on n threads at once, i = 0 .. n-1, from when all have started."""
    gate = threading.Barrier(n + 1)

    def run(i: int) -> None:
        gate.wait()
        work(i)
        gate.wait()
    pool = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for p in pool:
        p.start()
    gate.wait()
    t0 = time.perf_counter()
    gate.wait()
    wall = time.perf_counter() - t0
    for p in pool:
        p.join()
    return wall


def stage_ceiling(rows: np.ndarray, sym: np.ndarray, params: AdaptiveParams, threads: list[int]) -> dict:
    """µs a lane-step of T stages coding at once (each its own, as frames are), T each of
    `threads`: the lane-steps a second all of them make is the engine's ceiling on this CPU."""
    span, lanes = sym.shape
    out = {"lanes": lanes, "steps": span, "level": DEFAULT_LEVEL, "runs": []}
    for n in threads:
        encoders = [AdaptiveStage(replace(params)).encoder(lanes, span) for _ in range(n)]

        def code(i: int) -> None:
            for t in range(span):
                encoders[i].code(rows[t], sym[t])
        wall = together(code, n)
        out["runs"].append({"stages": n, "wall_s": round(wall, 3),
                            "us_per_lane_step": round(1e6 * wall / (lanes * span), 3),
                            "mb_s_all": round(n * lanes * span / wall / 1e6, 3)})
    return out


class HandedRows(LaneBatch):
    """A batch whose step hands out rows made before (the model's, tiled over its members):
    what the frames' loop costs when the step costs nothing."""

    def __init__(self, model: IntModel, rows: np.ndarray) -> None:
        super().__init__(model, graphs=False)
        self.rows = rows

    def _make_step(self) -> Callable[[np.ndarray], np.ndarray]:
        k, lanes = self.rows.shape[1], self.lanes  # every member codes the rows' text: its rows
        bank = [np.tile(r.astype(np.int32), (-(-lanes // k), 1))[:lanes] for r in self.rows]
        count = iter(range(1 << 62))
        return lambda prev: bank[next(count) % len(bank)]


def frames_ceiling(model: IntModel, loaded, text: bytes, rows: np.ndarray, params: AdaptiveParams,
                   frames: list[int]) -> dict:
    """N frames at once, each coding the rows' text through the GPU engine's own loop
    (codec/block.py's `run_lanes`, the lane batch, the stage's calls), the step handing out the
    rows made before: the loop's ceiling on this machine's cores (Python's lock held between
    the stage's calls included), beside `stage_ceiling`'s."""
    span, lanes = rows.shape[:2]
    out = {"lanes": lanes, "steps": span, "runs": []}
    for n in frames:
        batch = HandedRows(model, rows)
        engines = [TwinEngine(loaded, str(model.device), batch) for _ in range(n)]
        for e in engines:  # every region laid out before the clock starts
            e.finish(e.start(lanes))
        stages = [AdaptiveStage(replace(params)) for _ in range(n)]
        size = lanes * span
        wall = together(lambda i: mixed_encode(engines[i], stages[i], text[:size], lanes), n)
        out["runs"].append({"frames": n, "wall_s": round(wall, 3),
                            "us_per_lane_step": round(1e6 * wall / size, 3),
                            "mb_s_all": round(n * size / wall / 1e6, 3)})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--input", type=Path, required=True)
    ap.add_argument("--model", default="default")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--lanes", type=int, nargs="+", default=[128, 512, 1024, 2048, 4096])
    ap.add_argument("--steps", type=int, default=50, help="steps timed a lane count")
    ap.add_argument("--profile-lanes", type=int, default=1024)
    ap.add_argument("--stage-lanes", type=int, default=128, help="a 2 MiB frame's lanes at the default level")
    ap.add_argument("--stage-steps", type=int, default=1000)
    ap.add_argument("--stage-threads", type=int, nargs="+", default=None, help="default: 1, half the cores, all")
    ap.add_argument("--compiled", type=int, choices=[0, 1], default=None,
                    help="time only the twin's kernels (0) or the compiled step (1); default both")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    raw = args.input.read_bytes()
    text = lzma.decompress(raw) if args.input.suffix == ".xz" else raw
    model = IntModel(load_model(args.model).int_weights(), args.device)
    cores = os.cpu_count() or 1
    threads = args.stage_threads or sorted({1, max(1, cores // 2), cores})
    report: dict = {"device": torch.cuda.get_device_name(0) if model.device.type == "cuda" else "cpu",
                    "cores": cores, "model": args.model}

    def save(key: str, value) -> None:
        report[key] = value
        print(json.dumps({key: value}), flush=True)
        if args.out:
            args.out.write_text(json.dumps(report, indent=1))

    rows, sym = real_rows(model, text, args.stage_lanes, args.stage_steps)
    params = gpu_stage_params(text)
    save("stage", stage_ceiling(rows, sym, params, threads))
    loaded = load_model(args.model)
    save("frames", frames_ceiling(IntModel(loaded.int_weights(), "cpu"), loaded, text, rows, params, threads))
    modes = [False, True] if args.compiled is None else [bool(args.compiled)]
    save("steps", [step_times(model, n, args.steps, c) for c in modes for n in args.lanes])
    save("kernels", [kernels(model, args.profile_lanes, c) for c in modes])


if __name__ == "__main__":
    main()
