"""Tests for the trainer (`shazip train`, `shazip.train.train`) on the committed fixture text.

What is checked: `tiny` really learns (beats the order-0 entropy of its training text), metrics
are written, a run split by `--resume` lands on bit-identical weights, `.zst` corpora train the
same weights as the plain file, 2-process DDP on CPU (gloo) trains the same model as one process
with the same global batch and resumes, the exported model drives `shazip compress/decompress`,
and every user mistake is one `shazip: ...` line with a non-zero exit code.

Everything uses `--threads 1`: the machine may be busy.
"""

from __future__ import annotations

import collections
import io
import json
import math
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch
import zstandard
from click.testing import CliRunner
from safetensors.torch import load_file

import shazip
from shazip.model import twin as quant
from shazip.cli import main
from shazip.format.container import Method
from shazip.format.reader import ArchiveReader
from shazip.model.file import load_model
from shazip.train import checkpoint as pieces
from shazip.train.data import ByteStreams, Corpus
from shazip.train.trainer import TrainArgs, evaluate, lr_at, scaled_for_batch, train

from engine_tables import lanes_of, run

DATA = Path(__file__).parent / "data"
FIXTURE = DATA / "wiki.xml"
VALID = 4000  # bytes held out at the end of the fixture
METRIC_KEYS = {"step", "bytes_seen", "train_bpc", "bytes_per_s", "lr"}


# ---------------------------------------------------------------- helpers


def targs(out: Path, corpus=(FIXTURE,), **kw) -> TrainArgs:
    """Small, quiet, single-threaded `tiny` runs; keywords override."""
    base = dict(config="tiny", batch=8, bptt=32, valid_bytes=VALID, eval_every=10**9, lr=5e-3, warmup=20,
                threads=1, progress=False)
    base.update(kw)
    return TrainArgs(corpus=tuple(str(p) for p in corpus), out=str(out), **base)


