"""Model files: safetensors weights + JSON config in the metadata. Data only, never code.

A model's id is the sha256 of its file; archives record it, so a decoder can prove it holds
the very weights the encoder used.

Weights are float32, float16 (`save_model(..., weights="float16")`: half the size, for the
training milestones that carry a run's float weights from one machine to the next; loaded as
float32, exactly), or (`weights="int8"`, the shipped form, ~4x smaller) the matrices as int8
rows with a float32 scale each ("W.q8", "W.scale"). The integer engine takes
those integers as they are (`LoadedModel.int8_rows`); the float model gets them multiplied back
in float32 (one IEEE rounding per weight, the same everywhere), and saving checks that
quantizing those float weights per row gives back exactly the stored integers, so a float file
and its int8 export run the same integer model. Bundled models live in `shazip/models/` and are
listed in `shazip/models/index.json` with their sha256, which is checked on every load.

Reading a model checks its config and every tensor's name, type and shape from the file's JSON
header; the weights themselves (numpy, a tenth of a second to import) are read at their first
use, and checked then (finite numbers). A model file given by path is read in full at once, so
a bad one fails before any work; a bundled one, whose sha256 matches what was checked when it
was bundled, waits until a block needs it: an empty input never loads numpy.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import stat
import struct
from dataclasses import dataclass, field
from pathlib import Path

from typing import TYPE_CHECKING

from .config import Config, tensor_shapes
from ..errors import ModelError

if TYPE_CHECKING:
    import numpy as np

    from .exact import IntWeights
    from .sharnn import SHARNN

FORMAT = "shazip-model/1"
BUNDLED_DIR = Path(__file__).parent.parent / "models"  # shazip/models/
MAX_HEADER = 1 << 20  # a safetensors JSON header larger than this is not ours
MAX_INDEX = 1 << 20  # a models folder's index.json larger than this is not one shazip wrote


@dataclass
class LoadedModel:
    """A model file, its config and tensor shapes checked. Its weights (`params`, numpy), the
    integer engine's constants (`int_weights`) and the torch model (`model`, for training and
    the float engine) are made from the file on first use."""

    name: str
    model_id: bytes  # sha256 of the file
    cfg: Config
    blob: bytes = field(repr=False)  # the file
    info: dict = field(default_factory=dict)  # free-form figures recorded at export
    path: Path | None = None
    where: str = "model"  # how errors name it
    _made: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def id_hex(self) -> str:
        return self.model_id.hex()

    @property
    def num_params(self) -> int:
        return sum(math.prod(s) for s in tensor_shapes(self.cfg).values())

    @property
    def params(self) -> dict[str, np.ndarray]:
        """float32 weights by state-dict name, as the float model holds them."""
        return self._tensors()[0]

    @property
    def int8_rows(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """int8 files: each stored matrix as (int8 q [N, K], float32 scale [N]), for the integer engine."""
        return self._tensors()[1]

    def _tensors(self) -> tuple[dict, dict]:
        if "tensors" not in self._made:
            self._made["tensors"] = _read_tensors(self.blob, self.where)
        return self._made["tensors"]

    def int_weights(self) -> IntWeights:
        """The integer model's constants (exact.py), derived once."""
        if "int" not in self._made:
            from .exact import int_weights
            self._made["int"] = int_weights(self.cfg, self.params, self.int8_rows)
        return self._made["int"]

    @property
    def model(self) -> SHARNN:
        """The torch model of these weights (imports torch), built once, in eval mode."""
        if "torch" not in self._made:
            import torch

            from .sharnn import SHARNN
            with torch.device("meta"):
                model = SHARNN(self.cfg)
            model.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in self.params.items()}, strict=True,
                                  assign=True)
            self._made["torch"] = model.eval()
        return self._made["torch"]


WEIGHTS = ("float32", "float16", "int8")  # how a model file may store its weights


