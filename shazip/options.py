"""The user-facing choices and defaults, in a module that imports nothing heavy, so that the
command line can show its help and version without loading torch (the API checks them too)."""

from dataclasses import dataclass

DEFAULT_LANES = 32  # the most lanes the automatic choice uses (lanes 0 on the command line)
MAX_LANES = 1024  # each lane holds a ring of mem_len states: 512 MB for `small` at 1024 lanes
# Lanes per block. Each lane starts the model cold, and lanes interleave in the adaptive stage's
# shared tables, which dilutes the recency its statistics rely on. On the CPU a step costs about
# the same per lane whatever their number (benchmarks/README.md, "The step"), so lanes buy little
# speed there; a GPU runs a step's lanes as one batch and wants many. Measured on the suite
# (benchmarks/README.md, "Structured text"): lanes of at least 16 KB instead of 2 KB make the
# archives 0.8 % smaller (logs 6 %, JSON 3 %) and were no slower.
LANE_FLOOR = 256  # what archives may hold: at most n // 256 lanes (every shazip encoder keeps to it)
# Repetitive text (logs, tables, JSON, XML, code: records and keys that recur) loses far more to
# lanes than prose does: strings first met in two lanes are paid twice, and each lane's model
# and line-above contexts start cold. Measured on 150 KB development files (benchmarks/README.md,
# "Lanes by kind"), lanes of 64 KB rather than 16 KB: logs 1.2-7 % smaller, JSON 1.4-6.8 %, XML
# 1.6 %, code 0.6 %, a book 0.2 %. So a block that zstd's fastest level shrinks more than
# REPETITIVE-fold (prose: 2.4-2.7; those files: 3.5-82) gets lanes LONG_LANES times longer on
# the CPU, where the step costs about the same per lane (a log and a JSON file of the suite took
# 4-24 % longer end to end for 2.6-3.3 % smaller archives).
REPETITIVE = 3.0
LONG_LANES = 4
MIN_LANE_GPU = 2048  # the automatic choice on a GPU: at most DEFAULT_LANES lanes, none shorter than this
ONE_LANE = 1 << 40  # a shortest lane no block reaches: one lane per block


@dataclass(frozen=True)
class Level:
    """What a compression level (-1 .. -9) chooses. Every choice is recorded in the archive, so
    a decoder is told nothing. Measured on the suite: benchmarks/README.md, "Levels"."""

    model: bool  # the neural model; without it the adaptive stage codes alone (~9x faster on the suite)
    stage: int  # the adaptive stage's models: version 1's set, or all of the newest version's (structured text)
    min_lane: int  # the shortest lane the automatic choice makes on the CPU (a GPU: MIN_LANE_GPU at most)


LEVELS = {1: Level(False, 1, ONE_LANE), 2: Level(False, 4, ONE_LANE), 3: Level(True, 4, 2048),
          4: Level(True, 4, 4096), 5: Level(True, 4, 8192), 6: Level(True, 4, 16384), 7: Level(True, 4, 65536),
          8: Level(True, 4, 262144), 9: Level(True, 4, ONE_LANE)}
DEFAULT_LEVEL = 6
MIN_LANE = LEVELS[DEFAULT_LEVEL].min_lane  # the default level's automatic choice on the CPU
LANES_HELP = ("Parallel lanes per block: more are faster on a GPU, each starts the model cold. 0: automatic, at "
              f"most {DEFAULT_LANES} and none shorter than the level's (16 KB at -6, 4x that on repetitive text; "
              "2 KB on a GPU).")
LEVELS_HELP = ("-1 .. -9: -1 (--fast) and -2 code with the adaptive stage alone, no neural model (-1 its version "
               "1 models), about 9x faster; -3 .. -9 add the model, in ever longer lanes (smaller, slower): "
               "-6 (the default) lanes of 16 KB or more, -9 (--best) one lane per block (on a GPU: lanes of 2 KB or more "
               "at every level).")
DEFAULT_BLOCK_SIZE = 2 << 20
# Input bytes per frame (an independent archive: frames.py). Each frame starts the adaptive
# stage cold; measured in benchmarks/README.md "Frames".
DEFAULT_FRAME_SIZE = 16 << 20
FRAME_HELP = ("Input bytes per frame, an independent archive (whole blocks): -T N makes and decodes N frames at "
              "once. 0: one archive however long the input.")
MAX_FRAME_IN_MEMORY = 256 << 20  # a decoder splits out frames to decode at once up to this archive size
ADAPT_CHOICES = ("cm", "none")  # the adaptive stage, on by default; none: the model alone
ENGINE_CHOICES = ("int8", "float32")  # engines.ENGINES, by name
DEVICES = ("cpu", "cuda", "auto")  # where the int8 engine runs (engines.resolve_device)
