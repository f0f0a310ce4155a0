"""What a hostile trial found (frames spliced for a seek, forged trailers, hostile model folders,
a decompressor handed the seek table, names from an archive): each case rebuilt and refused, or
answered exactly."""

from __future__ import annotations

import io
import json
import os
import random
import struct
import time
import zlib
from pathlib import Path

import pytest

import shazip
from shazip.format.frames import index
from shazip.format import crc
from shazip.format.frames import pack_table, read_table

from test_cli import assert_ok, run


def test_crc_of_joined_pieces_from_their_crcs():
    rng = random.Random(3)
    for _ in range(200):
        a, b = rng.randbytes(rng.randrange(0, 2000)), rng.randbytes(rng.choice([0, 1, 3, 64, rng.randrange(0, 70000)]))
        assert crc.combine(zlib.crc32(a), zlib.crc32(b), len(b)) == zlib.crc32(a + b)


@pytest.fixture(scope="module")
def framed(text) -> tuple[bytes, bytes, bytes]:
    """The same 20,000 bytes as frames of 4 KB and of 8 KB (blocks of 1 KB: one output id)."""
    data = text[:20000]
    return (data, shazip.compress(data, 1, block_size=1024, frame_size=4096),
            shazip.compress(data, 1, block_size=1024, frame_size=8192))


def _read_at(blob: bytes, offset: int, n: int) -> bytes:
    with shazip.open(io.BytesIO(blob)) as f:
        f.seek(offset)
        return f.read(n)


def test_a_seek_into_a_frame_of_another_framing_is_refused(framed):
    """Frame 1 of the 8 KB framing between frames 0 and 2.. of the 4 KB one, no seek table: the
    ids and indexes agree, only the links (the crc of the frame before's data) tell. A seek
    returned the original's bytes 9096.. for 5000.. with no error."""
    data, a, b = framed
    fa, fb = index(io.BytesIO(a)), index(io.BytesIO(b))
    spliced = a[fa[0].start:fa[0].end] + b[fb[1].start:fb[1].end] + b"".join(a[f.start:f.end] for f in fa[2:])
    with pytest.raises(shazip.CorruptArchive, match="frame 1 does not follow frame 0"):
        _read_at(spliced, 5000, 3000)
    with pytest.raises(shazip.CorruptArchive, match="frame 1 does not follow frame 0"):
        shazip.decompress(spliced)
    assert _read_at(a, 5000, 3000) == data[5000:8000]  # the genuine file seeks as before


def test_a_forged_trailer_with_a_table_to_match_is_refused_by_a_seek(framed):
    """Frame 1's trailer says 2,048 bytes fewer and the seek table is rewritten to agree, with a
    valid crc: its chained crc, which a seek never checked, tells (the end was 17,952, and
    seek(10000) returned the original's bytes from 12,048)."""
    data, a, _ = framed
    frames = index(io.BytesIO(a))
    forged = bytearray(a[:frames[-1].end])
    at = frames[1].end - 17  # the trailer: tag u8, n_blocks u32, total_len u64, crc u32
    tag, n_blocks, total = struct.unpack("<BIQ", forged[at:at + 13])
    forged[at:at + 13] = struct.pack("<BIQ", tag, n_blocks, total - 2048)
    forged += pack_table([(f.end - f.start, f.decoded - 2048 * (i == 1)) for i, f in enumerate(frames)])
    for seek in ((0, 2), (10000, 0)):
        with pytest.raises(shazip.CorruptArchive, match="trailer checksum mismatch"):
            with shazip.open(io.BytesIO(bytes(forged))) as f:
                f.seek(*seek)
                f.read(100)


def _hostile_folder(folder, **entry) -> None:
    """A user models folder whose index names `default` as `entry` says (its sha256 and size
    the bundled default's unless given), so that every default-level decode looks there."""
    from shazip.model.file import bundled_index
    real = bundled_index()["default"]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "index.json").write_text(json.dumps({"default": {**real, **entry}}))


