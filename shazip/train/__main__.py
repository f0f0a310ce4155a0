"""`python -m shazip.train` (and `torchrun ... -m shazip.train`): the `shazip train` command."""

from .command import train_command

train_command()