def metrics(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def weights(out: Path) -> dict[str, torch.Tensor]:
    return load_file(str(out / f"{out.name}.safetensors"))


def checkpoint(out: Path) -> dict:
    return pieces.load(out, "cpu")


def checkpoint_bytes(out: Path) -> dict[str, bytes]:
    """Every file of a run's checkpoint (manifest and pieces) by name."""
    return {p.name: p.read_bytes() for p in sorted(out.glob("checkpoint*"))}


def assert_same_weights(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    differ = [k for k in a if not torch.equal(a[k], b[k])]
    assert not differ, f"tensors differ: {differ[:5]}"


def max_diff(a: dict, b: dict) -> float:
    assert a.keys() == b.keys()
    return max((a[k] - b[k]).abs().max().item() for k in a)


def unigram_bits(data: bytes) -> float:
    """Order-0 entropy in bits/byte."""
    n = len(data)
    return -sum(c / n * math.log2(c / n) for c in collections.Counter(data).values())


def cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=True)


def assert_ok(r) -> None:
    assert r.exception is None, f"exit {r.exit_code}, exception {r.exception!r}, stderr {r.stderr!r}"
    assert r.exit_code == 0, r.stderr


def assert_fails(r, phrase: str) -> str:
    """Clean failure: non-zero exit via sys.exit, exactly one `shazip: ...` line, no traceback."""
    assert r.exit_code != 0, f"expected failure, got exit 0 (stderr {r.stderr!r})"
    assert isinstance(r.exception, SystemExit), f"uncaught exception (would be a traceback): {r.exception!r}"
    assert "Traceback" not in r.stderr and "Traceback" not in r.stdout
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("shazip: "), r.stderr
    assert phrase.lower() in lines[0].lower(), lines[0]
    return lines[0]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# Runs `shazip train` under torchrun with rank 1's clock (as the trainer sees it) jumping an hour
# per reading: rank 1 finds a wall-clock checkpoint due at every step, rank 0 never does.
SKEWED_CLOCK = """
import os, types
import shazip.train.trainer as trainer
from shazip.train.command import train_command
if os.environ["RANK"] == "1":
    import time
    calls = [0]
    def skewed():
        calls[0] += 1
        return time.time() + 3600.0 * calls[0]
    trainer.time = types.SimpleNamespace(time=skewed)
train_command()
"""


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (from /proc): torchrun starts its workers in sessions of their own."""
    children = collections.defaultdict(list)
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                stat = Path(f"/proc/{d}/stat").read_text()
            except OSError:
                continue
            children[int(stat.rsplit(")", 1)[1].split()[1])].append(int(d))
    found, todo = [], [pid]
    while todo:
        kids = children[todo.pop()]
        found += kids
        todo += kids
    return found


def torchrun(out: Path, *extra, script: Path | None = None, timeout: float = 75) -> subprocess.CompletedProcess:
    """`torchrun --nproc_per_node=2 -m shazip.train ...` (or `script`). A hang (ranks taking
    different collective paths) fails the test after `timeout` s and kills torchrun's workers."""
    target = ["-m", "shazip.train"] if script is None else [str(script)]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--master_port", str(free_port()),
           *target, str(FIXTURE), "--config", "tiny", "--out", str(out), "--batch", "4",
           "--bptt", "32", "--valid-bytes", str(VALID), "--lr", "5e-3", "--warmup", "1", "--threads", "1", "-q",
           *map(str, extra)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("WORLD_SIZE", None)
    log = out.parent / f"{out.name}.torchrun.log"  # a file, not a pipe: orphans cannot block reading it
    with open(log, "w") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        for pid in [*descendants(proc.pid), proc.pid]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.wait()
        pytest.fail(f"torchrun hung for {timeout} s:\n{log.read_text()[-3000:]}")
    output = log.read_text()
    assert proc.returncode == 0, f"exit {proc.returncode}:\n{output[-3000:]}"
    return subprocess.CompletedProcess(cmd, proc.returncode, output)


# ---------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def overfit(tmp_path_factory) -> tuple[Path, dict]:
    """`tiny` trained ~300 steps on the fixture (a few seconds): (run folder, returned record)."""
    out = tmp_path_factory.mktemp("runs") / "overfit"
    record = train(targs(out, batch=8, bptt=64, steps=300, lr=5e-3, warmup=20))
    return out, record


# ---------------------------------------------------------------- learning and metrics


def test_tiny_overfits_the_fixture(overfit, text):
    out, record = overfit
    h0 = unigram_bits(text[:-VALID])  # the training part, computed here
    assert 4.0 < h0 < 7.0  # sanity of the reference itself (XML text)
    lines = metrics(out)
    final = lines[-1]
    assert final.get("final") is True
    assert record["valid_bpc"] == final["valid_bpc"]
    assert record["step"] == final["step"] == 300
    assert 0 < record["valid_bpc"] < 8
    assert record["valid_bpc"] < h0, f"valid {record['valid_bpc']} bpc does not beat order-0 {h0:.3f}"

    # progress lines: every log_every (20) steps, with the documented fields
    logs = lines[:-1]
    assert [r["step"] for r in logs] == list(range(20, 301, 20))
    for r in logs:
        assert METRIC_KEYS <= r.keys(), r
        assert 0 < r["train_bpc"] < 9 and r["bytes_per_s"] > 0
        assert r["lr"] == pytest.approx(5e-3 * min(1.0, r["step"] / 20))
    seen = [r["bytes_seen"] for r in logs] + [final["bytes_seen"]]
    assert seen == sorted(seen) and seen[-2] == seen[-1]
    assert 300 * 8 * 5 <= final["bytes_seen"] <= 300 * 8 * (64 + 20)  # jittered segment lengths
    assert logs[-1]["train_bpc"] < logs[0]["train_bpc"] - 1.0  # it learned while training

    # the export records the same figures and loads as a model
    loaded = load_model(out / "overfit.safetensors")
    assert loaded.id_hex == record["model_id"]
    assert loaded.info["valid_bpc"] == record["valid_bpc"] and loaded.info["steps"] == 300
    assert loaded.model.cfg.collapsed_vs and loaded.model.cfg.d_model == 32


def test_eval_every_adds_valid_bpc(tmp_path):
    out = tmp_path / "ev"
    train(targs(out, steps=6, eval_every=3, log_every=2))
    lines = metrics(out)
    assert [r["step"] for r in lines] == [2, 3, 4, 6, 6]
    assert ["valid_bpc" in r for r in lines] == [False, True, False, True, True]
    assert all(0 < r["valid_bpc"] < 9 for r in lines if "valid_bpc" in r)


def test_train_restores_signal_handlers_and_threads(tmp_path):
    """train() in-process must not leave its SIGINT/SIGTERM handlers (Ctrl-C would no longer stop
    the caller) nor its --threads (process-wide in torch) behind."""
    before = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM))
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        train(targs(tmp_path / "sig", steps=2, threads=1))
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(threads)
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before


