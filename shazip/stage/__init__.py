"""The adaptive stage's Python side: its parameters, the registry of its models as the core
exports it (csrc/stage/models.def), and its handle on the core's tables."""
