"""The trainable ``.tflite`` contract (CONTRACT.md): the single source of every signature name, its
inputs and outputs, the state it reads and writes, the metadata field names and the format version.

Stdlib only: the exporter (TensorFlow), the on-device runtime (numpy + an interpreter) and the
golden generators all import it; nothing else spells a signature, tensor or metadata field name.

Shapes are tuples of symbols: ``N`` is the batch (dynamic: the only dimension a caller chooses per
call); ``H, W, C`` the input size, ``K`` the class capacity, ``D`` the feature dimension, ``S`` the
channel-mask length (sum of the candidate layers' output channels) and ``C_l`` one candidate
layer's output channels are fixed at export and read from the metadata; ``()`` is a scalar.

Why every signature takes at least one input: TFLite's Java ``Interpreter.runSignature`` throws
``IllegalArgumentException("Input error: Inputs should not be null or empty.")`` for an empty
input map, so a signature without inputs could not be called from Android. ``get_state`` and
``reset_state`` therefore take the scalar :data:`DUMMY` (int32, value ignored).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "CANDIDATE_OUTPUTS", "FORMAT", "FORMAT_VERSION", "GLOBAL_STATE", "METADATA_FIELDS", "METADATA_NAME",
    "OPTIMIZER_SLOTS", "REQUIRED_FIELDS", "SELFTEST_NAME", "SIGNATURES", "SIGNATURE_NAMES", "SPECS", "STATE_TENSORS",
    "TRAIN_VARIANT_PREFIX", "ContractError", "MetadataField", "SignatureSpec", "TensorSpec", "check_format",
    "layer_state", "markdown_tables", "optimizer_slots", "signature_io", "state_names", "train_variant_name",
    "validate_graph",
]
"""The functions and tables; the name constants (``INFER``, ``IMAGES``, ``F_INPUT`` ...) are module
attributes read as ``contract.NAME``."""

# ------------------------------------------------------------------ format
FORMAT = "tflite-train"
"""Value of the metadata ``format`` field."""
FORMAT_VERSION = 1
"""The metadata format version this code writes and reads (see :func:`check_format`)."""
METADATA_NAME = "tflite_train"
"""Name of the flatbuffer ``Model.metadata`` entry holding the metadata JSON (UTF-8)."""
SELFTEST_NAME = "tflite_train_selftest"
"""Name of the flatbuffer ``Model.metadata`` entry holding the self-test vectors (npz)."""
CHECKPOINT_CONFIG = "config"
"""Checkpoint header member (optional): the resolved config of the run that wrote it, a JSON object."""
CHECKPOINT_REPORT = "report"
"""Checkpoint header member (optional): that run's report (selection, cost, losses, accuracy), a JSON object."""

# -------------------------------------------------------------- signatures
INFER = "infer"
FISHER = "fisher"
TRAIN_STEP = "train_step"
SET_HEAD = "set_head"
SET_SELECTION = "set_selection"
SET_HPARAMS = "set_hparams"
GET_STATE = "get_state"
SET_STATE = "set_state"
RESET_STATE = "reset_state"
TRAIN_VARIANT_PREFIX = "train_step_"
"""Depth-specific train steps are named ``train_step_<lowest layer>`` (metadata ``train_variants``)."""

# ------------------------------------------------------------ tensor names
IMAGES = "images"
LABELS = "labels"
PROTOTYPES = "prototypes"
NUM_CLASSES = "num_classes"
CHANNEL_MASK = "channel_mask"
LEARNING_RATE = "learning_rate"
DUMMY = "dummy"
"""Scalar int32 input of the signatures that need no argument (value ignored; module docstring)."""
EMBEDDINGS = "embeddings"
LOGITS = "logits"
LOSS = "loss"
ACCURACY = "accuracy"
OK = "ok"
STEP = "step"

# State variable names: per candidate layer ``<layer><suffix>``, then the global ones.
KERNEL_SUFFIX = "_kernel"
BIAS_SUFFIX = "_bias"
MASK_SUFFIX = "_mask"
OPTIMIZER_SLOTS = {"adam": ("m", "v"), "sgd_momentum": ("mom",)}
"""Optimizer name -> slot names; a slot variable is ``<layer>_<kernel|bias>_<slot>``."""
GLOBAL_STATE = (PROTOTYPES, NUM_CLASSES, STEP, LEARNING_RATE)

CANDIDATE_OUTPUTS = "<candidate>"
"""Placeholder in :data:`SIGNATURES`: one output per candidate layer, named like the layer, f32[C_l]."""
STATE_TENSORS = "<state>"
"""Placeholder in :data:`SIGNATURES`: every state variable, named and shaped as in :func:`state_names`."""


