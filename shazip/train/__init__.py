"""Training tools, apart from the decoder: the trainer (`shazip train`), its corpora and its
optimizer. Nothing in compression or decompression imports this package."""

from .command import train_command
from .trainer import TrainArgs, train

__all__ = ["TrainArgs", "train", "train_command"]
