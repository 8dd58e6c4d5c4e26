"""The signatures of a trainable ``.tflite`` file: their names, inputs, outputs and the state they share.

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

from tflite_train.contract.errors import ContractError

__all__ = [
    "INFER", "FISHER", "TRAIN_STEP", "SET_HEAD", "SET_SELECTION", "SET_HPARAMS", "GET_STATE", "SET_STATE",
    "RESET_STATE", "TRAIN_VARIANT_PREFIX", "IMAGES", "LABELS", "PROTOTYPES", "NUM_CLASSES", "CHANNEL_MASK",
    "LEARNING_RATE", "DUMMY", "EMBEDDINGS", "LOGITS", "LOSS", "ACCURACY", "OK", "STEP", "KERNEL_SUFFIX",
    "BIAS_SUFFIX", "MASK_SUFFIX", "OPTIMIZER_SLOTS", "GLOBAL_STATE", "CANDIDATE_OUTPUTS", "STATE_TENSORS",
    "TensorSpec", "SignatureSpec", "SIGNATURES", "SIGNATURE_NAMES", "SPECS", "optimizer_slots", "slot_names", "state_names",
    "layer_state", "train_variant_name", "FEATURES_PREFIX", "TRAIN_FROM_PREFIX", "INFER_FROM_PREFIX", "ACTIVATIONS",
    "CACHED_SIGNATURES", "features_name", "train_from_name", "infer_from_name", "EPISODE_FROM_PREFIX",
    "ACCUMULATE_FROM_PREFIX", "APPLY_ACCUMULATED", "SUPPORT_MASK", "EPISODE_SIGNATURES", "APPLY_ACCUMULATED_SPEC",
    "episode_from_name", "accumulate_from_name",
]

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
FEATURES_PREFIX = "features_"
"""Cached-cut signatures ``features_<layer>``: images -> the activation that layer's cut starts from
(metadata ``cached_cuts``)."""
TRAIN_FROM_PREFIX = "train_step_from_"
"""``train_step_from_<layer>``: the train step of ``train_step_<layer>``, started from a cached activation."""
INFER_FROM_PREFIX = "infer_from_"
"""``infer_from_<layer>``: ``infer`` started from a cached activation."""
EPISODE_FROM_PREFIX = "episode_step_from_"
"""``episode_step_from_<layer>`` (optional): one optimizer step on the ProtoNet loss of an episode whose
prototypes are computed in the graph from its support rows (metadata ``cached_cuts``' ``episode_signature``)."""
ACCUMULATE_FROM_PREFIX = "accumulate_from_"
"""``accumulate_from_<layer>`` (optional): adds the rows' summed gradient into internal accumulators
(metadata ``cached_cuts``' ``accumulate_signature``); :data:`APPLY_ACCUMULATED` steps with their mean."""
APPLY_ACCUMULATED = "apply_accumulated"
"""One optimizer step with the mean accumulated gradient (metadata ``apply_accumulated_signature``)."""

# ------------------------------------------------------------ tensor names
IMAGES = "images"
LABELS = "labels"
PROTOTYPES = "prototypes"
NUM_CLASSES = "num_classes"
CHANNEL_MASK = "channel_mask"
LEARNING_RATE = "learning_rate"
DUMMY = "dummy"
"""Scalar int32 input of the signatures that need no argument (value ignored; module docstring)."""
ACTIVATIONS = "activations"
"""The activation at a cut (``features_<layer>`` output, ``*_from_<layer>`` input), shape [N, *cached_cuts.shape]."""
SUPPORT_MASK = "support_mask"
"""Input of ``episode_step_from_<layer>``: f32[N], 1.0 = a support row (builds its class's prototype, not
scored), 0.0 = a pseudo-query row (scored against the prototypes)."""
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

_ACTIVATIONS = TensorSpec(ACTIVATIONS, "float32", ("N", "A..."))
CACHED_SIGNATURES: tuple[SignatureSpec, ...] = (
    SignatureSpec(FEATURES_PREFIX + "<layer>", (_IMAGES,), (_ACTIVATIONS,), (_WEIGHTS,), (),
                  "The forward pass below the cut at <layer>: the activation every layer from <layer> up reads "
                  "(computed once per support image and cached by the runtime)."),
    SignatureSpec(TRAIN_FROM_PREFIX + "<layer>", (_ACTIVATIONS, _LABELS), _TRAIN_OUT,
                  (_WEIGHTS, "optimizer slots", "masks", PROTOTYPES, NUM_CLASSES, STEP, LEARNING_RATE),
                  (STEP, "selected channels of the candidate kernels, biases and optimizer slots"),
                  "train_step_<layer> from the cached activation: the same loss, accuracy and update; valid only "
                  "when no layer below <layer> is selected."),
    SignatureSpec(INFER_FROM_PREFIX + "<layer>", (_ACTIVATIONS,), SIGNATURES[0].outputs,
                  (_WEIGHTS, PROTOTYPES, NUM_CLASSES), (), "infer from the cached activation."),
)
"""The cached-cut signatures of one cut (metadata ``cached_cuts``); ``<layer>`` is the cut's lowest
layer and ``A...`` the activation's shape without the batch (the entry's ``shape``)."""

_UPDATE_READS = (_WEIGHTS, "optimizer slots", "masks", NUM_CLASSES, STEP, LEARNING_RATE)
_UPDATE_WRITES = (STEP, "selected channels of the candidate kernels, biases and optimizer slots")
EPISODE_SIGNATURES: tuple[SignatureSpec, ...] = (
    SignatureSpec(EPISODE_FROM_PREFIX + "<layer>", (_ACTIVATIONS, _LABELS, TensorSpec(SUPPORT_MASK, "float32", ("N",))),
                  _TRAIN_OUT, _UPDATE_READS, _UPDATE_WRITES,
                  "One episode step from cached activations, prototypes in the graph: e = the embeddings with the "
                  "current weights, c_k = mean e of the support rows (support_mask 1) of class k (0 without one), "
                  "loss = mean cross-entropy of the cosine logits of the query rows (support_mask 0); its gradient "
                  "reaches the weights through the query embeddings and the prototypes; step += 1 and the optimizer "
                  "step of train_step_from_<layer>. loss and accuracy over the query rows, before the update. Does "
                  "not read or write the prototypes state; valid only when no layer below <layer> is selected."),
    SignatureSpec(ACCUMULATE_FROM_PREFIX + "<layer>", (_ACTIVATIONS, _LABELS), _TRAIN_OUT,
                  (_WEIGHTS, "masks", PROTOTYPES, NUM_CLASSES),
                  ("internal gradient accumulators (not state)",),
                  "Adds the gradient of the sum of the rows' train_step_from_<layer> losses (selected layers) into "
                  "internal accumulators and counts the rows; no weight, slot or step changes. Mean loss and "
                  "accuracy of the rows; valid only when no layer below <layer> is selected."),
)
"""The optional episode and accumulation signatures of one cached cut (metadata ``cached_cuts``'
``episode_signature`` and ``accumulate_signature``; absent in older files)."""

APPLY_ACCUMULATED_SPEC = SignatureSpec(
    APPLY_ACCUMULATED, (_DUMMY,), (_OK,), (*_UPDATE_READS, "internal gradient accumulators"),
    (*_UPDATE_WRITES, "internal gradient accumulators"),
    "With rows accumulated: step += 1, one optimizer step with the accumulated gradient / rows (= train_step_from "
    "on all of them), then zero the accumulators; without rows: nothing changes. reset_state, set_state and "
    "set_selection also zero them.")
"""The optional signature that applies the accumulated gradient (metadata ``apply_accumulated_signature``)."""

SIGNATURE_NAMES: tuple[str, ...] = tuple(s.name for s in SIGNATURES)
SPECS: Mapping[str, SignatureSpec] = {s.name: s for s in SIGNATURES}


def optimizer_slots(optimizer: str) -> tuple[str, ...]:
    """Slot names of ``optimizer`` (``OPTIMIZER_SLOTS``)."""
    if optimizer not in OPTIMIZER_SLOTS:
        raise ContractError(f"optimizer must be one of {sorted(OPTIMIZER_SLOTS)}; got {optimizer!r}")
    return OPTIMIZER_SLOTS[optimizer]


def slot_names(layer: str, optimizer: str) -> list[str]:
    """The optimizer slot variables of one candidate layer: ``<layer>_<kernel|bias>_<slot>``, kernel's first."""
    return [f"{layer}{p}_{s}" for p in (KERNEL_SUFFIX, BIAS_SUFFIX) for s in optimizer_slots(optimizer)]


def state_names(layers: Sequence[str], optimizer: str) -> list[str]:
    """Names of all state variables of candidate ``layers``, in ``get_state`` order (also the
    ``set_state`` input names): per layer kernel, bias, their optimizer slots, mask; then
    prototypes, num_classes, step, learning_rate."""
    names = []
    for layer in layers:
        names += [layer + KERNEL_SUFFIX, layer + BIAS_SUFFIX, *slot_names(layer, optimizer), layer + MASK_SUFFIX]
    return names + list(GLOBAL_STATE)


def layer_state(layer: str, optimizer: str) -> list[str]:
    """The state variables of one candidate layer."""
    return state_names([layer], optimizer)[: -len(GLOBAL_STATE)]


def train_variant_name(layer: str) -> str:
    """Signature name of the depth-specific train step whose backward stops at ``layer``."""
    return TRAIN_VARIANT_PREFIX + layer


def features_name(layer: str) -> str:
    """Signature name of the frozen prefix below the cut at ``layer``."""
    return FEATURES_PREFIX + layer


def train_from_name(layer: str) -> str:
    """Signature name of the train step from the cached activation at ``layer``'s cut."""
    return TRAIN_FROM_PREFIX + layer


def infer_from_name(layer: str) -> str:
    """Signature name of ``infer`` from the cached activation at ``layer``'s cut."""
    return INFER_FROM_PREFIX + layer


def episode_from_name(layer: str) -> str:
    """Signature name of the episode step (prototypes in the graph) from the cached activation at ``layer``'s cut."""
    return EPISODE_FROM_PREFIX + layer


def accumulate_from_name(layer: str) -> str:
    """Signature name of the gradient accumulation from the cached activation at ``layer``'s cut."""
    return ACCUMULATE_FROM_PREFIX + layer
