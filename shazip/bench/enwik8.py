"""`shazip fetch-enwik8`: the official enwik8, downloaded on the user's explicit command and
kept only if its sha256 matches. Nothing else in shazip touches the network."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import urllib.request
import zipfile
from pathlib import Path

from ..errors import ShazipError, UsageError

ENWIK8_URL = "http://mattmahoney.net/dc/enwik8.zip"
ENWIK8_SHA256 = "2b49720ec4d78c3c9fabaee6e4179a5e997302b3a70029f30f2d582218c024a8"


def fetch_enwik8(dest_dir: Path, url: str = ENWIK8_URL, sha256: str = ENWIK8_SHA256) -> Path:
    """Downloads the official enwik8 zip, unpacks enwik8 and keeps it only if its sha256 matches."""
    dest_dir.mkdir(parents=True, exist_ok=True)
    dest = dest_dir / "enwik8"
    if dest.exists():
        raise UsageError(f"'{dest}' already exists")
    with tempfile.TemporaryDirectory(dir=dest_dir, prefix=".enwik8-") as tmp:
        zpath = Path(tmp) / "enwik8.zip"
        try:
            with urllib.request.urlopen(url, timeout=60) as r, open(zpath, "wb") as f:
                shutil.copyfileobj(r, f, 1 << 20)
        except OSError as e:
            raise ShazipError(f"cannot download {url}: {e}") from None
        try:
            with zipfile.ZipFile(zpath) as z:
                if "enwik8" not in z.namelist():
                    raise ShazipError(f"{url} does not contain enwik8")
                part = Path(tmp) / "enwik8"
                h = hashlib.sha256()
                with z.open("enwik8") as fin, open(part, "wb") as fout:
                    while chunk := fin.read(1 << 20):
                        h.update(chunk)
                        fout.write(chunk)
        except zipfile.BadZipFile:
            raise ShazipError(f"{url} is not a zip file") from None
        if h.hexdigest() != sha256:
            raise ShazipError(f"enwik8 from {url} has sha256 {h.hexdigest()}, expected {sha256}: refused")
        os.replace(part, dest)
    return dest
