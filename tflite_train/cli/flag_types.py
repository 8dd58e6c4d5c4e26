"""Argument types of the command line: absurd values are refused while parsing, before any file is read."""

from __future__ import annotations

import argparse
import math

__all__ = ["MAX_BATCH", "MAX_EPOCHS", "MAX_ITERATIONS", "MAX_SEED", "MAX_STEPS", "byte_budget", "policy_name", "ranged"]

MAX_ITERATIONS = 100_000
MAX_EPOCHS = 10_000
MAX_BATCH = 1024
MAX_STEPS = 1_000_000
MAX_SEED = 2**32 - 1


def _number(text: str, kind: type, low: float, high: float, *, low_open: bool = False, unit: str = "") -> float | int:
    try:
        value = kind(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"expected {'an integer' if kind is int else 'a number'}; got {text!r}") from err
    if not (value > low if low_open else value >= low) or not value <= high or value != value:
        show = (lambda v: str(int(v))) if kind is int else (lambda v: f"{v:g}")
        bound = f"{'>' if low_open else '>='} {show(low)} and <= {show(high)}"
        raise argparse.ArgumentTypeError(f"must be {bound}{unit}; got {text!r}")
    return value


def ranged(kind: type, low: float, high: float, *, low_open: bool = False, unit: str = ""):
    def parse(text: str):
        return _number(text, kind, low, high, low_open=low_open, unit=unit)

    parse.__name__ = kind.__name__  # argparse names the type in its messages
    return parse


def byte_budget(text: str) -> float:
    """A byte size with a unit (``1MiB``) as an int, or ``unlimited`` as ``math.inf``."""
    from tflite_train.runtime.byte_size import parse_byte_size

    if text.strip().lower() == "unlimited":
        return math.inf
    try:
        value = parse_byte_size(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from err
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1 byte (no layer fits 0); got {text!r}")
    return value


def policy_name(text: str) -> str:
    from tflite_train.sparse.policies import canonical_policy_name

    try:
        return canonical_policy_name(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from err
