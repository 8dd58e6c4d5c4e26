"""One writer per output: an exclusive advisory lock on ``<out>.lock``, taken before the work starts.

Two ``adapt`` runs into the same checkpoint would otherwise both train and the later rename would
win silently. ``output_lock(out)`` takes ``fcntl.flock(LOCK_EX | LOCK_NB)`` on ``<out>.lock`` (in the
output's directory) and fails at once, without writing anything, if another process holds it
(``OutputLockedError``, one line naming the output). While it is held no other writer of ``out`` can
be alive, so the temporary files a SIGKILLed writer left are removed then
(``atomic_file.remove_stale_temps``). The kernel drops the lock when the holder dies, however it dies.

The lock file is removed on release, before the lock is dropped. A process that opened the old file
just before may then lock an unlinked inode, so after locking the holder checks that the path still
names the inode it locked, and starts over otherwise: at most one process holds the lock of a path.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pathlib
from collections.abc import Iterator

from tflite_train.runtime.atomic_file import remove_stale_temps
from tflite_train.runtime.errors import OutputError
from tflite_train.runtime.output_names import name_limit, sibling_stem
from tflite_train.runtime.text import printable

__all__ = ["LOCK_SUFFIX", "OutputLockedError", "lock_path", "output_lock"]

LOCK_SUFFIX = ".lock"
_ATTEMPTS = 100  # "path no longer names the locked inode" races; each needs another release in between


class OutputLockedError(OutputError):
    """Another process is writing the same output."""


def lock_path(out: str | os.PathLike) -> pathlib.Path:
    """``<out>.lock``, beside the output (``<stem>.lock`` for a name too long for the suffix:
    ``output_names.sibling_stem``)."""
    out = pathlib.Path(out)
    limit = name_limit(out.parent)
    fits = len(os.fsencode(out.name + LOCK_SUFFIX)) <= limit
    return out.with_name((out.name if fits else sibling_stem(out.name, limit)) + LOCK_SUFFIX)


def _acquire(out: pathlib.Path) -> tuple[int, pathlib.Path]:
    path = lock_path(out)
    for _ in range(_ATTEMPTS):
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise OutputLockedError(f"output {printable(str(out))} is being written by another process (it holds "
                                    f"{printable(str(path))}); wait for it to finish or choose another --out") from None
        except BaseException:
            os.close(fd)
            raise
        try:
            mine = os.fstat(fd)
            current = os.stat(path)
            if (mine.st_dev, mine.st_ino) == (current.st_dev, current.st_ino):
                return fd, path
        except FileNotFoundError:
            pass  # released and removed between our open and our lock: start over
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)
    raise OutputError(f"could not lock {printable(str(path))}: it keeps being replaced")


@contextlib.contextmanager
def output_lock(out: str | os.PathLike) -> Iterator[pathlib.Path]:
    """Holds the exclusive lock of output ``out`` for the ``with`` block; yields the lock file's path.

    On entry, temporary files of ``out`` left by a killed writer are removed.

    Raises:
      OutputLockedError: another process holds the lock (nothing was written).
      OSError: the lock file cannot be created (e.g. the folder is read-only).
    """
    out = pathlib.Path(out)
    fd, path = _acquire(out)
    try:
        remove_stale_temps(out)
        yield path
    finally:
        try:
            path.unlink(missing_ok=True)  # while still locked: see the module docstring
        finally:
            os.close(fd)
