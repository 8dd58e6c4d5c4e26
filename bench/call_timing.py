"""The median wall time of repeated calls: the one timing loop of the benchmark scripts.

Stdlib only: the timing workers also run in the Pi env (tflite-runtime 2.14, no TensorFlow, no SciPy).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable

__all__ = ["median_seconds"]


def median_seconds(fn: Callable[[], object], repeats: int, max_seconds: float = math.inf, warm_up: int = 3,
                   min_calls: int = 10) -> tuple[float, int]:
    """(median seconds per call, calls timed) of ``fn``.

    ``warm_up`` untimed calls first; then up to ``repeats`` timed calls, stopping early once
    ``max_seconds`` have passed and at least ``min_calls`` calls were timed (no limit: exactly ``repeats``).
    """
    for _ in range(warm_up):
        fn()
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < repeats and (time.perf_counter() - start < max_seconds or len(times) < min_calls):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), len(times)
