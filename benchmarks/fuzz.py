"""Fuzz the decoder with damaged real archives; print what became of every case.

    python benchmarks/fuzz.py --cases 10000

Five archives of the committed fixture text plus random bytes, with model-coded (with and without
the adaptive stage; a level's choice and every model of the newest stage version), raw and zstd
blocks (the committed `tiny-trained` model; small blocks so there are several), and the golden
archives of formats 1-3 (tests/data: shazip 0.3-0.7's, which every version decodes), damaged by the
mutations of testkit/archive_damage.py: bit flips, truncation in every region, inserted and deleted
bytes, header/block/trailer field edits with their crc resealed, payload bytes, blocks swapped,
dropped or repeated, a block spliced in from an archive of other text made the same way, and
blocks claiming far more bytes and lanes than their payload holds; and, every fourth case, a
framed output's frames cut at a boundary, reordered, dropped, repeated or taken from another
output or from another framing of the same data, a trailer forged with the table made to agree, or its
seek table forged (`frame_damage`), each read five ways: decoded whole, at random seeks (`shazip.open`),
in random pieces (`ShazipDecompressor` in lzma's loop), and by `recover_stream` (every run of bytes it
writes between two losses must be the original's, or the donor's, never anything else); and
`--folder-cases` hostile models folders (an index of any JSON, entries naming links to /dev/zero,
FIFOs, 30 GB sparse files, folders, other models, wrong sizes and sha256s), each asked for a model
an archive needs. Each case must end in a clean ShazipError ("refused") or the exact original
("intact"); anything else is counted as a failure and printed, and the exit code is 1. Also prints the slowest case and the process's
peak RSS (`--max-seconds`, `--max-mb`: a case slower, or a peak larger, fails the run), and the
slowest case by the format its header claims (a claim of 2**28 bytes in each among them)."""

from __future__ import annotations

import argparse
import collections
import io
import json
import os
import random
import resource
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "testkit"))  # archive_damage: the tests' damage, not installed (testkit/README.md)

import shazip  # noqa: E402
from shazip.errors import ShazipError  # noqa: E402
from shazip.format.container import Method  # noqa: E402
from shazip.format.header import FORMAT_VERSIONS  # noqa: E402
from shazip.model.file import load_model  # noqa: E402
from shazip.stage.adaptive import AdaptiveParams  # noqa: E402

