"""Float vs int8 cross-entropy and the achieved archive size, on one held-out slice.

    python benchmarks/quality.py --model shazip/models/default.safetensors \
        --data ../shared/data/enwik6 --limit 200000 --lanes 32

All three figures use the same lanes (the slice cut into --lanes contiguous pieces, each
starting cold), so they differ only by the engine and the coder:
  float_bpc    the float32 model (sequence forward, state carried),
  int8_bpc     the integer engine's cross-entropy, from the very rows the coder gets,
  achieved     8 * archive bytes / input bytes, archive = header + one model-coded block;
  overhead     achieved payload bits vs the int8 cross-entropy (the coder's cost).
The archive is decoded again and compared (round_trip)."""

from __future__ import annotations

import argparse
import io
import json
import math
import time

import numpy as np
import torch
import torch.nn.functional as F

import shazip
from shazip.codec.block import CodingStats, lane_lengths, model_encode
from shazip.codec.engines import IntEngine
from shazip.format.container import Method
from shazip.format.writer import ArchiveWriter
from shazip.format.header import Header
from shazip.model.file import LoadedModel, load_model


@torch.no_grad()
def float_bits(loaded: LoadedModel, data: bytes, lanes: int, chunk: int = 256) -> float:
    """Total bits of the float model over the lanes (lane starts fed byte 0, as the coder does)."""
    model = loaded.model.eval()
    lengths = lane_lengths(len(data), lanes)
    span = int(lengths[0])
    flat = np.zeros(lanes * span, dtype=np.int64)
    flat[: len(data)] = np.frombuffer(data, dtype=np.uint8)
    grid = torch.from_numpy(flat.reshape(lanes, span))
    inputs = torch.cat([torch.zeros(lanes, 1, dtype=torch.int64), grid[:, :-1]], 1)
    valid = torch.arange(span)[None, :] < torch.from_numpy(lengths)[:, None]
    state, total = model.init_state(lanes), 0.0
    for t in range(0, span, chunk):
        logits, state = model(inputs[:, t:t + chunk], state)
        nll = F.cross_entropy(logits.reshape(-1, 256), grid[:, t:t + chunk].reshape(-1), reduction="none")
        total += float((nll * valid[:, t:t + chunk].reshape(-1)).sum()) / math.log(2)
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="default")
    ap.add_argument("--data", required=True)
    ap.add_argument("--offset", type=int, default=0)
    ap.add_argument("--limit", type=int, default=200_000)
    ap.add_argument("--lanes", type=int, default=32)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    loaded = load_model(args.model)
    with open(args.data, "rb") as f:
        f.seek(args.offset)
        data = f.read(args.limit)
    n = len(data)

    t = time.perf_counter()
    fbits = float_bits(loaded, data, args.lanes)
    t_float = time.perf_counter() - t

    stats = CodingStats()
    t = time.perf_counter()
    payload = model_encode(IntEngine(loaded, args.threads), data, args.lanes, stats=stats)
    ce = [stats.model_bits]
    out = io.BytesIO()
    header = Header(engine=IntEngine.engine_id, engine_version=IntEngine.engine_version, threads=0,
                    model_id=loaded.model_id, model_name=loaded.name, block_size=n, lanes=args.lanes)
    writer = ArchiveWriter(out, header)
    writer.add_block(Method.MODEL, args.lanes, data, payload)
    writer.finish()
    t_int = time.perf_counter() - t
    archive = out.getvalue()
    t = time.perf_counter()
    ok = shazip.decompress(archive, model=loaded, threads=args.threads) == data
    t_dec = time.perf_counter() - t

    print(json.dumps({
        "model": loaded.name, "id": loaded.id_hex[:16], "data": args.data, "offset": args.offset, "bytes": n,
        "lanes": args.lanes, "float_bpc": round(fbits / n, 4), "int8_bpc": round(ce[0] / n, 4),
        "int8_minus_float": round((ce[0] - fbits) / n, 4),
        "archive_bytes": len(archive), "achieved_bpc": round(8 * len(archive) / n, 4),
        "payload_overhead_pct": round(100 * (8 * len(payload) / ce[0] - 1), 4),
        "container_bytes": len(archive) - len(payload), "round_trip": ok,
        "seconds": {"float": round(t_float, 1), "int8_compress": round(t_int, 1), "int8_decompress": round(t_dec, 1)},
    }))


if __name__ == "__main__":
    main()
