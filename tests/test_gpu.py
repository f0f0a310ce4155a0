"""The GPU writes the CPU's archives, byte for byte, and each decodes the other's: at levels 3 .. 9,
without the stage, over several frames and with `-T`, given the same lane layout (the automatic
one differs on a GPU). The bundled model (the production shape). Skipped without CUDA; on the
device machine `benchmarks/gpu/run.sh` runs them, and with the folder `benchmarks/gpu/prepare.py`
made (`gpu-run/`, or $SHAZIP_GPU_RUN) also the archives made on another machine's CPU."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
import torch

import shazip

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")

PREPARED = Path(os.environ.get("SHAZIP_GPU_RUN") or Path(__file__).resolve().parents[1] / "gpu-run") / "archives"
LAYOUT = dict(lanes=30, block_size=1_500, frame_size=3_000)  # 6 KB: two frames of two blocks; 50 steps a block
CASES = [dict(level=k) for k in range(3, 10)] + [dict(level=6, adapt="none"), dict(level=7, threads=2)]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(f"{k}{v}" for k, v in c.items()))
def test_gpu_archive_equals_cpu_archive_both_ways(text, case):
    data, options = text[:6000], dict(LAYOUT, **case)
    on_cpu = shazip.compress(data, device="cpu", **options)
    on_gpu = shazip.compress(data, device="cuda", **options)
    assert on_gpu == on_cpu
    assert shazip.decompress(on_cpu, device="cuda") == data
    assert shazip.decompress(on_gpu, device="cpu", threads=2) == data


def _prepared() -> list[dict]:
    if not (PREPARED / "manifest.json").exists():
        return []
    return json.loads((PREPARED / "manifest.json").read_text())["cases"]


@pytest.mark.skipif(not _prepared(), reason="no prepared archives (benchmarks/gpu/prepare.py)")
@pytest.mark.parametrize("case", _prepared(), ids=lambda c: c["archive"])
def test_archives_made_on_another_machine(case):
    """Made by prepare.py on another machine's CPU: the GPU decodes them and, with the same
    options, writes the very same bytes."""
    manifest = json.loads((PREPARED / "manifest.json").read_text())
    data = (PREPARED / manifest["input"]).read_bytes()
    blob = (PREPARED / case["archive"]).read_bytes()
    assert hashlib.sha256(blob).hexdigest() == case["sha256"] and hashlib.sha256(data).hexdigest() == \
        manifest["input_sha256"]
    assert shazip.decompress(blob, device="cuda") == data
    assert shazip.compress(data, device="cuda", **case["options"]) == blob
