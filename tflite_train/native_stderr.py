"""What native code writes straight to file descriptor 2 (TensorFlow's C++ logs, the TFLite converter's
diagnostics), whatever Python's logging settings: captured around a call and routed to a logger instead of
the terminal. Stdlib only."""

from __future__ import annotations

import logging
import os
import sys
import tempfile
from collections.abc import Callable
from typing import TypeVar

__all__ = ["capturing_stderr"]

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
