"""What an op family declares to the registry (``converters.ops.registry``): its IR kinds, each with
forward, gradient and what the graph passes ask of it, and the Keras layers (and functional Keras ops)
that map to them.

An IR kind is one of

* :class:`OpKind` -- a node without weights: ``forward(node, xs) -> (z, y)`` (z the pre-activation of
  an activation node, else None), ``backward(node, xs, z, y, g_y, in_shapes) -> [g_x for each input]``;
* :class:`WeightedKind` -- a layer with a kernel W and a bias b (a candidate the device may train):
  ``forward(node, x, W, b, variables) -> z`` (the activation is applied by the caller),
  ``input_grad(node, g_z, W, in_shape, kernel_is_variable) -> g_x`` and
  ``weight_grad(node, x, g_z, in_shape) -> (dW, db)`` of every output channel in the kernel's layout,
  and what the layer table and cost model need (``geometry``: kernel, stride, groups; the cost model,
  ``tflite_train.sparse.cost_model``, prices a layer from its table row: M = H' W' k^2 (C_in / g) C_out).

The passes and the layer table ask a kind, never its name, what it is (the registry's predicates):
an inference identity, an activation they fuse, a per-channel scale, a residual join, a part of a
classifier head; a weighted kind says its layer-table ``role`` (depthwise: ``channelwise``).

A :class:`LayerRule` maps one Keras layer class: ``read(ctx, layer, inputs, shapes)`` adds the IR
node(s) through the reader's :class:`ReadContext` and returns the output name, or None for a variant
without a gradient (the layer then runs frozen, as an opaque node). ``supports`` says, for the README,
which variants have a gradient; ``embedding`` and ``folds`` say what the passes do with the layer's node
(the embedding it can be; a BatchNormalization folded into the layer before it); ``frozen_settings`` names
the settings that keep a layer of the class from being read (for the refusal's message).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import keras
import numpy as np

if TYPE_CHECKING:  # the IR imports the registry; the families need its Node for type hints only
    from tflite_train.converters.graph.ir import Node

Shape = tuple[int, ...]


class GraphReadError(ValueError):
    """A Keras model the exporter cannot read (names the layer and what is wrong)."""


class ReadContext(Protocol):
    """The graph reader as the layer rules see it."""

    shapes: dict[str, Shape]

    def add(self, name: str, op: str, inputs: list[str], shape, keras_class: str, **fields: Any) -> str:
        """Appends a node (name made unique) and returns its name."""

    def activation_after(self, layer, out: str) -> str:
        """Appends ``layer``'s built-in activation after node ``out`` (if not linear); returns the output."""


@dataclasses.dataclass(frozen=True)
class OpKind:
    """An IR kind without weights (module docstring).

    Attributes:
      inference_identity: y = x at inference (Dropout, data augmentation): the passes drop it.
      fusable_activation: An element-wise y = f(x) the passes fuse into the weighted layer it alone reads
        (when f is one of the layer table's activations).
      channel_scale: A per-channel y = x s + t: between a block's projection and its residual join
        (ConvNeXt's LayerScale) it does not end the block.
      residual_join: Sums branches: a linear layer it reads ends a block (the layer table).
      head: May be part of the classifier head above the embedding (``select_embedding`` drops it).
    """

    name: str
    forward: Callable[..., tuple[Any, Any]]
    backward: Callable[..., list]
    inference_identity: bool = False
    fusable_activation: bool = False
    channel_scale: bool = False
    residual_join: bool = False
    head: bool = False


@dataclasses.dataclass(frozen=True)
class WeightedKind:
    """An IR kind with a kernel and a bias (module docstring).

    Attributes:
      out_axis: The kernel's output-channel axis (BatchNorm folding scales it).
      filter_layout: (node, W) -> W in the layout of the forward op's filter (what a constant stores).
      kernel_mask: (mask [C_out]) -> the mask broadcastable to the kernel (the masked optimizer step).
      geometry: (node, in_shape) -> (kernel, stride, groups) of the layer table's ``LayerSpec``.
      role: The layer table's role of a layer of this kind inside a block that is not the block's
        projection or expansion: "conv", "depthwise" or "dense" (``tflite_train.sparse.layer_table.ROLES``).
      head: May be part of the classifier head above the embedding (a Dense: ``select_embedding`` takes
        the input of the lowest one).
    """

    name: str
    forward: Callable[..., Any]
    input_grad: Callable[..., Any]
    weight_grad: Callable[..., tuple[Any, Any]]
    out_axis: int
    filter_layout: Callable[["Node", Any], Any]
    kernel_mask: Callable[[Any], Any]
    geometry: Callable[["Node", Shape], tuple[int, int, int]]
    role: str
    head: bool = False

    @property
    def channelwise(self) -> bool:
        """Output channel o reads input channel o only (a depthwise kernel [kh, kw, C, 1]: per-channel int8
        scales and channel masks on axis 2)."""
        return self.role == "depthwise"


@dataclasses.dataclass(frozen=True)
class LayerRule:
    """One Keras layer class and how it is read (module docstring).

    Attributes:
      embedding: The rule's name (``FeatureLayer.rule``) when a node of this layer is the embedding (a global
        pooling or Flatten); "" for layers that cannot be.
      folds: The passes fold the node into the linear weighted node it alone reads (BatchNormalization).
      frozen_settings: layer -> the settings that keep this layer from being read (e.g. ``groups=4``), for the
        name of a layer that runs frozen; None: nothing to say.
    """

    keras_class: str
    read: Callable[..., str | None]
    kinds: tuple[str, ...]
    supports: str = ""
    embedding: str = ""
    folds: bool = False
    frozen_settings: Callable[[Any], list[str]] | None = None


@dataclasses.dataclass(frozen=True)
class OperationRule(LayerRule):
    """A Keras op used functionally (``x + 3.0``): the fields of ``LayerRule``, with ``read(ctx, op,
    inputs, shapes, node)`` and ``supports`` the expressions it reads, comma-separated (for the README)."""


@dataclasses.dataclass(frozen=True)
class OpFamily:
    """One op family (named by its module): its IR kinds, Keras layer rules and functional-op rules."""

    name: str
    kinds: tuple[OpKind | WeightedKind, ...]
    layers: tuple[LayerRule, ...] = ()
    operations: tuple[OperationRule, ...] = ()


def pair(value) -> tuple[int, int]:
    """(a, a) for an int, else the first two entries as ints."""
    return (int(value), int(value)) if isinstance(value, int) else (int(value[0]), int(value[1]))


def f32(value) -> np.ndarray:
    """A Keras variable or tensor as a float32 numpy array."""
    return np.asarray(keras.ops.convert_to_numpy(value), np.float32)


def broadcast(shapes: list[Shape]) -> Shape:
    """The NumPy broadcast of ``shapes``."""
    return tuple(int(v) for v in np.broadcast_shapes(*shapes))