@dataclasses.dataclass(frozen=True)
class TensorSpec:
    """One input or output of a signature."""

    name: str
    dtype: str
    shape: tuple[str, ...]

    @property
    def dynamic(self) -> tuple[int, ...]:
        """Axes the caller sizes per call (the batch ``N``)."""
        return tuple(i for i, d in enumerate(self.shape) if d == "N")


@dataclasses.dataclass(frozen=True)
class SignatureSpec:
    """One exported signature: inputs, outputs, the state it reads and writes, and what it does."""

    name: str
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    purpose: str


_IMAGES = TensorSpec(IMAGES, "float32", ("N", "H", "W", "C"))
_LABELS = TensorSpec(LABELS, "int32", ("N",))
_OK = TensorSpec(OK, "int32", ())
_DUMMY = TensorSpec(DUMMY, "int32", ())
_TRAIN_OUT = (TensorSpec(LOSS, "float32", ()), TensorSpec(ACCURACY, "float32", ()))
_WEIGHTS = "candidate kernels and biases"

SIGNATURES: tuple[SignatureSpec, ...] = (
    SignatureSpec(INFER, (_IMAGES,), (TensorSpec(EMBEDDINGS, "float32", ("N", "D")),
                                      TensorSpec(LOGITS, "float32", ("N", "K"))),
                  (_WEIGHTS, PROTOTYPES, NUM_CLASSES), (),
                  "Embeddings and cosine logits; logits of classes >= num_classes are -1e9."),
    SignatureSpec(FISHER, (_IMAGES, _LABELS), (TensorSpec(CANDIDATE_OUTPUTS, "float32", ("C_l",)),),
                  (_WEIGHTS, PROTOTYPES, NUM_CLASSES), (),
                  "Per-channel Fisher information of every candidate layer (TinyTrain Eq. 1)."),
    SignatureSpec(TRAIN_STEP, (_IMAGES, _LABELS), _TRAIN_OUT,
                  (_WEIGHTS, "optimizer slots", "masks", PROTOTYPES, NUM_CLASSES, STEP, LEARNING_RATE),
                  (STEP, "selected channels of the candidate kernels, biases and optimizer slots"),
                  "step += 1, then one optimizer step on the selected channels; mean loss and accuracy "
                  "before the update."),
    SignatureSpec(SET_HEAD, (TensorSpec(PROTOTYPES, "float32", ("K", "D")), TensorSpec(NUM_CLASSES, "int32", ())),
                  (_OK,), (), (PROTOTYPES, NUM_CLASSES), "Sets the class prototypes (zero-padded to K)."),
    SignatureSpec(SET_SELECTION, (TensorSpec(CHANNEL_MASK, "float32", ("S",)),), (_OK,), (), ("masks",),
                  "Sets the 0/1 channel masks, concatenated in candidates order."),
    SignatureSpec(SET_HPARAMS, (TensorSpec(LEARNING_RATE, "float32", ()),), (_OK,), (), (LEARNING_RATE,),
                  "Sets the learning rate."),
    SignatureSpec(GET_STATE, (_DUMMY,), (TensorSpec(STATE_TENSORS, "float32 (num_classes: int32)", ("as exported",)),),
                  ("all state",), (), "Every state variable, in state order."),
    SignatureSpec(SET_STATE, (TensorSpec(STATE_TENSORS, "float32 (num_classes: int32)", ("as exported",)),), (_OK,), (),
                  ("all state",), "Writes every state variable."),
    SignatureSpec(RESET_STATE, (_DUMMY,), (_OK,), (), ("all state",),
                  "Restores the exported initial state (empty head and selection, zero slots, step 0)."),
)
"""Every signature of the contract, in export order. The depth-specific train steps
(``train_step_<layer>``, metadata ``train_variants``) have the inputs and outputs of ``train_step``."""

SIGNATURE_NAMES: tuple[str, ...] = tuple(s.name for s in SIGNATURES)
SPECS: Mapping[str, SignatureSpec] = {s.name: s for s in SIGNATURES}