def save_model(model: SHARNN, path: str | Path, name: str, info: dict | None = None, weights: str = "float32") -> str:
    """Export: collapse the value gate, write weights atomically, return the sha256 hex id.
    `weights` (WEIGHTS): "int8" stores the matrices the engine quantizes (all but the
    embedding, which also feeds the first LayerNorm at 15 bits) as int8 rows + float32 scales;
    "float16" every weight rounded to half precision (a milestone, not a shipped model)."""
    from safetensors.torch import save as st_save
    if weights not in WEIGHTS:
        raise ValueError(f"unknown weights '{weights}' (choose {', '.join(WEIGHTS)})")
    model.collapse_vs()
    meta = {"format": FORMAT, "name": name, "config": json.dumps(model.cfg.to_dict()),
            "info": json.dumps(info or {}), "weights": weights}
    tensors = {k: v.detach().float().contiguous() for k, v in model.state_dict().items()}
    if weights == "int8":
        tensors = _pack_int8(tensors)
    elif weights == "float16":
        if any(bool((v.abs() > 65504).any()) for v in tensors.values()):
            raise ModelError(f"{path}: a weight beyond float16's range: keep this model in float32")
        tensors = {k: v.half() for k, v in tensors.items()}
    blob = st_save(tensors, metadata=meta)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _write_atomic(path, blob)
    return hashlib.sha256(blob).hexdigest()


def _int8_names(tensors: dict) -> list[str]:
    return [k for k, v in tensors.items() if v.dim() == 2 and k != "embed.weight"]


def _pack_int8(tensors: dict) -> dict:
    import torch

    from .exact import quantize_weight
    out = dict(tensors)
    for k in _int8_names(tensors):
        w = tensors[k].double()
        scale = (w.abs().amax(dim=1) / 127).float()
        scale[scale == 0] = 1.0
        q = torch.clamp(torch.round(w / scale.double()[:, None]), -127, 127).to(torch.int8)
        back = quantize_weight((q.float() * scale[:, None]).numpy())[0]
        if not (back == q.numpy()).all():  # cannot happen for finite weights: |q| <= 127 re-rounds to itself
            raise ModelError(f"int8 export of {k} would not load back to the same integers")
        del out[k]
        out[f"{k}.q8"], out[f"{k}.scale"] = q.contiguous(), scale.contiguous()
    return out


def _unpack_int8(tensors: dict[str, np.ndarray]) -> tuple[dict, dict]:
    """(float32 weights for the model, {name: (int8 q, float32 scale)} of the int8 matrices);
    their types and shapes were checked from the header (`_check_tensors`)."""
    out, rows = {}, {}
    for k, v in tensors.items():
        if k.endswith(".scale") and f"{k[:-6]}.q8" in tensors:
            continue
        if k.endswith(".q8"):
            base, scale = k[:-3], tensors[f"{k[:-3]}.scale"]
            out[base] = v.astype("float32") * scale[:, None]  # one float32 product each, as torch's
            rows[base] = (v, scale)
        else:
            out[k] = v.astype("float32", copy=False)  # float16 widens exactly
    return out, rows


_DTYPES = {"F32": "<f4", "F16": "<f2", "I8": "i1"}  # the types `_check_tensors` lets through


def _read_tensors(blob: bytes, where: str) -> tuple[dict, dict]:
    """The file's weights (`_unpack_int8`), refused unless every one is a finite number. Each
    stored tensor is a read-only view of the file's bytes, not a copy: a model in memory is its
    file once (and, for an int8 file, the float32 weights made from it)."""
    import numpy as np
    header = _header(blob, where)
    base = 8 + struct.unpack("<Q", blob[:8])[0]
    tensors, at = {}, 0
    try:
        spans = sorted((tuple(v["data_offsets"]), k) for k, v in header.items() if k != "__metadata__")
        for (start, end), name in spans:
            v = header[name]
            dtype = np.dtype(_DTYPES[v["dtype"]])
            count = math.prod(v["shape"])
            if start != at or end - start != count * dtype.itemsize:  # the header promised what the body does not hold
                raise ModelError(f"{where}: invalid model file (tensor {name} is not where its header says)")
            tensors[name] = np.frombuffer(blob, dtype, count, base + start).reshape(v["shape"])
            at = end
    except (TypeError, ValueError, KeyError) as e:
        raise _invalid(where, e) from None
    if base + at != len(blob):
        raise ModelError(f"{where}: invalid model file (bytes after its last tensor)")
    params, rows = _unpack_int8(tensors)
    if not all(bool(np.isfinite(v).all()) for v in params.values()):
        raise ModelError(f"{where}: invalid model file (weights that are not finite numbers)")
    return params, rows


def _invalid(where: str, e: Exception) -> ModelError:
    first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    return ModelError(f"{where}: invalid model file ({first})")