def _one_line(r, *says: str, code: int = 1) -> None:
    assert r.exit_code == code, (r.exit_code, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    for s in says:
        assert s in lines[0], lines[0]


@pytest.fixture()
def default_archive(tmp_path) -> Path:
    from shazip.model.file import bundled_index
    if "default" not in bundled_index():
        pytest.skip("a checkout without the bundled model")
    src = tmp_path / "a.txt"
    src.write_bytes(b"The models folder is anyone's to write: each entry is checked before its file is read.\n")
    assert_ok(run("-q", src))
    return tmp_path / "a.txt.shz"


@pytest.mark.parametrize("index, says", [
    ("[]", "a JSON list, not an object of models"), ('{"x": 5}', "model 'x' is a int, not an object"),
    ('{"default": {"file": "/dev/zero", "sha256": "00", "bytes": 1}}', "its file is not a file name in the folder"),
    ("{not json", "the model index is damaged"),
])
def test_a_damaged_index_is_one_line_everywhere(default_archive, own_models_folder, index, says):
    (own_models_folder / "index.json").write_text(index)
    for args in (["-d", "-c", default_archive], ["-l", default_archive], ["models"]):
        _one_line(run(*args), "index.json: the model index is damaged", says)


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
def test_a_model_entry_that_is_no_regular_file_is_refused_at_once(default_archive, own_models_folder):
    """A link to /dev/zero under the default's name and sha256 was read until the OOM killer."""
    _hostile_folder(own_models_folder, file="zero.safetensors")
    os.symlink("/dev/zero", own_models_folder / "zero.safetensors")
    os.mkfifo(own_models_folder / "fifo.safetensors")
    start = time.monotonic()
    _one_line(run("-d", "-c", default_archive), "zero.safetensors", "not a regular file")
    _hostile_folder(own_models_folder, file="fifo.safetensors")
    _one_line(run("-d", "-c", default_archive), "fifo.safetensors", "not a regular file")
    _one_line(run("models", "--add", own_models_folder / "fifo.safetensors"), "not a regular file")
    _one_line(run("-d", "-c", "--model", own_models_folder / "fifo.safetensors", default_archive), "not a regular file")
    assert time.monotonic() - start < 30


def test_a_model_file_larger_than_its_entry_is_not_read(default_archive, own_models_folder):
    """A 30 GB (sparse) file under the default's name: refused from its size, not read."""
    _hostile_folder(own_models_folder, file="big.safetensors")
    with open(own_models_folder / "big.safetensors", "wb") as f:
        f.truncate(30 << 30)
    start = time.monotonic()
    _one_line(run("-d", "-c", default_archive), "big.safetensors", "damaged (32,212,254,720 bytes where")
    _one_line(run("models", "--add", own_models_folder / "big.safetensors"), "not a shazip model")
    assert time.monotonic() - start < 30


def _decode_in_pieces(blob: bytes, cut: int) -> bytes:
    """lzma's documented loop over pieces (two, cut at `cut`): a new decompressor for what one
    leaves as `unused_data`, more input where it `needs_input`, else a call with b""; a call that
    gives nothing and asks for nothing is a spin."""
    pieces, out, d, pending = [p for p in (blob[:cut], blob[cut:]) if p], [], shazip.ShazipDecompressor(), b""
    for _ in range(1000):
        if d.eof:
            pending, d = d.unused_data + pending, shazip.ShazipDecompressor()
            if not pending and not pieces:
                return b"".join(out)
        if d.needs_input:
            if not pending and not pieces:
                raise AssertionError("input ended inside a unit")
            data, pending = (pending, b"") if pending else (pieces.pop(0), b"")
            out.append(d.decompress(data))
        else:
            got = d.decompress(b"")
            assert got or d.eof or d.needs_input, "a spin: nothing given, nothing asked for"
            out.append(got)
    raise AssertionError("no end")


def test_the_decompressor_never_spins_on_a_piece_that_ends_inside_the_seek_table(framed):
    data, a, _ = framed
    table = len(pack_table(read_table(io.BytesIO(a), 0)))
    for cut in range(len(a) - table - 2, len(a) + 1):
        assert _decode_in_pieces(a, cut) == data, cut


def test_the_decompressor_checks_a_seek_table_it_is_given(framed):
    _, a, _ = framed
    table = bytearray(pack_table(read_table(io.BytesIO(a), 0)))
    d = shazip.ShazipDecompressor()
    assert d.decompress(bytes(table)) == b"" and d.eof  # an intact table: read past, nothing decoded
    table[12] ^= 1  # a frame's size in it
    with pytest.raises(shazip.CorruptArchive, match="the seek table is damaged"):
        shazip.ShazipDecompressor().decompress(bytes(table))


def test_a_name_from_an_archive_is_escaped_for_the_terminal(tmp_path, text):
    """A model name recorded in an archive with a newline (a forged second line) and escape
    sequences: every message and listing shows it escaped, on one line."""
    model = shazip.load(str(Path(__file__).parent / "data" / "tiny-trained.safetensors"))
    model.name = "evil\nshazip: all files OK\x1b[2J\u202e"
    arc = tmp_path / "a.shz"
    arc.write_bytes(shazip.compress(text[:3000], 6, model=model))
    r = run("-d", "-c", arc)
    _one_line(r, "evil\\x0ashazip: all files OK\\x1b[2J\\u202e")
    listing = run("-lv", arc).stdout
    assert "model evil\\x0ashazip: all files OK\\x1b[2J\\u202e, id" in listing and "\x1b" not in listing
    assert "\x1b" not in run("-l", arc).stdout


def test_recover_never_writes_an_archive_stored_inside_a_damaged_block(tmp_path):
    """An archive stored verbatim in a raw block (a .shz file inside a tar, say) is found by the
    search for the next magic after the block's damage: it is followed by the block's bytes, not
    by the stream's next record, so its text, never this output's, is not written."""
    rng = random.Random(11)
    inner = shazip.compress(b"never in the output " * 20, 1)
    data = rng.randbytes(3000) + inner + rng.randbytes(3000)
    blob = bytearray(shazip.compress(data, 1, block_size=8192))
    at = bytes(blob).find(inner)
    assert at > 0  # stored verbatim
    blob[at - 100] ^= 1  # the host block's payload, before the inner archive
    out = io.BytesIO()
    lost = shazip.recover_stream(io.BytesIO(bytes(blob)), out)
    assert b"never in the output" not in out.getvalue()
    assert len(lost) == 1 and lost[0].end == len(blob) and out.getvalue() == b""


def test_recover_names_where_another_outputs_frames_begin_and_keeps_them(framed, text):
    """Frame 0 from another file, then frames 1.. of this one: frame 0 is written (it is whole,
    the first frame of its output), the change of output is named where it happens, and every
    frame after it is written (frame 1 was dropped as foreign, frames 2.. appended unannounced)."""
    data, a, _ = framed
    other = text[20000:40000]
    x = shazip.compress(other, 1, block_size=1024, frame_size=4096)
    fa, fx = index(io.BytesIO(a)), index(io.BytesIO(x))
    blob = x[fx[0].start:fx[0].end] + a[fa[1].start:]
    out = io.BytesIO()
    lost = shazip.recover_stream(io.BytesIO(blob), out)
    assert out.getvalue() == other[:4096] + data[4096:]
    first = fx[0].end - fx[0].start
    assert [(x.start, x.end, x.output_at) for x in lost] == [(first, first, 4096)]
    assert "frame 1 is from another output" in lost[0].reason and "frames from here on are written" in lost[0].reason


def test_ctrl_c_as_the_program_starts_is_one_line(tmp_path):
    """Ctrl-C while a program imports its command line (its first tenth of a second) gave a
    KeyboardInterrupt traceback: here it arrives as click is imported."""
    import subprocess
    import sys
    script = """
import sys
class CtrlC:
    def find_spec(self, name, path=None, target=None):
        if name == "click":
            raise KeyboardInterrupt
sys.meta_path.insert(0, CtrlC())
from shazip.programs import {0}
sys.argv = ["{0}", "-V"]
{0}()
"""
    for program in ("shazip", "unshazip", "shazcat"):
        p = subprocess.run([sys.executable, "-c", script.format(program)], capture_output=True, text=True, timeout=60)
        assert p.returncode == 130 and p.stderr == "shazip: interrupted\n", (program, p.returncode, p.stderr[-300:])


def test_a_forged_block_of_zeros_claiming_megabytes_is_refused_at_once(text):
    """A one-block archive of 285 bytes whose header claims 16 MiB of a level-6 stage's block and
    whose payload is 240 zero bytes took minutes to refuse (the stage decodes zeros as bytes
    0xFF for ever); where its crc is that of such bytes, it is a valid archive and decodes."""
    from dataclasses import replace
    from shazip.format.reader import ArchiveReader
    reader = ArchiveReader(io.BytesIO(shazip.compress(text[:5000], 6, block_size=16 << 20)))
    assert reader._solo is not None and reader._solo.method.name == "MIXED"
    forged = reader.header.pack(replace(reader._solo, orig_len=16 << 20, payload_len=240, data_crc=12345)) + bytes(240)
    start = time.monotonic()
    with pytest.raises(shazip.ChecksumMismatch, match="a payload of zeros"):
        shazip.decompress(forged, threads=1)
    assert time.monotonic() - start < 1
    head = zlib.crc32(b"\xff" * 3000).to_bytes(4, "little")  # format 5: the crc of its first bytes, then the coder's
    valid = reader.header.pack(replace(reader._solo, orig_len=3000, payload_len=240,
                                       data_crc=zlib.crc32(b"\xff" * 3000))) + head + bytes(236)
    assert shazip.decompress(valid, threads=1) == b"\xff" * 3000


@pytest.mark.parametrize("byte", [0xFF, 0x80])
def test_a_forged_payload_that_decodes_cheaply_is_refused_at_its_head(text, byte):
    """240 bytes of 0xFF claiming 4 MiB of a level-6 block decoded for 150 s (format 4) before its
    crc failed: each decision came ever cheaper. Format 5's head check refuses such a payload once
    the block's first few KB are decoded."""
    from dataclasses import replace
    from shazip.format.reader import ArchiveReader
    reader = ArchiveReader(io.BytesIO(shazip.compress(text[:5000], 6, block_size=16 << 20)))
    assert reader.header.format_version == 5
    forged = reader.header.pack(replace(reader._solo, orig_len=4 << 20, payload_len=240, data_crc=12345))
    start = time.monotonic()
    with pytest.raises(shazip.CorruptArchive, match="first bytes do not match their check"):
        shazip.decompress(forged + bytes([byte]) * 240, threads=1)
    assert time.monotonic() - start < 1
