"""What a stream of archives holds, read and checked without decoding (`shazip -l`, `shazip info`).

Every header, block header and trailer is read and checked, and the frames are taken through
one chain (format/frames.py), as the decoder takes them, so that a listing of a damaged stream, or of
one cut at a frame boundary, fails as decoding it would; no payload is decoded.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any, BinaryIO

from .frames import Chain
from .reader import ArchiveReader


def describe(src: BinaryIO) -> list[dict[str, Any]]:
    """Summarize each archive in src (one, or a concatenation of them: frames, outputs) for
    `shazip info`, validating their structure and their chain but decoding nothing."""
    out: list[dict[str, Any]] = []
    lead, offset, chain = b"", 0, Chain()
    while True:
        reader = ArchiveReader(src, lead, more=True)
        chain.begin(reader.place())
        out.append(_describe(reader, offset))
        chain.end(reader.place(), out[-1]["archive_bytes"], out[-1]["total_len"], None, reader.skipped)
        if reader.table is not None:
            chain.table(reader.table)
        offset += out[-1]["archive_bytes"] + reader.skipped
        lead = reader.after
        if not lead:
            chain.close()
            return out


def _describe(reader: ArchiveReader, offset: int) -> dict[str, Any]:
    blocks = [
        {
            "index": bh.index,
            "method": bh.method.name.lower(),
            "lanes": bh.lanes,
            "orig_len": bh.orig_len,
            "payload_len": bh.payload_len,
        }
        for bh, _ in reader.blocks()
    ]
    assert reader.trailer is not None  # blocks() ran to completion
    info: dict[str, Any] = {"format_version": reader.header.format_version, **asdict(reader.header)}
    info["adapt_params"] = reader.header.adapt_params.hex()
    info["model_id"] = reader.header.model_id.hex()
    place = reader.place()
    info.update(frame_index=place.index, output_id=place.output_id, link=place.link, more=place.more)
    info.update(
        blocks=blocks,
        n_blocks=reader.trailer.n_blocks,
        total_len=reader.trailer.total_len,
        offset=offset,
        archive_bytes=reader.bytes_read - len(reader.after) - reader.skipped,  # `after` is the next archive's
        skipped_bytes=reader.skipped,  # skippable frames after it: the seek table after the last frame
    )
    return info
