"""Frames: a long input as independent archives, made and decoded several at once; the bytes do
not depend on how many at once."""

from __future__ import annotations

import io
import threading
import time
from dataclasses import replace

import pytest

import shazip
from shazip.api import decode_frame
from shazip.codec.frames import Shares, ordered_map
from shazip.errors import CorruptArchive, ShazipError
from shazip.format.container import Place
from shazip.format.listing import describe

from test_cli import assert_fails, assert_ok, listing, run, wait_until_writing

FRAMED = dict(block_size=4000, frame_size=10000, lanes=2)  # frames of 3 blocks (12,000 bytes)


@pytest.fixture(scope="module")
def data(text) -> bytes:
    return text[:40000]


@pytest.fixture(scope="module")
def framed(trained, data) -> bytes:
    return shazip.compress(data, model=trained, threads=1, **FRAMED)


def test_frames_are_whole_archives_whatever_the_threads(trained, data, framed):
    archives = describe(io.BytesIO(framed))
    assert [a["total_len"] for a in archives] == [12000, 12000, 12000, 4000]
    for threads in (2, 3):
        assert shazip.compress(data, model=trained, threads=threads, **FRAMED) == framed
    out = io.BytesIO()
    with shazip.open(out, "wb", model=trained, **FRAMED) as f:  # the incremental writer frames too
        for i in range(0, len(data), 777):
            f.write(data[i:i + 777])
    assert out.getvalue() == framed
    for a in archives:  # each frame decodes on its own (the decoders of frames at once), in its place only
        at, place = a["offset"], Place(a["frame_index"], a["output_id"], a["link"], a["more"])
        alone = b"".join(decode_frame(framed[at:at + a["archive_bytes"]], place, trained))
        assert alone == data[sum(b["total_len"] for b in archives if b["offset"] < at):][:a["total_len"]]
        with pytest.raises(CorruptArchive, match="changed"):
            decode_frame(framed[at:at + a["archive_bytes"]], replace(place, index=place.index + 1), trained)


def test_a_compressors_frames_are_made_at_once(trained, data, framed, monkeypatch):
    """`Compressor.compress` makes the frames of its input several at once, as `shazip.compress`
    does (it made them one after another, leaving `threads` unused), to the same bytes."""
    at_once = []
    real = shazip.Compressor._frames_at_once

    def counted(self, *args):
        at_once.append(self.threads)
        return real(self, *args)
    monkeypatch.setattr(shazip.Compressor, "_frames_at_once", counted)
    assert shazip.Compressor(trained, threads=3, **FRAMED).compress(data) == framed
    assert at_once == [3]


def test_frames_are_smaller_on_a_gpu_unless_asked(trained, monkeypatch):
    """On a GPU the default frame is GPU_FRAME_SIZE (the stages, a core each, bound the speed
    there); a frame size asked for is kept on every device."""
    from shazip.hardware import Hardware
    from shazip.options import DEFAULT_FRAME_SIZE, GPU_FRAME_SIZE
    size = lambda c: c.frame_blocks * c.header.block_size  # noqa: E731
    assert size(shazip.Compressor(trained)) == DEFAULT_FRAME_SIZE
    monkeypatch.setattr(Hardware, "of", classmethod(lambda cls, threads, device: cls(2, "cuda")))
    assert size(shazip.Compressor(trained, device="cuda")) == GPU_FRAME_SIZE < DEFAULT_FRAME_SIZE
    assert size(shazip.Compressor(trained, device="cuda", frame_size=8 << 20)) == 8 << 20


def test_one_frame_is_the_unframed_archive(trained, data):
    whole = shazip.compress(data[:12000], model=trained, **dict(FRAMED, frame_size=0))
    assert shazip.compress(data[:12000], model=trained, threads=2, **FRAMED) == whole
    assert len(describe(io.BytesIO(shazip.compress(data, model=trained, **dict(FRAMED, frame_size=0))))) == 1


def test_frames_decode_at_once_to_the_same_bytes(trained, data, framed):
    for threads in (1, 2, 4):
        assert shazip.decompress(framed, model=trained, threads=threads) == data
    # a stream that cannot seek decodes frame after frame
    assert b"".join(shazip.iter_decompress(io.BytesIO(framed), model=trained, threads=2)) == data


def test_frames_at_once_keep_one_engine_a_worker(trained, data, framed, monkeypatch):
    """Decoding frames at once, each worker builds its engine once and keeps it for every frame
    it decodes (four frames, two workers: at most two engines)."""
    import shazip.codec.engines as engines
    built = []
    real = engines.IntEngine.__init__

    def counted(self, *args, **kw):
        built.append(threading.get_ident())
        real(self, *args, **kw)

    monkeypatch.setattr(engines.IntEngine, "__init__", counted)
    assert len(describe(io.BytesIO(framed))) == 4
    assert shazip.decompress(framed, model=trained, threads=2) == data
    assert 1 <= len(built) <= 2

