"""Human byte sizes ("1MiB", "512KiB", "1.5MB", "2048") for budgets on the command line."""

from __future__ import annotations

import math
import re

UNITS = {
    "": 1, "b": 1,
    "kb": 10**3, "mb": 10**6, "gb": 10**9,
    "kib": 2**10, "mib": 2**20, "gib": 2**30,
    "k": 2**10, "m": 2**20, "g": 2**30,
}
_PATTERN = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*$")


def parse_byte_size(text: str) -> int:
    """Parses a size: a number and an optional unit (B; kB/MB/GB = 10^3k; KiB/MiB/GiB and K/M/G = 2^10k).

    The result is rounded down to whole bytes: "1.5MB" -> 1_500_000, "1MiB" -> 1_048_576.

    Raises:
      ValueError: empty, negative, NaN/inf, or an unknown unit (the message lists the known ones).
    """
    if not isinstance(text, str):
        raise ValueError(f"byte size must be a string like '1MiB'; got {text!r}")
    if text.strip().startswith("-"):
        raise ValueError(f"byte size must not be negative; got {text!r}")
    match = _PATTERN.match(text)
    if not match:
        raise ValueError(f"cannot parse byte size {text!r}; expected a number and a unit, e.g. '1MiB', '512KiB', '1.5MB'")
    value, unit = float(match.group(1)), match.group(2).lower()
    if unit not in UNITS:
        raise ValueError(f"unknown byte unit {match.group(2)!r} in {text!r}; known: B, kB, MB, GB, KiB, MiB, GiB, K, M, G")
    size = value * UNITS[unit]
    if not math.isfinite(size):
        raise ValueError(f"byte size must be finite; got {_shown(text)}")
    return int(math.floor(size))


def _shown(text: str) -> str:
    """``text`` for a message, at most 64 characters."""
    return repr(text if len(text) <= 64 else text[:64] + "...")
