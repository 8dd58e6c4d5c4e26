"""JSON as every reader of the project's files parses it: RFC 8259 with duplicate keys and NaN/Infinity refused,
as the Java core's ``org.tflitetrain.core.json.Json`` does.

Python's ``json.loads`` keeps the last of two equal keys (``{"a": 1, "a": 2}`` -> ``{"a": 2}``) and reads
``NaN``; the Java core refuses both. A file either side wrote is never like that, so such a file is hostile
or damaged, and reading it on one side only would let the two sides disagree on one file (a model's
metadata, a checkpoint header). Stdlib only: the device code and the exporter both use it.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["StrictJsonError", "loads_strict"]

KEY_CHARS = 80
"""Longest key quoted in a message (the rest is elided)."""


class StrictJsonError(ValueError):
    """JSON text with a duplicate key or a NaN/Infinity (the message names which)."""


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            shown = key if len(key) <= KEY_CHARS else key[:KEY_CHARS] + "..."
            raise StrictJsonError(f"duplicate key {shown!r}")
        out[key] = value
    return out


def _constant(name: str) -> Any:
    raise StrictJsonError(f"{name} is not JSON (strict JSON has no NaN or Infinity)")


def loads_strict(text: str | bytes | bytearray) -> Any:
    """``json.loads(text)``, refusing what the Java core's parser refuses beyond Python's: a key repeated in
    one object, ``NaN``, ``Infinity`` and ``-Infinity``.

    Raises:
      StrictJsonError: a duplicate key (named) or a non-finite constant (both ValueErrors).
      json.JSONDecodeError: malformed JSON (a ValueError).
      RecursionError: nesting deeper than the interpreter's recursion limit.
    """
    return json.loads(text, object_pairs_hook=_object, parse_constant=_constant)