def test_threads_are_shared_out_among_the_frames_in_progress():
    s = Shares(8, cores=8, frames=2)
    assert s.workers == 2
    with s.frame(0):
        assert s.of(0) == 4  # the other frame is about to start
        with s.frame(1):
            assert (s.of(0), s.of(1)) == (4, 4)
        assert s.of(0) == 8  # the last frame left: every thread
    assert s.of(0) == 1  # outside a frame
    s = Shares(3, cores=8, frames=2)
    with s.frame(1), s.frame(0):
        assert (s.of(1), s.of(0)) == (2, 1)
    # more frames than threads: one each, until the last ones outlast the others
    s = Shares(2, cores=2)
    frames = s.counted(["a", "b", "c"])
    assert (s.workers, next(frames), next(frames)) == (2, "a", "b")
    with s.frame(1):
        with s.frame(0):
            assert (s.of(0), s.of(1)) == (1, 1)
        assert s.of(1) == 1  # the count not known yet: another frame may start
        assert list(frames) == ["c"]  # all taken: 3 frames, 1 finished
        with s.frame(0):
            assert (s.of(1), s.of(0)) == (1, 1)
    with s.frame(0):
        assert s.of(0) == 2
    # only the cores there are: no more frames at once, no more threads a frame
    assert Shares(8, cores=2, frames=4).usable == Shares(8, cores=2, frames=4).workers == 2
    assert Shares(4, cores=1).workers == 1


def test_frames_fewer_than_threads_each_get_their_share(trained, data, framed, monkeypatch):
    """Four frames at -T 8 on 8 cores: four at once, each frame's first block on two threads (a
    pipelined frame), compressing and decompressing; the bytes are those of -T 1."""
    import shazip.codec.engines as engines
    first = {}
    real = engines.IntEngine.pool

    def pool(self):
        first.setdefault(id(self), self._threads())
        return real.fget(self)

    monkeypatch.setattr(engines.IntEngine, "pool", property(pool))
    from shazip.codec import decode, encode
    for module in (encode, decode):
        monkeypatch.setattr(module, "available_cores", lambda: 8)  # whatever this machine has
    assert shazip.compress(data, model=trained, threads=8, **FRAMED) == framed
    assert sorted(first.values()) == [2, 2, 2, 2]
    first.clear()
    assert shazip.decompress(framed, model=trained, threads=8) == data
    assert sorted(first.values()) == [2, 2, 2, 2]
    first.clear()
    assert shazip.decompress(framed, model=trained, threads=3) == data  # more frames than threads: one each at first
    assert list(first.values()) == [1, 1, 1]


def test_a_damaged_frame_fails_cleanly_at_once(trained, framed):
    bad = bytearray(framed)
    third = describe(io.BytesIO(framed))[2]
    bad[third["offset"] + third["archive_bytes"] - 30] ^= 0x10  # inside the third frame's last block
    for threads in (1, 2):
        with pytest.raises(ShazipError):
            shazip.decompress(bytes(bad), model=trained, threads=threads)


def test_command_line_frames(tmp_path, trained, data, framed):
    src = tmp_path / "d.txt"
    src.write_bytes(data)
    opts = ["--model", trained.path, "--block-size", "4000", "--frame-size", "10000", "--lanes", "2"]
    assert_ok(run("-q", "-T", "2", *opts, src))
    assert (tmp_path / "d.txt.shz").read_bytes() == framed
    src.unlink()
    assert_ok(run("-d", "-q", "-T", "2", "--model", trained.path, tmp_path / "d.txt.shz"))
    assert src.read_bytes() == data
    bad = bytearray(framed)
    last = describe(io.BytesIO(framed))[-1]
    bad[last["offset"] + last["archive_bytes"] - 40] ^= 1  # the last frame's last block
    (tmp_path / "bad.shz").write_bytes(bytes(bad))
    before = listing(tmp_path)
    assert_fails(run("-d", "-q", "-T", "2", "--model", trained.path, tmp_path / "bad.shz"), "bad.shz", tmp_path,
                 before, code=1)


