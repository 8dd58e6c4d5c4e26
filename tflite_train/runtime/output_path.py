"""Checking where results will be written, before any work: so a long run cannot end in a failed save.

``check_output_file`` refuses an output path that is a directory or another non-regular file, whose
folder is missing or read-only, whose name is longer than the file system allows, or whose file system has too little free space; it proves the
folder writable by creating, filling (``reserve_bytes``, at most 1 MiB), fsyncing and removing a
temporary file there. Writing can still fail later (the disk fills meanwhile): the writers are
atomic (``checkpoint.write_atomic``), so the old files stay as they were.
"""

from __future__ import annotations

import errno
import os
import pathlib
import stat
import tempfile

from tflite_train.runtime.errors import OutputError
from tflite_train.runtime.output_names import check_output_name, name_limit, sibling_stem
from tflite_train.runtime.text import printable

PROBE_LIMIT_BYTES = 2**20


def check_output_file(path: str | os.PathLike, *, reserve_bytes: int = 0, what: str = "output") -> pathlib.Path:
    """Checks that ``path`` can be (re)written atomically with up to ``reserve_bytes`` bytes.

    Args:
      path: The file to be written (it may exist: it will be replaced).
      reserve_bytes: Free space needed on its file system (an upper bound of what will be written).
      what: How the message names the file ("checkpoint", "plot", ...).

    Returns:
      ``path`` as a ``pathlib.Path``.

    Raises:
      OutputError: one line naming the path and the reason.
    """
    path = pathlib.Path(path)
    shown = printable(str(path))
    directory = path.parent
    shown_dir = printable(str(directory))
    if path.name in ("", ".", ".."):
        raise OutputError(f"{what} path {shown} names a directory; give a file path, e.g. {shown}/model.ckpt")
    try:
        info = os.stat(path)
    except FileNotFoundError:
        info = None
    except OSError as err:
        if err.errno == errno.ENAMETOOLONG:  # said with the limit below, once the folder is known to exist
            info = None
        else:
            raise OutputError(f"{what} path {shown}: {err.strerror or err}") from err
    if info is not None and stat.S_ISDIR(info.st_mode):
        raise OutputError(f"{what} path {shown} is a directory; give a file path, e.g. {shown}/model.ckpt")
    if info is not None and not stat.S_ISREG(info.st_mode):
        raise OutputError(f"{what} path {shown} exists and is not a regular file")
    if not directory.is_dir():
        raise OutputError(f"{what} folder {shown_dir} does not exist")
    check_output_name(path, what)
    try:
        space = os.statvfs(directory)
    except OSError as err:
        raise OutputError(f"cannot check the free space of {shown_dir}: {err.strerror or err}") from err
    free = space.f_bavail * space.f_frsize
    if free < reserve_bytes:
        raise OutputError(f"{what} folder {shown_dir} has {free} bytes free; writing {shown} needs up to {reserve_bytes}")
    try:
        fd, probe = tempfile.mkstemp(prefix=f".{sibling_stem(path.name, name_limit(directory))}.", suffix=".probe",
                                     dir=directory)
    except OSError as err:
        raise OutputError(f"cannot write to {what} folder {shown_dir}: {err.strerror or err}") from err
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(b"\0" * min(reserve_bytes, PROBE_LIMIT_BYTES))
            handle.flush()
            os.fsync(handle.fileno())
    except OSError as err:
        raise OutputError(f"cannot write to {what} folder {shown_dir}: {err.strerror or err}") from err
    finally:
        pathlib.Path(probe).unlink(missing_ok=True)
    return path
