"""The user-facing choices and defaults, in a module that imports nothing heavy, so that the
command line can show its help and version without loading torch (the API checks them too)."""

from dataclasses import dataclass

DEFAULT_LANES = 32  # the most lanes the automatic choice uses on the CPU (lanes 0 on the command line)
MAX_LANES = 1024  # each lane holds a ring of mem_len states: 512 MB for `small` at 1024 lanes
# Lanes per block. Each lane starts the model cold, and lanes interleave in the adaptive stage's
# shared tables, which dilutes the recency its statistics rely on. On the CPU a step costs about
# the same per lane whatever their number (benchmarks/JOURNAL.md, "The step"), so lanes buy little
# speed there; a GPU runs a step's lanes as one batch and wants many. Measured on the suite
# (benchmarks/JOURNAL.md, "Structured text"): lanes of at least 16 KB instead of 2 KB make the
# archives 0.8 % smaller (logs 6 %, JSON 3 %) and were no slower.
LANE_FLOOR = 256  # what archives may hold: at most n // 256 lanes (every shazip encoder keeps to it)
# Repetitive text (logs, tables, JSON, XML, code: records and keys that recur) loses far more to
# lanes than prose does: strings first met in two lanes are paid twice, and each lane's model
# and line-above contexts start cold. Measured on 150 KB development files (benchmarks/JOURNAL.md,
# "Lanes by kind"), lanes of 64 KB rather than 16 KB: logs 1.2-7 % smaller, JSON 1.4-6.8 %, XML
# 1.6 %, code 0.6 %, a book 0.2 %. So a block that zstd's fastest level shrinks more than
# REPETITIVE-fold (prose: 2.4-2.7; those files: 3.5-82) gets lanes LONG_LANES times longer on
# the CPU, where the step costs about the same per lane (a log and a JSON file of the suite took
# 4-24 % longer end to end for 2.6-3.3 % smaller archives). Eight times (128 KB at -6: 16 lanes
# for a block of 2 MiB, not 32): 4 MiB of logs 1.6 % smaller at the same speed at -T 2; 8 lanes
# made them 2.8 % smaller but took 10 % longer to compress and 17 % to decompress there (the
# threads meet once a step, over fewer lanes), though no longer on one core
# (benchmarks/JOURNAL.md, "What logs want of a block").
# But never below SPLIT_LANES where the plain rule gives that many: a frame's lanes are split
# over threads only from 8 (csrc/model/model.cpp: SOLO_LANES per member), and a 349 KB file
# coded in 5 lanes instead of 21 took 45 % longer at -T 2 for 0.8 % less.
REPETITIVE = 3.0
LONG_LANES = 8
SPLIT_LANES = 8
# On a GPU a step is one batch of every lane and costs about the same from 64 to 1,024 lanes
# (the torch twin launches ~550 kernels a step: 6.0 ms at 64 lanes, 7.3 ms at 1,024 on an H100
# eagerly; benchmarks/JOURNAL.md, "The GPU machine"), so there the automatic choice takes up to
# MAX_LANES lanes, but none shorter than the level's and than MIN_LANE_GPU: short lanes cost size
# (-6 on 4.2 MB of the mixed text in 2 MiB frames, against the CPU's default: lanes of 2 KB
# +5.0 %, 8 KB +2.2 %, 16 KB +1.4 %, 32 KB +0.7 %; on 32 MiB, 2 KB lanes +6.5 %; JOURNAL.md,
# "The GPU's lanes, by size"), and the GPU's archive is to stay within 2 % of the CPU's.
MIN_LANE_GPU = 16 << 10
ONE_LANE = 1 << 40  # a shortest lane no block reaches: one lane per block


@dataclass(frozen=True)
class LanePolicy:
    """How a block's lanes are chosen: at most `most`, none shorter than `min_lane`, or than
    `repetitive_min_lane` where zstd's fastest level shrinks the block more than REPETITIVE-fold
    (then not fewer than SPLIT_LANES where the first rule gives that many)."""

    most: int
    min_lane: int
    repetitive_min_lane: int

    @property
    def one_lane(self) -> bool:
        """Whether every block is one lane: the adaptive stage's models of a lane's own statistics
        (`local_match`, `local_ctx`) would then repeat the shared ones, and are left out."""
        return self.most == 1 or self.min_lane >= ONE_LANE


