"""The one exception type users of shazip see, and its specific kinds.

Every failure a user can cause (bad archive, missing model, existing output) is a
`ShazipError` whose message is one line fit for stderr; the CLI prints it and exits
non-zero. Subclasses exist so tests and callers can tell the cases apart.
"""


class ShazipError(Exception):
    """Base class: any error shazip reports to a user."""

    exit_code = 1


class ArchiveError(ShazipError):
    """Something is wrong with the archive being read (the kinds below)."""


class NotAnArchive(ArchiveError):
    """Input does not start with the shazip magic bytes."""


class UnsupportedVersion(ArchiveError):
    """Archive format or engine version is newer/unknown."""


class Truncated(ArchiveError):
    """Archive ends before its declared end."""


class CorruptArchive(ArchiveError):
    """Archive structure is damaged (header/block header checksum, impossible field)."""


class ChecksumMismatch(ArchiveError):
    """Decoded bytes of a block do not match the stored checksum."""


class ModelError(ShazipError):
    """Model file missing, invalid, or not the one an archive needs."""


class ContractError(ShazipError):
    """The native core was built with other constants than numerics.py states (never run)."""


class CoreUnavailable(ShazipError):
    """The native core (shazip._core) is missing, damaged or from another version."""


class OutputExists(ShazipError):
    """Refusing to overwrite an existing output without --force."""


class FileTrouble(ShazipError):
    """An input or output the system would not read or write (disk full, no permission, a
    file that vanished), named in the message."""


class Skipped(ShazipError):
    """An input left alone, as gzip leaves it with a warning (exit status 2): not a regular
    file, a directory without -r, a file that already has the .shz suffix."""

    exit_code = 2


class InputChanged(ShazipError):
    """An input that changed while it was read (appended to, cut, rewritten): the output holds
    exactly the bytes read, and the input is kept even under --rm; a warning (exit status 2), as
    gzip's "file size changed while zipping"."""

    exit_code = 2


class UsageError(ShazipError):
    """Bad arguments or input file problems (missing file, unreadable)."""

    exit_code = 2


class MissingDependency(UsageError):
    """An optional package a feature needs (torch for training, Dask for --scheduler) that is
    not installed or fails to load (shazip/optional.py)."""


def raise_interruption(e: ImportError) -> None:
    """Raises the interruption (Ctrl-C, a signal's exception) that made an import fail, if one
    did: an extension module interrupted as it initialises fails as ImportError("initialization
    failed") caused by it, which would otherwise read as a missing or damaged module."""
    cause = e.__cause__ or e.__context__
    if cause is not None and not isinstance(cause, Exception):
        raise cause
