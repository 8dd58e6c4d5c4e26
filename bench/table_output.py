"""Where a diagnostic bench script's Markdown table goes: a file (``--out``) or standard output."""

from __future__ import annotations

import logging
import pathlib

__all__ = ["emit"]

LOG = logging.getLogger(__name__)


def emit(text: str, out: str | None) -> None:
    """Writes ``text`` to ``out`` (logged), or prints it when ``out`` is None or empty."""
    if out:
        pathlib.Path(out).write_text(text)
        LOG.info("wrote %s", out)
    else:
        print(text, end="")
