"""The metadata JSON of an exported model (the ``tflite_train`` entry): its field names and schema.

``F_FORMAT`` and ``F_FORMAT_VERSION`` name the format tag and version of every file of the contract
(this metadata, the checkpoint header and its selection, the self-test vectors).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from tflite_train.contract.signatures import (APPLY_ACCUMULATED, APPLY_ACCUMULATED_SPEC, CACHED_SIGNATURES,
                                              CANDIDATE_OUTPUTS, EPISODE_SIGNATURES, LEARNING_RATE, OPTIMIZER_SLOTS,
                                              SIGNATURES, STATE_TENSORS, TRAIN_STEP, accumulate_from_name,
                                              episode_from_name, features_name, infer_from_name, train_from_name)

__all__ = [
    "FORMAT", "FORMAT_VERSION", "METADATA_NAME", "SELFTEST_NAME", "CHECKSUM_NAME", "HEAD_TYPE",
    "F_FORMAT", "F_FORMAT_VERSION", "F_BACKBONE", "F_MODEL_ID", "F_INPUT", "F_FEATURE_DIM", "F_FEATURE_LAYER", "F_RULE",
    "F_CLASS_CAPACITY",
    "F_HEAD", "F_OPTIMIZER", "F_LAYERS", "F_CANDIDATES", "F_STATE", "F_SIGNATURES", "F_TRAIN_VARIANTS",
    "F_SELFTEST", "F_CONFIG", "F_HEIGHT", "F_WIDTH", "F_CHANNELS", "F_DTYPE", "F_RANGE", "F_MEAN", "F_STD",
    "F_NORMALISATION_SOURCE", "F_CHANNEL_ORDER", "CHANNEL_ORDER_RGB", "CHANNEL_ORDER_BGR", "CHANNEL_ORDERS", "F_TYPE", "F_SCALE", "F_NAME", "F_BETA1", "F_BETA2", "F_EPSILON", "F_MOMENTUM",
    "F_INDEX", "F_OUT_CHANNELS", "F_CANDIDATE", "F_PARAMS", "F_FORWARD_MACS", "F_IN_ACTIVATION",
    "F_OUT_ACTIVATION", "F_BLOCK", "F_ROLE", "F_KERNEL", "F_STRIDE", "F_IN_CHANNELS", "F_GROUPS", "F_IN_HW",
    "F_OUT_HW", "F_ACTIVATION", "F_INPUTS", "F_OUTPUTS", "F_SIGNATURE", "F_LOWEST_LAYER", "F_LOWEST_INDEX", "F_ENTRY",
    "F_CACHED_CUTS", "F_SHAPE", "F_FEATURES_SIGNATURE", "F_TRAIN_SIGNATURE", "F_INFER_SIGNATURE", "F_SUFFIX_FORWARD_MACS",
    "F_EPISODE_SIGNATURE", "F_ACCUMULATE_SIGNATURE", "F_APPLY_ACCUMULATED_SIGNATURE",
    "LAYER_KEYS", "MetadataField", "METADATA_FIELDS", "REQUIRED_FIELDS", "signature_io",
]

FORMAT = "tflite-train"
"""Value of the metadata ``format`` field."""
FORMAT_VERSION = 1
"""The metadata format version this code writes and reads (see :func:`~tflite_train.contract.check_format`)."""
METADATA_NAME = "tflite_train"
"""Name of the flatbuffer ``Model.metadata`` entry holding the metadata JSON (UTF-8)."""
SELFTEST_NAME = "tflite_train_selftest"
"""Name of the flatbuffer ``Model.metadata`` entry holding the self-test vectors (npz)."""
CHECKSUM_NAME = "tflite_train_checksum"
"""Name of the flatbuffer ``Model.metadata`` entry holding the integrity seal: the 64 hex digits of the
sha256 of the whole file with these 64 bytes read as ASCII ``0`` (``tflite_train.runtime.model.integrity``)."""

F_FORMAT = "format"
F_FORMAT_VERSION = "format_version"
F_BACKBONE = "backbone"
F_MODEL_ID = "model_id"
F_INPUT = "input"
F_FEATURE_DIM = "feature_dim"
F_FEATURE_LAYER = "feature_layer"
F_CLASS_CAPACITY = "class_capacity"
F_HEAD = "head"
F_OPTIMIZER = "optimizer"
F_LAYERS = "layers"
F_CANDIDATES = "candidates"
F_STATE = "state"
F_SIGNATURES = "signatures"
F_TRAIN_VARIANTS = "train_variants"
F_CACHED_CUTS = "cached_cuts"
F_SELFTEST = "selftest"
F_CONFIG = "config"
# nested keys
F_HEIGHT, F_WIDTH, F_CHANNELS, F_DTYPE, F_RANGE, F_MEAN, F_STD = "height", "width", "channels", "dtype", "range", "mean", "std"
F_NORMALISATION_SOURCE = "normalisation_source"
F_CHANNEL_ORDER = "channel_order"
CHANNEL_ORDER_RGB = "rgb"
"""``input.channel_order`` of a network that reads the images as fed (the default; the field is then absent)."""
CHANNEL_ORDER_BGR = "bgr"
"""``input.channel_order`` of a network that reads BGR: the graph reverses the channels of the RGB images the
caller feeds before the normalisation (keras' caffe-mode models: ResNet50, VGG)."""
CHANNEL_ORDERS = (CHANNEL_ORDER_RGB, CHANNEL_ORDER_BGR)
"""The values of ``input.channel_order``."""
F_TYPE, F_SCALE, F_NAME = "type", "scale", "name"
F_RULE = "rule"
F_BETA1, F_BETA2, F_EPSILON, F_MOMENTUM = "beta1", "beta2", "epsilon", "momentum"
F_INDEX, F_OUT_CHANNELS, F_CANDIDATE = "index", "out_channels", "candidate"
F_PARAMS, F_FORWARD_MACS, F_IN_ACTIVATION, F_OUT_ACTIVATION = "params", "forward_macs", "in_activation", "out_activation"
F_INPUTS, F_OUTPUTS = "inputs", "outputs"
F_SIGNATURE, F_LOWEST_LAYER, F_LOWEST_INDEX = "signature", "lowest_layer", "lowest_index"
F_ENTRY = "entry"
F_SHAPE, F_SUFFIX_FORWARD_MACS = "shape", "suffix_forward_macs"
F_FEATURES_SIGNATURE, F_TRAIN_SIGNATURE, F_INFER_SIGNATURE = "features_signature", "train_signature", "infer_signature"
F_EPISODE_SIGNATURE, F_ACCUMULATE_SIGNATURE = "episode_signature", "accumulate_signature"
"""Optional keys of a ``cached_cuts`` entry: its ``episode_step_from_<layer>`` and ``accumulate_from_<layer>``."""
F_APPLY_ACCUMULATED_SIGNATURE = "apply_accumulated_signature"
"""Optional top-level field naming ``apply_accumulated``; present iff a cut has an ``accumulate_signature``."""
# keys of one ``layers`` entry besides F_INDEX, F_NAME, F_OUT_CHANNELS, F_CANDIDATE, F_PARAMS, F_FORWARD_MACS, F_*_ACTIVATION
F_BLOCK, F_ROLE, F_KERNEL, F_STRIDE, F_IN_CHANNELS, F_GROUPS = "block", "role", "kernel", "stride", "in_channels", "groups"
F_IN_HW, F_OUT_HW, F_ACTIVATION = "in_hw", "out_hw", "activation"
LAYER_KEYS = (F_INDEX, F_NAME, F_BLOCK, F_ROLE, F_KERNEL, F_STRIDE, F_IN_CHANNELS, F_OUT_CHANNELS, F_GROUPS, F_IN_HW,
              F_OUT_HW, F_ACTIVATION, F_PARAMS, F_FORWARD_MACS, F_IN_ACTIVATION, F_OUT_ACTIVATION, F_CANDIDATE)
"""Keys of one metadata ``layers`` entry: the fields of ``tflite_train.sparse.LayerSpec`` (its ``to_dict``),
``LayerCost``'s params, forward_macs, in/out_activation (bytes) and ``candidate``. All but ``candidate``
are defined by those dataclasses (``tests/contract/test_contract.py`` checks they agree); the Java core reads them
through ``Contract``."""
HEAD_TYPE = "cosine_prototype"


@dataclasses.dataclass(frozen=True)
class MetadataField:
    """One field of the metadata JSON (dotted path for nested fields)."""

    path: str
    type: str
    meaning: str
    required: bool = True


METADATA_FIELDS: tuple[MetadataField, ...] = (
    MetadataField(F_FORMAT, "string", f'always "{FORMAT}"'),
    MetadataField(F_FORMAT_VERSION, "int", "format version (version policy below)"),
    MetadataField(F_BACKBONE, "string", 'built-in backbone name, or "keras" for a user model'),
    MetadataField(F_MODEL_ID, "string", "sha256 (hex) of everything that makes two exports compute differently; "
                  "checkpoints name it"),
    MetadataField(F_INPUT, "object", "the image input"),
    MetadataField(f"{F_INPUT}.{F_HEIGHT}", "int", "H of the infer/fisher/train_step images input"),
    MetadataField(f"{F_INPUT}.{F_WIDTH}", "int", "W"),
    MetadataField(f"{F_INPUT}.{F_CHANNELS}", "int", "C"),
    MetadataField(f"{F_INPUT}.{F_DTYPE}", "string", 'element type of images, "float32"'),
    MetadataField(f"{F_INPUT}.{F_RANGE}", "[float, float]", "pixel value range the caller feeds (e.g. [0, 1])"),
    MetadataField(f"{F_INPUT}.{F_MEAN}", "[float] x C", "per-channel mean subtracted inside the graph"),
    MetadataField(f"{F_INPUT}.{F_STD}", "[float] x C", "per-channel std divided inside the graph"),
    MetadataField(f"{F_INPUT}.{F_NORMALISATION_SOURCE}", "string", "where mean/std came from (config, model ...)",
                  False),
    MetadataField(f"{F_INPUT}.{F_CHANNEL_ORDER}", "string", f'channel order the network reads: "{CHANNEL_ORDER_BGR}" = '
                  "the graph reverses the channels of the images first (callers always feed RGB; mean and std "
                  f'are in the reversed order); absent = "{CHANNEL_ORDER_RGB}"', False),
    MetadataField(F_FEATURE_DIM, "int", "D, the embedding width"),
    MetadataField(F_FEATURE_LAYER, "object", f"{{{F_NAME}, {F_RULE}}}: the layer of the exported Keras model whose "
                  "output is the embedding (the classifier above it is dropped) and why it was chosen: "
                  "--feature-layer, a global average or max pooling, Flatten, the input of the classifier's Dense "
                  "layers, or the model's output; informative, absent in older files", False),
    MetadataField(F_CLASS_CAPACITY, "int", "K, rows of the prototypes variable (most classes a head holds)"),
    MetadataField(F_HEAD, "object", f'{{"{F_TYPE}": "{HEAD_TYPE}", "{F_SCALE}": cosine scale s}}'),
    MetadataField(F_OPTIMIZER, "object", f"{F_NAME} ({' or '.join(OPTIMIZER_SLOTS)}), {LEARNING_RATE}, {F_BETA1}, "
                  f"{F_BETA2}, {F_EPSILON}, {F_MOMENTUM}: the exported optimizer"),
    MetadataField(F_LAYERS, "[object]", f"the layer table: {', '.join(LAYER_KEYS)}"),
    MetadataField(F_CANDIDATES, "[string]", "candidate layer names in forward order (mask order of set_selection)"),
    MetadataField(F_STATE, "[string]", "state variable names in get_state / set_state order"),
    MetadataField(F_SIGNATURES, "object", "signature name -> {inputs: [names], outputs: [names]}"),
    MetadataField(F_TRAIN_VARIANTS, "[object]", "depth-specific train steps: {signature, lowest_layer, lowest_index}",
                  False),
    MetadataField(F_CACHED_CUTS, "[object]", f"cached cut, one entry per cut, ascending: {{{F_LOWEST_LAYER}, "
                  f"{F_LOWEST_INDEX}, {F_SHAPE} (the activation without the batch), {F_FEATURES_SIGNATURE}, "
                  f"{F_TRAIN_SIGNATURE}, {F_INFER_SIGNATURE}, {F_SUFFIX_FORWARD_MACS} (forward MACs per image above "
                  f"the cut), optional {F_EPISODE_SIGNATURE} and {F_ACCUMULATE_SIGNATURE} (the cut's episode step and "
                  "gradient accumulation; absent in older files)}; absent in older files (the runtime then trains on "
                  "full steps)", False),
    MetadataField(F_APPLY_ACCUMULATED_SIGNATURE, "string", f'"{APPLY_ACCUMULATED}" when the cuts have '
                  f"{F_ACCUMULATE_SIGNATURE}s (the step with the accumulated gradient); absent otherwise", False),
    MetadataField(F_SELFTEST, "object", f'{{"{F_ENTRY}": "{SELFTEST_NAME}", "format": ...}}', False),
    MetadataField(F_CONFIG, "object", "the resolved export configuration (informative)", False),
)
REQUIRED_FIELDS: tuple[str, ...] = tuple(f.path for f in METADATA_FIELDS if f.required and "." not in f.path)



def signature_io(candidates: Sequence[str], state: Sequence[str], variants: Sequence[str] = (),
                 cached_cuts: Sequence[str] = (), episode_cuts: Sequence[str] = ()) -> dict[str, dict[str, list[str]]]:
    """The metadata ``signatures`` field: signature -> {inputs, outputs} names, placeholders expanded;
    ``variants`` are the depth-specific train steps, ``cached_cuts`` the lowest layers of the cuts with
    cached-cut signatures (:data:`CACHED_SIGNATURES`), ``episode_cuts`` those of the cuts that also
    have the episode and accumulation signatures (:data:`EPISODE_SIGNATURES`; with any, ``apply_accumulated``)."""
    def names(specs):
        out = []
        for spec in specs:
            out += list(candidates) if spec.name == CANDIDATE_OUTPUTS else list(state) if spec.name == STATE_TENSORS \
                else [spec.name]
        return out

    io = {s.name: {F_INPUTS: names(s.inputs), F_OUTPUTS: names(s.outputs)} for s in SIGNATURES}
    for name in variants:
        io[name] = {F_INPUTS: list(io[TRAIN_STEP][F_INPUTS]), F_OUTPUTS: list(io[TRAIN_STEP][F_OUTPUTS])}
    for layer in cached_cuts:
        for spec, name in zip(CACHED_SIGNATURES, (features_name(layer), train_from_name(layer), infer_from_name(layer))):
            io[name] = {F_INPUTS: names(spec.inputs), F_OUTPUTS: names(spec.outputs)}
    for layer in episode_cuts:
        for spec, name in zip(EPISODE_SIGNATURES, (episode_from_name(layer), accumulate_from_name(layer))):
            io[name] = {F_INPUTS: names(spec.inputs), F_OUTPUTS: names(spec.outputs)}
    if episode_cuts:
        spec = APPLY_ACCUMULATED_SPEC
        io[spec.name] = {F_INPUTS: names(spec.inputs), F_OUTPUTS: names(spec.outputs)}
    return io
