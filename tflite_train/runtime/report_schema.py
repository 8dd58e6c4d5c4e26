"""The declared schema of the run report a checkpoint carries, as ``tflite-train show`` reads it.

``adapt`` stores its report (``adapt_job.run_adaptation``) in the checkpoint header, where the
checkpoint schema only requires a JSON object: the report is informative and the restore never reads
it. ``show`` does (``summary.format_adapt_summary``), so ``adapt_job.run_record`` checks the fields it
prints against ``RUN_REPORT`` first: a crafted report is refused in one line naming the field instead
of ending in a KeyError or TypeError. Non-finite numbers are stored as null (``checkpoint``), so the
loss curve and the budgets may hold nulls; unknown fields are kept.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tflite_train.runtime.errors import CheckpointError
from tflite_train.runtime.model.header_schema import (Bool, Field, Float, Int, ListOf, MapOf, Nullable, Object,
                                                      SchemaError, Str)

__all__ = ["RUN_REPORT", "check_run_report"]

MAX_ITEMS = 10_000_000
_TEXT = Str(max_length=4096)
_NUMBER = Float()
_COUNT = Float(0)

CACHE = Object({
    "used": Field(Bool()),
    "reason": Field(Nullable(_TEXT), required=False),
    "layer": Field(Nullable(_TEXT), required=False),
    "cache_bytes": Field(Nullable(_COUNT), required=False),
    "image_bytes": Field(Nullable(_COUNT), required=False),
    "step_forward_macs": Field(Nullable(_COUNT), required=False),
}, extra=True)


def _cache_rules(cache: dict, path: str) -> None:
    if cache["used"]:
        for key in ("layer", "cache_bytes", "image_bytes", "step_forward_macs"):
            if cache.get(key) is None:
                raise SchemaError(f"{path}.{key}", "is missing for a cache that was used")
    elif cache.get("reason") is None:
        raise SchemaError(f"{path}.reason", "is missing for a cache that was not used")


REPLAY_MEMORY = Object({
    "examples": Field(Int(0, 2**62)),
    "bytes": Field(_COUNT),
    "budget": Field(_COUNT),
    "rows": Field(Int(0, 2**62), required=False),
    "cut": Field(_TEXT, required=False),
    "reason": Field(_TEXT, required=False),
}, extra=True, validator=lambda memory, path: _require_when(memory, path, "cut" if memory["examples"] else "reason"))
UPDATES = Object({
    "mode": Field(_TEXT),
    "batch": Field(Int(0, 2**62)),
    "prototype_mode": Field(_TEXT),
    "note": Field(Nullable(_TEXT), required=False),
}, extra=True)
RATE_CHOICE = Object({"rate": Field(_NUMBER), "reason": Field(_TEXT)}, extra=True)
CONTINUED_FROM = Object({
    "checkpoint": Field(_TEXT),
    "classes": Field(ListOf(_TEXT, MAX_ITEMS)),
    "new_classes": Field(ListOf(_TEXT, MAX_ITEMS)),
    "replayed": Field(Int(0, 2**62)),
    "selection_from": Field(Nullable(_TEXT)),
}, extra=True)


def _require_when(document: dict, path: str, key: str) -> None:
    if document.get(key) is None:
        raise SchemaError(f"{path}.{key}", "is missing")


RUN_REPORT = Object({
    "classes": Field(ListOf(_TEXT, MAX_ITEMS)),
    "shots": Field(Nullable(ListOf(Int(0, 2**62), MAX_ITEMS)), required=False),
    "selection": Field(Object({"channels": Field(MapOf(_TEXT, ListOf(Int(0, 2**31), MAX_ITEMS), MAX_ITEMS))},
                              extra=True)),
    "layer_costs": Field(MapOf(_TEXT, Object({"out_channels": Field(Int(0, 2**31), required=False)}, extra=True),
                               MAX_ITEMS), required=False),
    "model": Field(_TEXT),
    "policy": Field(_TEXT),
    "runtime": Field(_TEXT),
    "memory_bytes": Field(_COUNT),
    "budget": Field(Object({"memory_bytes": Field(Nullable(_COUNT))}, extra=True)),
    "backward_macs": Field(_COUNT),
    "compute_limit_macs": Field(Nullable(_COUNT)),
    "forward_macs": Field(_COUNT),
    "raised_from": Field(Object({"memory_bytes": Field(Nullable(_COUNT)),
                                 "compute_limit_macs": Field(Nullable(_COUNT))}, extra=True), required=False),
    "input_shape": Field(ListOf(Int(1, 2**31), 3, min_length=3), required=False),
    "cache": Field(Nullable(Object(CACHE.fields, extra=True, validator=_cache_rules)), required=False),
    "losses": Field(ListOf(Nullable(_NUMBER), MAX_ITEMS)),
    "support_accuracy_before": Field(Float(0, 1)),
    "support_accuracy_after": Field(Float(0, 1)),
    "query_accuracy": Field(Float(0, 1), required=False),
    "query_size": Field(Int(0, 2**62), required=False),
    "seconds": Field(MapOf(_TEXT, _COUNT, 1000)),
    "total_seconds": Field(_COUNT),
    "peak_rss_bytes": Field(_COUNT, required=False),
    "updates": Field(Nullable(UPDATES), required=False),
    "rate_choice": Field(Nullable(RATE_CHOICE), required=False),
    "replay_memory": Field(REPLAY_MEMORY, required=False),
    "continued_from": Field(CONTINUED_FROM, required=False),
}, extra=True)
"""The report fields ``show`` prints (``summary.format_adapt_summary``)."""


def check_run_report(report: Mapping[str, Any], source: str = "checkpoint") -> dict[str, Any]:
    """Checks a checkpoint's stored run report against ``RUN_REPORT``.

    Raises:
      CheckpointError: "<source>: run report field <path>: <problem>".
    """
    try:
        checked = RUN_REPORT.check(report, "")
    except SchemaError as err:
        raise CheckpointError(f"{source}: run report {err}") from None
    if "query_accuracy" in checked and "query_size" not in checked:
        raise CheckpointError(f"{source}: run report field query_size: is missing beside query_accuracy")
    return checked
