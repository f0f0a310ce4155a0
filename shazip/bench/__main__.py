"""The benchmark's measured child processes: `python -m shazip.bench _shazip ...` / `_py ...`."""

import sys

from .runner import _worker

_worker(sys.argv[1:])
