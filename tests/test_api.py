"""Python API round trips through the model path, and what corrupt input does."""

from __future__ import annotations

import io
import os
import random
import threading

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import shazip
from shazip.codec.block import LANE_FLOOR, MIN_LANE, lane_lengths
from shazip.errors import ChecksumMismatch, CorruptArchive, ModelError, ShazipError
from shazip.format.container import Method
from shazip.format.reader import ArchiveReader
from shazip.options import LONG_LANES, SPLIT_LANES
from shazip.stage.adaptive import PARAMS_BYTES, VERSION

MODEL_ONLY = frozenset({Method.MODEL})
MIXED_ONLY = frozenset({Method.MIXED})
# (methods, adaptive stage): the model alone, the model with the stage, and the automatic choice
CODINGS = [(MODEL_ONLY, "none"), (MIXED_ONLY, "cm"), (frozenset(Method), "cm"), (frozenset(Method), "none")]


@pytest.mark.parametrize("data", [b"", b"x", bytes(range(256)), "naïve café — 日本語 ✓\n".encode() * 40])
def test_small_inputs_round_trip(random_model, data):
    for methods, adapt in CODINGS:
        blob = shazip.compress(data, model=random_model, methods=methods, adapt=adapt)
        assert shazip.decompress(blob, model=random_model) == data