def _check_tensors(header: dict, cfg: Config, where: str) -> None:
    """Every tensor's name, type and shape, from the JSON header alone: float32 (or all float16)
    tensors, or int8 matrices ("W.q8") with a float32 scale per row ("W.scale"), as the config's
    model has them."""
    entries = {k: v for k, v in header.items() if k != "__metadata__"}
    got, types = {}, set()
    for k, v in entries.items():
        if k.endswith(".scale") and f"{k[:-6]}.q8" in entries:
            continue
        shape = tuple(v["shape"])
        if k.endswith(".q8"):
            base, scale = k[:-3], entries.get(f"{k[:-3]}.scale")
            if (v["dtype"] != "I8" or len(shape) != 2 or scale is None or scale["dtype"] != "F32"
                    or tuple(scale["shape"]) != shape[:1]):
                raise ModelError(f"{where}: invalid model file (bad int8 tensor {base})")
            got[base] = shape
        else:
            got[k] = shape
            types.add(v["dtype"])
    expected = tensor_shapes(cfg)
    if got != expected:
        wrong = sorted(set(got) ^ set(expected)) or [k for k in expected if got[k] != expected[k]]
        raise ModelError(f"{where}: invalid model file (tensors do not match its config: {wrong[0]})")
    if types - {"F32"} and types != {"F16"}:
        raise ModelError(f"{where}: invalid model file (weights that are neither float32 nor all float16)")


def _write_atomic(path: Path, blob: bytes) -> None:
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    tmp.write_bytes(blob)
    os.replace(tmp, path)


def _header(blob: bytes, where: str) -> dict:
    """The safetensors JSON header (tensors and "__metadata__"), if it is a shazip model's."""
    if len(blob) < 8:
        raise ModelError(f"{where}: not a shazip model (too short)")
    (n,) = struct.unpack("<Q", blob[:8])
    if n > min(MAX_HEADER, len(blob) - 8):
        raise ModelError(f"{where}: not a shazip model (not a safetensors file)")
    try:
        header = json.loads(blob[8 : 8 + n])
        meta = header.get("__metadata__") or {}
    except (ValueError, AttributeError):
        raise ModelError(f"{where}: not a shazip model (not a safetensors file)") from None
    if meta.get("format") != FORMAT:
        raise ModelError(f"{where}: not a shazip model (format {meta.get('format')!r}, expected {FORMAT!r})")
    return header


def model_from_bytes(blob: bytes, where: str, path: Path | None = None, read: bool = True) -> LoadedModel:
    """The model in a file's bytes, its config and tensor shapes checked; with `read`, its
    weights read and checked now too, else at their first use."""
    header = _header(blob, where)
    meta = header["__metadata__"]
    try:
        cfg = Config.from_dict(json.loads(meta["config"]))
        info = json.loads(meta.get("info", "{}"))
        _check_tensors(header, cfg, where)
    except ModelError:
        raise
    except Exception as e:  # shapes, missing fields, bad JSON: all mean "not a valid model"
        raise _invalid(where, e) from None
    loaded = LoadedModel(meta.get("name", path.stem if path else "model"), hashlib.sha256(blob).digest(), cfg, blob,
                         info, path, where)
    if read:
        loaded._tensors()
    return loaded


def user_models_dir() -> Path:
    """Where `shazip models --add` keeps a user's own models: $SHAZIP_MODELS, else the XDG data
    folder ($XDG_DATA_HOME/shazip/models, ~/.local/share/shazip/models), which outlives upgrades
    of the package."""
    if os.environ.get("SHAZIP_MODELS"):
        return Path(os.environ["SHAZIP_MODELS"])
    data = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(data) / "shazip" / "models"


def _index(folder: Path) -> dict[str, dict]:
    """A models folder's index.json (none: no models), each entry checked: a name to a file in
    that folder, its sha256 and its size (what `bundle_model` writes). A folder is anyone's to
    write, so nothing in it is trusted further than it is checked."""
    idx = folder / "index.json"
    if not os.path.lexists(idx):
        return {}
    try:
        with _open_regular(idx, str(idx)) as f:
            text = f.read(MAX_INDEX + 1)
        if len(text) > MAX_INDEX:
            raise ModelError(f"{idx}: the model index is damaged (over {MAX_INDEX:,} bytes)")
        entries = json.loads(text)
    except OSError as e:
        raise ModelError(f"{idx}: the model index is unreadable ({e.strerror or e})") from None
    except ValueError as e:
        raise ModelError(f"{idx}: the model index is damaged ({e})") from None
    problem = _index_problem(entries)
    if problem:
        raise ModelError(f"{idx}: the model index is damaged ({problem})")
    return entries


