"""Ablation of the adaptive stage (shazip/adaptive.py) on the int8 engine's rows of real files.

Each input is a file, whose rows the int8 engine computes first (--model, --lanes, --limit;
outside the timings), or an .npz of rows dumped before: freq uint32 [steps, lanes, 256],
data uint8 [n], lanes, n (lane i is data[i*span:(i+1)*span], span = ceil(n / lanes); freq[t, i]
is lane i's row for its byte t). For each file it prints bits/byte of: the NN rows alone (their
ideal code length), the stage without the NN input (context models only), NN + context models
without APMs, and the full stage, whose real payload size is printed beside its ideal code
length (the coder's overhead); then the stage's time per byte (encoder, and decoder with a
round-trip check). Timings include the per-step Python call; other processes on the machine
make them noisy, so compare ratios within one run.

    python benchmarks/adaptive_ablation.py ../shared/data/enwik6 runs/suite/py_click_core.py --lanes 32
    python benchmarks/adaptive_ablation.py rows.npz --set mixer_lr=8 --set orders=1,2,3
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

import numpy as np
import torch

from shazip.adaptive import AdaptiveParams, AdaptiveStage
from shazip.engines import TwinEngine
from shazip.modelfile import load_model

def load_rows(path: Path, model: str, lanes: int, limit: int | None) -> tuple[torch.Tensor, np.ndarray, int]:
    if path.suffix == ".npz":
        z = np.load(path)
        return torch.from_numpy(z["freq"].astype(np.int64)), z["data"], int(z["lanes"])
    data = np.frombuffer(path.read_bytes()[:limit], dtype=np.uint8)
    sym, active, span = lane_grid(data, lanes)
    engine = TwinEngine(load_model(model), "cpu")
    state, prev = engine.start(lanes), np.zeros(lanes, dtype=np.int64)
    freq = torch.empty(span, lanes, 256, dtype=torch.int32)  # every entry is below 2**31
    for t in range(span):
        state, f = engine.step(state, prev)
        freq[t] = torch.from_numpy(f.astype(np.int32))
        prev = sym[t].copy()
    return freq, data, lanes


def lane_grid(data: np.ndarray, lanes: int) -> tuple[np.ndarray, np.ndarray, int]:
    """(symbols [span, lanes] zero-padded, active lanes per step, span)."""
    n = len(data)
    span = -(-n // lanes)
    flat = np.zeros(lanes * span, dtype=np.int64)
    flat[:n] = data
    lengths = np.clip(n - span * np.arange(lanes), 0, span)
    active = (lengths[None, :] > np.arange(span)[:, None]).sum(1)
    return np.ascontiguousarray(flat.reshape(lanes, span).T), active, span


def model_bits(freq: torch.Tensor, sym: np.ndarray, active: np.ndarray) -> float:
    f = freq[: len(sym)].numpy().astype(np.int64)
    mask = np.arange(f.shape[1])[None, :] < active[:, None]
    chosen = np.take_along_axis(f, sym[:, :, None], axis=2)[:, :, 0].astype(np.float64)
    total = f.sum(axis=2, dtype=np.float64)
    return float(-(np.log2(chosen / total) * mask).sum())


def encode(params: AdaptiveParams, freq: torch.Tensor, sym: np.ndarray, active: np.ndarray,
           span: int) -> tuple[float, bytes, float]:
    """(ideal bits, payload, seconds)."""
    stage = AdaptiveStage(params)
    symbols = torch.from_numpy(sym)
    steps = [(freq[t, :k].long(), symbols[t, :k]) for t, k in enumerate(active)]  # outside the timing
    t0 = time.process_time()
    enc = stage.encoder(sym.shape[1], span, measure=True)
    for f, s in steps:
        enc.code(f, s)
    payload = enc.finish()
    return enc.bits, payload, time.process_time() - t0


def decode(params: AdaptiveParams, freq: torch.Tensor, sym: np.ndarray, active: np.ndarray, span: int,
           payload: bytes) -> tuple[bool, float]:
    stage = AdaptiveStage(params)
    rows = [freq[t, :k].long() for t, k in enumerate(active)]
    t0 = time.process_time()
    dec = stage.decoder(sym.shape[1], span, payload)
    out = [dec.code(f) for f in rows]
    secs = time.process_time() - t0
    return all(np.array_equal(o.numpy(), sym[t, :len(o)]) for t, o in enumerate(out)), secs


def parse_overrides(items: list[str]) -> dict:
    out = {}
    types = {f.name: f.type for f in dataclasses.fields(AdaptiveParams)}
    for item in items:
        key, value = item.split("=", 1)
        if key not in types:
            raise SystemExit(f"unknown parameter {key}")
        if key == "orders":
            out[key] = tuple(int(v) for v in value.split(",") if v)
        elif "bool" in str(types[key]):
            out[key] = value.lower() in ("1", "true", "yes")
        else:
            out[key] = int(value)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+", help="files (rows computed by the int8 engine) or .npz rows")
    ap.add_argument("--model", default="default")
    ap.add_argument("--lanes", type=int, default=32)
    ap.add_argument("--limit", type=int, default=None, help="only the first N bytes of each file")
    ap.add_argument("--set", action="append", default=[], help="override an AdaptiveParams field: name=value")
    ap.add_argument("--no-decode", action="store_true", help="skip the decoding check")
    args = ap.parse_args()
    torch.set_num_threads(1)
    files = [Path(f) for f in args.files]
    base = dataclasses.replace(AdaptiveParams(), **parse_overrides(args.set))
    print(f"params: {base.to_dict()}")
    configs = [("CM only (no NN input)", dataclasses.replace(base, nn=False)),
               ("NN + CM, no APM", dataclasses.replace(base, apm=False)),
               ("NN + CM + APM (full)", base)]
    header = f"{'file':<26} {'config':<24} {'bits/byte':>9} {'payload b/B':>11} {'us/byte':>8}"
    print(header)
    print("-" * len(header))
    for path in files:
        freq, data, lanes = load_rows(path, args.model, args.lanes, args.limit)
        sym, active, span = lane_grid(data, lanes)
        n = len(data)
        print(f"{path.name:<26} {'NN only (ideal)':<24} {model_bits(freq, sym, active) / n:9.4f}")
        for name, params in configs:
            bits, payload, secs = encode(params, freq, sym, active, span)
            print(f"{'':<26} {name:<24} {bits / n:9.4f} {8 * len(payload) / n:11.4f} {1e6 * secs / n:8.3f}")
        if not args.no_decode:
            ok, secs = decode(base, freq, sym, active, span, payload)
            print(f"{'':<26} {'decode (full)':<24} {'ok' if ok else 'MISMATCH':>9} {'':>11} {1e6 * secs / n:8.3f}")
            print(f"{'':<26} {'coder overhead':<24} {100 * (8 * len(payload) / bits - 1):8.4f}%")


if __name__ == "__main__":
    main()