from archive_damage import frame_damage, mutate  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-seconds", type=float, default=2.0)
    # the newest stage at full size (its fifth coding, AdaptiveParams()) is most of the peak: 576 MB
    # with stage version 14, 625 MB with version 15's six more tables (each 4 MB, and its snapshot),
    # 663 MB with version 16, 829 MB with version 17's four mixers of 65,536 sets (22.5 MB each, twice);
    # the framed files' other readers (seeks, pieces, recovery) took the run's peak from 892 to 913 MB
    ap.add_argument("--max-mb", type=float, default=1000.0)
    ap.add_argument("--folder-cases", type=int, default=200, help="Hostile models folders tried.")
    args = ap.parse_args()
    model = load_model(ROOT / "tests" / "data" / "tiny-trained.safetensors")
    text = (ROOT / "tests" / "data" / "wiki.xml").read_bytes()
    data = text[:2000] + random.Random(1).randbytes(600) + text[2000:3000]
    other = text[3000:5000] + random.Random(2).randbytes(600) + text[5000:6000]
    codings = ((frozenset({Method.MODEL, Method.RAW}), "none"), (frozenset({Method.MIXED, Method.RAW}), "cm"),
               (frozenset(Method), "cm"),
               (frozenset({Method.MIXED, Method.RAW}), AdaptiveParams(nn=False, nn_final=False)),
               (frozenset({Method.MIXED, Method.RAW}), AdaptiveParams()),  # every model of the newest stage
               (frozenset({Method.STAGE, Method.RAW}), "cm"))  # format 5's stage blocks: the stage alone
    archives, donors = ([shazip.compress(d, model=model, block_size=900, lanes=3, methods=m, adapt=a)
                         for m, a in codings] for d in (data, other))
    expected = [data] * len(archives)
    # and the golden archives of formats 1-4 (written by shazip 0.3-0.21), which every version must decode
    for name in ("golden-int8.shz", "golden-mixed.shz", "golden-mixed-v3.shz", "golden-mixed-v4.shz"):
        old = (ROOT / "tests" / "data" / name).read_bytes()
        archives.append(old)
        donors.append(None)
        expected.append(shazip.decompress(old, model=model))
    # and framed outputs (three frames and a seek table), for mistakes with whole frames (every 4th case)
    framed, framed_donors, reframed = ([shazip.compress(d, model=model, block_size=600, frame_size=size, lanes=2,
                                                        methods=m, adapt=a, threads=1) for m, a in codings[1:3]]
                                       for d, size in ((data, 1200), (other, 1200), (data, 1800)))
    rng = random.Random(args.seed)
    counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    failures, slowest = [], (0.0, "")
    by_format: dict[int, tuple[float, str]] = {}  # the slowest case by the format its header says (0: none known)
    t0 = time.perf_counter()
    for case in range(args.cases):
        if case % 4 == 3:
            k = case // 4 % len(framed)
            name, bad = frame_damage(framed[k], rng, framed_donors[k], reframed[k])
            for reader, read in FRAME_READERS.items():  # the other readers of a framed file
                t = time.perf_counter()
                outcome = _judged(lambda: read(bad, model, rng, data, other), data, failures, case, name)
                counts[f"{name} [{reader}]"][outcome] += 1
                slowest = max(slowest, (time.perf_counter() - t, f"{name} [{reader}]"))
        else:
            k = (case - case // 4) % len(archives)  # every archive in turn over the other cases
            name, bad = mutate(archives[k], rng, donors[k])
            name += f" (format {archives[k][4]})"
        t = time.perf_counter()
        try:
            out = shazip.decompress(bad, model=model, threads=1 + case % 2)
            outcome = "intact" if out == (data if case % 4 == 3 else expected[k]) else "WRONG OUTPUT"
        except ShazipError:
            outcome = "refused"
        except Exception:  # anything else is a bug: record it and go on
            outcome = "CRASH"
            failures.append((case, name, traceback.format_exc(limit=3)))
        dt = time.perf_counter() - t
        slowest = max(slowest, (dt, name))
        fmt = bad[4] if len(bad) > 4 and bad[:4] == b"SHZ\x89" and bad[4] in FORMAT_VERSIONS else 0
        by_format[fmt] = max(by_format.get(fmt, (0.0, "")), (dt, name))
        if dt > args.max_seconds:
            failures.append((case, name, f"took {dt:.1f} s"))
        counts[name.split(" (")[0] + (name[name.index(" (format"):] if " (format" in name else "")][outcome] += 1
        if outcome == "WRONG OUTPUT":
            failures.append((case, name, "decoded to different bytes without an error"))
    for case in range(args.folder_cases):
        name, outcome = _folder_case(model, data, rng)
        counts[name][outcome] += 1
        if outcome in ("CRASH", "WRONG OUTPUT", "SLOW"):
            failures.append((case, name, outcome))
    total = collections.Counter()
    for c in counts.values():
        total.update(c)
    print(f"{'mutation':28s} {'refused':>8s} {'intact':>7s} {'failed':>7s}")
    for name in sorted(counts):
        c = counts[name]
        print(f"{name:28s} {c['refused']:8d} {c['intact']:7d} {c['CRASH'] + c['WRONG OUTPUT'] + c['SLOW']:7d}")
    print(json.dumps({"cases": args.cases, "refused": total["refused"], "intact": total["intact"],
                      "crashes": total["CRASH"], "wrong_output": total["WRONG OUTPUT"],
                      "seconds": round(time.perf_counter() - t0, 1), "slowest_case_s": round(slowest[0], 3),
                      "slowest_mutation": slowest[1],
                      "slowest_s_by_format": {f: round(t, 3) for f, (t, _) in sorted(by_format.items())},
                      "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if peak > args.max_mb:
        failures.append((-1, "the whole run", f"peak RSS {peak:.0f} MB"))
    for case, name, what in failures[:20]:
        print(f"case {case} ({name}): {what}", file=sys.stderr)
    sys.exit(1 if failures else 0)


def _judged(read, want: bytes, failures: list, case: int, name: str) -> str:
    """"intact" where `read()` returns `want` (or True: a reader that checked its own bytes),
    "refused" on a ShazipError, else a failure recorded."""
    try:
        got = read()
    except ShazipError:
        return "refused"
    except Exception:
        failures.append((case, name, traceback.format_exc(limit=3)))
        return "CRASH"
    if got is True or got == want:
        return "intact"
    failures.append((case, name, "read different bytes without an error"))
    return "WRONG OUTPUT"


def _seeks(bad: bytes, model, rng: random.Random, data: bytes, _) -> bool:
    """Random seeks (and the end's): every read gives the bytes a stream gives at that place
    before it fails (the original's, where it does not), or an error; a seek proves as much as
    a stream, and no more (a file whose frame 0 is another output's gives that frame's bytes to
    a stream too, before its frame 1 is refused)."""
    streamed, whole = bytearray(), True
    try:
        for block in shazip.iter_decompress(io.BytesIO(bad), model):
            streamed += block
    except ShazipError:
        whole = False
    with shazip.open(io.BytesIO(bad), model=model) as f:
        for _ in range(4):
            at, n = rng.randrange(len(data) + 10), rng.randrange(1, 2000)
            f.seek(at)
            if f.read(n) != streamed[at:at + n]:
                return False
        if f.seek(0, io.SEEK_END) != len(streamed) or not whole:
            return False  # the end of a file that a stream refuses must be refused too
    return bytes(streamed) == data


def _pieces(bad: bytes, model, rng: random.Random, data: bytes, _) -> bytes:
    """lzma's loop for a stream in random pieces: a new decompressor for each one's unused_data."""
    cuts = sorted(rng.sample(range(1, len(bad)), min(3, len(bad) - 1)))
    pieces = [p for p in (bad[a:b] for a, b in zip([0, *cuts], [*cuts, len(bad)])) if p]
    out, d, pending = [], shazip.ShazipDecompressor(model), b""
    for _ in range(10_000):
        if d.eof:
            pending, d = d.unused_data + pending, shazip.ShazipDecompressor(model)
            if not pending and not pieces:
                return b"".join(out)
        if d.needs_input:
            if not pending and not pieces:
                raise shazip.Truncated("the input ended inside an archive")
            data_in, pending = (pending, b"") if pending else (pieces.pop(0), b"")
            out.append(d.decompress(data_in))
        else:
            got = d.decompress(b"")
            if not (got or d.eof or d.needs_input):
                raise RuntimeError("the decompressor spins: nothing given, nothing asked for")
            out.append(got)
    raise RuntimeError("no end after 10,000 calls")


def _recovered(bad: bytes, model, rng: random.Random, data: bytes, other: bytes) -> bool:
    """`recover_stream`: every run of bytes written between two losses is a run of the
    original's or the donor's (whose frame may stand in the file), never anything else."""
    out = io.BytesIO()
    lost = shazip.recover_stream(io.BytesIO(bad), out, model=model)
    written = out.getvalue()
    cuts = sorted({0, len(written), *(x.output_at for x in lost)})
    runs = [written[a:b] for a, b in zip(cuts, cuts[1:])]
    return all(run in data or run in other for run in runs) and (bool(lost) or written == data)


FRAME_READERS = {"seek": _seeks, "pieces": _pieces, "recover": _recovered}


def _folder_case(model, data: bytes, rng: random.Random) -> tuple[str, str]:
    """A hostile user models folder holding (or claiming to hold) the model an archive needs."""
    import hashlib
    blob = model.blob
    sha = hashlib.sha256(blob).hexdigest()
    arc = shazip.compress(data[:1500], model=model, block_size=900, lanes=3)
    entry = {"name": "m", "file": "m.safetensors", "sha256": sha, "bytes": len(blob), "params": 1, "figures": {}}
    how = rng.choice(["intact", "json", "types", "path", "zero", "fifo", "sparse", "folder", "missing", "sha",
                      "bytes", "other model"])
    with tempfile.TemporaryDirectory() as folder:
        d = Path(folder)
        index: object = {"m": entry}
        if how == "json":
            index = rng.choice([[], 5, "x", None, {"m": 5}, {"m": []}, {"m": {}}])
        elif how == "types":
            index = {"m": {**entry, rng.choice(["file", "sha256", "bytes", "figures"]): rng.choice([5, None, [], {}])}}
        elif how == "path":
            index = {"m": {**entry, "file": rng.choice(["/dev/zero", "../m.safetensors", ".hidden", "a/b"])}}
        elif how == "sha":
            index = {"m": {**entry, "sha256": "0" * 64}}
        elif how == "bytes":
            index = {"m": {**entry, "bytes": len(blob) + rng.choice([-1, 1, 1 << 40])}}
        target = d / "m.safetensors"
        if how == "zero":
            os.symlink("/dev/zero", target)
        elif how == "fifo":
            os.mkfifo(target)
        elif how == "sparse":
            with open(target, "wb") as f:
                f.truncate(30 << 30)
        elif how == "folder":
            target.mkdir()
        elif how == "other model":
            target.write_bytes(blob[:-4] + bytes(4))
        elif how != "missing":
            target.write_bytes(blob)
        (d / "index.json").write_text(json.dumps(index) if how != "json" or rng.random() < 0.8 else "{not json")
        os.environ["SHAZIP_MODELS"] = folder
        t = time.perf_counter()
        try:
            outcome = "intact" if shazip.decompress(arc) == data[:1500] else "WRONG OUTPUT"
        except ShazipError:
            outcome = "refused"
        except Exception:
            outcome = "CRASH"
        finally:
            del os.environ["SHAZIP_MODELS"]
        if time.perf_counter() - t > 5:
            outcome = "SLOW"
    return f"models folder: {how}", outcome


if __name__ == "__main__":
    main()