def test_sigint_stops_cleanly_then_resumes(tmp_path, capfd):
    """Ctrl-C during the loop: the step finishes, a checkpoint and a model are written; the run
    resumes from there. The signal is sent only once train() has installed its handler."""
    out = tmp_path / "int"
    default = signal.getsignal(signal.SIGINT)

    def interrupt() -> None:
        for _ in range(3000):
            if signal.getsignal(signal.SIGINT) is not default:
                threading.Event().wait(0.3)  # let a few steps run
                os.kill(os.getpid(), signal.SIGINT)
                return
            threading.Event().wait(0.01)

    t = threading.Thread(target=interrupt, daemon=True)
    t.start()
    record = train(targs(out, steps=10**6, minutes=1.0))
    t.join(5)
    assert 0 < record["step"] < 10**6 and record["final"]
    assert signal.getsignal(signal.SIGINT) is default
    assert checkpoint(out)["step"] == record["step"]
    first = (out / "int.safetensors").read_bytes()
    again = train(targs(out, steps=record["step"] + 2, resume=True))
    assert again["step"] == record["step"] + 2
    # the earlier export, which archives may need, is kept under its id; the new one took the name
    kept = out / f"int-{record['model_id'][:12]}.safetensors"
    assert kept.read_bytes() == first and (out / "int.safetensors").read_bytes() != first
    err = capfd.readouterr().err  # however short the run, the console gets the held-out figure
    assert f"held-out {again['valid_bpc']:.4f} bits/byte after {again['step']} steps" in err


# ---------------------------------------------------------------- resume is exact