@dataclass(frozen=True)
class Level:
    """What a compression level (-1 .. -9) chooses. Every choice is recorded in the archive, so
    a decoder is told nothing. Measured on the suite: benchmarks/JOURNAL.md, "Levels"."""

    models: tuple[str, ...]  # the adaptive stage's models: version 1's (`nn`: the neural model) and models.def's
    min_lane: int  # the shortest lane the automatic choice makes on the CPU (a GPU: MIN_LANE_GPU at most)
    model_name: str = "default"  # the bundled model it codes with where the caller names none
    # the least share of a repetitive block's code length the model must save, half-way, to be run on
    # to its end (codec/kind.py; else the stage codes the block alone, a `stage` block); None: no race
    model_pays: float | None = None
    # the stage's models for a frame whose first block is repetitive (codec/kind.py's test), where
    # they differ from `models`
    repetitive_models: tuple[str, ...] | None = None

    @property
    def model(self) -> bool:
        """Whether the neural model codes (without it the adaptive stage codes alone, ~9x faster)."""
        return "nn" in self.models


# Each level's stage, written out (tests/test_codec.py pins what each makes). Why these, measured on
# the suite (benchmarks/JOURNAL.md, "Stage version 13" .. "Stage version 17"): every level but -1 uses
# version 16's slow final mixer (0.4-0.5 % smaller for no time) and version 17's seeded weight sets
# (up to 0.2 %). Levels 3-6 use version 12's run inputs (0.5 % smaller at -6) and version 13's groups
# context (0.3 %), without the sparse context (+0.01 % beside the groups, for its time): the stage
# 7.4-7.8 µs/byte at the default's lanes. Levels 7-9 add HEAVY: version 14's three of the groups (0.3-0.5 %
# for about 1.3 µs/byte), version 15's tokens and indirect contexts (0.3-0.7 %, about 2 µs/byte at one
# lane), version 16's contexts of numbers, cells, tokens and brackets (0.5 % on structured text) and
# version 17's order, place and match mixers and the NN's final input (0.3-0.4 %, about 4 µs/byte at one
# lane, 16 % of -9's time end to end): a few per cent of their time, where the model's long lanes cost
# several times the stage's. Level 2, the stage alone, keeps version 11's models: there the stage is all
# of the time. Levels 2-9 have version 18's models of numbers, the float tail and the line steps
# (canada.json 7.1 % smaller, logs 0.6 %, prose within 0.01 %, for no time; "Stage version 18") and
# version 19's number echo (logs and JSON up to 3 % smaller, text without numbers unchanged, for no
# time; "Stage version 19"). Where every block is one lane (-2, -9) the stage's models of a lane's
# own statistics are left out (LanePolicy.one_lane).
# Levels 3-5 code with `mini` (d 128, models/README.md), whose step costs 0.38x `default`'s: on large
# inputs their lanes are those of -6 (at most DEFAULT_LANES a block), so the model is what sets them
# apart: on the suite -5 is 1.031x -6's bytes, one core 1.65x as fast (benchmarks/JOURNAL.md, "mini").
RECORDS = ("fields", "brackets", "layered", "shape", "local_match", "local_ctx", "warm", "match_ctx",  # 2-3
           "field_value", "field_eq", "match_apm", "digits", "recover", "line_match", "number", "record",  # 4-8
           "predicted", "class_mix", "state_mix", "cell_left", "cell_order", "last_number",  # 9-11
           "float_tail", "line_step", "number_echo")  # 18-19
HEAVY = ("group_word", "group_mix", "group_apm", "tokens", "indirect", "places", "cell_up", "this_token", "nest",
         "order_mix", "nn_final", "place_mix", "match_mix")
STAGE_ALONE = ("word", "column", "sparse", "match", "apm") + RECORDS + ("slow_final", "seed_sets")
DEFAULT_STAGE = ("word", "column", "nn", "match", "apm") + RECORDS + ("runs", "groups", "slow_final", "seed_sets")
HEAVY_STAGE = ("word", "column", "sparse", "nn", "match", "apm") + RECORDS + (
    "runs", "groups", "slow_final", "seed_sets") + HEAVY
# On a repetitive block the model in the level's lanes saves -3 % to +12 % against the stage alone in
# one lane, for most of the time: levels 3-6 run it to the end only where, half-way, it has saved
# MODEL_PAYS or more of what the stage alone spent on the same bytes, -7 .. -9 wherever it saves
# anything (codec/kind.py; benchmarks/JOURNAL.md, "Stage blocks").
MODEL_PAYS = 0.03
# And a frame that starts with a repetitive block gets -7's stage models at levels 3-6 too: on
# training logs and JSON 2.6 % smaller, for 27 % more time compressing and 34 % decompressing such
# text (benchmarks/JOURNAL.md, "Stage blocks"), where prose keeps the lighter set and its speed.
LEVELS = {1: Level(("word", "column", "sparse", "match", "apm"), ONE_LANE), 2: Level(STAGE_ALONE, ONE_LANE),
          3: Level(DEFAULT_STAGE, 2048, "mini", MODEL_PAYS, HEAVY_STAGE),
          4: Level(DEFAULT_STAGE, 4096, "mini", MODEL_PAYS, HEAVY_STAGE),
          5: Level(DEFAULT_STAGE, 8192, "mini", MODEL_PAYS, HEAVY_STAGE),
          6: Level(DEFAULT_STAGE, 16384, model_pays=MODEL_PAYS, repetitive_models=HEAVY_STAGE),
          7: Level(HEAVY_STAGE, 65536, model_pays=0.0), 8: Level(HEAVY_STAGE, 262144, model_pays=0.0),
          9: Level(HEAVY_STAGE, ONE_LANE, model_pays=0.0)}
