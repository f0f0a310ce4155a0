"""Python API: compress/decompress bytes or streams, block by block in bounded memory.

    import shazip
    blob = shazip.compress(b"some text", model="default")
    assert shazip.decompress(blob) == b"some text"

Every failure is a `shazip.ShazipError` with a one-line message.
"""

from __future__ import annotations

import io
from typing import BinaryIO, Callable

import torch

from . import adaptive
from .adaptive import AdaptiveParams, AdaptiveStage
from .codec import ALL_METHODS, MAX_LANES, CodingStats, decode_block, encode_block
from .container import MAX_BLOCK_SIZE, ArchiveReader, ArchiveWriter, Header, Method, read_upto, verify_block
from .engines import BY_ID, ENGINES, FloatEngine, IntEngine, check_replayable, engine_for, resolve_threads, torch_threads
from .errors import CorruptArchive, ModelError, UnsupportedVersion, UsageError
from .modelfile import LoadedModel, find_model, load_model, model_from_bytes
from .options import ADAPT_CHOICES, DEFAULT_BLOCK_SIZE, DEFAULT_LANES

ADAPT: dict[str, AdaptiveParams | None] = dict(zip(ADAPT_CHOICES, (AdaptiveParams(), None)))

Progress = Callable[[int], None]


def _resolve(model: str | LoadedModel) -> LoadedModel:
    return model if isinstance(model, LoadedModel) else load_model(model)


class _Once:
    """Builds a thing at its first use and keeps it: the engine and the adaptive stage are made
    at the first model-coded block (archives of stored/zstd blocks never need the model), and
    the stage then lives on through every later block of the input."""

    def __init__(self, make: Callable[[], object]) -> None:
        self.make, self.made = make, None

    def __call__(self):
        if self.made is None:
            self.made = self.make()
        return self.made


def _engine(kind: type[IntEngine] | type[FloatEngine], loaded: Callable[[], LoadedModel], threads: int) -> _Once:
    return _Once(lambda: FloatEngine(loaded(), threads) if kind is FloatEngine else IntEngine(loaded()))


def compress_stream(src: BinaryIO, dst: BinaryIO, model: str | LoadedModel = "default",
                    lanes: int = DEFAULT_LANES, block_size: int = DEFAULT_BLOCK_SIZE,
                    threads: int = 0, progress: Progress | None = None,
                    methods: frozenset[Method] = ALL_METHODS, engine: str = "int8",
                    stats: CodingStats | None = None, adapt: str = "cm") -> int:
    """Compresses src to dst one block at a time; returns the number of input bytes.
    `methods` restricts the block methods tried (e.g. {Method.MIXED} to measure the model);
    `stats`, if given, collects the model's cross-entropy and the methods chosen.
    `engine` is "int8" (integer-exact, decodes anywhere) or "float32" (decodes only on this
    machine with the same thread count). `adapt` is "cm" (the adaptive stage learns the input
    as it is coded; int8 engine only) or "none" (the model alone, as shazip 0.3 coded)."""
    if not 1 <= lanes <= MAX_LANES:
        raise UsageError(f"lanes must be between 1 and {MAX_LANES}")
    if not 1 <= block_size <= MAX_BLOCK_SIZE:
        raise UsageError(f"block size must be between 1 and {MAX_BLOCK_SIZE}")
    threads = resolve_threads(threads)
    if not methods:
        raise UsageError("no block method allowed")
    if engine not in ENGINES:
        raise UsageError(f"unknown engine '{engine}' (choose {', '.join(ENGINES)})")
    if adapt not in ADAPT:
        raise UsageError(f"unknown adaptive stage '{adapt}' (choose {', '.join(ADAPT)})")
    params = ADAPT[adapt]
    if params is not None and engine != "int8":
        raise UsageError("the adaptive stage needs the int8 engine's integer rows (use adapt 'none' with float32)")
    loaded = _resolve(model)
    if len(loaded.name.encode()) > 255:
        raise UsageError(f"model name is longer than 255 bytes: {loaded.name[:40]}...")
    with torch_threads(threads):
        kind = ENGINES[engine]
        header = Header(engine=kind.engine_id, engine_version=kind.engine_version,
                        threads=torch.get_num_threads() if kind is FloatEngine else 0,
                        model_id=loaded.model_id, model_name=loaded.name, block_size=block_size, lanes=lanes,
                        adapt_version=adaptive.VERSION if params else 0, adapt_params=params.pack() if params else b"")
        get_engine = _engine(kind, lambda: loaded, header.threads)
        get_stage = _Once(lambda: AdaptiveStage(params)) if params else None
        writer = ArchiveWriter(dst, header)
        total = 0
        while block := read_upto(src, block_size):
            method, k, payload = encode_block(get_engine, block, lanes, progress, methods, stats, get_stage)
            writer.add_block(method, k, block, payload)
            total += len(block)
        writer.finish()
    return total


