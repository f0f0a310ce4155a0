"""Dask distributed: a 2-worker LocalCluster makes the same archive as a local run with the same
frame size, and decodes it (and a local one) to the input."""

from __future__ import annotations

import io

import pytest

import shazip
from shazip.format.listing import describe

distributed = pytest.importorskip("distributed")  # the dask extra; dev has it

OPTIONS = dict(block_size=4000, frame_size=8000, lanes=2)


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as c, \
            distributed.Client(c) as cl:
        yield cl


def test_cluster_equals_local(tmp_path, client, trained, text):
    import shazip.distributed as sd
    data = text[:30000]
    src = tmp_path / "in.txt"
    src.write_bytes(data)
    local = shazip.compress(data, model=trained, threads=2, **OPTIONS)
    assert sd.compress(str(src), str(tmp_path / "in.shz"), client, model=str(trained.path), **OPTIONS) == len(data)
    assert (tmp_path / "in.shz").read_bytes() == local
    assert sd.decompress(str(tmp_path / "in.shz"), str(tmp_path / "out.txt"), client, model=str(trained.path)) == len(data)
    assert (tmp_path / "out.txt").read_bytes() == data
    # an empty input is one empty archive, as locally
    (tmp_path / "e").write_bytes(b"")
    sd.compress(str(tmp_path / "e"), str(tmp_path / "e.shz"), client, model=str(trained.path), **OPTIONS)
    assert (tmp_path / "e.shz").read_bytes() == shazip.compress(b"", model=trained, **OPTIONS)


def test_a_damaged_frame_fails_and_writes_nothing(tmp_path, client, trained, text):
    import shazip.distributed as sd
    arc = bytearray(shazip.compress(text[:20000], model=trained, threads=1, **OPTIONS))
    last = describe(io.BytesIO(arc))[-1]
    arc[last["offset"] + last["archive_bytes"] - 30] ^= 0x10  # the last frame's last block
    (tmp_path / "bad.shz").write_bytes(bytes(arc))
    with pytest.raises(shazip.ShazipError):
        sd.decompress(str(tmp_path / "bad.shz"), str(tmp_path / "out.txt"), client, model=str(trained.path))
    assert not (tmp_path / "out.txt").exists() and [p.name for p in tmp_path.iterdir()] == ["bad.shz"]


def test_command_line_scheduler(tmp_path, client, trained, text):
    from test_cli import assert_ok, run
    data = text[:20000]
    (tmp_path / "d.txt").write_bytes(data)
    opts = ["--model", trained.path, "--block-size", "4000", "--frame-size", "8000", "--lanes", "2"]
    address = client.scheduler.address
    assert_ok(run("-q", "--scheduler", address, *opts, tmp_path / "d.txt"))
    assert (tmp_path / "d.txt.shz").read_bytes() == shazip.compress(data, model=trained, **OPTIONS)
    (tmp_path / "d.txt").unlink()
    assert_ok(run("-d", "-q", "--scheduler", address, "--model", trained.path, tmp_path / "d.txt.shz"))
    assert (tmp_path / "d.txt").read_bytes() == data
    r = run("-q", "--scheduler", address, *opts, tmp_path / "d.txt")  # the output exists
    assert r.exit_code == 1 and "already exists" in r.stderr


def test_an_existing_output_is_kept_unless_replace(tmp_path, client, trained, text):
    import shazip.distributed as sd
    (tmp_path / "d.txt").write_bytes(text[:3000])
    (tmp_path / "d.shz").write_bytes(b"keep me")
    with pytest.raises(FileExistsError):
        sd.compress(str(tmp_path / "d.txt"), str(tmp_path / "d.shz"), client, model=str(trained.path), replace=False,
                    **OPTIONS)
    assert (tmp_path / "d.shz").read_bytes() == b"keep me" and sorted(p.name for p in tmp_path.iterdir()) == [
        "d.shz", "d.txt"]


def test_frames_cut_or_reordered_are_refused_on_the_cluster(tmp_path, client, trained, text):
    """The cluster's decoder takes the frames through the same chain as a local one: a cut at a
    frame boundary and a reordering are refused, and nothing is written."""
    import shazip.distributed as sd
    from archive_damage import frames_of
    frames, table = frames_of(shazip.compress(text[:30000], model=trained, threads=1, **OPTIONS))
    cases = {"cut.shz": (b"".join(frames[:2]), "frame 2 of the output is missing"),
             "swapped.shz": (frames[0] + frames[2] + frames[1] + frames[3] + table, "seek table|frame 1 of the output")}
    for name, (blob, phrase) in cases.items():
        (tmp_path / name).write_bytes(blob)
        with pytest.raises(shazip.ShazipError, match=phrase):
            sd.decompress(str(tmp_path / name), str(tmp_path / "out.txt"), client, model=str(trained.path))
        assert not (tmp_path / "out.txt").exists()


def test_a_scheduler_lost_mid_run_is_one_line(tmp_path, trained, text):
    """The cluster goes away while frames are under way: one line naming the file and the
    cluster, exit 1, no output or temporary file left."""
    import signal
    import socket
    import subprocess
    import sys
    import time
    from test_cli import shazip_cmd
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    address = f"tcp://127.0.0.1:{port}"
    quiet = dict(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    scheduler = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                                  "--port", str(port), "--no-dashboard"], **quiet)
    worker = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", address, "--nthreads", "1",
                               "--no-dashboard"], **quiet)
    try:
        (tmp_path / "d.txt").write_bytes(text * 3)
        p = subprocess.Popen(shazip_cmd("-q", "--scheduler", address, "--model", trained.path, "--block-size", "4000",
                                        "--frame-size", "4000", tmp_path / "d.txt"), stderr=subprocess.PIPE, text=True,
                             stdin=subprocess.DEVNULL)
        deadline = time.time() + 120
        while not any(".tmp" in f.name for f in tmp_path.iterdir()):  # frames under way
            assert p.poll() is None and time.time() < deadline, "ended before the cluster could be lost"
            time.sleep(0.05)
        scheduler.send_signal(signal.SIGKILL)
        worker.send_signal(signal.SIGKILL)
        _, err = p.communicate(timeout=120)
    finally:
        for proc in (scheduler, worker):
            proc.kill()
            proc.wait()
    assert p.returncode == 1 and "Traceback" not in err and err.count("\n") == 1, err
    assert "d.txt: the Dask cluster at" in err and sorted(f.name for f in tmp_path.iterdir()) == ["d.txt"], err


def test_a_cluster_without_workers_fails_in_bounded_time(tmp_path, monkeypatch, trained, text):
    """The scheduler keeps tasks for workers that may come: a run on a cluster whose workers
    are all gone waited forever; now it fails once none has been there for WORKERLESS_S."""
    import time
    from shazip import distributed as shazip_distributed
    monkeypatch.setattr(shazip_distributed, "WORKERLESS_S", 2.0)
    (tmp_path / "d.txt").write_bytes(text[:20000])
    with distributed.LocalCluster(n_workers=0, processes=False, dashboard_address=None) as c, \
            distributed.Client(c) as cl:
        start = time.monotonic()
        with pytest.raises(shazip.ShazipError, match="has had no worker for 2 s"):
            shazip_distributed.compress(str(tmp_path / "d.txt"), str(tmp_path / "d.txt.shz"), cl, model=trained.path,
                                        **OPTIONS)
        assert time.monotonic() - start < 30
    assert sorted(f.name for f in tmp_path.iterdir()) == ["d.txt"]
