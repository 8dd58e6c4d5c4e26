"""What native code writes straight to file descriptor 2, whatever Python's logging settings: TensorFlow's C++
logs and the TFLite converter's diagnostics (captured around a call and routed to a logger, ``capturing_stderr``),
or an interpreter's start-up lines (discarded, ``native_stderr_silenced``: the CLI prints one line per error on
stderr). Stdlib only, so the device half uses it too."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from typing import TypeVar

__all__ = ["capturing_stderr", "native_stderr_silenced"]

T = TypeVar("T")


def capturing_stderr(run: Callable[[], T], level: int, logger: logging.Logger, what: str) -> T:
    """``run()`` with file descriptor 2 captured; the captured text is logged at ``level`` on ``logger`` as
    "<what>:\\n<text>" (nothing when empty), also when ``run`` raises."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            return run()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            text = captured.read().decode(errors="replace").rstrip()
            if text:
                logger.log(level, "%s:\n%s", what, text)


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