def decompress_stream(src: BinaryIO, dst: BinaryIO, model: str | LoadedModel | None = None,
                      progress: Progress | None = None, threads: int = 0) -> int:
    """Decompresses src to dst, verifying each block before writing it; returns bytes written.
    `model` overrides the archive's model name; its id must still match the archive's.
    `threads` applies to int8 archives (float32 ones replay the encoder's thread count); 0, the
    default, uses every available core."""
    threads = resolve_threads(threads)
    reader = ArchiveReader(src)
    h = reader.header
    kind = BY_ID.get(h.engine)

    def loaded() -> LoadedModel:
        check_replayable(engine_for(h.engine, h.engine_version), h.threads)
        found = find_model(h.model_name, h.model_id) if model is None else _resolve(model)
        if found.model_id != h.model_id:
            raise ModelError(f"wrong model: the archive needs '{h.model_name}' (id {h.model_id.hex()[:16]}), "
                             f"given '{found.name}' (id {found.id_hex[:16]})")
        return found

    def stage() -> AdaptiveStage:
        if kind is not IntEngine:  # the encoder never writes this: the stage reads integer rows
            raise CorruptArchive(f"engine {h.engine} cannot drive the adaptive stage (damaged header?)")
        if h.adapt_version != adaptive.VERSION:
            raise UnsupportedVersion(f"archive needs adaptive stage version {h.adapt_version}, which this shazip "
                                     f"does not have")
        return AdaptiveStage(AdaptiveParams.unpack(h.adapt_params))

    get_engine = _engine(kind, loaded, h.threads)
    get_stage = _Once(stage) if h.adapt_version else None
    total = 0
    with torch_threads(h.threads if kind is FloatEngine else threads):
        for bh, payload in reader.blocks():
            try:
                block = decode_block(get_engine, bh.method, bh.lanes, payload, bh.orig_len, progress, get_stage)
            except CorruptArchive as e:
                raise CorruptArchive(f"block {bh.index}: {e}") from None
            verify_block(bh, block)
            dst.write(block)
            total += len(block)
    return total


def compress(data: bytes, model: str | LoadedModel = "default", **kw) -> bytes:
    """Compresses bytes in memory. Keyword arguments as `compress_stream`."""
    out = io.BytesIO()
    compress_stream(io.BytesIO(data), out, model, **kw)
    return out.getvalue()


def decompress(data: bytes, model: str | LoadedModel | None = None, **kw) -> bytes:
    out = io.BytesIO()
    decompress_stream(io.BytesIO(data), out, model, **kw)
    return out.getvalue()


def load(path_or_bytes: str | bytes) -> LoadedModel:
    """Loads a model from a path, a bundled name, or the bytes of a model file."""
    if isinstance(path_or_bytes, bytes):
        return model_from_bytes(path_or_bytes, "model bytes")
    return load_model(path_or_bytes)
