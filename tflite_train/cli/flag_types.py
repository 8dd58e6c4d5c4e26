"""Argument types of the command line: absurd values are refused while parsing, before any file is read."""

from __future__ import annotations

import argparse
import math

__all__ = ["MAX_BATCH", "MAX_BYTES", "MAX_EPOCHS", "MAX_FLAG_CHARS", "MAX_ITERATIONS", "MAX_SEED", "MAX_STEPS", "byte_budget",
           "finite_float", "policy_name", "positive_float", "ranged", "replay_budget"]

MAX_ITERATIONS = 100_000
MAX_EPOCHS = 10_000
MAX_BATCH = 1024
MAX_STEPS = 1_000_000
MAX_SEED = 2**32 - 1
MAX_BYTES = 2**60
"""Largest byte size a flag takes (1 EiB; ``unlimited`` means no limit)."""
MAX_REPLAY_BYTES = 2**30
"""Largest replay budget (1 GiB): the memory is read whole into RAM with its checkpoint."""
MAX_FLAG_CHARS = 64
"""Longest numeric flag value read (a number never needs more; 5,000 digits would only cost time)."""


def _shown(text: str) -> str:
    """``text`` for a message: printable, at most ``MAX_FLAG_CHARS`` characters."""
    from tflite_train.runtime.text import printable

    return printable(repr(text if len(text) <= MAX_FLAG_CHARS else text[:MAX_FLAG_CHARS] + "..."))


def _number(text: str, kind: type, low: float, high: float, *, low_open: bool = False, unit: str = "") -> float | int:
    """``text`` as ``kind``, finite and in range, or ``ArgumentTypeError`` (argparse turns it into one line)."""
    noun = "an integer" if kind is int else "a number"
    if len(text) > MAX_FLAG_CHARS:
        raise argparse.ArgumentTypeError(f"expected {noun} of at most {MAX_FLAG_CHARS} characters; got {_shown(text)}")
    try:
        value = kind(text)
    except (ValueError, OverflowError) as err:
        raise argparse.ArgumentTypeError(f"expected {noun}; got {_shown(text)}") from err
    show = (lambda v: str(int(v))) if kind is int and math.isfinite(low) and math.isfinite(high) else (lambda v: f"{v:g}")
    parts = ([f"{'>' if low_open else '>='} {show(low)}"] if math.isfinite(low) else []) + \
            ([f"<= {show(high)}"] if math.isfinite(high) else [])
    if parts and (not (value > low if low_open else value >= low) or not value <= high):  # NaN fails both
        raise argparse.ArgumentTypeError(f"must be {' and '.join(parts)}{unit}; got {_shown(text)}")
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number; got {_shown(text)}")
    return value


def ranged(kind: type, low: float, high: float, *, low_open: bool = False, unit: str = ""):
    """An argparse type: a finite ``kind`` (int or float) in [low, high] (``low_open``: (low, high]);
    NaN, infinities and values out of range are refused while parsing, before any arithmetic."""
    def parse(text: str):
        return _number(text, kind, low, high, low_open=low_open, unit=unit)

    parse.__name__ = kind.__name__  # argparse names the type in its messages
    return parse


def finite_float(text: str) -> float:
    """An argparse type: any finite number (NaN and infinities refused)."""
    return _number(text, float, -math.inf, math.inf)


def positive_float(text: str) -> float:
    """An argparse type: a finite number > 0 (e.g. a standard deviation or a scale)."""
    return _number(text, float, 0.0, math.inf, low_open=True)


def byte_budget(text: str) -> float:
    """A byte size with a unit (``1MiB``) as an int in 1..``MAX_BYTES``, or ``unlimited`` as ``math.inf``."""
    from tflite_train.runtime.byte_size import parse_byte_size

    if len(text) > MAX_FLAG_CHARS:
        raise argparse.ArgumentTypeError(f"expected a byte size of at most {MAX_FLAG_CHARS} characters; got {_shown(text)}")
    if text.strip().lower() == "unlimited":
        return math.inf
    try:
        value = parse_byte_size(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from err
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1 byte (no layer fits 0); got {_shown(text)}")
    if value > MAX_BYTES:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_BYTES} bytes (1 EiB), or 'unlimited'; got {_shown(text)}")
    return value


def replay_budget(text: str) -> int:
    """A replay budget: a byte size with a unit (``1MiB``) in 0..``MAX_REPLAY_BYTES``; 0 keeps no replay memory."""
    from tflite_train.runtime.byte_size import parse_byte_size

    if len(text) > MAX_FLAG_CHARS:
        raise argparse.ArgumentTypeError(f"expected a byte size of at most {MAX_FLAG_CHARS} characters; got {_shown(text)}")
    try:
        value = parse_byte_size(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from err
    if value > MAX_REPLAY_BYTES:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_REPLAY_BYTES} bytes (1 GiB); got {_shown(text)}")
    return value


def policy_name(text: str) -> str:
    from tflite_train.sparse.policies import canonical_policy_name

    try:
        return canonical_policy_name(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from err


MAX_RATES = 16
"""Most candidate rates ``--rate-choice`` takes (each costs a fine-tuning run per task)."""


def rate_list(text: str) -> tuple[float, ...] | None:
    """``--rate-choice``: comma-separated learning rates >= 0 (0 = no update; e.g. ``0,1e-4,1e-3,1e-2``), at most
    ``MAX_RATES``; ``off`` = None (one rate for every task)."""
    if text.strip().lower() == "off":
        return None
    parts = [p.strip() for p in text.split(",")]
    if not 1 <= len(parts) <= MAX_RATES or not all(parts):
        raise argparse.ArgumentTypeError(f"expected 1 to {MAX_RATES} comma-separated rates or 'off'; got {_shown(text)}")
    return tuple(float(_number(p, float, 0.0, 10.0)) for p in parts)
