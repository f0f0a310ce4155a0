"""Model files are data, never code: safetensors + JSON only, checked before use."""

from __future__ import annotations

import json
import pickle
import struct

import numpy as np
import pytest
import torch
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save

from shazip.model import file as modelfile
from shazip.errors import ModelError
from shazip.model.file import load_model


class _Boom:
    """A pickle that would create a file when unpickled."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _parts(path):
    blob = path.read_bytes()
    (n,) = struct.unpack("<Q", blob[:8])
    return json.loads(blob[8:8 + n])["__metadata__"], st_load(blob)


def test_pickle_payloads_are_refused_and_never_run(tmp_path, random_model):
    marker = tmp_path / "ran"
    for name, write in (("pickle.bin", lambda p: p.write_bytes(pickle.dumps(_Boom(marker)))),
                        ("torch.pt", lambda p: torch.save({"x": _Boom(marker)}, p)),
                        ("state.pt", lambda p: torch.save(random_model.model.state_dict(), p))):
        write(tmp_path / name)
        with pytest.raises(ModelError, match="not a shazip model"):
            load_model(tmp_path / name)
    assert not marker.exists()


def test_wrong_shapes_are_refused(tmp_path, random_model_path):
    meta, tensors = _parts(random_model_path)
    name = sorted(tensors)[0]
    tensors[name] = torch.zeros(tuple(tensors[name].shape) + (2,))
    (tmp_path / "m").write_bytes(st_save(tensors, metadata=meta))
    with pytest.raises(ModelError, match="do not match its config"):
        load_model(tmp_path / "m")


def test_a_config_larger_than_the_file_allocates_nothing(tmp_path, random_model_path):
    """A config claiming a paper-size model over tiny tensors is refused from the shapes alone."""
    meta, tensors = _parts(random_model_path)
    cfg = json.loads(meta["config"])
    cfg.update(d_model=1 << 16, d_boom=1 << 18)
    (tmp_path / "m").write_bytes(st_save(tensors, metadata=dict(meta, config=json.dumps(cfg))))
    with pytest.raises(ModelError, match="do not match its config"):
        load_model(tmp_path / "m")


def test_missing_tensor_and_bad_config_are_refused(tmp_path, random_model_path):
    meta, tensors = _parts(random_model_path)
    (tmp_path / "a").write_bytes(st_save(dict(list(tensors.items())[1:]), metadata=meta))
    with pytest.raises(ModelError, match="do not match its config"):
        load_model(tmp_path / "a")
    (tmp_path / "b").write_bytes(st_save(tensors, metadata=dict(meta, config="{not json")))
    with pytest.raises(ModelError, match="invalid model file"):
        load_model(tmp_path / "b")


def test_non_finite_weights_are_refused(tmp_path, random_model_path):
    meta, tensors = _parts(random_model_path)
    name = sorted(tensors)[-1]
    tensors[name] = tensors[name].clone()
    tensors[name].view(-1)[0] = float("nan")
    (tmp_path / "m").write_bytes(st_save(tensors, metadata=meta))
    with pytest.raises(ModelError, match="not finite"):
        load_model(tmp_path / "m")


def test_a_damaged_bundled_model_is_refused(tmp_path, monkeypatch, random_model_path):
    monkeypatch.setattr(modelfile, "BUNDLED_DIR", tmp_path)
    modelfile.bundle_model(random_model_path, "m", into=tmp_path)
    assert load_model("m").model_id == modelfile.model_from_bytes(random_model_path.read_bytes(), "x").model_id
    blob = bytearray((tmp_path / "m.safetensors").read_bytes())
    blob[-1] ^= 1
    (tmp_path / "m.safetensors").write_bytes(bytes(blob))
    with pytest.raises(ModelError, match="sha256 mismatch"):
        load_model("m")


def test_int8_export_is_smaller_and_gives_the_engine_the_same_integers(tmp_path, trained, text):
    """An int8 model file holds the very integers the int8 engine derives from the float file,
    at about a quarter of the size, and archives made with it round-trip."""
    import shazip
    from shazip.model import twin as quant
    from shazip.format.container import Method
    modelfile.save_model(trained.model, tmp_path / "f.safetensors", "t")
    modelfile.save_model(trained.model, tmp_path / "q.safetensors", "t", weights="int8")
    f, q = load_model(tmp_path / "f.safetensors"), load_model(tmp_path / "q.safetensors")
    assert (tmp_path / "q.safetensors").stat().st_size < 0.5 * (tmp_path / "f.safetensors").stat().st_size
    assert not f.int8_rows and sorted(q.int8_rows) == sorted(
        k for k, v in trained.model.state_dict().items() if v.dim() == 2 and k != "embed.weight")
    # The engine from the int8 file's own integers equals the one from its weights expanded to
    # float32 and quantized again (so archives made either way are the same), and its int8
    # weights are the float file's.
    a, b = quant.IntModel(f.model), quant.IntModel(q.int_weights())
    c = quant.IntModel(q.model)
    for ba, bb, bc in zip(a.blocks, b.blocks, c.blocks):
        for name in ("lstm", "boom", "q"):
            if name in bb:
                x, y, z = ba[name], bb[name], bc[name]
                assert all(torch.equal(u, v) for u, v in zip(x.weights, y.weights))
                assert all(torch.equal(u, v) for u, v in zip(y.weights + y.mults, z.weights + z.mults))
                assert torch.equal(y.bias, z.bias) and y.shift == z.shift
    assert torch.equal(a.embed, b.embed) and torch.equal(a.out.weights[0], b.out.weights[0])
    data = text[:3000]
    blob = shazip.compress(data, model=q, methods=frozenset({Method.MODEL}), adapt="none", lanes=4)
    assert shazip.decompress(blob, model=q) == data
    meta, tensors = _parts(tmp_path / "q.safetensors")
    assert meta["weights"] == "int8" and tensors["blocks.0.boom.up.weight.q8"].dtype == torch.int8


def test_float16_milestone_loads_as_the_rounded_weights(tmp_path, trained):
    """A milestone (weights="float16", half the float file) loads as float32 holding exactly each
    weight rounded to half precision, and trains on (--init takes it); a file mixing float16 and
    float32 tensors is refused."""
    modelfile.save_model(trained.model, tmp_path / "f.safetensors", "t")
    modelfile.save_model(trained.model, tmp_path / "h.safetensors", "t", {"bytes_seen": 5}, weights="float16")
    h = load_model(tmp_path / "h.safetensors")
    assert (tmp_path / "h.safetensors").stat().st_size < 0.55 * (tmp_path / "f.safetensors").stat().st_size
    assert h.info == {"bytes_seen": 5}
    for k, v in trained.model.state_dict().items():
        assert h.params[k].dtype == np.float32 and np.array_equal(h.params[k], v.half().float().numpy())
    meta, tensors = _parts(tmp_path / "h.safetensors")
    assert meta["weights"] == "float16"
    key = next(iter(tensors))
    tensors[key] = tensors[key].float()
    (tmp_path / "m").write_bytes(st_save(tensors, metadata=meta))
    with pytest.raises(ModelError, match="neither float32 nor all float16"):
        load_model(tmp_path / "m")


def test_bad_int8_tensors_are_refused(tmp_path, trained):
    modelfile.save_model(trained.model, tmp_path / "q.safetensors", "t", weights="int8")
    meta, tensors = _parts(tmp_path / "q.safetensors")
    key = next(k for k in tensors if k.endswith(".scale"))
    tensors[key] = tensors[key][:-1].clone()
    (tmp_path / "m").write_bytes(st_save(tensors, metadata=meta))
    with pytest.raises(ModelError, match="bad int8 tensor"):
        load_model(tmp_path / "m")


def test_archives_of_an_earlier_default_decode_after_a_new_one_ships(tmp_path, monkeypatch, random_model_path,
                                                                     trained, text):
    """A user's data never depends on a model the release no longer ships: archives made with
    `default` (format 4 records its id's first bytes, with or without the stage) still decode
    with plain defaults once another model is `default` and the old one is kept under a new
    name; the archive's id, not its name, finds it."""
    import shazip
    monkeypatch.setattr(modelfile, "BUNDLED_DIR", tmp_path)
    modelfile.bundle_model(random_model_path, "default", into=tmp_path)
    data = text[:3000]
    from shazip.format.container import Method  # model-coded blocks (stored ones would decode without any model
    archives = [shazip.compress(data, adapt="none", lanes=2, methods=frozenset({Method.MODEL})),
                shazip.compress(data, lanes=2, methods=frozenset({Method.MIXED}))]
    assert archives[0][4] == archives[1][4] == 5
    modelfile.bundle_model(random_model_path, "default-2026-11", into=tmp_path)  # the release keeps the old one...
    trained_path = tmp_path / "trained.safetensors"
    modelfile.save_model(trained.model, trained_path, name="trained")
    modelfile.bundle_model(trained_path, "default", into=tmp_path)  # ...and ships a new default
    assert load_model("default").model_id != load_model("default-2026-11").model_id
    for blob in archives:
        assert shazip.decompress(blob) == data
    (tmp_path / "default-2026-11.safetensors").unlink()
    index = modelfile.bundled_index()
    del index["default-2026-11"]
    (tmp_path / "index.json").write_text(json.dumps(index))
    for blob in archives:  # gone: a clear error naming the model by id
        with pytest.raises(ModelError, match="not installed"):
            shazip.decompress(blob)


def test_every_bundled_model_decodes_with_defaults(text):
    """Each model the release ships (the default and the ones it superseded) round-trips an
    archive decoded with no --model: the archive finds its model by id."""
    import shazip
    from shazip.format.container import Method
    names = sorted(modelfile.bundled_index())
    if not names:
        pytest.skip("no bundled model in this checkout")
    for name in names:
        blob = shazip.compress(text[:1500], model=name, lanes=2, methods=frozenset({Method.MIXED}))
        assert shazip.decompress(blob) == text[:1500], name


def test_each_level_codes_with_its_own_model_unless_one_is_named(text, tmp_path):
    """A level's model (`Level.model_name`) is the one its archives record, from the API and the
    command line alike, when no model is named; a named model overrides it; both decode with no
    model named (the archive finds its model by id)."""
    import io

    import shazip
    from click.testing import CliRunner

    from shazip.cli import main
    from shazip.format.listing import describe
    from shazip.options import LEVELS
    bundled = sorted(modelfile.bundled_index())
    if len(bundled) < 2:
        pytest.skip("fewer than two bundled models in this checkout")

    def recorded(blob: bytes) -> str:
        return describe(io.BytesIO(blob))[0]["model_id"]  # format 3 keeps the id's first 8 bytes

    data = text[:2000]
    first_level: dict[str, int] = {}
    for n, lv in LEVELS.items():
        if lv.model:
            first_level.setdefault(lv.model_name, n)
    for name, level in first_level.items():
        blob = shazip.compress(data, level)
        assert load_model(name).id_hex.startswith(recorded(blob)), (name, level)
        assert shazip.decompress(blob) == data
        (tmp_path / "in").write_bytes(data)
        assert CliRunner().invoke(main, [f"-{level}", "-c", "-q", str(tmp_path / "in")]).stdout_bytes == blob
        other = next(m for m in bundled if load_model(m).id_hex != load_model(name).id_hex)
        named = shazip.compress(data, level, model=other)
        assert load_model(other).id_hex.startswith(recorded(named)) and shazip.decompress(named) == data


def test_a_users_own_model_is_found_by_name_and_by_the_archives_that_need_it(own_models_folder, trained,
                                                                           random_model_path, text, tmp_path):
    """`shazip models --add` keeps the model in the user's folder, never the package: --model NAME
    finds it, it comes before a bundled model of the same name, and an archive made with it (which
    records its name and id) decodes with no --model."""
    from click.testing import CliRunner

    import shazip
    from shazip.cli import main
    from shazip.format.container import Method
    package = sorted(modelfile.BUNDLED_DIR.iterdir())
    r = CliRunner().invoke(main, ["models", "--add", str(random_model_path), "--name", "mine"])
    assert r.exit_code == 0 and str(own_models_folder) in r.stdout, r.output
    assert (own_models_folder / "mine.safetensors").exists() and sorted(modelfile.BUNDLED_DIR.iterdir()) == package
    assert load_model("mine").name == "mine"
    blob = shazip.compress(text[:2000], model="mine", lanes=2, methods=frozenset({Method.MIXED}))
    assert shazip.decompress(blob) == text[:2000]  # found by the id the archive records
    listing = CliRunner().invoke(main, ["models"]).stdout
    assert f"mine (yours, in {own_models_folder})" in listing
    trained_path = tmp_path / "t.safetensors"
    modelfile.save_model(trained.model, trained_path, name="t")
    assert_ok = CliRunner().invoke(main, ["models", "--add", str(trained_path), "--name", "default"])
    assert assert_ok.exit_code == 0
    assert load_model("default").model_id == load_model(trained_path).model_id  # the user's comes first


def test_a_bundled_model_goes_by_its_bundled_name():
    if "default" not in modelfile.bundled_index():
        pytest.skip("no bundled model in this checkout")
    assert load_model("default").name == "default"  # the file calls itself "general"


def test_adding_the_same_file_again_keeps_what_was_recorded_of_it(tmp_path, random_model_path, trained):
    modelfile.bundle_model(random_model_path, "m", into=tmp_path)
    index = json.loads((tmp_path / "index.json").read_text())
    index["m"]["figures"]["bytes_seen_before"] = 123
    (tmp_path / "index.json").write_text(json.dumps(index))
    assert modelfile.bundle_model(random_model_path, "m", into=tmp_path)["figures"]["bytes_seen_before"] == 123
    other = tmp_path / "other.safetensors"
    modelfile.save_model(trained.model, other, name="other")
    assert "bytes_seen_before" not in modelfile.bundle_model(other, "m", into=tmp_path)["figures"]


def test_what_the_index_records_of_a_model_goes_with_it(tmp_path, random_model_path, monkeypatch):
    """A fine-tune from an installed model counts all the training behind it, also what only its
    index records (the bundled default's warm start: 214.9 MB in all, not its last 39.7 MB)."""
    modelfile.bundle_model(random_model_path, "m", into=tmp_path)
    index = json.loads((tmp_path / "index.json").read_text())
    index["m"]["figures"]["bytes_seen_before"] = 175_000_000
    (tmp_path / "index.json").write_text(json.dumps(index))
    monkeypatch.setenv("SHAZIP_MODELS", str(tmp_path))
    assert load_model("m").info["bytes_seen_before"] == 175_000_000