def _index_problem(entries: object) -> str | None:
    """What is wrong with an index's entries, if anything."""
    if not isinstance(entries, dict):
        return f"a JSON {type(entries).__name__}, not an object of models"
    for name, e in entries.items():
        if not isinstance(e, dict):
            return f"model {name!r} is a {type(e).__name__}, not an object"
        if not _NAME.fullmatch(name):
            return f"model name {name!r} is not letters, digits, '-' or '_'"
        if not isinstance(e.get("file"), str) or not _FILE.fullmatch(e["file"]):
            return f"model {name!r}: its file is not a file name in the folder"
        if not isinstance(e.get("sha256"), str) or not re.fullmatch(r"[0-9a-f]{64}", e["sha256"]):
            return f"model {name!r}: its sha256 is not 64 hex digits"
        if type(e.get("bytes")) is not int or e["bytes"] < 0:
            return f"model {name!r}: its size is not a number of bytes"
        if not isinstance(e.get("figures", {}), dict):
            return f"model {name!r}: its figures are not an object"
    return None


_NAME = re.compile(r"[A-Za-z0-9_-]+")  # a model's name (what --model takes)
_FILE = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]*")  # a file in the folder itself (no path, not hidden)


def _open_regular(path: Path, where: str):
    """`path` opened for reading if it is a regular file, else ModelError: opened without
    blocking (a FIFO would wait for a writer forever) and judged on the open descriptor, so no
    other file can take its place between the check and the read (/dev/zero would never end)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ModelError(f"{where}: not a regular file")
    return os.fdopen(fd, "rb")


def bundled_index() -> dict[str, dict]:
    """The models shipped inside the package."""
    return _index(BUNDLED_DIR)


def installed() -> dict[str, tuple[Path, dict]]:
    """Every model a name finds, with its folder: the user's own (user_models_dir) before the
    bundled ones, so a user's model of the same name is the one used."""
    found = {name: (BUNDLED_DIR, e) for name, e in bundled_index().items()}
    user = user_models_dir()
    return found | {name: (user, e) for name, e in _index(user).items()}


def bundle_model(src: str | Path, name: str | None = None, bench: dict | None = None,
                 into: Path | None = None) -> dict:
    """Copies a model file into a models folder (`into`: the user's by default; BUNDLED_DIR ships
    it inside the package, as a release ships `default`) and records its sha256. `bench`: a
    `shazip bench` result for this very file, whose headline figures are recorded beside the
    trainer's."""
    path = Path(src)
    if not os.path.lexists(path):
        raise ModelError(f"model not found: '{src}'")
    blob = _read_file(path)  # read once: the recorded sha256 is that of the weights checked here
    loaded = model_from_bytes(blob, str(path), path)
    name = name or loaded.name
    into = user_models_dir() if into is None else into
    before = _index(into).get(name, {})  # the same file again (new figures): what was recorded of it stays
    figures = {**(before.get("figures", {}) if before.get("sha256") == hashlib.sha256(blob).hexdigest() else {}),
               **loaded.info}
    if bench is not None:
        figures["bench"] = bench_figures(bench, hashlib.sha256(blob).hexdigest())
    if not _NAME.fullmatch(name):
        raise ModelError(f"model name '{name}' must be letters, digits, '-' or '_'")
    try:
        into.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ModelError(f"{into}: cannot make the models folder ({e.strerror})") from None
    _write_atomic(into / f"{name}.safetensors", blob)
    idx = _index(into)
    idx[name] = {"name": name, "file": f"{name}.safetensors", "sha256": hashlib.sha256(blob).hexdigest(),
                 "bytes": len(blob), "params": loaded.num_params, "figures": figures}
    _write_atomic(into / "index.json", (json.dumps(idx, indent=2, sort_keys=True) + "\n").encode())
    return idx[name] | {"folder": str(into)}


def bench_figures(result: dict, sha256: str) -> dict:
    """The headline of a `shazip bench` result (bench.json) for the model with this sha256."""
    rows = {r["compressor"]: r for r in result.get("rows", [])}
    row = rows.get("shazip")
    if row is None or row["extra"]["model_id"] != sha256:
        raise ModelError("the benchmark result is not of this model file (its model id differs)")
    out = {"input": Path(result["input"]["path"]).name, "input_bytes": result["input"]["bytes"],
           "bits_per_byte": row["bits_per_byte"], "model_bits_per_byte": row["extra"]["model_bits_per_byte"],
           "compress_KBps": row["compress_KBps"], "decompress_KBps": row["decompress_KBps"],
           "threads": row["extra"]["threads"], "lanes": row["extra"]["lanes"], "round_trip": row["round_trip"],
           "cpu": result["machine"]["cpu"], "date": result["machine"]["date"]}
    if "xz" in rows:
        out["xz_bits_per_byte"] = rows["xz"]["bits_per_byte"]
    return out