DEFAULT_LEVEL = 6


def lane_policy(level: Level, lanes: int | None, on_gpu: bool) -> LanePolicy:
    """`lanes` asked for (down to LANE_FLOOR bytes each), or the automatic choice of `level` on
    the CPU or a GPU (the comments above say why each)."""
    if lanes is not None:
        return LanePolicy(lanes, LANE_FLOOR, LANE_FLOOR)
    if on_gpu and level.model:
        gpu_lane = min(level.min_lane, MIN_LANE_GPU)
        return LanePolicy(MAX_LANES, gpu_lane, gpu_lane)
    return LanePolicy(DEFAULT_LANES, level.min_lane, level.min_lane * LONG_LANES)


MIN_LANE = LEVELS[DEFAULT_LEVEL].min_lane  # the default level's automatic choice on the CPU
LANES_HELP = ("Parallel lanes per block: more are faster on a GPU, each starts the model cold. 0: automatic, at "
              f"most {DEFAULT_LANES} and none shorter than the level's (16 KB at -6, {LONG_LANES}x that on repetitive text; "
              f"on a GPU up to {MAX_LANES}, none shorter than the level's or {MIN_LANE_GPU >> 10} KB, "
              "whichever is less).")
def models_by_level() -> str:
    """Which model codes at which levels, read from LEVELS: "-3 .. -5 mini, -6 .. -9 default"."""
    runs: list[list] = []  # [first, last, model name]
    for n, lv in LEVELS.items():
        if not lv.model:
            continue
        if runs and runs[-1][2] == lv.model_name and runs[-1][1] == n - 1:
            runs[-1][1] = n
        else:
            runs.append([n, n, lv.model_name])
    return ", ".join(f"-{a} .. -{b} {name}" if a != b else f"-{a} {name}" for a, b, name in runs)


LEVELS_HELP = ("-1 .. -9: -1 (--fast) and -2 code with the adaptive stage alone, no neural model (-1 its version "
               "1 models), about 9x faster; -3 .. -9 add a model (" + models_by_level() + "), in ever longer "
               "lanes (smaller, slower): -6 (the default) lanes of 16 KB or more, -7 .. -9 also the stage's heaviest models "
               "(-3 .. -6 on repetitive text), -9 (--best) "
               f"one lane per block (on a GPU: up to {MAX_LANES} lanes, none shorter than the level's or "
               f"{MIN_LANE_GPU >> 10} KB, whichever is less).")
DEFAULT_BLOCK_SIZE = 2 << 20
# Input bytes per frame (an independent archive: docs/format.md, "Frames"). Each frame starts the adaptive
# stage cold: halving the frame costs 0.2-0.9 % (benchmarks/JOURNAL.md, "Frames" and "Folders;
# frames' size; a fresh bench"), which users with cores to spare may choose to pay.
DEFAULT_FRAME_SIZE = 16 << 20
# On a GPU the model's steps are shared by the frames coded at once and the stages, a core each
# (~130 KB/s), bound the speed (docs/gpu.md): frames are smaller there, so that 32 MiB make one
# frame for each of 16 cores (2 MiB frames cost ~0.3 % against 8 MiB on mixed text).
GPU_FRAME_SIZE = 2 << 20
FRAME_HELP = ("Input bytes per frame, an independent archive (whole blocks): -T N makes and decodes N frames at "
              f"once. 0: one archive however long the input. [default: {DEFAULT_FRAME_SIZE >> 20} MiB; with "
              f"--device cuda {GPU_FRAME_SIZE >> 20} MiB]")


def frame_size_for(device: str, frame_size: int | None) -> int:
    """The frame size asked for, or the default on `device` ("cpu" or "cuda", resolved)."""
    if frame_size is not None:
        return frame_size
    return DEFAULT_FRAME_SIZE if device == "cpu" else GPU_FRAME_SIZE


MAX_FRAME_IN_MEMORY = 256 << 20  # a decoder splits out frames to decode at once up to this archive size
ADAPT_CHOICES = ("cm", "none")  # the adaptive stage, on by default; none: the model alone
ENGINE_CHOICES = ("int8", "float32")  # engines.ENGINES, by name
DEVICES = ("cpu", "cuda", "auto")  # where the int8 engine runs (hardware.resolve_device)