def test_ordered_map_keeps_order_and_bounds_what_it_takes():
    taken, running, peak = [], [0], [0]
    lock = threading.Lock()

    def items():
        for i in range(12):
            taken.append(i)
            yield i

    def fn(worker: int, i: int, check) -> tuple[int, int]:
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.01 * (i % 3))
        with lock:
            running[0] -= 1
        return worker, i

    got = []
    for worker, i in ordered_map(fn, items(), 3):
        assert len(taken) <= len(got) + 1 + 4  # never more than workers + 1 ahead of the consumer
        got.append(i)
        assert 0 <= worker < 3
    assert got == list(range(12)) and peak[0] <= 3

    def fails(worker: int, i: int, check) -> int:
        if i == 4:
            raise ValueError("frame 4")
        return i

    out = []
    with pytest.raises(ValueError, match="frame 4"):
        for i in ordered_map(fails, range(10), 2):
            out.append(i)
    assert out == [0, 1, 2, 3]


def test_recover_writes_every_intact_frame(tmp_path, trained, data, framed):
    """A damaged frame costs its own data only: the frames before and after it are written,
    and the loss is named by archive bytes and output position."""
    archives = describe(io.BytesIO(framed))
    second = archives[1]
    bad = bytearray(framed)
    bad[second["offset"] + 2] ^= 0xFF  # the second frame's magic: nothing of it can be read
    out = io.BytesIO()
    lost = shazip.recover_stream(io.BytesIO(bytes(bad)), out, model=trained)
    assert out.getvalue() == data[:12000] + data[24000:]
    assert [(x.start, x.end, x.output_at) for x in lost] == [(second["offset"], archives[2]["offset"], 12000)]
    out = io.BytesIO()
    assert shazip.recover_stream(io.BytesIO(framed), out, model=trained) == [] and out.getvalue() == data
    # the command line: the output keeps what was saved, one line names the loss, exit 1
    (tmp_path / "d.txt.shz").write_bytes(bytes(bad))
    r = run("-d", "-q", "--recover", "--model", trained.path, tmp_path / "d.txt.shz")
    assert r.exit_code == 1 and "lost archive bytes" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert (tmp_path / "d.txt").read_bytes() == data[:12000] + data[24000:]
    assert (tmp_path / "d.txt.shz").exists()


def test_a_reader_seeks_by_frame(trained, data, framed):
    """A seek decodes from the start of the frame that holds the position: a frame before it
    is never decoded (here the first one is damaged, and reading the others still works), and
    the size comes from the structure."""
    bad = bytearray(framed)
    first = describe(io.BytesIO(framed))[0]
    bad[first["archive_bytes"] - 60] ^= 0x20  # the first frame's last block payload
    with shazip.open(io.BytesIO(bytes(bad)), "rb", model=trained) as f:
        assert f.seek(0, io.SEEK_END) == len(data)
        for at in (30000, 12000, 25000, 39990, 24000):
            f.seek(at)
            assert f.read(5000) == data[at:at + 5000]
        f.seek(100)
        with pytest.raises(ShazipError):
            f.read(20000)
    with shazip.open(io.BytesIO(framed), "rb", model=trained) as f:
        f.seek(13000)
        assert f.read(100) == data[13000:13100]
        f.seek(50)  # back before the frame in hand
        assert f.read() == data[50:]


def test_ordered_map_stops_running_calls_when_the_consumer_stops():
    """A consumer that stops early (an error, a signal) does not wait for frames still being
    coded: they end at their next check."""
    def fn(worker: int, i: int, check) -> int:
        if i == 0:
            return 0
        for _ in range(1000):  # ten seconds unless stopped
            check()
            time.sleep(0.01)
        return i

    t = time.perf_counter()
    results = ordered_map(fn, range(4), 2)
    assert next(results) == 0
    results.close()
    assert time.perf_counter() - t < 2


def test_sigterm_stops_frames_at_once_without_waiting(tmp_path, text):
    """Frames coded at once on worker threads: SIGTERM ends the run at once (a signal that lands
    on a worker thread must not wait for a frame to end), leaving no output behind."""
    import signal
    import subprocess
    import sys
    src = tmp_path / "t.txt"
    src.write_bytes(text[:60000] * 16)  # 48 frames: minutes on two cores of any machine
    p = subprocess.Popen([sys.executable, "-m", "shazip", "-q", "-T", "2", "--block-size", "20000", "--frame-size",
                          "20000", str(src)], stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    wait_until_writing(p, tmp_path)  # start-up done, frames under way
    t = time.perf_counter()
    p.send_signal(signal.SIGTERM)
    code = p.wait(timeout=30)
    assert code == 128 + signal.SIGTERM, p.stderr.read().decode(errors="replace")
    assert time.perf_counter() - t < 2
    assert sorted(x.name for x in tmp_path.iterdir()) == ["t.txt"]