def test_resume_equals_uninterrupted(tmp_path, monkeypatch):
    # batch 16 x bptt 64 over ~61 KB: the streams wrap (state reset) in the second half
    kw = dict(batch=16, bptt=64, dropout=0.1, lr=5e-3, warmup=10)
    monkeypatch.setattr(pieces, "PIECE_BYTES", 20_000)  # the checkpoint in several pieces
    n = 80
    one = tmp_path / "one" / "m"
    two = tmp_path / "two" / "m"
    train(targs(one, steps=n, **kw))
    # the split run also logs, evaluates and checkpoints often: none of it may change the weights
    r = train(targs(two, steps=n // 2, log_every=3, eval_every=7, checkpoint_minutes=0, **kw))
    assert r["step"] == n // 2 and checkpoint(two)["step"] == n // 2
    assert len(json.loads((two / pieces.MANIFEST).read_text())["pieces"]) > 2
    half = weights(two)
    r = train(targs(two, steps=n, resume=True, log_every=3, eval_every=7, checkpoint_minutes=0, **kw))
    assert r["step"] == n

    assert max_diff(half, weights(two)) > 1e-3  # the second half trained
    assert_same_weights(weights(one), weights(two))
    a, b = checkpoint(one), checkpoint(two)
    for k in ("step", "bytes_seen", "data_pos", "numpy_rng"):
        assert a[k] == b[k], k
    assert torch.equal(a["torch_rng"], b["torch_rng"])
    assert a["data_pos"] < a["bytes_seen"] // 16, "the streams never wrapped: test does not cover the reset"
    finals = [x for x in metrics(two) if x.get("final")]
    assert [x["step"] for x in finals] == [n // 2, n]
    assert finals[-1]["valid_bpc"] == metrics(one)[-1]["valid_bpc"]


def test_resume_finds_the_corpus_in_another_folder(tmp_path):
    """As a run checkpointed on a GPU machine resumes here: the same files, elsewhere."""
    there, here, out = tmp_path / "there", tmp_path / "here", tmp_path / "run"
    there.mkdir()
    (there / "wiki.xml").write_bytes(FIXTURE.read_bytes())
    train(targs(out, corpus=(there / "wiki.xml",), steps=4))
    there.rename(here)
    assert train(targs(out, corpus=(here / "wiki.xml",), steps=8, resume=True))["step"] == 8
    (here / "wiki.xml").write_bytes(FIXTURE.read_bytes()[:-1])
    with pytest.raises(shazip.UsageError, match="different config, corpus"):
        train(targs(out, corpus=(here / "wiki.xml",), steps=12, resume=True, valid_bytes=VALID))


def test_resume_reads_the_checkpoint_not_the_seed(tmp_path):
    """Control for the test above: a fresh run of the second half alone differs."""
    kw = dict(batch=8, bptt=32, dropout=0.1, warmup=5)
    a, b = tmp_path / "a" / "m", tmp_path / "b" / "m"
    train(targs(a, steps=8, **kw))
    train(targs(a, steps=16, resume=True, **kw))
    train(targs(b, steps=16, seed=99, **kw))
    assert max_diff(weights(a), weights(b)) > 1e-3


# ---------------------------------------------------------------- the checkpoint's pieces

def test_checkpoint_pieces_round_trip_and_replace_the_last_generation(tmp_path, monkeypatch):
    monkeypatch.setattr(pieces, "PIECE_BYTES", 1000)
    first = {"w": torch.arange(1000, dtype=torch.float32), "step": 1}
    pieces.save(first, tmp_path)
    names = {p.name for p in tmp_path.iterdir()}
    assert len(names) > 4 and pieces.MANIFEST in names
    assert all(p.stat().st_size <= 1000 for p in tmp_path.glob("checkpoint-*"))
    got = pieces.load(tmp_path, "cpu")
    assert torch.equal(got["w"], first["w"]) and got["step"] == 1
    pieces.save({"w": torch.ones(10), "step": 2}, tmp_path)
    assert pieces.load(tmp_path, "cpu")["step"] == 2
    assert not names - {pieces.MANIFEST} & {p.name for p in tmp_path.iterdir()}, "the first save's pieces stayed"


def test_checkpoint_save_cut_short_keeps_the_previous_one(tmp_path, monkeypatch):
    monkeypatch.setattr(pieces, "PIECE_BYTES", 1000)
    pieces.save({"w": torch.zeros(500), "step": 1}, tmp_path)

    def killed(*_):
        raise KeyboardInterrupt  # the run stopped between the new pieces and the new manifest
    monkeypatch.setattr(pieces.os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        pieces.save({"w": torch.ones(700), "step": 2}, tmp_path)
    monkeypatch.undo()
    assert pieces.load(tmp_path, "cpu")["step"] == 1
    pieces.save({"w": torch.ones(700), "step": 3}, tmp_path)  # the orphaned pieces are written over
    assert pieces.load(tmp_path, "cpu")["step"] == 3


@pytest.mark.parametrize("damage", ["flip", "cut", "missing", "escaping name", "not json"])
def test_checkpoint_damage_is_named(tmp_path, monkeypatch, damage):
    monkeypatch.setattr(pieces, "PIECE_BYTES", 1000)
    pieces.save({"w": torch.arange(1000, dtype=torch.float32)}, tmp_path)
    manifest = json.loads((tmp_path / pieces.MANIFEST).read_text())
    victim = tmp_path / manifest["pieces"][2]["name"]
    if damage == "flip":
        data = bytearray(victim.read_bytes())
        data[10] ^= 1
        victim.write_bytes(bytes(data))
    elif damage == "cut":
        victim.write_bytes(victim.read_bytes()[:-1])
    elif damage == "missing":
        victim.unlink()
    elif damage == "escaping name":
        manifest["pieces"][2]["name"] = "../elsewhere.pt"
        (tmp_path / pieces.MANIFEST).write_text(json.dumps(manifest))
    else:
        (tmp_path / pieces.MANIFEST).write_text("{")
    with pytest.raises(shazip.UsageError) as e:
        pieces.load(tmp_path, "cpu")
    named = pieces.MANIFEST if damage in ("escaping name", "not json") else victim.name
    assert named in str(e.value)


def test_error_device_cuda_without_a_gpu(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("a GPU is here")
    r = cli("train", FIXTURE, "--config", "tiny", "--out", tmp_path / "o", "--valid-bytes", VALID, "--steps", 2,
            "--device", "cuda")
    assert_fails(r, "--device cuda")


# ---------------------------------------------------------------- .zst corpora


def test_zst_corpus_trains_like_the_plain_file(tmp_path, monkeypatch, text):
    cache = tmp_path / "cache"
    monkeypatch.setenv("SHAZIP_CACHE", str(cache))
    zst = tmp_path / "wiki.xml.zst"
    # several frames, as `cat a.zst b.zst` or a parallel compressor make them
    cctx = zstandard.ZstdCompressor(level=3)
    zst.write_bytes(cctx.compress(text[:30000]) + cctx.compress(text[30000:]))
    r = train(targs(tmp_path / "z" / "m", corpus=(zst,), steps=5))
    assert r["step"] == 5
    cached = list((cache / "corpus").iterdir())
    assert len(cached) == 1 and cached[0].read_bytes() == text  # decompressed once, no temp files left
    train(targs(tmp_path / "p" / "m", steps=5))
    assert_same_weights(weights(tmp_path / "z" / "m"), weights(tmp_path / "p" / "m"))
    # a second run reads the cache (same key), still no extra files
    train(targs(tmp_path / "z2" / "m", corpus=(zst,), steps=1))
    assert list((cache / "corpus").iterdir()) == cached


def test_several_corpus_files_concatenate(tmp_path, monkeypatch, text):
    monkeypatch.setenv("SHAZIP_CACHE", str(tmp_path / "cache"))
    first = tmp_path / "a.xml.zst"
    first.write_bytes(zstandard.ZstdCompressor().compress(text[:20000]))
    second = tmp_path / "b.xml"
    second.write_bytes(text[20000:])
    train(targs(tmp_path / "two" / "m", corpus=(first, second), steps=4))
    train(targs(tmp_path / "one" / "m", steps=4))
    assert_same_weights(weights(tmp_path / "two" / "m"), weights(tmp_path / "one" / "m"))


# ---------------------------------------------------------------- DDP, two real processes


def test_ddp_two_processes_train_and_resume(tmp_path):
    """2 ranks x batch 4 average their gradients, so they train what one process does with batch 8
    over the same 8 streams (to float rounding); a DDP resume also matches. The resume runs with
    rank 1's clock skewed: ranks must still agree on wall-clock checkpoints (they deadlocked)."""
    out = tmp_path / "ddp"
    torchrun(out, "--steps", "10")
    model_path = out / "ddp.safetensors"
    loaded = load_model(model_path)
    assert loaded.info["steps"] == 10
    lines = metrics(out)
    assert lines[-1]["final"] and lines[-1]["step"] == 10 and 0 < lines[-1]["valid_bpc"] < 9
    ck = checkpoint(out)
    assert ck["world"] == 2 and len(ck["carried"]) == 2 and ck["step"] == 10
    assert not any(torch.equal(x, y) for x, y in zip(ck["carried"][0][0], ck["carried"][1][0])), \
        "both ranks carried the same state: they read the same streams"

    single = tmp_path / "single"
    train(targs(single, batch=8, bptt=32, steps=10, lr=5e-3, warmup=1))
    tol = max_diff(weights(out), weights(single))
    assert tol < 1e-5, f"DDP and one process differ by {tol}"

    skewed = tmp_path / "skewed_clock.py"
    skewed.write_text(SKEWED_CLOCK)
    torchrun(out, "--steps", "14", "--resume", script=skewed)
    assert load_model(model_path).info["steps"] == 14
    assert [x["step"] for x in metrics(out) if x.get("final")] == [10, 14]
    single14 = tmp_path / "single14"
    train(targs(single14, batch=8, bptt=32, steps=14, lr=5e-3, warmup=1))
    assert max_diff(weights(single14), weights(single)) > 1e-3  # so 1e-5 is a real agreement
    tol = max_diff(weights(out), weights(single14))
    assert tol < 1e-5, f"resumed DDP and one process differ by {tol}"


# ---------------------------------------------------------------- the export drives the CLI


def test_exported_model_round_trips_through_the_cli(overfit, text, tmp_path):
    out, record = overfit
    model = out / "overfit.safetensors"
    data = text[20000:26000]  # article text (the repetitive siteinfo head is zstd's home ground)
    src = tmp_path / "part.xml"
    src.write_bytes(data)
    arc = tmp_path / "part.xml.shz"
    assert_ok(cli("compress", src, "-o", arc, "--model", model, "--lanes", 4, "--threads", 1, "-q"))
    reader = ArchiveReader(io.BytesIO(arc.read_bytes()))
    methods = [bh.method for bh, _ in reader.blocks()]
    assert methods == [Method.MIXED], methods  # the trained model beats zstd on text it saw
    assert record["model_id"].startswith(reader.header.model_id.hex())  # format 3: the id's first 8 bytes
    back = tmp_path / "back.xml"
    assert_ok(cli("decompress", arc, "-o", back, "--model", model, "-q"))
    assert back.read_bytes() == data
    assert arc.stat().st_size < len(data) * 0.6


# ---------------------------------------------------------------- user errors


def test_qat_phase_ends_the_run_and_resumes_exactly(tmp_path, text):
    """--qat-steps N: the last N steps train through the engine's int8 rounding; a run split
    inside the QAT phase lands on the same weights; the export records it, and the int8
    engine's cross-entropy matches the fake-quantized model it was trained as."""
    kw = dict(batch=8, bptt=32, lr=5e-3, warmup=10, log_every=10, qat_steps=20)
    one, two, plain = tmp_path / "one" / "m", tmp_path / "two" / "m", tmp_path / "plain" / "m"
    train(targs(one, steps=50, **kw))
    train(targs(two, steps=40, **{**kw, "qat_steps": 10}))  # stops 10 steps into the QAT phase
    train(targs(two, steps=50, resume=True, **kw))
    train(targs(plain, steps=50, **{**kw, "qat_steps": 0}))
    assert_same_weights(weights(one), weights(two))
    assert max_diff(weights(one), weights(plain)) > 1e-4  # QAT changed the training
    logged = {r["step"]: r.get("qat", False) for r in metrics(one) if not r.get("final")}
    assert logged == {10: False, 20: False, 30: False, 40: True, 50: True}
    loaded = load_model(one / "m.safetensors")
    assert loaded.info["qat_steps"] == 20

    grid = lanes_of(text[-VALID:], 4, 500)
    freq = run(quant.IntModel(loaded.model), grid).double()
    bits_int = float(-torch.log2(freq.gather(2, grid.T[:, :, None])[..., 0] / freq.sum(-1)).mean())
    loaded.model.set_qat(True)
    with torch.no_grad():
        logits, _ = loaded.model(torch.cat([torch.zeros(4, 1, dtype=torch.int64), grid[:, :-1]], 1),
                                 loaded.model.init_state(4))
    bits_fq = float(torch.nn.functional.cross_entropy(logits.reshape(-1, 256), grid.reshape(-1))) / math.log(2)
    assert abs(bits_int - bits_fq) < 0.02


def test_cooldown_decays_the_rate_over_the_last_steps(tmp_path):
    """--cooldown K: constant rate, then linear decay over the last K of --steps (logged, and
    recorded in the export)."""
    out = tmp_path / "c" / "m"
    train(targs(out, steps=30, batch=4, bptt=16, lr=1e-3, warmup=5, log_every=5, cooldown=10))
    lrs = {r["step"]: r["lr"] for r in metrics(out) if not r.get("final")}
    assert lrs[10] == lrs[20] == pytest.approx(1e-3)
    assert [lrs[25], lrs[30]] == pytest.approx([1e-3 * 6 / 10, 1e-3 * 1 / 10])
    assert load_model(out / "m.safetensors").info["cooldown_steps"] == 10
    a = TrainArgs(corpus=(), out="", lr=1.0, warmup=1, steps=100, cooldown=40)
    assert [lr_at(a, s) for s in (0, 59, 60, 80, 99)] == pytest.approx([1.0, 1.0, 1.0, 0.5, 1 / 40])


def test_error_cooldown_without_steps(tmp_path):
    r = cli("train", FIXTURE, "--config", "tiny", "--out", tmp_path / "o", "--valid-bytes", VALID,
            "--minutes", 1, "--cooldown", 5, "--threads", 1)
    assert_fails(r, "--cooldown needs --steps")


def test_error_qat_steps_without_steps(tmp_path):
    r = cli("train", FIXTURE, "--config", "tiny", "--out", tmp_path / "o", "--valid-bytes", VALID,
            "--minutes", 1, "--qat-steps", 5, "--threads", 1)
    assert_fails(r, "--qat-steps needs --steps")


def small_run(out: Path, *extra):
    return cli("train", FIXTURE, "--config", "tiny", "--out", out, "--steps", 2, "--batch", 2, "--bptt", 16,
               "--valid-bytes", VALID, "--threads", 1, "-q", *extra)


def test_error_missing_corpus(tmp_path):
    r = cli("train", tmp_path / "nope.txt", "--config", "tiny", "--out", tmp_path / "o", "--steps", 2, "--threads", 1)
    assert_fails(r, "not found")


def test_error_empty_corpus(tmp_path):
    (tmp_path / "empty.txt").write_bytes(b"")
    r = cli("train", tmp_path / "empty.txt", "--config", "tiny", "--out", tmp_path / "o", "--steps", 2, "--threads", 1)
    assert_fails(r, "empty")


def test_error_corpus_too_short(tmp_path, text):
    short = tmp_path / "short.txt"
    short.write_bytes(text[:500])
    # the default --valid-bytes (5 %, at least one segment) leaves too little for 32 streams
    r = cli("train", short, "--config", "tiny", "--out", tmp_path / "o", "--steps", 2, "--threads", 1)
    msg = assert_fails(r, "corpus too short")
    assert "--valid-bytes" in msg and "--batch" in msg  # the message names what to change
    r = cli("train", short, "--config", "tiny", "--out", tmp_path / "o2", "--valid-bytes", 150, "--batch", 4,
            "--steps", 2, "--threads", 1)  # 350 bytes cannot feed 4 streams of one 128+ byte segment
    assert_fails(r, "corpus too short")
    r = cli("train", short, "--config", "tiny", "--out", tmp_path / "o3", "--valid-bytes", 100,
            "--steps", 2, "--threads", 1)  # a validation slice shorter than one segment measures nothing
    assert_fails(r, "--valid-bytes must be at least one segment")


def test_small_corpus_trains_with_the_default_held_out_share(tmp_path, text):
    """A 64 KB corpus: 5 % is held out (not 2 MB), and training runs."""
    out = tmp_path / "o"
    r = cli("train", FIXTURE, "--config", "tiny", "--out", out, "--steps", 2, "--batch", 4, "--bptt", 32,
            "--threads", 1, "--eval-every", 1)
    assert_ok(r)
    assert f"{len(text) // 20:,} bytes held out" in r.stderr and "until step 2" in r.stderr


def test_error_unknown_config(tmp_path):
    r = cli("train", FIXTURE, "--config", "huge", "--out", tmp_path / "o", "--valid-bytes", VALID, "--steps", 2,
            "--threads", 1)
    assert_fails(r, "unknown config 'huge'")


def test_error_checkpoint_exists_without_resume(tmp_path):
    out = tmp_path / "run"
    assert_ok(small_run(out))
    before = checkpoint_bytes(out)
    assert_fails(small_run(out), "already holds a checkpoint")
    assert checkpoint_bytes(out) == before  # left alone


def test_error_incompatible_checkpoint_on_resume(tmp_path):
    out = tmp_path / "run"
    assert_ok(small_run(out))
    before = checkpoint_bytes(out)
    r = cli("train", FIXTURE, "--config", "small", "--out", out, "--steps", 4, "--batch", 2, "--bptt", 16,
            "--valid-bytes", VALID, "--threads", 1, "-q", "--resume")
    assert_fails(r, "different config")
    assert_fails(small_run(out, "--resume", "--dropout", "0.2"), "different config")
    r = cli("train", FIXTURE, "--config", "tiny", "--out", out, "--steps", 4, "--batch", 3, "--bptt", 16,
            "--valid-bytes", VALID, "--threads", 1, "-q", "--resume")
    assert_fails(r, "batch")
    assert checkpoint_bytes(out) == before


def test_error_resume_without_checkpoint(tmp_path):
    assert_fails(small_run(tmp_path / "fresh", "--resume"), "no checkpoint")


def test_error_broken_zst(tmp_path, monkeypatch, text):
    monkeypatch.setenv("SHAZIP_CACHE", str(tmp_path / "cache"))
    bad = tmp_path / "bad.txt.zst"
    bad.write_bytes(text[:1000])
    r = cli("train", bad, "--config", "tiny", "--out", tmp_path / "o", "--steps", 2, "--threads", 1)
    assert_fails(r, "not a valid zstd file")
    # cut short (an interrupted download): must not train silently on a prefix of the corpus
    cut = tmp_path / "cut.txt.zst"
    cctx = zstandard.ZstdCompressor()
    full = b"".join(cctx.compress(text[i : i + 8000]) for i in range(0, len(text), 8000))
    cut.write_bytes(full[:-20])
    r = cli("train", cut, "--config", "tiny", "--out", tmp_path / "o2", "--valid-bytes", VALID, "--steps", 2,
            "--threads", 1)
    assert_fails(r, "truncated")
    assert not [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]  # nothing cached


def test_fine_tune_an_existing_model(tmp_path, text, trained):
    """`shazip train --init MODEL` starts from that model (its shape and weights) and exports a
    model `--model` accepts; on the new kind of text it then does better than the start."""
    corpus = tmp_path / "code.txt"  # a kind the fixture model never saw
    corpus.write_bytes(b"".join(b"def f%d(x):\n    return x * %d + %d\n\n" % (i, i % 7, i % 11) for i in range(1500)))
    out = tmp_path / "ft"
    r = cli("train", corpus, "--init", DATA / "tiny-trained.safetensors", "--out", out, "--steps", 40,
            "--batch", 4, "--bptt", 32, "--lr", 3e-3, "--warmup", 5, "--threads", 1, "--eval-every", 40)
    assert_ok(r)
    tuned = load_model(out / "ft.safetensors")
    assert tuned.model.cfg == trained.model.cfg
    # what the start had seen is carried on (issue 25, item 10: `shazip models` tells the whole training)
    assert tuned.info["bytes_seen_before"] == trained.info["bytes_seen"] + trained.info.get("bytes_seen_before", 0)
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert records[0]["step"] == 0 and records[-1]["valid_bpc"] < records[0]["valid_bpc"]  # the "before"
    assert f"held-out {records[0]['valid_bpc']:.4f} bits/byte before training" in r.stderr
    sample = corpus.read_bytes()[-3000:]
    assert shazip.decompress(shazip.compress(sample, model=tuned), model=tuned) == sample
    before = len(shazip.compress(sample, model=trained, adapt="none", methods=frozenset({Method.MODEL})))
    after = len(shazip.compress(sample, model=tuned, adapt="none", methods=frozenset({Method.MODEL})))
    assert after < before, (before, after, records[-1])


# ---------------------------------------------------------------- a lend's run: resident data, snapshots, batch scaling


def test_resident_streams_give_the_same_batches(text):
    """On a GPU the streams are copied to the device once and sliced there; the batches (and the
    wrap) are the ones read from the corpus each step."""
    corpus = Corpus([str(FIXTURE)])
    read = ByteStreams(corpus, 0, len(corpus) - VALID, 6, first_stream=6, total_streams=12)
    resident = ByteStreams(corpus, 0, len(corpus) - VALID, 6, first_stream=6, total_streams=12, resident=True)
    for seq_len in [31, 5, 64, 200, 200, 200, 33] * 8:
        (a, wa), (b, wb) = read.next_batch(seq_len), resident.next_batch(seq_len)
        assert wa == wb and a.dtype == b.dtype == torch.int64 and torch.equal(a, b)
    assert read.pos == resident.pos


def test_snapshot_without_checkpoint_leaves_the_weights_of_every_minute(tmp_path):
    """--no-checkpoint --snapshot DIR: no checkpoint is written, yet DIR holds the float export and
    the metrics after each periodic save (what a lend cut short returns) and after the end."""
    out, snap = tmp_path / "run", tmp_path / "snap"
    train(targs(out, steps=6, log_every=2, checkpoint=False, snapshot=str(snap), checkpoint_minutes=0))
    assert not pieces.exists(out) and not list(out.glob("checkpoint*"))
    assert (snap / "run.safetensors").read_bytes() == (out / "run.safetensors").read_bytes()
    assert (snap / "metrics.jsonl").read_text() == (out / "metrics.jsonl").read_text()
    info = load_model(snap / "run.safetensors").info
    assert info["steps"] == 6 and info["batch"] == 8 and info["device"] == "cpu"


def test_snapshot_is_written_before_the_run_ends(tmp_path, monkeypatch):
    """A run killed from outside after its first periodic save: the snapshot is already there."""
    from shazip.train import trainer
    seen = []
    real = trainer.export

    def spy(model, path, *a, **kw):
        digest = real(model, path, *a, **kw)
        seen.append((Path(path).parent.name, load_model(path).info["steps"]))
        return digest

    monkeypatch.setattr(trainer, "export", spy)
    train(targs(tmp_path / "run", steps=3, checkpoint=False, snapshot=str(tmp_path / "snap"), checkpoint_minutes=0))
    assert ("snap", 1) in seen and ("snap", 2) in seen  # every step's save, as the minute's would


def test_error_resume_without_checkpointing(tmp_path):
    r = cli("train", FIXTURE, "--config", "tiny", "--out", tmp_path / "o", "--valid-bytes", VALID,
            "--steps", 2, "--no-checkpoint", "--resume", "--threads", 1)
    assert_fails(r, "--resume needs a checkpoint")


def test_ref_batch_scales_the_rate_and_warm_up(tmp_path):
    assert scaled_for_batch(2e-3, 300, 256, 256) == (2e-3, 300)
    lr, warmup = scaled_for_batch(2e-3, 300, 4096, 256)
    assert lr == pytest.approx(8e-3) and warmup == 75
    out = tmp_path / "r"
    train(targs(out, steps=8, log_every=1, batch=8, ref_batch=32, lr=4e-3, warmup=4))
    lrs = [r["lr"] for r in metrics(out) if "lr" in r]
    assert lrs[:3] == pytest.approx([2e-3 / 8 * k for k in (1, 2, 3)])  # half the rate, warm-up 8 steps
    assert lrs[-1] == pytest.approx(2e-3)


def test_eval_bytes_judges_a_fixed_slice(tmp_path):
    """--eval-bytes N: every held-out figure, the final one too, is over the first N held-out bytes."""
    out = tmp_path / "e"
    record = train(targs(out, steps=4, eval_every=2, eval_bytes=1000))
    model = load_model(out / "e.safetensors").model
    corpus = Corpus([str(FIXTURE)])
    lo = len(corpus) - VALID
    assert record["valid_bpc"] == pytest.approx(evaluate(model, corpus, lo, lo + 1000, 32), abs=1e-4)
    assert record["valid_bpc"] != pytest.approx(evaluate(model, corpus, lo, len(corpus), 32), abs=1e-4)
