"""The exporter's graph IR: a Keras CNN as plain data (no Keras objects except opaque frozen ops).

A :class:`Graph` is a tuple of :class:`Node` in topological order, starting with the single image
input. Every node has one output tensor, named like the node. Weighted nodes (``conv2d``, ``grouped_conv2d``,
``depthwise``, ``dense``) carry their kernel and bias as float32 numpy arrays in Keras layouts
(conv [kh, kw, C_in, C_out], depthwise [kh, kw, C, 1], dense [D_in, D_out]) and an ``activation``
attribute (fused by :func:`converters.graph.passes.fuse_activations`).

Op kinds and their attributes (forward, gradient and what the passes ask of each: ``converters.ops.registry``):

============== ====================================================================
op             attrs
============== ====================================================================
input          --
conv2d         kernel (kh, kw), strides (sh, sw), padding "same"/"valid", activation
depthwise      as conv2d; separable: the SeparableConv2D whose depthwise half it is
grouped_conv2d as conv2d; groups g > 1 (kernel [kh, kw, C_in / g, C_out])
dense          activation
affine         -- (weights: scale [C], shift [C]; an unfolded BatchNormalization)
layer_norm     epsilon (weights: gamma [C], beta [C]; LayerNormalization over the channels)
activation     fn (``ACTIVATIONS``, or GELU: ``NODE_ACTIVATIONS``), alpha (leaky_relu)
add            -- (n inputs, broadcasting)
add_const      value
multiply       -- (2 inputs, broadcasting; squeeze-excite)
concat         axis (non-batch axis of the IR shape; n inputs)
scale          value (multiply by a constant)
zero_pad       pads ((top, bottom), (left, right))
avg_pool       pool (ph, pw), strides, padding
max_pool       pool, strides, padding
global_pool    keepdims (global average pooling)
global_max_pool keepdims (global max pooling)
reshape        -- (Flatten and Reshape: output shape = ``shape``)
identity       -- (Dropout and other inference-time identities)
opaque         -- (``call`` runs the Keras layer on constant copies of its weights)
============== ====================================================================

Every kind but ``input`` and ``opaque`` (frozen only) is differentiable (``DIFFERENTIABLE_OPS``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from tflite_train.converters.ops.activations import ACTIVATIONS
from tflite_train.converters.ops.registry import DIFFERENTIABLE_KINDS, WEIGHTED_KINDS

__all__ = ["ACTIVATIONS", "DIFFERENTIABLE_OPS", "WEIGHTED_OPS", "FeatureLayer", "Graph", "InputSpec", "Node"]

WEIGHTED_OPS = WEIGHTED_KINDS
"""IR kinds with a kernel and a bias (the registry's weighted kinds)."""
DIFFERENTIABLE_OPS = DIFFERENTIABLE_KINDS
"""IR kinds with a builtin-op gradient (every registered kind)."""


@dataclasses.dataclass(frozen=True, eq=False)
class Node:
    """One operation of the graph and its output tensor.

    Attributes:
      name: Unique name (the Keras layer name where there is one).
      op: Op kind (module docstring).
      inputs: Names of the input nodes, in call order.
      shape: Output shape without the batch axis.
      attrs: Op attributes (module docstring).
      weights: Constant arrays (kernel, bias; or scale, shift).
      keras_class: Class name of the Keras layer or op it came from (for messages).
      call: For ``opaque`` nodes, a function (values list) -> output tensor (the Keras layer run
        statelessly on constant copies of its weights, which ``weights`` holds for the model id).

    Weighted nodes also record ``attrs["keras_output"]``: the Keras layer whose output their y is
    (after BN folding and activation fusion), for references computed on the Keras model.
    """

    name: str
    op: str
    inputs: tuple[str, ...]
    shape: tuple[int, ...]
    attrs: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    weights: tuple[np.ndarray, ...] = ()
    keras_class: str = ""
    call: Any = None

    @property
    def is_weighted(self) -> bool:
        """True for the weighted kinds (conv2d, grouped_conv2d, depthwise, dense)."""
        return self.op in WEIGHTED_OPS

    @property
    def differentiable(self) -> bool:
        """True when the exporter has a builtin-op backward for this node."""
        return self.op in DIFFERENTIABLE_OPS

    def replace(self, **changes: Any) -> "Node":
        """A copy with ``changes`` applied."""
        return dataclasses.replace(self, **changes)


@dataclasses.dataclass(frozen=True)
class InputSpec:
    """What the device feeds: NHWC float32 in ``value_range``, normalised in-graph as (x - mean) / std.

    Attributes:
      shape: (H, W, C).
      value_range: (low, high) of the pixel values the model takes (e.g. (0, 1) or raw (0, 255)).
      mean, std: Per-channel normalisation constants (C values each).
      source: Where the normalisation came from ("config", or the absorbed Keras layer names).
    """

    shape: tuple[int, int, int]
    value_range: tuple[float, float]
    mean: tuple[float, ...]
    std: tuple[float, ...]
    source: str = "config"


@dataclasses.dataclass(frozen=True)
class FeatureLayer:
    """The layer of the user's model whose output is the embedding, and the rule that chose it.

    Attributes:
      name: The layer (its IR node as read, i.e. the Keras layer name).
      rule: Why: ``--feature-layer``, the global pooling or Flatten, the input of the classifier's Dense
        layers, or the model's output (``converters.graph.passes.select_embedding``).
    """

    name: str
    rule: str


@dataclasses.dataclass(frozen=True)
class Graph:
    """A CNN as nodes in topological order; ``output`` names the embedding node ([N, D]); ``feature_layer``
    says which layer of the model it is (None for a graph not made by ``prepare_graph``)."""

    nodes: tuple[Node, ...]
    output: str
    input_spec: InputSpec
    feature_layer: FeatureLayer | None = None

    def __post_init__(self) -> None:
        names = [n.name for n in self.nodes]
        if len(set(names)) != len(names):
            raise ValueError("graph node names must be unique")
        seen: set[str] = set()
        for node in self.nodes:
            missing = [i for i in node.inputs if i not in seen]
            if missing:
                raise ValueError(f"node {node.name!r} reads {missing} before they are computed")
            seen.add(node.name)
        if self.output not in seen:
            raise ValueError(f"output {self.output!r} is not a node")

    @property
    def by_name(self) -> dict[str, Node]:
        """Name -> node."""
        return {n.name: n for n in self.nodes}

    def consumers(self) -> dict[str, list[str]]:
        """Name -> names of the nodes that read it (in topological order)."""
        out: dict[str, list[str]] = {n.name: [] for n in self.nodes}
        for node in self.nodes:
            for name in node.inputs:
                out[name].append(node.name)
        return out

    def position(self) -> dict[str, int]:
        """Name -> topological position."""
        return {n.name: i for i, n in enumerate(self.nodes)}

    def weighted(self) -> list[Node]:
        """The weighted nodes (the paper's layers), in topological order."""
        return [n for n in self.nodes if n.is_weighted]

    def descendants(self, names: set[str] | frozenset[str]) -> set[str]:
        """``names`` and every node that (transitively) reads one of them."""
        out = set(names)
        for node in self.nodes:
            if any(i in out for i in node.inputs):
                out.add(node.name)
        return out

    def ancestors(self, name: str) -> set[str]:
        """Every node ``name`` (transitively) reads, ``name`` itself included."""
        by_name = self.by_name
        out, stack = set(), [name]
        while stack:
            current = stack.pop()
            if current not in out:
                out.add(current)
                stack.extend(by_name[current].inputs)
        return out