# ---------------------------------------------------------- metadata fields
F_FORMAT = "format"
F_FORMAT_VERSION = "format_version"
F_BACKBONE = "backbone"
F_MODEL_ID = "model_id"
F_INPUT = "input"
F_FEATURE_DIM = "feature_dim"
F_CLASS_CAPACITY = "class_capacity"
F_HEAD = "head"
F_OPTIMIZER = "optimizer"
F_LAYERS = "layers"
F_CANDIDATES = "candidates"
F_STATE = "state"
F_SIGNATURES = "signatures"
F_TRAIN_VARIANTS = "train_variants"
F_SELFTEST = "selftest"
F_CONFIG = "config"
# nested keys
F_HEIGHT, F_WIDTH, F_CHANNELS, F_DTYPE, F_RANGE, F_MEAN, F_STD = "height", "width", "channels", "dtype", "range", "mean", "std"
F_NORMALISATION_SOURCE = "normalisation_source"
F_TYPE, F_SCALE, F_NAME = "type", "scale", "name"
F_BETA1, F_BETA2, F_EPSILON, F_MOMENTUM = "beta1", "beta2", "epsilon", "momentum"
F_INDEX, F_OUT_CHANNELS, F_CANDIDATE = "index", "out_channels", "candidate"
F_PARAMS, F_FORWARD_MACS, F_IN_ACTIVATION, F_OUT_ACTIVATION = "params", "forward_macs", "in_activation", "out_activation"
F_INPUTS, F_OUTPUTS = "inputs", "outputs"
F_SIGNATURE, F_LOWEST_LAYER, F_LOWEST_INDEX = "signature", "lowest_layer", "lowest_index"
F_ENTRY = "entry"
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
    MetadataField(F_FEATURE_DIM, "int", "D, the embedding width"),
    MetadataField(F_CLASS_CAPACITY, "int", "K, rows of the prototypes variable (most classes a head holds)"),
    MetadataField(F_HEAD, "object", f'{{"{F_TYPE}": "{HEAD_TYPE}", "{F_SCALE}": cosine scale s}}'),
    MetadataField(F_OPTIMIZER, "object", f"{F_NAME} ({' or '.join(OPTIMIZER_SLOTS)}), {LEARNING_RATE}, {F_BETA1}, "
                  f"{F_BETA2}, {F_EPSILON}, {F_MOMENTUM}: the exported optimizer"),
    MetadataField(F_LAYERS, "[object]", "the layer table: index, name, block, role, kernel, stride, in/out_channels, "
                  "groups, in_hw, out_hw, activation, params, forward_macs, in/out_activation, candidate"),
    MetadataField(F_CANDIDATES, "[string]", "candidate layer names in forward order (mask order of set_selection)"),
    MetadataField(F_STATE, "[string]", "state variable names in get_state / set_state order"),
    MetadataField(F_SIGNATURES, "object", "signature name -> {inputs: [names], outputs: [names]}"),
    MetadataField(F_TRAIN_VARIANTS, "[object]", "depth-specific train steps: {signature, lowest_layer, lowest_index}",
                  False),
    MetadataField(F_SELFTEST, "object", f'{{"{F_ENTRY}": "{SELFTEST_NAME}", "format": ...}}', False),
    MetadataField(F_CONFIG, "object", "the resolved export configuration (informative)", False),
)
REQUIRED_FIELDS: tuple[str, ...] = tuple(f.path for f in METADATA_FIELDS if f.required and "." not in f.path)


class ContractError(ValueError):
    """A model file whose metadata or graph does not satisfy the contract."""


def optimizer_slots(optimizer: str) -> tuple[str, ...]:
    """Slot names of ``optimizer`` (``OPTIMIZER_SLOTS``)."""
    if optimizer not in OPTIMIZER_SLOTS:
        raise ContractError(f"optimizer must be one of {sorted(OPTIMIZER_SLOTS)}; got {optimizer!r}")
    return OPTIMIZER_SLOTS[optimizer]


def state_names(layers: Sequence[str], optimizer: str) -> list[str]:
    """Names of all state variables of candidate ``layers``, in ``get_state`` order (also the
    ``set_state`` input names): per layer kernel, bias, their optimizer slots, mask; then
    prototypes, num_classes, step, learning_rate."""
    slots = optimizer_slots(optimizer)
    names = []
    for layer in layers:
        names += [layer + KERNEL_SUFFIX, layer + BIAS_SUFFIX]
        names += [f"{layer}{p}_{s}" for p in (KERNEL_SUFFIX, BIAS_SUFFIX) for s in slots]
        names.append(layer + MASK_SUFFIX)
    return names + list(GLOBAL_STATE)


def layer_state(layer: str, optimizer: str) -> list[str]:
    """The state variables of one candidate layer."""
    return state_names([layer], optimizer)[: -len(GLOBAL_STATE)]


def train_variant_name(layer: str) -> str:
    """Signature name of the depth-specific train step whose backward stops at ``layer``."""
    return TRAIN_VARIANT_PREFIX + layer


