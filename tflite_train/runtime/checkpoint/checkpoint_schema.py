"""The declared schema of a checkpoint's header and of its selection, and their consistency with the model.

Three layers, each checked before any value of the layer is used (``checkpoint.decode_checkpoint`` and
``checkpoint.restore_checkpoint`` call them in this order):

1. ``check_checkpoint_header(header, source)``: every field's JSON type, range and length
   (``CHECKPOINT_HEADER``, ``SELECTION``), and the header's own cross-field rules: the selection's
   ``channels`` has exactly its ``layers`` as keys, each a strictly increasing list of channel indices;
   array names are unique, each array's ``nbytes`` is its ``shape``'s element count x 4 and lies within
   ``payload_bytes``; ``num_classes``, ``prototypes`` and ``learning_rate`` are present with their
   contract dtype and rank. The optional replay section (``REPLAY``, issue 42; version 1 or 2) comes with
   exactly its arrays: ``replay_activations`` float32 [R >= 1, *activation_shape] within ``budget_bytes``,
   ``replay_labels`` int32 [R] and, in version 2 only, ``replay_images`` int32 [R]; a header without it has
   none of them.
2. ``check_checkpoint_arrays(header, arrays, source)``: what needs the payload: ``num_classes`` >= 1,
   ``prototypes`` has that many rows, and ``class_names`` is empty or names exactly that many classes;
   replay labels are classes of the head, replay activations finite, and ``replay_images`` (version 2) begins
   with 0..I-1 (the images' plain views) and continues in ascending order within 0..I-1, each row labelled as
   its image.
3. ``check_checkpoint_fits(checkpoint, ...)``: against the model: the ``model_id``, every selected
   layer a candidate, every channel index below its layer's output channels, at most
   ``class_capacity`` classes and prototypes of ``feature_dim`` columns; ``check_replay_fits``: the
   replay section's cut is one of the model's cached cuts, at its index and with its activation shape.

Each failure is a ``CheckpointError`` of one line naming the file, the field and what is wrong.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tflite_train import contract as C
from tflite_train.runtime.adaptation.replay_memory import replay_image_layout
from tflite_train.runtime.errors import CheckpointError
from tflite_train.runtime.model.header_schema import (Bool, Const, Field, Int, JsonObject, ListOf, MapOf, Nullable,
                                                      Object, SchemaError, Str, field_path, require, sequence_text)

__all__ = ["ALLOWED_DTYPES", "CHECKPOINT_HEADER", "MAX_ARRAYS", "MAX_CLASSES", "MAX_LAYERS", "MAX_PAYLOAD_BYTES",
           "REPLAY", "SELECTION", "check_checkpoint_arrays", "check_checkpoint_fits", "check_checkpoint_header",
           "check_replay_fits"]

ALLOWED_DTYPES = ("float32", "int32")
"""Element types a checkpoint array may have (4 bytes each, little-endian)."""
MAX_ARRAYS = 100_000
MAX_LAYERS = 10_000
MAX_CLASSES = 100_000
MAX_CHANNELS = 2**24
"""Most channel indices of one selected layer (and 1 + the largest index)."""
MAX_NAME = 1024
MAX_RANK = 8
MAX_DIM = 2**31 - 1
MAX_PAYLOAD_BYTES = 2**40
_REQUIRED_ARRAYS = {C.NUM_CLASSES: ("int32", 0), C.PROTOTYPES: ("float32", 2), C.LEARNING_RATE: ("float32", 0)}
"""Arrays every checkpoint holds: name -> (dtype, rank)."""
REPLAY_ARRAYS = (C.REPLAY_ACTIVATIONS, C.REPLAY_LABELS, C.REPLAY_IMAGES)
"""The payload arrays of the replay section (present exactly when the section is; ``replay_images`` exactly when
its version is 2)."""


def _selection_rules(selection: dict, path: str) -> None:
    layers, channels = selection[C.SEL_LAYERS], selection[C.SEL_CHANNELS]
    extra = sorted(set(channels) - set(layers))
    require(not extra, field_path(path, C.SEL_CHANNELS),
            f"names layer {extra[0]!r}, which is not in {C.SEL_LAYERS}" if extra else "")
    missing = [n for n in layers if n not in channels]
    require(not missing, field_path(path, C.SEL_CHANNELS),
            f"lacks the selected layer {missing[0]!r}" if missing else "")


SELECTION = Object({
    C.F_FORMAT: Field(Const(C.SELECTION_FORMAT)),
    C.F_FORMAT_VERSION: Field(Const(C.SELECTION_FORMAT_VERSION)),
    C.SEL_POLICY: Field(Str(max_length=MAX_NAME)),
    C.SEL_LAYERS: Field(ListOf(Str(max_length=MAX_NAME, min_length=1), MAX_LAYERS, unique=True)),
    C.SEL_CHANNELS: Field(MapOf(Str(max_length=MAX_NAME, min_length=1),
                                ListOf(Int(0, MAX_CHANNELS - 1), MAX_CHANNELS, min_length=1, increasing=True),
                                MAX_LAYERS)),
}, validator=_selection_rules)
"""A selection object (``Selection.to_dict``): in a checkpoint header, or on its own."""

ARRAY_ENTRY = Object({
    C.CK_NAME: Field(Str(max_length=MAX_NAME, min_length=1)),
    C.CK_DTYPE: Field(Str(choices=ALLOWED_DTYPES)),
    C.CK_SHAPE: Field(ListOf(Int(0, MAX_DIM), MAX_RANK)),
    C.CK_OFFSET: Field(Int(0, MAX_PAYLOAD_BYTES)),
    C.CK_NBYTES: Field(Int(0, MAX_PAYLOAD_BYTES)),
})


REPLAY = Object({
    C.F_FORMAT: Field(Const(C.REPLAY_FORMAT)),
    C.F_FORMAT_VERSION: Field(Int(C.REPLAY_FORMAT_VERSION_ONE_VIEW, C.REPLAY_FORMAT_VERSION)),
    C.RP_CUT_LAYER: Field(Str(max_length=MAX_NAME, min_length=1)),
    C.RP_CUT_INDEX: Field(Int(0, MAX_LAYERS)),
    C.RP_ACTIVATION_SHAPE: Field(ListOf(Int(1, MAX_DIM), MAX_RANK - 1, min_length=1)),
    C.RP_BUDGET_BYTES: Field(Int(0, MAX_PAYLOAD_BYTES)),
    C.F_RULE: Field(Str(choices=(C.REPLAY_RULE,))),
})
"""The replay section (``contract.CK_REPLAY``; ``replay_memory``)."""


def _replay_rules(header: dict, seen: Mapping[str, dict]) -> None:
    """The replay section and its arrays agree (module docstring, layer 1)."""
    replay = header.get(C.CK_REPLAY)
    if replay is None:
        stray = [name for name in REPLAY_ARRAYS if name in seen]
        require(not stray, f"{C.CK_ARRAYS}[{stray[0]!r}]" if stray else "",
                f"is replay data without the header field {C.CK_REPLAY}")
        return
    version = replay[C.F_FORMAT_VERSION]
    for name in REPLAY_ARRAYS:
        wanted = name != C.REPLAY_IMAGES or version >= 2
        require(name in seen or not wanted, C.CK_ARRAYS,
                f"has no {name!r} array for the header field {C.CK_REPLAY} (version {version})")
        require(name not in seen or wanted, f"{C.CK_ARRAYS}[{name!r}]",
                f"is not part of a {C.CK_REPLAY} section of version {version}")
    shape = replay[C.RP_ACTIVATION_SHAPE]
    activations, labels = seen[C.REPLAY_ACTIVATIONS], seen[C.REPLAY_LABELS]
    where = f"{C.CK_ARRAYS}[{C.REPLAY_ACTIVATIONS!r}]"
    rows = activations[C.CK_SHAPE][0] if activations[C.CK_SHAPE] else 0
    require(activations[C.CK_DTYPE] == "float32" and activations[C.CK_SHAPE][1:] == shape and rows >= 1, where,
            f"must be float32 [R >= 1, {', '.join(map(str, shape))}] ({C.CK_REPLAY}.{C.RP_ACTIVATION_SHAPE}); "
            f"got {activations[C.CK_DTYPE]} {activations[C.CK_SHAPE]}")
    require(activations[C.CK_NBYTES] <= replay[C.RP_BUDGET_BYTES], where,
            f"takes {activations[C.CK_NBYTES]} bytes, over {C.CK_REPLAY}.{C.RP_BUDGET_BYTES} {replay[C.RP_BUDGET_BYTES]}")
    require(labels[C.CK_DTYPE] == "int32" and labels[C.CK_SHAPE] == [rows], f"{C.CK_ARRAYS}[{C.REPLAY_LABELS!r}]",
            f"must be int32 [{rows}] (one class per stored activation); got {labels[C.CK_DTYPE]} {labels[C.CK_SHAPE]}")
    images = seen.get(C.REPLAY_IMAGES)
    require(images is None or images[C.CK_DTYPE] == "int32" and images[C.CK_SHAPE] == [rows],
            f"{C.CK_ARRAYS}[{C.REPLAY_IMAGES!r}]", "" if images is None else
            f"must be int32 [{rows}] (one image per stored activation); got {images[C.CK_DTYPE]} {images[C.CK_SHAPE]}")


def _header_rules(header: dict, path: str) -> None:
    payload = header[C.CK_PAYLOAD_BYTES]
    seen: dict[str, dict] = {}
    for i, entry in enumerate(header[C.CK_ARRAYS]):
        where = field_path(field_path(C.CK_ARRAYS, i), C.CK_NAME)
        name = entry[C.CK_NAME]
        require(name not in seen, where, f"repeats the array {name!r}")
        seen[name] = entry
        count = math.prod(entry[C.CK_SHAPE])
        require(entry[C.CK_NBYTES] == 4 * count, field_path(field_path(C.CK_ARRAYS, i), C.CK_NBYTES),
                f"is {entry[C.CK_NBYTES]} but shape {entry[C.CK_SHAPE]} of {entry[C.CK_DTYPE]} takes {4 * count} bytes")
        require(entry[C.CK_OFFSET] + entry[C.CK_NBYTES] <= payload, field_path(field_path(C.CK_ARRAYS, i), C.CK_OFFSET),
                f"array {name!r} ends at byte {entry[C.CK_OFFSET] + entry[C.CK_NBYTES]}, beyond "
                f"{C.CK_PAYLOAD_BYTES} {payload}")
    for name, (dtype, rank) in _REQUIRED_ARRAYS.items():
        require(name in seen, C.CK_ARRAYS, f"has no {name!r} array")
        entry = seen[name]
        require(entry[C.CK_DTYPE] == dtype and len(entry[C.CK_SHAPE]) == rank, f"{C.CK_ARRAYS}[{name!r}]",
                f"must be {dtype} of rank {rank}; got {entry[C.CK_DTYPE]} {entry[C.CK_SHAPE]}")
    _replay_rules(header, seen)


CHECKPOINT_HEADER = Object({
    C.F_FORMAT: Field(Const(C.CHECKPOINT_FORMAT)),
    C.F_FORMAT_VERSION: Field(Const(C.CHECKPOINT_FORMAT_VERSION)),
    C.F_MODEL_ID: Field(Str(max_length=MAX_NAME, min_length=1)),
    C.CK_SELECTION: Field(SELECTION),
    C.CK_INCLUDE_OPTIMIZER: Field(Bool()),
    C.CK_CLASS_NAMES: Field(ListOf(Str(max_length=MAX_NAME), MAX_CLASSES)),
    C.CK_ARRAYS: Field(ListOf(ARRAY_ENTRY, MAX_ARRAYS)),
    C.CK_PAYLOAD_BYTES: Field(Int(0, MAX_PAYLOAD_BYTES)),
    C.CHECKPOINT_CONFIG: Field(Nullable(JsonObject()), required=False),
    C.CHECKPOINT_REPORT: Field(Nullable(JsonObject()), required=False),
    C.CK_REPLAY: Field(REPLAY, required=False),
}, validator=_header_rules)
"""The checkpoint header (``checkpoint`` module docstring; CONTRACT.md "Checkpoint format")."""


def check_checkpoint_header(header: Any, source: str = "<bytes>") -> dict[str, Any]:
    """Checks a parsed checkpoint header against ``CHECKPOINT_HEADER`` and its cross-field rules.

    Returns:
      The header, every field known to be well typed and in range.

    Raises:
      CheckpointError: "<source>: checkpoint header field <path>: <problem>".
    """
    try:
        return CHECKPOINT_HEADER.check(header, "")
    except SchemaError as err:
        raise CheckpointError(f"{source}: checkpoint header {err}") from None


def check_checkpoint_arrays(header: Mapping[str, Any], arrays: Mapping[str, np.ndarray], source: str = "<bytes>") -> int:
    """The rules that need the payload: ``num_classes`` >= 1 rows of ``prototypes``, one class name per class.

    Returns:
      The number of classes.

    Raises:
      CheckpointError: naming the field.
    """
    k = int(arrays[C.NUM_CLASSES])
    if k < 1:
        raise CheckpointError(f"{source}: checkpoint array {C.NUM_CLASSES!r} is {k}; an adapted head has at least 1 class")
    rows = arrays[C.PROTOTYPES].shape[0]
    if rows != k:
        raise CheckpointError(f"{source}: checkpoint array {C.PROTOTYPES!r} has {rows} rows for {C.NUM_CLASSES} {k}")
    names = header[C.CK_CLASS_NAMES]
    if names and len(names) != k:
        raise CheckpointError(f"{source}: checkpoint header field {C.CK_CLASS_NAMES}: names {len(names)} classes; "
                              f"the head has {C.NUM_CLASSES} {k}")
    if C.REPLAY_LABELS in arrays:
        labels = arrays[C.REPLAY_LABELS]
        outside = labels[(labels < 0) | (labels >= k)]
        if outside.size:
            raise CheckpointError(f"{source}: checkpoint array {C.REPLAY_LABELS!r} holds class {int(outside[0])}; "
                                  f"the head has {C.NUM_CLASSES} {k}")
        if not np.all(np.isfinite(arrays[C.REPLAY_ACTIVATIONS])):
            raise CheckpointError(f"{source}: checkpoint array {C.REPLAY_ACTIVATIONS!r} holds NaN or Inf")
        if C.REPLAY_IMAGES in arrays:
            images = arrays[C.REPLAY_IMAGES]
            problem = replay_image_layout(images, labels.shape[0])
            if problem:
                raise CheckpointError(f"{source}: checkpoint array {C.REPLAY_IMAGES!r} {problem}")
            if not np.array_equal(labels, labels[images]):
                raise CheckpointError(f"{source}: checkpoint array {C.REPLAY_LABELS!r} labels a row unlike its image "
                                      f"({C.REPLAY_IMAGES!r}): a view's class is its image's")
    return k


def check_checkpoint_fits(model_id: str, layers: tuple[str, ...], channels: Mapping[str, tuple[int, ...]],
                          num_classes: int, *, model_model_id: str, candidate_channels: Mapping[str, int],
                          capacity: int, source: str = "checkpoint") -> None:
    """The checkpoint against the model: same ``model_id``, selected layers are candidates, channel
    indices below each layer's output channels, at most ``capacity`` classes.

    Raises:
      CheckpointError: naming the field and both values.
    """
    if model_id != model_model_id:
        raise CheckpointError(f"{source} is for model {model_id[:16]}..., not this model {model_model_id[:16]}...; "
                              "refusing to load")
    outside = [n for n in layers if n not in candidate_channels]
    if outside:
        raise CheckpointError(f"{source} selects layers {outside} that are not candidates of this model "
                              f"({sequence_text(list(candidate_channels))})")
    for name in layers:
        top = channels[name][-1]
        if top >= candidate_channels[name]:
            raise CheckpointError(f"{source}: field {C.CK_SELECTION}.{C.SEL_CHANNELS}[{name!r}] has channel {top}; "
                                  f"layer {name!r} has {candidate_channels[name]} output channels")
    if not 1 <= num_classes <= capacity:
        raise CheckpointError(f"{source}: checkpoint num_classes {num_classes} is outside 1..{capacity}")


def check_replay_fits(section: Mapping[str, Any], cuts: Sequence[Any], source: str = "checkpoint") -> None:
    """The replay section against the model: its cut is one of the model's cached cuts (``CachedCut``s), at
    the same layer index and with the same activation shape.

    Raises:
      CheckpointError: naming the field and both values.
    """
    layer = section[C.RP_CUT_LAYER]
    cut = next((c for c in cuts if c.layer == layer), None)
    where = f"{source}: checkpoint header field {C.CK_REPLAY}"
    if cut is None:
        raise CheckpointError(f"{where}.{C.RP_CUT_LAYER}: {layer!r} is not a cached cut of this model "
                              f"({sequence_text([c.layer for c in cuts]) or 'it has none'})")
    if cut.index != section[C.RP_CUT_INDEX]:
        raise CheckpointError(f"{where}.{C.RP_CUT_INDEX}: is {section[C.RP_CUT_INDEX]}; layer {layer!r} has index "
                              f"{cut.index} in this model")
    if list(cut.shape) != list(section[C.RP_ACTIVATION_SHAPE]):
        raise CheckpointError(f"{where}.{C.RP_ACTIVATION_SHAPE}: is {list(section[C.RP_ACTIVATION_SHAPE])}; the cut "
                              f"at {layer!r} has activations of shape {list(cut.shape)} in this model")
