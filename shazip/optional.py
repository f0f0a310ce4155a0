"""The optional dependencies: each imported only where a feature needs it, and any way it fails
to load becomes one line naming the package, what needs it, the error and the fix.

A package that is absent raises ModuleNotFoundError, but a broken one raises anything on import:
ImportError for a shared library that is missing (a CUDA build of torch without its CUDA
libraries), OSError from the dynamic loader, ModuleNotFoundError for a dependency of its own.
A plain install of shazip compresses and decompresses with none of these.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from .errors import MissingDependency, raise_interruption

# how to get each package; torch's CPU wheel named first, since a plain `pip install torch` (or an
# extra that needs torch) resolves on PyPI to a CUDA build of several GB
INSTALL = {
    "torch": "pip install torch --index-url https://download.pytorch.org/whl/cpu (a GPU: pip install torch); "
             "README, \"Set up\"",
    "zstandard": "pip install zstandard",
    "distributed": "pip install 'shazip[dask]'",
    "matplotlib": "pip install matplotlib",
}


def require(package: str, what: str) -> ModuleType:
    """`package` imported, or MissingDependency: "`what` needs `package`, which is not installed
    (or: which fails to load (the error)): how to install it"."""
    try:
        return importlib.import_module(package)
    except (ImportError, OSError) as e:
        if isinstance(e, ImportError):
            raise_interruption(e)
        raise MissingDependency(f"{what} needs {package}, which {_state(package, e)}: {INSTALL[package]}") from None


def available(package: str) -> bool:
    """Whether `package` imports (an absent or broken install is not available). Imports it."""
    try:
        require(package, "")
    except MissingDependency:
        return False
    return True


def _state(package: str, e: BaseException) -> str:
    if isinstance(e, ModuleNotFoundError) and e.name == package:
        return "is not installed"
    text = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"fails to load ({type(e).__name__}: {text})" if text else f"fails to load ({type(e).__name__})"
