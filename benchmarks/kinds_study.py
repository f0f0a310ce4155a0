"""What structured text wants of a block: lanes, and whether the model runs (issue 66's first question).

    python benchmarks/kinds_study.py DIR_OR_FILES... [--configs A,B,...] [--threads 1] [--json OUT]

Each file is compressed whole by the API under each configuration, one after the other on the
same cores, and decompressed; the table gives bytes, bits/byte and seconds each way per file and
in total:

    -6        the default level as it is (its lanes: 16 KB, 128 KB on repetitive blocks, at most 32;
              repetitive blocks raced against the stage alone, shazip/codec/kind.py)
    -6 model  the default level with the model on every block it tries (no race: shazip 0.21's choice)
    -6 heavy  the default level with -7's stage models (the heaviest)
    -6 1lane  the default level's stage and model, one lane a block (the stage sees the block in order)
    -6 stage  the default level's stage models without the model's input, one lane (no neural step)
    -2        the stage alone with its own models (the level that never runs the model)
    -9        the smallest level (one lane a block, every model)
    -9 stage  -9's stage models (the heaviest) without the model's input, one lane

`--trials` instead prints, per file, what a level's trial of the model (shazip/codec/kind.py)
sees on the file's first bytes beside what the whole file gives: the code lengths of the stage
alone and with the model, one lane, fresh, on the first 16 / 32 / 64 KB, and of the whole file
coded `-6` as it would be (the model in the level's lanes) and as a `stage` block (one lane, no
model), with seconds: what the level's threshold (options.MODEL_PAYS) is set from, on training
data only.

Evaluation only (but `--trials` on training text): never train or tune on what this reads. The
kernel path (`SHAZIP_KERNELS`) and the CPU are printed with the table.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import time
from pathlib import Path

import shazip
from shazip.codec.encode import stage_params
from shazip.core import kernels
from shazip.options import LEVELS, lane_policy

CONFIGS = {
    "-6": dict(level=6),
    "-6 model": dict(level=6, race=False),
    "-6 heavy": dict(level=6, models=7),
    "-6 1lane": dict(level=6, lanes=1),
    "-6 stage": dict(level=6, lanes=1, stage_only=True),
    "-2": dict(level=2),
    "-9": dict(level=9),
    "-9 stage": dict(level=9, lanes=1, stage_only=True),
}


def compressor(config: dict, threads: int) -> shazip.Compressor:
    """The API's compressor for one configuration (`stage_only`: the level's stage parameters
    with the model's input off, given as parameters, so the archive records exactly them)."""
    options = {k: v for k, v in config.items() if k not in ("stage_only", "race", "models")}
    if config.get("stage_only"):
        level = LEVELS[config["level"]]
        params = stage_params("cm", level, lane_policy(level, options.get("lanes"), False))
        options["adapt"] = dataclasses.replace(params, nn=False, nn_final=False)
    c = shazip.Compressor(threads=threads, **options)
    if config.get("race") is False:
        c.model_pays = None
    if "models" in config:  # another level's stage models, chosen by the input's kind as a level's are
        c.params = stage_params("cm", LEVELS[config["models"]], c.lane_policy)
    return c


def trials(files: list[Path], level: int, threads: int) -> None:
    """`--trials`: the model's saving on a file's start against its saving on the whole file."""
    from shazip.codec.block import _engine_for, encode_block, mixed_encode
    from shazip.format.container import Method
    from shazip.stage.adaptive import AdaptiveStage

    c = shazip.Compressor(level=level, threads=threads)
    print(f"{'file':28s} {'bytes':>9s}  trial 16K  32K  64K   whole: model  stage   saving  seconds model/stage")
    for f in files:
        data = f.read_bytes()[:c.frame_blocks and 2 << 20]
        params = c.params.for_data(data)
        saved = []
        for n in (16 << 10, 32 << 10, 64 << 10):
            sample = data[:n]
            alone = len(mixed_encode(None, AdaptiveStage(params.fitted(len(sample))), sample, 1))
            stage = AdaptiveStage(params.fitted(len(sample)))
            mixed = len(mixed_encode(_engine_for(stage, c._engine), stage, sample, 1))
            saved.append(1 - mixed / alone)
        whole = {}
        for method in (Method.MIXED, Method.STAGE):
            stage = AdaptiveStage(params.fitted(len(data)))
            t = time.perf_counter()
            _, k, payload = encode_block(c._engine, data, c.lane_policy, methods=frozenset({method}),
                                         get_stage=lambda: stage)
            whole[method] = (len(payload), time.perf_counter() - t, k)
        (m, tm, k), (a, ta, _) = whole[Method.MIXED], whole[Method.STAGE]
        print(f"{f.name:28s} {len(data):9,d}  {saved[0]:8.1%} {saved[1]:5.1%} {saved[2]:5.1%}   {m:9,d} {a:9,d} "
              f"{1 - m / a:6.1%} {tm:6.1f} / {ta:4.1f}  ({k} lanes)", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("inputs", nargs="+", type=Path)
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--trials", action="store_true", help="the model's trial against the whole file (see above)")
    args = ap.parse_args()
    files = sorted(p for i in args.inputs for p in ([i] if i.is_file() else i.iterdir()) if p.is_file())
    if args.trials:
        return trials(files, 6, args.threads)
    rows = []
    for name in args.configs.split(","):
        c = compressor(CONFIGS[name], args.threads)
        for f in files:
            data = f.read_bytes()
            t = time.perf_counter()
            blob = c.compress(data)
            seconds = time.perf_counter() - t
            assert shazip.decompress(blob, c.loaded, threads=args.threads) == data, (name, f)
            back = time.perf_counter() - t - seconds
            rows.append({"config": name, "file": f.name, "bytes": len(data), "archive": len(blob),
                         "bits_per_byte": round(8 * len(blob) / len(data), 4), "seconds": round(seconds, 2),
                         "decompress_seconds": round(back, 2)})
            print(f"{name:10s} {f.name:28s} {len(data):9,d} -> {len(blob):8,d} {8 * len(blob) / len(data):6.3f} "
                  f"{seconds:7.1f} s {back:7.1f} s", flush=True)
    print(f"\n{'config':10s} {'archive':>10s} {'bits/byte':>9s} {'seconds':>8s} {'back':>8s}   "
          f"(kernels {kernels()}, "
          f"{platform.processor() or platform.machine()}, {args.threads} thread(s))")
    total = sum(r["bytes"] for r in rows if r["config"] == rows[0]["config"])
    for name in args.configs.split(","):
        mine = [r for r in rows if r["config"] == name]
        packed = sum(r["archive"] for r in mine)
        print(f"{name:10s} {packed:10,d} {8 * packed / total:9.4f} {sum(r['seconds'] for r in mine):8.1f} "
              f"{sum(r['decompress_seconds'] for r in mine):8.1f}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