@pytest.mark.parametrize("lanes", [1, 3, 7])
def test_model_coded_text_round_trips_with_lanes(random_model, text, lanes):
    data = text[:2400]
    blob = shazip.compress(data, model=random_model, lanes=lanes, block_size=1000, methods=MODEL_ONLY, adapt="none")
    assert shazip.decompress(blob, model=random_model) == data
    blocks = list(ArchiveReader(io.BytesIO(blob)).blocks())
    assert [b.method for b, _ in blocks] == [Method.MODEL] * 3
    assert [b.lanes for b, _ in blocks] == [min(lanes, max(1, b.orig_len // LANE_FLOOR)) for b, _ in blocks]


def test_automatic_lanes_are_long(random_model, text):
    """Without `lanes`, a block gets at most 32 lanes of at least MIN_LANE bytes (a small file
    is not cut into many cold starts), LONG_LANES times longer where zstd's fastest level
    shrinks it more than REPETITIVE-fold (but not fewer than SPLIT_LANES where the plain rule
    gives that many); asked for, lanes go down to LANE_FLOOR bytes."""
    rng = random.Random(5)
    loose = bytes(rng.choice(b"abcdefghijklmnop ") for _ in range(3 * MIN_LANE + 100))  # zstd -1: 1.9-fold
    lanes_of = lambda blob: [b.lanes for b, _ in ArchiveReader(io.BytesIO(blob)).blocks()]  # noqa: E731
    # wiki markup (zstd -1 shrinks it over 4-fold): 3 plain lanes become 1; 23 become 8, not 2 (SPLIT_LANES)
    for data, lanes in ((loose, 3), (text, 1), (text * 6, SPLIT_LANES)):
        auto = shazip.compress(data, model=random_model, methods=MODEL_ONLY, adapt="none")
        asked = shazip.compress(data, model=random_model, lanes=32, methods=MODEL_ONLY, adapt="none")
        assert lanes_of(auto) == [lanes] and lanes_of(asked) == [32]
        assert shazip.decompress(auto, model=random_model) == shazip.decompress(asked, model=random_model) == data
    assert len(text) // MIN_LANE == 3 and len(text) * 6 // MIN_LANE == 23 and len(text) * 6 // (MIN_LANE * LONG_LANES) == 2


def test_lane_lengths_cover_block():
    for n in range(0, 50):
        for lanes in range(1, 9):
            ln = lane_lengths(n, lanes)
            assert ln.sum() == n and (np.diff(ln) <= 0).all()


def test_random_bytes_do_not_grow(random_model):
    data = os.urandom(100_000)
    blob = shazip.compress(data, model=random_model, block_size=30_000)
    # header (with the adaptive stage's fields) + 4 block headers + trailer: a fixed overhead,
    # nothing proportional to the data
    assert len(blob) <= len(data) + 51 + 2 + PARAMS_BYTES[VERSION] + len("tiny-random") + 4 * 24 + 17
    assert shazip.decompress(blob, model=random_model) == data


@settings(max_examples=15, deadline=None)
@given(st.binary(max_size=1500), st.integers(1, 5), st.integers(200, 1000))
def test_any_bytes_round_trip(random_model, data, lanes, block_size):
    blob = shazip.compress(data, model=random_model, lanes=lanes, block_size=block_size, methods=MODEL_ONLY, adapt="none")
    assert shazip.decompress(blob, model=random_model) == data


def _payload_offsets(blob: bytes) -> list[tuple[int, int]]:
    """(start, length) of each block payload inside the archive."""
    reader = ArchiveReader(io.BytesIO(blob))
    out, pos = [], len(reader.header.pack())
    for bh, payload in reader.blocks():
        pos += 24
        out.append((pos, bh.payload_len))
        pos += bh.payload_len
    return out


@pytest.mark.parametrize("methods, adapt", [(MODEL_ONLY, "none"), (MIXED_ONLY, "cm"), (frozenset({Method.ZSTD}), "cm"),
                                            (frozenset({Method.RAW}), "cm")])
def test_flipped_payload_bit_is_named_by_block(random_model, text, methods, adapt):
    blob = bytearray(shazip.compress(text[:1500], model=random_model, block_size=500, methods=methods, adapt=adapt))
    start, length = _payload_offsets(bytes(blob))[1]
    for bit in (0, 8 * length // 2 + 3, 8 * length - 1):
        bad = bytearray(blob)
        bad[start + bit // 8] ^= 1 << (bit % 8)
        with pytest.raises((ChecksumMismatch, CorruptArchive), match="block 1"):
            shazip.decompress(bytes(bad), model=random_model)


def test_wrong_model_is_refused(random_model, other_model_path, text):
    blob = shazip.compress(text[:3000], model=random_model, methods=MODEL_ONLY, adapt="none")
    with pytest.raises(ModelError, match="wrong model"):
        shazip.decompress(blob, model=shazip.load(str(other_model_path)))
    with pytest.raises(ModelError, match="needs model 'tiny-random'"):
        shazip.decompress(blob)


def test_stored_blocks_decode_without_the_model(random_model):
    data = os.urandom(5000)
    blob = shazip.compress(data, model=random_model)
    assert shazip.decompress(blob) == data  # no model given, none installed: not needed


def test_api_from_threads(random_model, text):
    results: dict[int, bool] = {}

    def work(i: int) -> None:
        data = text[i * 1500 : (i + 1) * 1500]
        blob = shazip.compress(data, model=random_model, methods=MODEL_ONLY, adapt="none")
        results[i] = shazip.decompress(blob, model=random_model) == data

    threads = [threading.Thread(target=work, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {0: True, 1: True, 2: True}


def test_errors_are_shazip_errors():
    for bad in (b"", b"PK\x03\x04 not ours", b"SHZ\x89\x09"):
        with pytest.raises(ShazipError):
            shazip.decompress(bad)


def test_bundled_default_model_round_trips_real_text(text):
    """`shazip compress` with no --model uses the bundled model, offline, and its sha256 is checked."""
    from shazip.model.file import bundled_index, load_model

    if "default" not in bundled_index():
        pytest.skip("no bundled default model in this checkout")
    data = text[30_000:33_000]  # article text, not the repetitive XML header
    blob = shazip.compress(data, methods=MODEL_ONLY, adapt="none")
    assert shazip.decompress(blob) == data
    assert load_model("default").model_id.startswith(ArchiveReader(io.BytesIO(blob)).header.model_id)  # its first 8 bytes
    assert len(blob) < len(data) / 2  # a trained model: well under 4 bits/byte on English text


def test_unknown_engine_version_is_refused(random_model, text):
    """Format 4 packs the engine id and version in byte 6 (a one-block archive: nothing after
    the header is chained to its crc, which is resealed)."""
    import zlib

    from archive_damage import Layout
    from shazip.errors import UnsupportedVersion
    blob = shazip.compress(text[:1000], model=random_model, methods=MODEL_ONLY, adapt="none")
    end = Layout.of(blob).header_end
    for engine in (7 << 4 | 1, 1 << 4 | 14):  # an unknown engine id, an unknown version of the int8 engine
        head = bytearray(blob[:end])
        head[6] = engine
        forged = bytes(head) + zlib.crc32(bytes(head)).to_bytes(4, "little") + blob[end + 4:]
        with pytest.raises(UnsupportedVersion, match="engine"):
            shazip.decompress(forged, model=random_model)


def test_lanes_beyond_what_the_encoder_makes_are_refused(random_model, text):
    """A forged lane count would make the decoder allocate a ring per lane."""
    import struct

    from archive_damage import BLOCK_HEADER, Layout, _reseal
    blob = bytearray(shazip.compress(text[:2000], model=random_model, methods=MODEL_ONLY, adapt="none",
                                     block_size=1000))
    lay = Layout.of(bytes(blob))
    pos = lay.blocks[0][0]
    blob[pos + 6 : pos + 8] = struct.pack("<H", 900)  # tag u8, index u32, method u8, lanes u16
    _reseal(blob, pos, pos + BLOCK_HEADER, lay)  # (block 1's chained crc now fails: decode block 0 first)
    with pytest.raises(CorruptArchive, match="block 0: 900 lanes"):
        shazip.decompress(bytes(blob), model=random_model, threads=1)


def test_float_archive_needing_more_threads_than_cpus_is_refused(random_model, text):
    """The float32 engine replays the encoder's thread count; a count beyond this machine's
    CPUs (real, or forged with the crc resealed) is refused, not run oversubscribed."""
    import struct
    import zlib
    blob = bytearray(shazip.compress(text[:1500], model=random_model, engine="float32",
                                     methods=frozenset({Method.MODEL}), adapt="none"))
    assert shazip.decompress(bytes(blob), model=random_model) == text[:1500]
    end = 41 + blob[40] + 6
    blob[7] = min(255, (os.cpu_count() or 1) + 1)
    struct.pack_into("<I", blob, end, zlib.crc32(bytes(blob[:end])))
    with pytest.raises(ShazipError, match="decodes exactly only with the"):
        shazip.decompress(bytes(blob), model=random_model)


def test_threads_zero_means_every_available_core(trained, text):
    from shazip.hardware import available_cores, resolve_threads
    assert resolve_threads(0) == min(available_cores(), 255) and resolve_threads(3) == 3
    with pytest.raises(shazip.ShazipError, match="between 0"):
        resolve_threads(-1)
    data = text[:3000]
    assert shazip.compress(data, model=trained, lanes=2, threads=0) == shazip.compress(data, model=trained, lanes=2,
                                                                                      threads=1)



@pytest.mark.parametrize("how", ["stream at once", "stream", "iter", "incremental", "recover", "compress"])
def test_threads_and_device_are_resolved_once_a_call(trained, text, monkeypatch, how):
    """A call resolves its threads and device where it enters the API and hands them down: a
    framed output decoded frames at once, one after the other or incrementally, recovered, or
    made, asks for the machine's cores and a GPU once."""
    import shazip.hardware as hardware
    data = text[:6000]
    framed = shazip.compress(data, model=trained, lanes=1, block_size=2048, frame_size=2048)
    asked = {"threads": 0, "device": 0}
    for name, key in (("resolve_threads", "threads"), ("resolve_device", "device")):
        def counted(arg, _real=getattr(hardware, name), _key=key):
            asked[_key] += 1
            return _real(arg)
        monkeypatch.setattr(hardware, name, counted)
    out = io.BytesIO()
    if how == "stream at once":
        shazip.decompress_stream(io.BytesIO(framed), out, model=trained, threads=2)
    elif how == "stream":
        shazip.decompress_stream(io.BytesIO(framed), out, model=trained, threads=1)
    elif how == "iter":
        out.write(b"".join(shazip.iter_decompress(io.BytesIO(framed), model=trained, threads=0)))
    elif how == "incremental":
        out.write(shazip.ShazipDecompressor(model=trained, threads=0).decompress(framed))
    elif how == "recover":
        shazip.recover_stream(io.BytesIO(framed), out, model=trained, threads=0)
    else:
        out.write(shazip.decompress(shazip.compress(data, model=trained, lanes=1, block_size=2048, frame_size=2048,
                                                    threads=0), model=trained, threads=1))
        asked = {k: v / 2 for k, v in asked.items()}  # two calls
    assert out.getvalue() == data and asked == {"threads": 1, "device": 1}

def test_openmp_waits_passively_unless_the_user_says_otherwise():
    """Spinning OpenMP threads stall when another process holds a core; shazip asks for passive
    waiting before torch starts OpenMP, and leaves a user's own choice alone."""
    import subprocess
    import sys
    code = "import os, shazip; print(os.environ['OMP_WAIT_POLICY'])"
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    assert subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True).stdout == "PASSIVE\n"
    env["OMP_WAIT_POLICY"] = "ACTIVE"
    assert subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True).stdout == "ACTIVE\n"


# ---------------------------------------------------------------- file objects and incremental coding


def test_incremental_compressor_fed_a_byte_at_a_time_equals_one_shot(trained, text):
    data = text[:3000]
    c = shazip.Compressor(trained, lanes=2, block_size=1000)
    obj = c.compressobj()
    out = b"".join(obj.compress(data[i:i + 1]) for i in range(len(data))) + obj.flush()
    assert out == c.compress(data) == shazip.compress(data, model=trained, lanes=2, block_size=1000)
    assert shazip.decompress(out, model=trained) == data
    assert c.compressobj().flush() == shazip.compress(b"", model=trained, lanes=2, block_size=1000)


def test_reusable_compressor_loads_once(trained, text, monkeypatch):
    c = shazip.Compressor(trained, lanes=2)
    first = c.compress(text[:2000])
    import shazip.codec.engines as engines
    monkeypatch.setattr(engines.IntEngine, "__init__", lambda *a, **k: pytest.fail("the engine was built again"))
    assert c.compress(text[:2000]) == first  # a fresh adaptive stage per archive, the same engine


def test_open_binary_and_text(tmp_path, trained, text):
    path = tmp_path / "a.shz"
    with shazip.open(path, "wb", model=trained, lanes=2, block_size=1500) as f:
        for i in range(0, 4000, 7):
            f.write(text[i:min(i + 7, 4000)])
    assert shazip.decompress(path.read_bytes(), model=trained) == text[:4000]
    with shazip.open(path, "rb", model=trained) as f:
        assert f.read(10) == text[:10] and f.read1(5) == text[10:15] and f.read() == text[15:4000]
        assert f.read() == b""
    with shazip.open(tmp_path / "t.shz", "wt", model=trained, encoding="utf-8") as f:
        f.write("grüße ✓\n" * 50)
    with shazip.open(tmp_path / "t.shz", "rt", model=trained, encoding="utf-8") as f:
        assert f.readlines() == ["grüße ✓\n"] * 50
    with pytest.raises(ValueError):
        shazip.open(path, "rb", model=trained, encoding="utf-8")


def test_open_with_tarfile_and_copyfileobj(tmp_path, trained, text):
    import shutil
    import tarfile
    (tmp_path / "f.xml").write_bytes(text[:5000])
    with shazip.open(tmp_path / "t.tar.shz", "wb", model=trained, lanes=4) as f:
        with tarfile.open(fileobj=f, mode="w|") as tar:
            tar.add(tmp_path / "f.xml", arcname="f.xml")
    with shazip.open(tmp_path / "t.tar.shz", "rb", model=trained) as f:
        with tarfile.open(fileobj=f, mode="r|") as tar:
            member = next(iter(tar))
            assert member.name == "f.xml" and tar.extractfile(member).read() == text[:5000]
    with shazip.open(tmp_path / "t.tar.shz", "rb", model=trained) as f, open(tmp_path / "copy.tar", "wb") as g:
        shutil.copyfileobj(f, g)
    assert tarfile.open(tmp_path / "copy.tar").extractfile("f.xml").read() == text[:5000]


def test_incremental_decompressor_fed_a_byte_at_a_time(trained, text):
    data = text[:5000] + bytes(range(256)) * 4
    blob = shazip.compress(data, model=trained, lanes=2, block_size=1500)
    d = shazip.ShazipDecompressor(model=trained)
    out = b"".join(d.decompress(blob[i:i + 1]) for i in range(len(blob)))
    assert out == data and d.eof
    whole = shazip.ShazipDecompressor(model=trained)
    assert whole.needs_input
    assert whole.decompress(blob + b"next") == data and whole.eof and whole.unused_data == b"next"
    assert not whole.needs_input
    with pytest.raises(EOFError):
        whole.decompress(b"")
    with pytest.raises(shazip.NotAnArchive, match="gzip"):
        shazip.ShazipDecompressor().decompress(b"\x1f\x8b\x08\x00")
    with pytest.raises(shazip.UnsupportedVersion):
        shazip.ShazipDecompressor().decompress(b"SHZ\x89\x09" + bytes(60))
    bad = bytearray(blob)
    bad[len(blob) // 2] ^= 4
    with pytest.raises(shazip.ShazipError):
        d = shazip.ShazipDecompressor(model=trained)
        for i in range(0, len(bad), 100):
            d.decompress(bytes(bad[i:i + 100]))


# ---------------------------------------------------------------- seekable readers


@pytest.fixture(scope="module")
def seek_archive(trained, text) -> tuple[bytes, bytes]:
    """(original, archive): 5 blocks through the adaptive stage, whose tables carry from block
    to block, so a rewind must decode from the start again to get them right."""
    data = text[:5000]
    blob = shazip.compress(data, model=trained, lanes=4, block_size=1000)
    assert len(list(ArchiveReader(io.BytesIO(blob)).blocks())) == 5
    return data, blob


def test_reader_seeks_like_a_file(trained, seek_archive):
    import random
    data, blob = seek_archive
    rng = random.Random(5)
    with shazip.open(io.BytesIO(blob), "rb", model=trained) as f:
        assert f.seekable() and f.tell() == 0
        assert f.read(1500) == data[:1500] and f.tell() == 1500
        assert f.seek(-500, io.SEEK_CUR) == 1000 and f.read(10) == data[1000:1010]
        pos = 1010
        for _ in range(25):
            whence = rng.choice((io.SEEK_SET, io.SEEK_CUR, io.SEEK_END))
            target = rng.randrange(0, len(data) + 200)  # some past the end
            offset = target - (0, pos, len(data))[whence]
            pos = min(target, len(data))  # past the end stops at the end, as gzip and lzma
            assert f.seek(offset, whence) == pos == f.tell()
            n = rng.choice((0, 1, 700, 2500, -1))
            got = f.read(n) if rng.random() < 0.8 else f.read1(n)
            want = data[pos:] if n < 0 else data[pos:pos + n]
            if got != want:  # read1 may stop at a block's end
                assert want.startswith(got) and got and f.read(len(want) - len(got)) == want[len(got):], (pos, n)
            pos += len(want)
            assert f.tell() == pos
        assert f.seek(len(data) + 12345) == len(data) and f.read() == b"" and f.tell() == len(data)
        assert f.seek(0) == 0 and f.read() == data
        with pytest.raises(ValueError, match="negative"):
            f.seek(-1)
        with pytest.raises(ValueError, match="whence"):
            f.seek(0, 3)
    with shazip.open(io.BytesIO(blob), "rb", model=trained) as f:
        assert f.seek(-10, io.SEEK_END) == len(data) - 10 and f.read() == data[-10:]


def test_reader_starts_where_the_file_was(trained, seek_archive, tmp_path):
    """An archive after other bytes in a file: a rewind goes back to where it began."""
    data, blob = seek_archive
    (tmp_path / "x").write_bytes(b"prefix" + blob)
    with open(tmp_path / "x", "rb") as raw:
        raw.seek(6)
        with shazip.open(raw, "rb", model=trained) as f:
            assert f.read(4500)[-10:] == data[4490:4500] and f.seek(3) == 3 and f.read(7) == data[3:10]
    with shazip.open(io.BytesIO(blob), "rt", model=trained, encoding="latin-1") as t:  # text mode seeks too
        first = t.readline()
        t.seek(0)
        assert t.readline() == first == data.decode("latin-1").splitlines(keepends=True)[0]


def test_reader_over_a_pipe_is_a_stream(trained, seek_archive):
    class Pipe(io.BytesIO):
        def seekable(self) -> bool:
            return False

    data, blob = seek_archive
    with shazip.open(Pipe(blob), "rb", model=trained) as f:
        assert not f.seekable()
        assert f.read(1234) == data[:1234] and f.tell() == 1234
        with pytest.raises(io.UnsupportedOperation):
            f.seek(0)
        assert f.read() == data[1234:] and f.tell() == len(data)


def test_writer_is_not_seekable_and_tells_bytes_written(trained, tmp_path):
    with shazip.open(tmp_path / "w.shz", "wb", model=trained) as f:
        f.write(b"abc")
        f.write(b"defg")
        assert not f.seekable() and f.tell() == 7
        with pytest.raises(io.UnsupportedOperation):
            f.seek(0)
    with pytest.raises(ValueError):
        f.tell()


def test_tarfile_random_access_mode(trained, text, tmp_path):
    """tarfile's "r:" mode lists the members, then seeks back to extract each."""
    import tarfile
    members = {"a.xml": text[:3000], "b.xml": text[3000:4500]}
    plain = io.BytesIO()
    with tarfile.open(fileobj=plain, mode="w") as tar:
        for name, body in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
    (tmp_path / "t.tar.shz").write_bytes(shazip.compress(plain.getvalue(), model=trained, lanes=4, block_size=2000))
    with shazip.open(tmp_path / "t.tar.shz", "rb", model=trained) as f, tarfile.open(fileobj=f, mode="r:") as tar:
        assert tar.getnames() == ["a.xml", "b.xml"]
        assert tar.extractfile("b.xml").read() == members["b.xml"]
        assert tar.extractfile("a.xml").read() == members["a.xml"]
        tar.extract("a.xml", tmp_path / "out", filter="data")
    assert (tmp_path / "out" / "a.xml").read_bytes() == members["a.xml"]


def test_dir_shows_the_lazy_api():
    assert {"compress", "decompress", "open", "Compressor", "ShazipFile", "iter_decompress"} <= set(dir(shazip))


def test_level_is_the_second_argument(trained):
    data = b"the level comes second, as in zlib.compress(data, 9) " * 20
    assert shazip.compress(data, 1, model=trained) == shazip.compress(data, level=1, model=trained)
    assert shazip.compress(data, 1, model=trained) != shazip.compress(data, 2, model=trained)
    with pytest.raises(TypeError, match="second argument is the level"):
        shazip.compress(data, "default")


@pytest.mark.parametrize("call, named", [
    (lambda: shazip.Compressor(level="9"), "level must be an int"),
    (lambda: shazip.Compressor(lanes="x"), "lanes must be an int"),
    (lambda: shazip.Compressor(block_size=2.5), "block_size must be an int"),
    (lambda: shazip.compress(b"x", levl=9), "compress() got an unexpected keyword argument 'levl'"),
    (lambda: shazip.decompress(b"", modle="default"), "decompress() got an unexpected keyword argument 'modle'"),
    (lambda: shazip.open(7), "file must be"),
    (lambda: shazip.open(123.5, "wb"), "file must be"),
])
def test_argument_errors_are_type_errors_at_the_call(call, named):
    with pytest.raises(TypeError) as e:
        call()
    assert named in str(e.value)
