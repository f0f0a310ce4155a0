"""The user-facing choices and defaults, in a module that imports nothing heavy, so that the
command line can show its help and version without loading torch (the API checks them too)."""

DEFAULT_LANES = 32  # the most lanes the automatic choice uses (lanes 0 on the command line)
MAX_LANES = 1024  # each lane holds a ring of mem_len states: 512 MB for `small` at 1024 lanes
# Lanes per block. Each lane starts the model cold, and lanes interleave in the adaptive stage's
# shared tables, which dilutes the recency its statistics rely on. On the CPU a step costs about
# the same per lane whatever their number (benchmarks/README.md, "The step"), so lanes buy little
# speed there; a GPU runs a step's lanes as one batch and wants many. Measured on the suite
# (benchmarks/README.md, "Structured text"): lanes of at least 16 KB instead of 2 KB make the
# archives 0.8 % smaller (logs 6 %, JSON 3 %) and were no slower.
LANE_FLOOR = 256  # what archives may hold: at most n // 256 lanes (every shazip encoder keeps to it)
MIN_LANE = 16384  # the automatic choice on the CPU: at most DEFAULT_LANES lanes, none shorter than this
MIN_LANE_GPU = 2048  # ... and on a GPU
LANES_HELP = ("Parallel lanes per block: more are faster on a GPU, each starts the model cold. 0: automatic, at "
              f"most {DEFAULT_LANES} and none shorter than 16 KB (2 KB on a GPU).")
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
