"""Atomic file replacement: a reader sees the old file or the new one, complete, never a mix.

``write_atomic(path, data)`` writes a temporary file in ``path``'s own directory, named
``.<name>.<8 random chars>.tmp`` so that it can be attributed to ``path`` (a name too long for that
tail uses its stem, ``output_names.sibling_stem``), fsyncs it, ``os.replace``s
it over ``path`` (one atomic rename on POSIX file systems) and fsyncs the directory. Any exception
(including ``KeyboardInterrupt``, and SIGTERM once the command line turns it into an exception)
removes the temporary file. A writer killed by SIGKILL cannot clean up: ``remove_stale_temps``
removes what it left, and is called by the next writer that holds the output's lock
(``output_lock.output_lock``), when no other writer of that output can be alive.
"""

from __future__ import annotations

import os
import pathlib
import re
import tempfile
from collections.abc import Callable

from tflite_train.runtime.output_names import name_limit, sibling_stem

__all__ = ["TEMP_SUFFIXES", "remove_stale_temps", "temp_files", "write_atomic"]

TEMP_SUFFIXES = (".tmp", ".probe")
"""Suffixes of the temporary files of an output: ``write_atomic``'s and ``output_path``'s free-space probe."""
_RANDOM = "[a-z0-9_]{8}"  # tempfile's random part: 8 characters of "abcdefghijklmnopqrstuvwxyz0123456789_"


def _temp_name(name: str) -> re.Pattern[str]:
    # ".<name>.<8 chars><suffix>": the fixed-length tail makes the split unique, so the temporaries of
    # an output "m" never match those of an output "m.x" (".m.x.abcdefgh.tmp" is 8 chars + ".tmp" after ".m.x.")
    suffixes = "|".join(re.escape(s) for s in TEMP_SUFFIXES)
    return re.compile(rf"\.{re.escape(name)}\.{_RANDOM}(?:{suffixes})")


def temp_files(path: str | os.PathLike) -> list[pathlib.Path]:
    """The temporary files of ``path`` (``write_atomic``'s and the free-space probe's) in its directory."""
    path = pathlib.Path(path)
    directory = path.parent
    pattern = _temp_name(sibling_stem(path.name, name_limit(directory)))
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    return sorted(directory / n for n in names if pattern.fullmatch(n))


def remove_stale_temps(path: str | os.PathLike) -> list[pathlib.Path]:
    """Removes the temporary files a killed writer of ``path`` left; returns them.

    Only call it while holding ``path``'s lock: a live writer's temporary file looks the same.
    """
    removed = []
    for temp in temp_files(path):
        try:
            temp.unlink()
        except FileNotFoundError:
            continue
        removed.append(temp)
    return removed


def write_atomic(path: str | os.PathLike, data: bytes, *, chunk_size: int = 1 << 16,
                 on_chunk: Callable[[int, int], None] | None = None) -> None:
    """Writes ``data`` to ``path`` atomically: temp file in the same dir, fsync, ``os.replace``, fsync dir.

    ``on_chunk(bytes_written, total)`` is called after each chunk of ``chunk_size`` bytes (progress;
    tests use it to kill the writer mid-way). The temp file is removed if writing fails.
    """
    path = pathlib.Path(path)
    directory = path.parent if str(path.parent) else pathlib.Path(".")
    if not directory.is_dir():
        raise ValueError(f"checkpoint directory {directory} does not exist")
    stem = sibling_stem(path.name, name_limit(directory))  # the name itself unless that would not fit
    fd, tmp = tempfile.mkstemp(prefix=f".{stem}.", suffix=TEMP_SUFFIXES[0], dir=directory)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)  # mkstemp's 0600 -> the usual mode of a new file
        with os.fdopen(fd, "wb") as f:
            for start in range(0, len(data), chunk_size):
                f.write(data[start:start + chunk_size])
                if on_chunk is not None:
                    f.flush()
                    on_chunk(min(start + chunk_size, len(data)), len(data))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        pathlib.Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
