"""Handing the heap's free pages back to the operating system (glibc's ``malloc_trim``).

glibc serves a numpy array of up to 32 MiB from its heap once an array of that size has been freed (its
mmap threshold rises to the largest freed mmapped block), and pages freed inside the heap stay in the
process's resident set until something reuses them. An adaptation frees tens of MiB of temporaries (the
augmented views, a whole-state read) between phases whose interpreter arenas are allocated later and
never freed: without a trim those arenas land on fresh pages, and the freed ones still count. Measured on
EfficientNet-Lite0@128 (tflite-runtime 2.14): 37 MiB resident but free before the checkpoint was read.
``malloc_trim(0)`` returns every whole free page of every arena (``madvise(MADV_DONTNEED)``; glibc >= 2.8);
it frees nothing in use, so results cannot change. Elsewhere (no glibc) it is a no-op.
"""

from __future__ import annotations

import ctypes
import functools
import logging
from collections.abc import Callable

__all__ = ["release_free_memory"]

LOG = logging.getLogger(__name__)


@functools.lru_cache(maxsize=1)
def _malloc_trim() -> Callable[[int], int] | None:
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (AttributeError, OSError):  # not glibc (musl, macOS, Windows)
        LOG.debug("no malloc_trim in this process: freed heap pages stay resident until reused")
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


def release_free_memory() -> bool:
    """Returns the C heap's free pages to the operating system (module docstring); True when glibc did
    release some, False when none were free or the C library has no ``malloc_trim``."""
    trim = _malloc_trim()
    return bool(trim(0)) if trim is not None else False
