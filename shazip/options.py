"""The user-facing choices and defaults, in a module that imports nothing heavy, so that the
command line can show its help and version without loading torch (the API checks them too)."""

DEFAULT_LANES = 32  # the most lanes the automatic choice uses (lanes 0 on the command line)
MAX_LANES = 1024  # each lane holds a ring of mem_len states: 512 MB for `small` at 1024 lanes
# Lanes per block. Each lane starts the model cold (the adaptive stage's tables, shared by the
# lanes, soften that), and each step has a fixed cost (~0.5 ms on one core) whatever the lane
# count, so a block of n bytes in lanes of L bytes takes ~0.5 ms * L more than its per-byte
# work. Measured (benchmarks/lanes.py, results in benchmarks/README.md): lanes of 2 KB instead
# of 256 B save 12-14 % on 5-12 KB files and 1-3 % on 40-53 KB ones, for at most ~1 s more.
LANE_FLOOR = 256  # what archives may hold: at most n // 256 lanes (every shazip encoder keeps to it)
MIN_LANE = 2048  # the automatic choice: at most DEFAULT_LANES lanes, none shorter than this
LANES_HELP = ("Parallel lanes per block: more are faster, each starts the model cold. 0: automatic, at most "
              f"{DEFAULT_LANES} and none shorter than 2 KB.")
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