def signature_io(candidates: Sequence[str], state: Sequence[str],
                 variants: Sequence[str] = ()) -> dict[str, dict[str, list[str]]]:
    """The metadata ``signatures`` field: signature -> {inputs, outputs} names, placeholders expanded."""
    def names(specs):
        out = []
        for spec in specs:
            out += list(candidates) if spec.name == CANDIDATE_OUTPUTS else list(state) if spec.name == STATE_TENSORS \
                else [spec.name]
        return out

    io = {s.name: {F_INPUTS: names(s.inputs), F_OUTPUTS: names(s.outputs)} for s in SIGNATURES}
    for name in variants:
        io[name] = {F_INPUTS: list(io[TRAIN_STEP][F_INPUTS]), F_OUTPUTS: list(io[TRAIN_STEP][F_OUTPUTS])}
    return io


def check_format(metadata: Mapping[str, Any]) -> None:
    """The version rule: a reader accepts ``format == FORMAT`` and ``format_version == FORMAT_VERSION``.

    A newer version is refused with "update the runtime" (fields may have changed meaning); an
    older or malformed one with "re-export the model". Unknown extra fields within a version are
    ignored (adding an optional field does not bump the version; renaming, removing or changing
    the meaning of a field or signature does).

    Raises:
      ContractError: naming the field and both values.
    """
    if not isinstance(metadata, Mapping):
        raise ContractError(f"model metadata must be a JSON object; got {type(metadata).__name__}")
    if metadata.get(F_FORMAT) != FORMAT:
        raise ContractError(f"metadata field {F_FORMAT!r} is {metadata.get(F_FORMAT)!r}; expected {FORMAT!r}")
    version = metadata.get(F_FORMAT_VERSION)
    if isinstance(version, int) and not isinstance(version, bool) and version > FORMAT_VERSION:
        raise ContractError(f"metadata field {F_FORMAT_VERSION!r} is {version}, newer than the {FORMAT_VERSION} this "
                            "runtime reads: update the runtime")
    if version != FORMAT_VERSION:
        raise ContractError(f"metadata field {F_FORMAT_VERSION!r} is {version!r}; this runtime reads {FORMAT_VERSION}: "
                            "re-export the model")


def _mismatch(field: str, meta_value: Any, graph_value: Any) -> ContractError:
    return ContractError(f"model file lies: metadata {field} = {meta_value!r} but the graph has {graph_value!r}")


def validate_graph(metadata: Mapping[str, Any], graph: Mapping[str, Mapping[str, Mapping[str, tuple]]]) -> None:
    """Checks that the graph matches what the metadata claims, before any call.

    Args:
      metadata: The parsed metadata JSON.
      graph: signature -> {"inputs": {name: (shape, dtype)}, "outputs": {name: (shape, dtype)}} as the
        interpreter reports it (shape a tuple of ints, dynamic dims as -1 or 1; dtype a numpy-style
        name such as "float32").

    Checked: every contract signature (and train variant) exists with the declared inputs and
    outputs; ``class_capacity`` = rows of ``set_head``'s prototypes input; ``feature_dim`` = its
    columns; ``input`` height/width/channels/dtype = ``infer``'s images input; every candidate layer
    has its state variables (``get_state`` outputs) and a ``fisher`` output of ``out_channels``
    entries; the ``set_selection`` mask length = the candidates' channels.

    Raises:
      ContractError: one line naming the field, the metadata value and the graph value.
    """
    check_format(metadata)
    missing = [k for k in REQUIRED_FIELDS if k not in metadata]
    if missing:
        raise ContractError(f"model metadata lacks fields {missing}")
    try:
        _validate_graph(metadata, graph)
    except ContractError:
        raise
    except (KeyError, TypeError, IndexError, ValueError, AttributeError) as err:
        raise ContractError(f"model metadata is malformed ({type(err).__name__}: {err})") from err


