"""Giving a finished temporary file its name, without ever replacing a file unasked.

A writer (the command line, Dask's client) writes its output beside the destination under a
temporary name and, once it is complete, names it: here. The check "is anything there?" and
the naming are one kernel step, so a file made meanwhile (another run's output, a user's file,
a dangling symlink) is never replaced unless the caller says `replace`.
"""

from __future__ import annotations

import errno
import os


def publish(tmp: str, path: str, replace: bool) -> None:
    """`tmp` becomes `path`: replacing what is there with `replace`, else only if nothing is
    (FileExistsError otherwise): a hard link, or renameat2's RENAME_NOREPLACE where the file
    system has no hard links. Other failures raise OSError."""
    if replace:
        os.replace(tmp, path)
        return
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise
    except OSError as e:
        if e.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EMLINK, errno.ENOSYS):
            raise
        _rename_noreplace(tmp, path)
        return
    os.unlink(tmp)


def _rename_noreplace(tmp: str, path: str) -> None:
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    at_fdcwd, rename_noreplace = -100, 1
    if not hasattr(libc, "renameat2"):  # an old C library: checked, then renamed (a narrow race remains)
        if os.path.lexists(path):
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), path)
        os.replace(tmp, path)
        return
    if libc.renameat2(at_fdcwd, os.fsencode(tmp), at_fdcwd, os.fsencode(path), rename_noreplace) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), path)
