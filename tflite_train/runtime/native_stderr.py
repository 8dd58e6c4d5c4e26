"""Keeping a native library's log lines off the process's stderr (the CLI prints one line per error there)."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

__all__ = ["native_stderr_silenced"]


@contextlib.contextmanager
def native_stderr_silenced() -> Iterator[None]:
    """File descriptor 2 points at /dev/null inside the block, so that what native code writes there
    (e.g. "INFO: Created TensorFlow Lite XNNPACK delegate for CPU.", or LiteRT's list of vendor plugins it
    did not find) does not reach the terminal; success is judged by the call's result, not by that text."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
