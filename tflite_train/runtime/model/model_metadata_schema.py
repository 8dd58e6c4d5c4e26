"""The declared schema of an exported model's metadata JSON, as the runtime reads it.

``TrainableModel`` checks the metadata with ``check_model_metadata`` right after reading it and before
anything else uses a value (the graph comparison ``contract.validate_graph``, the layer table, the
cost model, the image input): the seal proves the bytes are the exporter's only when the exporter is
this project, and a file re-sealed by anyone passes the digest. Checked field by field: types, ranges
and lengths of every field the runtime reads (``MODEL_METADATA``), then the cross-field rules: layer
indices 0..n-1 in order and names unique, ``groups`` dividing the channels, every candidate a layer
of the table, ``input.mean``/``input.std`` one value per input channel (std > 0), ``input.range``
low < high, ``input.channel_order`` "rgb" or "bgr" (bgr only on 3 channels), every train variant and cached cut naming a layer at its index. Fields the runtime does
not read (``config``, ``selftest``, a layer's ``params``...) are only type-checked when declared, and
unknown fields are ignored (the version policy of CONTRACT.md).
"""

from __future__ import annotations

from typing import Any

from tflite_train import contract as C
from tflite_train.runtime.model.header_schema import (Bool, Const, Field, Float, Int, JsonObject, ListOf, MapOf, Object,
                                                      SchemaError, Str, field_path, require)
from tflite_train.sparse.layer_table import ACTIVATIONS, ROLES

__all__ = ["HEAD", "INPUT", "MODEL_METADATA", "check_model_metadata"]

MAX_NAME = 1024
MAX_LAYERS = 10_000
MAX_SIZE = 2**16
"""Largest image side, channel count, kernel or stride a metadata field may declare."""
MAX_CHANNELS = 2**24
MAX_COUNT = 2**62
"""Largest parameter, MAC or byte count."""
MAX_SIGNATURE_TENSORS = 100_000

_NAME = Str(max_length=MAX_NAME, min_length=1)
_SIZE = Int(1, MAX_SIZE)
_COUNT = Int(0, MAX_COUNT)


def _layer_rules(layer: dict, path: str) -> None:
    groups = layer[C.F_GROUPS]
    require(layer[C.F_IN_CHANNELS] % groups == 0 and layer[C.F_OUT_CHANNELS] % groups == 0,
            field_path(path, C.F_GROUPS), f"{groups} must divide {C.F_IN_CHANNELS} {layer[C.F_IN_CHANNELS]} and "
                                          f"{C.F_OUT_CHANNELS} {layer[C.F_OUT_CHANNELS]}")


LAYER = Object({
    C.F_INDEX: Field(Int(0, MAX_LAYERS - 1)),
    C.F_NAME: Field(_NAME),
    C.F_BLOCK: Field(Int(-1, MAX_LAYERS)),
    C.F_ROLE: Field(Str(choices=ROLES)),
    C.F_KERNEL: Field(_SIZE),
    C.F_STRIDE: Field(_SIZE),
    C.F_IN_CHANNELS: Field(Int(1, MAX_CHANNELS)),
    C.F_OUT_CHANNELS: Field(Int(1, MAX_CHANNELS)),
    C.F_GROUPS: Field(Int(1, MAX_CHANNELS)),
    C.F_IN_HW: Field(ListOf(_SIZE, 2, min_length=2)),
    C.F_OUT_HW: Field(ListOf(_SIZE, 2, min_length=2)),
    C.F_ACTIVATION: Field(Str(choices=ACTIVATIONS)),
    C.F_PARAMS: Field(_COUNT, required=False),
    C.F_FORWARD_MACS: Field(_COUNT, required=False),
    C.F_IN_ACTIVATION: Field(_COUNT, required=False),
    C.F_OUT_ACTIVATION: Field(_COUNT, required=False),
    C.F_CANDIDATE: Field(Bool(), required=False),
}, extra=True, validator=_layer_rules)


def _input_rules(inp: dict, path: str) -> None:
    channels = inp[C.F_CHANNELS]
    for key in (C.F_MEAN, C.F_STD):
        values = inp[key]
        require(len(values) == channels, field_path(path, key),
                f"has {len(values)} values for {C.F_CHANNELS} {channels}")
    bad = [v for v in inp[C.F_STD] if v <= 0]
    require(not bad, field_path(path, C.F_STD), f"must be > 0; got {bad[0] if bad else ''}")
    if C.F_RANGE in inp:
        low, high = inp[C.F_RANGE]
        require(low < high, field_path(path, C.F_RANGE), f"must be [low, high] with low < high; got [{low}, {high}]")
    order = inp.get(C.F_CHANNEL_ORDER, C.CHANNEL_ORDER_RGB)
    require(order == C.CHANNEL_ORDER_RGB or channels == 3, field_path(path, C.F_CHANNEL_ORDER),
            f"{order!r} needs {C.F_CHANNELS} 3; got {channels}")


INPUT = Object({
    C.F_HEIGHT: Field(_SIZE),
    C.F_WIDTH: Field(_SIZE),
    C.F_CHANNELS: Field(Int(1, 4)),
    C.F_DTYPE: Field(Const("float32")),
    C.F_RANGE: Field(ListOf(Float(-1e6, 1e6), 2, min_length=2), required=False),
    C.F_MEAN: Field(ListOf(Float(-1e6, 1e6), 4, min_length=1)),
    C.F_STD: Field(ListOf(Float(-1e6, 1e6), 4, min_length=1)),
    C.F_NORMALISATION_SOURCE: Field(Str(), required=False),
    C.F_CHANNEL_ORDER: Field(Str(choices=C.CHANNEL_ORDERS), required=False),
}, extra=True, validator=_input_rules)

