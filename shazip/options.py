"""The user-facing choices and defaults, in a module that imports nothing heavy, so that the
command line can show its help and version without loading torch (the API checks them too)."""

DEFAULT_LANES = 32
DEFAULT_BLOCK_SIZE = 2 << 20
ADAPT_CHOICES = ("cm", "none")  # the adaptive stage, on by default; none: the model alone
ENGINE_CHOICES = ("int8", "float32")  # engines.ENGINES, by name
