"""Names of the files an output gets beside it (temporaries, the free-space probe, the lock), within the
file system's limit on one file name.

Most file systems limit a name to 255 bytes (``NAME_MAX``). An output's siblings add a fixed tail to
its name: ``.<name>.<8 random chars>.tmp`` / ``.probe`` (16 bytes at most) and ``<name>.lock``. For a
name that leaves room for the tail they use it unchanged; for a longer one (up to the limit itself,
which is valid) they use a *stem*: the name's first bytes, cut at a character boundary, ``~`` and 8
hex digits of the name's sha256, so that the stem still names the output and two long names that
share a prefix get different siblings. ``check_output_name`` refuses a name beyond the limit before
any work starts.
"""

from __future__ import annotations

import hashlib
import os

from tflite_train.runtime.errors import OutputError
from tflite_train.runtime.text import printable

__all__ = ["NAME_MAX", "SIBLING_TAIL_BYTES", "check_output_name", "name_limit", "sibling_stem"]

NAME_MAX = 255
"""Longest file name in bytes where the file system does not say (Linux, macOS, Windows: 255)."""
SIBLING_TAIL_BYTES = 16
"""Longest tail a sibling adds to the stem: "." before it and ".<8 random chars>.probe" after it."""
_HASH_CHARS = 8


def name_limit(directory: str | os.PathLike) -> int:
    """The longest file name in bytes ``directory``'s file system allows (``NAME_MAX`` if it does not say)."""
    try:
        limit = os.pathconf(directory, "PC_NAME_MAX")
    except (OSError, ValueError):
        return NAME_MAX
    return limit if isinstance(limit, int) and limit > SIBLING_TAIL_BYTES + _HASH_CHARS + 1 else NAME_MAX


def sibling_stem(name: str, limit: int = NAME_MAX) -> str:
    """The stem of the siblings of output ``name``: ``name`` itself when ``name`` + the longest tail fits in
    ``limit`` bytes, else its longest prefix that fits with "~<8 hex digits of sha256(name)>"."""
    encoded = os.fsencode(name)
    room = limit - SIBLING_TAIL_BYTES
    if len(encoded) <= room:
        return name
    digest = hashlib.sha256(encoded).hexdigest()[:_HASH_CHARS]
    prefix = encoded[:room - _HASH_CHARS - 1]
    while prefix:
        try:
            text = os.fsdecode(prefix)
            text.encode("utf-8")  # no lone surrogate from a cut character
            break
        except UnicodeError:
            prefix = prefix[:-1]
    else:
        text = ""
    return f"{text}~{digest}"


def check_output_name(path: str | os.PathLike, what: str = "output") -> None:
    """Refuses an output whose file name is longer than its file system allows (before any work).

    Raises:
      OutputError: naming the path, its name's length and the limit.
    """
    path = os.fspath(path)
    directory, name = os.path.split(path)
    limit = name_limit(directory or ".")
    size = len(os.fsencode(name))
    if size > limit:
        raise OutputError(f"{what} path {printable(path)}: the file name is {size} bytes; this file system allows "
                          f"at most {limit}")
