"""Checks an exported model's metadata against the contract (v1) and reads its layer table."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from tflite_train.sparse.layer_table import LayerSpec, LayerTable

SUPPORTED_FORMAT = "tflite-train"
SUPPORTED_FORMAT_VERSION = 1
REQUIRED_KEYS = ("model_id", "input", "feature_dim", "class_capacity", "optimizer", "layers", "candidates")
_SPEC_FIELDS = tuple(f.name for f in dataclasses.fields(LayerSpec))


def check_metadata(metadata: Mapping[str, Any]) -> None:
    """Raises ValueError unless ``metadata`` is a ``tflite-train`` v1 model with the keys the trainer uses."""
    if not isinstance(metadata, Mapping):
        raise ValueError(f"model metadata must be a JSON object; got {type(metadata).__name__}")
    if metadata.get("format") != SUPPORTED_FORMAT or metadata.get("format_version") != SUPPORTED_FORMAT_VERSION:
        raise ValueError(
            f"unsupported model: format={metadata.get('format')!r}, format_version={metadata.get('format_version')!r}; "
            f"this trainer reads {SUPPORTED_FORMAT!r} v{SUPPORTED_FORMAT_VERSION}"
        )
    missing = [k for k in REQUIRED_KEYS if k not in metadata]
    if missing:
        raise ValueError(f"model metadata lacks keys {missing}")
    if not metadata["candidates"]:
        raise ValueError("model metadata lists no candidate layers; the model cannot be fine-tuned")


def layer_table(metadata: Mapping[str, Any]) -> LayerTable:
    """The model's ``LayerTable`` from its metadata ``layers`` (extra keys such as ``params`` dropped)."""
    return LayerTable(tuple(LayerSpec.from_dict({k: layer[k] for k in _SPEC_FIELDS}) for layer in metadata["layers"]))
