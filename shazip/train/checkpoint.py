"""A training checkpoint stored in pieces: `checkpoint.json` names them, `checkpoint-S-K.pt` hold them.

Why pieces: a run on a lent GPU machine brings back only files of at most 16 MiB (DEVELOPERS.md,
"The GPU"), and a larger model's weights with its optimizer's two moments are several times that.
The pieces are the bytes of one `torch.save`, cut every PIECE_BYTES; the manifest gives each
piece's size and sha256 and is written last, atomically, so a run killed while saving leaves the
previous checkpoint whole (each save's pieces carry its generation G, one more than the last, and
the previous generation's are removed only once the new manifest is in place). A missing, cut or damaged piece is named on loading.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
from pathlib import Path

import torch

from ..errors import UsageError

MANIFEST = "checkpoint.json"
PIECE_BYTES = 16_000_000  # under the device machine's 16 MiB a returned file
PIECE_NAME = re.compile(r"checkpoint-[0-9]+-[0-9]+\.pt")


def exists(folder: Path) -> bool:
    return (folder / MANIFEST).exists()


def save(obj: dict, folder: Path) -> None:
    """Writes `obj` (torch.save) into `folder` as pieces of at most PIECE_BYTES, then the manifest."""
    old = _manifest(folder) if exists(folder) else {"generation": 0, "pieces": []}
    generation = old["generation"] + 1
    buf = io.BytesIO()
    torch.save(obj, buf)
    data = buf.getbuffer()
    pieces = []
    for k, lo in enumerate(range(0, max(len(data), 1), PIECE_BYTES)):
        name = f"checkpoint-{generation}-{k}.pt"
        chunk = data[lo:lo + PIECE_BYTES]
        with open(folder / name, "wb") as f:
            f.write(chunk)
            f.flush()
            os.fsync(f.fileno())
        pieces.append({"name": name, "bytes": len(chunk), "sha256": hashlib.sha256(chunk).hexdigest()})
    tmp = folder / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps({"generation": generation, "bytes": len(data), "pieces": pieces}, indent=1) + "\n")
    os.replace(tmp, folder / MANIFEST)
    for p in old["pieces"]:
        (folder / p["name"]).unlink(missing_ok=True)


def load(folder: Path, map_location: torch.device | str) -> dict:
    """The checkpoint in `folder`, every piece checked against the manifest."""
    parts = []
    for p in _manifest(folder)["pieces"]:
        path = folder / p["name"]
        try:
            chunk = path.read_bytes()
        except OSError as e:
            raise UsageError(f"{path}: checkpoint piece unreadable ({e.strerror})") from None
        if len(chunk) != p["bytes"] or hashlib.sha256(chunk).hexdigest() != p["sha256"]:
            raise UsageError(f"{path}: checkpoint piece damaged or cut ({len(chunk):,} bytes, "
                             f"{p['bytes']:,} expected, or its sha256 differs)")
        parts.append(chunk)
    return torch.load(io.BytesIO(b"".join(parts)), map_location=map_location, weights_only=False)


def _manifest(folder: Path) -> dict:
    path = folder / MANIFEST
    try:
        manifest = json.loads(path.read_text())
        if not isinstance(manifest["generation"], int) or not all(
                PIECE_NAME.fullmatch(p["name"]) and isinstance(p["bytes"], int) and isinstance(p["sha256"], str)
                for p in manifest["pieces"]):
            raise ValueError("its generation or pieces are malformed")
        return manifest
    except OSError as e:
        raise UsageError(f"{path}: checkpoint manifest unreadable ({e.strerror})") from None
    except (ValueError, KeyError, TypeError) as e:
        raise UsageError(f"{path}: not a checkpoint manifest ({e})") from None

