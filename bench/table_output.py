"""Markdown tables of the benchmark's reports: their lines (``markdown_table``) and where the text goes (``emit``)."""

from __future__ import annotations

import logging
import pathlib
from collections.abc import Iterable, Sequence

__all__ = ["emit", "markdown_table"]

LOG = logging.getLogger(__name__)


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[str]], align: str = "") -> list[str]:
    """The lines of a Markdown table: ``header``, the rule, then one line per row, cells as given (pure).

    A row is ``| a | b |``; an empty cell gives ``|  |``, except in the header, where it is written ``| |``
    (the corner above a column of row labels). ``align``: one letter per column, ``l`` (``---``, the
    default for missing letters) or ``r`` (``---:``).
    """
    head = "|" + "|".join(f" {cell} " if cell else " " for cell in header) + "|"
    rule = "|" + "".join("---:|" if a == "r" else "---|" for a in align.ljust(len(header), "l"))
    return [head, rule, *("| " + " | ".join(row) + " |" for row in rows)]


def emit(text: str, out: str | None) -> None:
    """Writes ``text`` to ``out`` (logged), or prints it when ``out`` is None or empty."""
    if out:
        pathlib.Path(out).write_text(text)
        LOG.info("wrote %s", out)
    else:
        print(text, end="")