def _validate_graph(metadata: Mapping[str, Any], graph: Mapping[str, Mapping[str, Mapping[str, tuple]]]) -> None:
    declared = metadata[F_SIGNATURES]
    variants = [v[F_SIGNATURE] for v in metadata.get(F_TRAIN_VARIANTS, [])]
    for name in (*SIGNATURE_NAMES, *variants):
        if name not in declared:
            raise ContractError(f"metadata field {F_SIGNATURES!r} lacks the contract signature {name!r}")
        if name not in graph:
            raise _mismatch(f"{F_SIGNATURES}.{name}", "present", f"no such signature (has {sorted(graph)})")
        for kind in (F_INPUTS, F_OUTPUTS):
            meta_names = sorted(declared[name][kind])
            graph_names = sorted(graph[name][kind])
            if meta_names != graph_names:
                raise _mismatch(f"{F_SIGNATURES}.{name}.{kind}", meta_names, graph_names)
        if not graph[name][F_INPUTS]:
            raise ContractError(f"signature {name!r} takes no input; the contract requires one (CONTRACT.md)")
        spec = SPECS.get(name, SPECS[TRAIN_STEP])
        for kind, tensors in ((F_INPUTS, spec.inputs), (F_OUTPUTS, spec.outputs)):
            for tensor in tensors:
                if tensor.name in (CANDIDATE_OUTPUTS, STATE_TENSORS):
                    continue
                shape, dtype = graph[name][kind][tensor.name]
                if str(dtype) != tensor.dtype or len(shape) != len(tensor.shape):
                    raise _mismatch(f"{F_SIGNATURES}.{name}.{kind}.{tensor.name}",
                                    f"{tensor.dtype} of rank {len(tensor.shape)} (CONTRACT.md)",
                                    f"{dtype} {tuple(shape)}")
    protos_shape, _ = graph[SET_HEAD][F_INPUTS][PROTOTYPES]
    if int(metadata[F_CLASS_CAPACITY]) != int(protos_shape[0]):
        raise _mismatch(F_CLASS_CAPACITY, metadata[F_CLASS_CAPACITY], int(protos_shape[0]))
    if int(metadata[F_FEATURE_DIM]) != int(protos_shape[1]):
        raise _mismatch(F_FEATURE_DIM, metadata[F_FEATURE_DIM], int(protos_shape[1]))
    shape, dtype = graph[INFER][F_INPUTS][IMAGES]
    inp = metadata[F_INPUT]
    for axis, key in enumerate((F_HEIGHT, F_WIDTH, F_CHANNELS), start=1):
        if int(inp[key]) != int(shape[axis]):
            raise _mismatch(f"{F_INPUT}.{key}", inp[key], int(shape[axis]))
    if inp[F_DTYPE] != str(dtype):
        raise _mismatch(f"{F_INPUT}.{F_DTYPE}", inp[F_DTYPE], str(dtype))
    channels = {layer[F_NAME]: int(layer[F_OUT_CHANNELS]) for layer in metadata[F_LAYERS]}
    state_out = graph[GET_STATE][F_OUTPUTS]
    optimizer = metadata[F_OPTIMIZER][F_NAME]
    total = 0
    for layer in metadata[F_CANDIDATES]:
        if layer not in channels:
            raise ContractError(f"metadata field {F_CANDIDATES!r} names {layer!r}, not in {F_LAYERS!r}")
        for var in layer_state(layer, optimizer):
            if var not in state_out:
                raise _mismatch(f"{F_CANDIDATES}[{layer!r}]", f"state variable {var}", "no such get_state output")
        fisher_out = graph[FISHER][F_OUTPUTS].get(layer)
        if fisher_out is None:
            raise _mismatch(f"{F_CANDIDATES}[{layer!r}]", "a fisher output", "none")
        if tuple(int(d) for d in fisher_out[0]) != (channels[layer],):
            raise _mismatch(f"{F_LAYERS}[{layer!r}].{F_OUT_CHANNELS}", channels[layer], tuple(fisher_out[0]))
        total += channels[layer]
    mask_shape, _ = graph[SET_SELECTION][F_INPUTS][CHANNEL_MASK]
    if total != int(mask_shape[0]):
        raise _mismatch(f"{F_CANDIDATES} (sum of out_channels)", total, int(mask_shape[0]))


def markdown_tables() -> str:
    """The signature and metadata tables of CONTRACT.md, rendered from this module (a test keeps the
    document in step with it)."""
    def tensors(specs):
        return "<br>".join(f"`{t.name}` {t.dtype}[{', '.join(t.shape)}]" for t in specs)

    lines = ["| signature | inputs | outputs | reads | writes | does |", "|---|---|---|---|---|---|"]
    for s in SIGNATURES:
        lines.append(f"| `{s.name}` | {tensors(s.inputs)} | {tensors(s.outputs)} | {', '.join(s.reads) or '-'} | "
                     f"{', '.join(s.writes) or '-'} | {s.purpose} |")
    lines += ["", "| field | type | required | meaning |", "|---|---|---|---|"]
    for f in METADATA_FIELDS:
        lines.append(f"| `{f.path}` | {f.type} | {'yes' if f.required else 'no'} | {f.meaning} |")
    return "\n".join(lines) + "\n"