def load_model(spec: str | os.PathLike = "default") -> LoadedModel:
    """`spec` is an installed model's name (the user's own, then the bundled ones) or a path to a
    model file."""
    idx = installed()
    if isinstance(spec, str) and spec in idx:
        folder, entry = idx[spec]
        path = folder / entry["file"]
        blob = _read_file(path, f"model '{spec}' ({path})", entry["bytes"])
        if hashlib.sha256(blob).hexdigest() != entry["sha256"]:
            raise ModelError(f"model '{spec}' is damaged (sha256 mismatch): "
                             + ("reinstall shazip" if folder == BUNDLED_DIR else "add it again (shazip models --add)"))
        loaded = model_from_bytes(blob, f"model '{spec}'", path, read=False)  # checked when it was bundled
        loaded.name = spec  # what the user typed, not the name the file was trained under (`default`: "general")
        for key, value in entry.get("figures", {}).items():  # what was recorded beside the file (its whole
            if key != "bench":                                 # training: a fine-tune counts it on)
                loaded.info.setdefault(key, value)
        return loaded
    path = Path(spec)
    if not os.path.lexists(path) or os.path.isdir(path):
        known = ", ".join(sorted(idx)) or "none bundled"
        raise ModelError(f"model not found: '{spec}' (bundled: {known})")
    return model_from_bytes(_read_file(path), str(path), path)


def _read_file(path: Path, where: str | None = None, size: int | None = None) -> bytes:
    """A model file's bytes, read only once it is a regular file (`_open_regular`) of `size`
    bytes where the index records one, and its header (read first) is a shazip model's and
    describes tensors that end where the file does: a file larger or shorter than its header
    says (a valid header before gigabytes of anything) is refused at once, not read whole."""
    where = where or str(path)
    try:
        with _open_regular(path, where) as f:
            if size is not None and os.fstat(f.fileno()).st_size != size:
                raise ModelError(f"{where}: damaged ({os.fstat(f.fileno()).st_size:,} bytes where the models "
                                 f"folder's index records {size:,})")
            size = os.fstat(f.fileno()).st_size
            head = f.read(8)
            if len(head) == 8:
                n = struct.unpack("<Q", head)[0]
                head += f.read(n) if n <= min(MAX_HEADER, size - 8) else b""
            header = _header(head, where)
            try:
                end = 8 + len(head[8:]) + max((v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"),
                                              default=0)
            except (TypeError, KeyError, IndexError, AttributeError):
                raise ModelError(f"{where}: invalid model file (a tensor without its data offsets)") from None
            if end != size:
                raise ModelError(f"{where}: invalid model file ({size:,} bytes, where its header describes {end:,})")
            return head + f.read()
    except OSError as e:
        raise ModelError(f"{where}: cannot read the model file ({e.strerror or e})") from None


def find_model(name: str, model_id: bytes) -> LoadedModel:
    """The installed model whose id is (or, in format 3 archives, starts with) `model_id`, whatever
    it is called now: a model that was `default` when an archive was made stays installed under
    another name when a new default ships. `name` is what the archive recorded, for the message."""
    matches = installed_names(model_id)
    found = installed()
    if len({found[n][1]["sha256"] for n in matches}) != 1:  # none, or a prefix that is not one model's
        raise ModelError(f"this archive needs {model_label(name, model_id)}, which is not installed; "
                         f"pass it with --model PATH")
    return load_model(matches[0])


def installed_names(model_id: bytes) -> list[str]:
    """The names under which the installed models whose id is (or starts with) `model_id` are
    found (the user's own and the bundled ones): what a user types for the model an archive needs."""
    return sorted(n for n, (_, e) in installed().items() if bytes.fromhex(e["sha256"]).startswith(model_id))


def model_label(name: str, model_id: bytes) -> str:
    """How messages name an archive's model: by name where the archive records one."""
    return f"model '{name}' (id {model_id.hex()[:16]})" if name else f"the model with id {model_id.hex()[:16]}"


def stored_name(loaded: LoadedModel, compact: bool) -> str:
    """The model name an archive records. Format 3 (`compact`, as gzip -n leaves out file names)
    records none for a bundled model, which its id finds (whatever name the model file holds:
    a bundled model's file may hold another name than its bundled one); a user's own model keeps its name, so that an
    archive needing it can say which."""
    return "" if compact and any(e["sha256"] == loaded.id_hex for e in bundled_index().values()) else loaded.name