TRAIN_VARIANT = Object({
    C.F_SIGNATURE: Field(_NAME),
    C.F_LOWEST_LAYER: Field(_NAME, required=False),
    C.F_LOWEST_INDEX: Field(Int(0, MAX_LAYERS - 1)),
}, extra=True)

CACHED_CUT = Object({
    C.F_LOWEST_LAYER: Field(_NAME),
    C.F_LOWEST_INDEX: Field(Int(0, MAX_LAYERS - 1)),
    C.F_SHAPE: Field(ListOf(Int(1, MAX_CHANNELS), 8, min_length=1)),
    C.F_FEATURES_SIGNATURE: Field(_NAME),
    C.F_TRAIN_SIGNATURE: Field(_NAME),
    C.F_INFER_SIGNATURE: Field(_NAME),
    C.F_SUFFIX_FORWARD_MACS: Field(_COUNT),
    C.F_EPISODE_SIGNATURE: Field(_NAME, required=False),
    C.F_ACCUMULATE_SIGNATURE: Field(_NAME, required=False),
}, extra=True)

HEAD = Object({C.F_TYPE: Field(Const(C.HEAD_TYPE)), C.F_SCALE: Field(Float(0, 1e6, low_open=True))}, extra=True)

SIGNATURE_IO = Object({
    C.F_INPUTS: Field(ListOf(_NAME, MAX_SIGNATURE_TENSORS)),
    C.F_OUTPUTS: Field(ListOf(_NAME, MAX_SIGNATURE_TENSORS)),
}, extra=True)


def _metadata_rules(meta: dict, path: str) -> None:
    layers = meta[C.F_LAYERS]
    names: dict[str, int] = {}
    for position, layer in enumerate(layers):
        where = field_path(field_path(C.F_LAYERS, position), C.F_INDEX)
        require(layer[C.F_INDEX] == position, where, f"is {layer[C.F_INDEX]}; indices must be 0..n-1 in order")
        require(layer[C.F_NAME] not in names, field_path(field_path(C.F_LAYERS, position), C.F_NAME),
                f"repeats the layer name {layer[C.F_NAME]!r}")
        names[layer[C.F_NAME]] = position
    for i, name in enumerate(meta[C.F_CANDIDATES]):
        require(name in names, field_path(C.F_CANDIDATES, i), f"names {name!r}, which is not in {C.F_LAYERS}")
    for key in (C.F_TRAIN_VARIANTS, C.F_CACHED_CUTS):
        for i, entry in enumerate(meta.get(key, [])):
            layer = entry.get(C.F_LOWEST_LAYER)
            index = entry[C.F_LOWEST_INDEX]
            require(index < len(layers), field_path(field_path(key, i), C.F_LOWEST_INDEX),
                    f"is {index}; the table has {len(layers)} layers")
            if layer is not None:
                require(names.get(layer) == index, field_path(field_path(key, i), C.F_LOWEST_LAYER),
                        f"{layer!r} is not the layer at index {index}")


MODEL_METADATA = Object({
    C.F_FORMAT: Field(Const(C.FORMAT)),
    C.F_FORMAT_VERSION: Field(Int(0, 2**31 - 1)),
    C.F_BACKBONE: Field(Str(max_length=MAX_NAME)),
    C.F_MODEL_ID: Field(_NAME),
    C.F_INPUT: Field(INPUT),
    C.F_FEATURE_DIM: Field(Int(1, MAX_CHANNELS)),
    C.F_FEATURE_LAYER: Field(Object({C.F_NAME: Field(_NAME), C.F_RULE: Field(Str(max_length=MAX_NAME))}, extra=True),
                             required=False),
    C.F_CLASS_CAPACITY: Field(Int(1, 2**20)),
    C.F_HEAD: Field(HEAD),
    C.F_OPTIMIZER: Field(Object({C.F_NAME: Field(Str(choices=tuple(C.OPTIMIZER_SLOTS)))},
                                extra=True)),
    C.F_LAYERS: Field(ListOf(LAYER, MAX_LAYERS, min_length=1)),
    C.F_CANDIDATES: Field(ListOf(_NAME, MAX_LAYERS, min_length=1, unique=True)),
    C.F_STATE: Field(ListOf(_NAME, MAX_SIGNATURE_TENSORS, unique=True)),
    C.F_SIGNATURES: Field(MapOf(_NAME, SIGNATURE_IO, MAX_SIGNATURE_TENSORS)),
    C.F_TRAIN_VARIANTS: Field(ListOf(TRAIN_VARIANT, MAX_LAYERS), required=False),
    C.F_CACHED_CUTS: Field(ListOf(CACHED_CUT, MAX_LAYERS), required=False),
    C.F_APPLY_ACCUMULATED_SIGNATURE: Field(_NAME, required=False),
    C.F_SELFTEST: Field(JsonObject(), required=False),
    C.F_CONFIG: Field(JsonObject(), required=False),
}, extra=True, validator=_metadata_rules)
"""The metadata fields the runtime reads (CONTRACT.md "Metadata"); ``format_version`` is checked by the
version rule (``contract.check_format``) first, so that a newer file says "update the runtime"."""


def check_model_metadata(metadata: Any, source: str = "model") -> dict[str, Any]:
    """Checks an exported model's metadata: the version rule, then ``MODEL_METADATA`` field by field.

    Returns:
      The metadata (every field the runtime reads known to be well typed, in range and consistent).

    Raises:
      ContractError: another format or version (``contract.check_format``), or "<source>: metadata
        field <path>: <problem>".
    """
    C.check_format(metadata)
    try:
        MODEL_METADATA.check(metadata, "")
    except SchemaError as err:
        raise C.ContractError(f"{source}: metadata {err}") from None
    return metadata
