"""Progress bars (tqdm) for the long on-device loops: Fisher, training steps, reading and predicting.

Library functions take a ``Progress`` factory, ``progress(description, total) -> bar`` where the bar
is a context manager with ``update(n=1)`` and ``set_postfix_str(text)``; ``no_progress`` draws nothing.
The command line passes ``terminal_progress(enabled)``: tqdm bars on stderr, only when stderr is a
terminal and ``--quiet`` is not given.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any


class _Silent:
    """A bar that draws nothing."""

    def __enter__(self) -> "_Silent":
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def update(self, n: int = 1) -> None:
        """Does nothing."""

    def set_postfix_str(self, text: str) -> None:
        """Does nothing."""


Progress = Callable[[str, int], Any]


def no_progress(description: str, total: int) -> _Silent:
    """The progress factory that draws nothing."""
    return _Silent()


def terminal_progress(enabled: bool = True, stream: Any = None) -> Progress:
    """tqdm bars on ``stream`` (stderr), or ``no_progress`` when disabled or the stream is not a terminal."""
    stream = sys.stderr if stream is None else stream
    if not enabled or not getattr(stream, "isatty", lambda: False)():
        return no_progress
    from tqdm import tqdm

    def bar(description: str, total: int):
        return tqdm(total=total, desc=description, file=stream, leave=False, dynamic_ncols=True, unit="img"
                    if description in ("reading", "predicting") else "it")

    return bar
