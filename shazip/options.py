"""The user-facing choices and defaults, in a module that imports nothing heavy, so that the
command line can show its help and version without loading torch (the API checks them too)."""

DEFAULT_LANES = 32  # the most lanes the automatic choice uses (lanes 0 on the command line)
LANES_HELP = ("Parallel lanes per block: more are faster, each starts the model cold. 0: automatic, at most "
              f"{DEFAULT_LANES} and none shorter than 2 KB.")
DEFAULT_BLOCK_SIZE = 2 << 20
ADAPT_CHOICES = ("cm", "none")  # the adaptive stage, on by default; none: the model alone
ENGINE_CHOICES = ("int8", "float32")  # engines.ENGINES, by name
DEVICES = ("cpu", "cuda", "auto")  # where the int8 engine runs (engines.resolve_device)
