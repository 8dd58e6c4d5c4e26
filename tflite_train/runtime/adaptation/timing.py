"""Wall-clock timing of the adaptation phases (load, head, fisher+selection, training, eval)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator


class PhaseTimer:
    """Accumulates ``time.perf_counter`` seconds per named phase, in first-use order."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Times the ``with`` body and adds it to ``seconds[name]``."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start

    def total(self) -> float:
        """Sum over all phases."""
        return sum(self.seconds.values())
