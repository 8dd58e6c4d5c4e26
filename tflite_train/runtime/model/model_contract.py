"""Checks an exported model's metadata against the contract (v1) and reads its layer table and input range."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from tflite_train.contract import F_CANDIDATES, F_INPUT, F_LAYERS, F_RANGE, REQUIRED_FIELDS, check_format
from tflite_train.sparse.layer_table import LayerSpec, LayerTable

_SPEC_FIELDS = tuple(f.name for f in dataclasses.fields(LayerSpec))


def check_metadata(metadata: Mapping[str, Any]) -> None:
    """Raises ValueError unless ``metadata`` is a ``tflite-train`` v1 model with the keys the trainer uses."""
    check_format(metadata)
    missing = [k for k in REQUIRED_FIELDS if k not in metadata]
    if missing:
        raise ValueError(f"model metadata lacks keys {missing}")
    if not metadata[F_CANDIDATES]:
        raise ValueError("model metadata lists no candidate layers; the model cannot be fine-tuned")


def layer_table(metadata: Mapping[str, Any]) -> LayerTable:
    """The model's ``LayerTable`` from its metadata ``layers`` (extra keys such as ``params`` dropped)."""
    return LayerTable(tuple(LayerSpec.from_dict({k: layer[k] for k in _SPEC_FIELDS}) for layer in metadata[F_LAYERS]))


def input_range(metadata: Mapping[str, Any]) -> tuple[float, float]:
    """The pixel range (low, high) the model takes (metadata ``input.range``; [0, 1] when absent)."""
    low, high = metadata[F_INPUT].get(F_RANGE, [0.0, 1.0])
    return float(low), float(high)
