"""Sizes and operation counts as people read them: "1.5 KiB", "37.08 M" (budgets, costs, summaries)."""

from __future__ import annotations

import math

__all__ = ["format_bytes", "format_count"]


def format_bytes(value: float) -> str:
    """1536 -> "1.5 KiB" (binary units, as ``--mem-budget`` takes them); inf -> "unlimited"."""
    if math.isinf(value):
        return "unlimited"
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if value >= size:
            return f"{value / size:.1f} {unit}"
    return f"{value:.0f} B"


def format_count(value: float) -> str:
    """12_345_678 -> "12.35 M"; inf -> "unlimited"."""
    if math.isinf(value):
        return "unlimited"
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if value >= size:
            return f"{value / size:.2f} {unit}"
    return f"{value:.0f}"
