"""Ablation of the adaptive stage (shazip/stage/adaptive.py) on the int8 engine's rows of real files.

The stage is cheap (a few µs/byte) beside the model, so the model's rows of each file are
computed once by the native int8 engine (outside the timings; --model, --lanes: default the
lanes `shazip` itself would use, at most 32 of at least 2 KB) and kept in --rows DIR as
NAME.LANES.MODELID.npz (freq uint32 [steps, lanes, 256], data uint8 [n], lanes). Then every
configuration codes every file as one block, and the table gives bits/byte of the real payload:

    NN only    the rows' own ideal code length (no stage)
    full       the stage as configured (--set overrides AdaptiveParams of every configuration)
    -X / +X    the full stage with one model set off / on (--off X, --on X: AdaptiveParams
               fields, repeatable; `--vary name=value` adds an arbitrary variant)

plus each configuration's total per kind of file (the suite's MANIFEST.tsv kinds when the files
are the suite's) and its encoder time per byte (the per-step Python call included; other
processes on the machine make it noisy, so compare within one run). With --check the full
configuration is also decoded and compared.

    python benchmarks/adaptive_ablation.py runs/suite/* --off word --off column --on records
    python benchmarks/adaptive_ablation.py runs/suite/log_* --vary mixer_lr=8 --check
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import re
import time
from pathlib import Path

import numpy as np

from shazip import core
from shazip.codec.block import MIN_LANE, effective_lanes
from shazip.model.file import load_model
from shazip.options import DEFAULT_LANES
from shazip.stage.adaptive import AdaptiveParams, AdaptiveStage

MANIFEST = Path(__file__).resolve().parent / "suite" / "MANIFEST.tsv"


def rows_for(path: Path, model: str, lanes: int, cache: Path) -> tuple[np.ndarray, np.ndarray, int]:
    """(freq uint32 [span, lanes, 256], data, lanes) for a file, from the cache or computed."""
    data = np.frombuffer(path.read_bytes(), dtype=np.uint8)
    loaded = load_model(model)
    k = lanes or effective_lanes(len(data), DEFAULT_LANES, MIN_LANE)
    dump = cache / f"{path.name}.{k}.{loaded.model_id.hex()[:12]}.npz"
    if dump.exists():
        z = np.load(dump)
        if np.array_equal(z["data"], data):
            return z["freq"], data, k
    sym, _, span = lane_grid(data, k)
    net = core.model(loaded.int_weights())
    pool = core.load().ThreadPool(1)
    state = net.state(k)
    freq = np.empty((span, k, 256), dtype=np.uint32)  # every entry is at most 2**30
    prev = np.zeros(k, dtype=np.uint8)
    for t in range(span):
        freq[t] = net.step(state, prev, pool)
        prev = sym[t].astype(np.uint8)
    cache.mkdir(parents=True, exist_ok=True)
    tmp = dump.with_suffix(".tmp.npz")
    np.savez(tmp, freq=freq, data=data, lanes=k)
    tmp.replace(dump)
    return freq, data, k


def lane_grid(data: np.ndarray, lanes: int) -> tuple[np.ndarray, np.ndarray, int]:
    """(symbols [span, lanes] zero-padded, active lanes per step, span)."""
    n = len(data)
    span = -(-n // lanes)
    flat = np.zeros(lanes * span, dtype=np.int64)
    flat[:n] = data
    lengths = np.clip(n - span * np.arange(lanes), 0, span)
    active = (lengths[None, :] > np.arange(span)[:, None]).sum(1)
    return np.ascontiguousarray(flat.reshape(lanes, span).T), active, span


def model_bits(freq: np.ndarray, sym: np.ndarray, active: np.ndarray) -> float:
    f = freq[: len(sym)].astype(np.int64)
    mask = np.arange(f.shape[1])[None, :] < active[:, None]
    chosen = np.take_along_axis(f, sym[:, :, None], axis=2)[:, :, 0].astype(np.float64)
    total = f.sum(axis=2, dtype=np.float64)
    return float(-(np.log2(chosen / total) * mask).sum())


def encode(params: AdaptiveParams, steps: list, lanes: int, span: int) -> tuple[bytes, float]:
    """(payload, seconds)."""
    stage = AdaptiveStage(params)
    t0 = time.process_time()
    enc = stage.encoder(lanes, span)
    for f, s in steps:
        enc.code(f, s)
    payload = enc.finish()
    return payload, time.process_time() - t0


def decodes(params: AdaptiveParams, steps: list, lanes: int, span: int, payload: bytes) -> bool:
    dec = AdaptiveStage(params).decoder(lanes, span, payload)
    return all(np.array_equal(dec.code(f), s) for f, s in steps)


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


GROUPS = ((r"\blog\b", "log"), ("source", "code"), ("JavaScript", "code"), ("JSON", "data"), ("CSV", "data"),
          ("YAML", "data"), ("XML", "data"), ("prose", "prose"), ("poetry", "prose"), ("play", "prose"),
          ("writing", "prose"))


def kinds() -> dict[str, str]:
    """Suite file name -> its group: log, code, data (JSON, CSV, YAML, XML: with logs and code,
    the structured text issue 23's targets name), prose, or other (HTML, Markdown, CRLF text)."""
    out = {}
    with MANIFEST.open(newline="") as f:
        for row in csv.DictReader(f, delimiter="\t"):
            out[row["name"]] = next((g for word, g in GROUPS if re.search(word, row["kind"])), "other")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+", type=Path)
    ap.add_argument("--model", default="default")
    ap.add_argument("--lanes", type=int, default=0, help="lanes per file (0: what shazip would use)")
    ap.add_argument("--rows", type=Path, default=Path("runs/rows"), help="where the model's rows are kept")
    ap.add_argument("--set", action="append", default=[], help="AdaptiveParams override for all: name=value")
    ap.add_argument("--off", action="append", default=[], help="a variant without this model (a bool field)")
    ap.add_argument("--on", action="append", default=[], help="a variant with this model (a bool field)")
    ap.add_argument("--vary", action="append", default=[], help="a variant with name=value[,name=value...]")
    ap.add_argument("--check", action="store_true", help="decode the full configuration and compare")
    args = ap.parse_args()
    base = dataclasses.replace(AdaptiveParams(), **parse_overrides(args.set))
    configs = [("full", base)]
    configs += [(f"-{m}", dataclasses.replace(base, **{m: False})) for m in args.off]
    configs += [(f"+{m}", dataclasses.replace(base, **{m: True})) for m in args.on]
    configs += [(v, dataclasses.replace(base, **parse_overrides(v.split(",")))) for v in args.vary]
    print(f"full: {base.to_dict()}")
    kind_of = kinds()
    names = ["NN only"] + [c for c, _ in configs]
    print(f"{'file':<28} {'bytes':>8} " + " ".join(f"{c[:11]:>11}" for c in names))
    totals: dict[str, np.ndarray] = {}
    secs: dict[str, np.ndarray] = {}  # per kind and configuration
    for path in args.files:
        freq, data, lanes = rows_for(path, args.model, args.lanes, args.rows)
        sym, active, span = lane_grid(data, lanes)
        steps = [(freq[t, :k].astype(np.int64), sym[t, :k]) for t, k in enumerate(active)]
        n = len(data)
        bits, times = [model_bits(freq, sym, active)], []
        for i, (_, params) in enumerate(configs):
            payload, s = encode(params.fitted(n), steps, lanes, span)
            bits.append(8.0 * len(payload))
            times.append(s)
            if args.check and i == 0 and not decodes(params.fitted(n), steps, lanes, span, payload):
                raise SystemExit(f"{path}: the full configuration does not decode")
        kind = kind_of.get(path.name, "other")
        for key in (kind, "all"):
            totals.setdefault(key, np.zeros(len(names) + 1))
            totals[key] += np.array([n] + bits)
            secs.setdefault(key, np.zeros(len(configs)))
            secs[key] += times
        print(f"{path.name:<28} {n:>8} " + " ".join(f"{b / n:11.4f}" for b in bits), flush=True)
    print()
    order = sorted(totals, key=lambda k: (k == "all", k))
    for key in order:
        t = totals[key]
        print(f"{'total ' + key:<28} {int(t[0]):>8} " + " ".join(f"{b / t[0]:11.4f}" for b in t[1:]))
    print("\nthe stage's encoder, µs/byte")
    for key in order:
        print(f"{key:<37} {'':>11} " + " ".join(f"{1e6 * s / totals[key][0]:11.2f}" for s in secs[key]))


if __name__ == "__main__":
    main()
