"""shazip._testing, the core's hooks for tests (csrc/testing/): what a test reaches in the core
that the package never calls.

It is an extension apart from shazip._core, built only in place (the README's editable install,
`python setup.py build_ext --inplace`) or with SHAZIP_TEST_HOOKS=1, never by `pip install .`; it
takes the objects the core makes (the two share pybind11's type registry), so the core is loaded
first. A test that needs it and finds it missing fails, saying how to build it: a suite that
skipped those tests would pass without testing the core's parts."""

from __future__ import annotations

from types import ModuleType

from shazip import core


def hooks() -> ModuleType:
    """The loaded shazip._testing (RuntimeError, with the command that builds it, if missing)."""
    core.load()
    try:
        from shazip import _testing
    except ImportError as e:
        raise RuntimeError(f"shazip._testing, the core's hooks for tests, is not built ({e}): `pip install .` "
                           f"builds none; build it in place, `python setup.py build_ext --inplace` (or the README's "
                           f"`pip install -e`), or with SHAZIP_TEST_HOOKS=1") from None
    return _testing
