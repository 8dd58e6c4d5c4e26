"""Reads a Keras 3 model (Functional or Sequential, nested sub-models flattened) into the graph IR.

Each Keras operation becomes IR node(s) (``converters.graph.ir``) with its output shape inferred for
the requested input size, as its op family's rule in the op registry says (``converters.ops.registry``:
e.g. Conv2D/Dense with a built-in activation become the weighted node followed by an activation node,
fused back by the passes; a SeparableConv2D its depthwise and pointwise halves). Layers without a rule,
or in a variant without a gradient, become ``opaque`` nodes: they run in the frozen part of the model
through the Keras layer itself and are refused inside the gradient region (``converters.graph.region``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import keras
import numpy as np

from tflite_train.converters.graph.ir import Node
from tflite_train.converters.ops import registry
from tflite_train.converters.ops.activations import KERAS_ACTIVATIONS, activation_attrs
from tflite_train.converters.ops.spec import GraphReadError

__all__ = ["GraphReadError", "output_names", "read_keras"]


class _Reader:
    """Accumulates IR nodes while walking (possibly nested) Keras models (the registry's ``ReadContext``)."""

    def __init__(self) -> None:
        self.nodes: list[Node] = []
        self.shapes: dict[str, tuple[int, ...]] = {}
        self.used: set[str] = set()

    def unique(self, name: str) -> str:
        base, k = name, 1
        while name in self.used:
            name, k = f"{base}_{k}", k + 1
        self.used.add(name)
        return name

    def add(self, name: str, op: str, inputs: list[str], shape, keras_class: str, **fields: Any) -> str:
        """Appends a node (name made unique) and returns its name."""
        node = Node(self.unique(name), op, tuple(inputs), tuple(int(v) for v in shape), keras_class=keras_class,
                    **fields)
        self.nodes.append(node)
        self.shapes[node.name] = node.shape
        return node.name

    # ----------------------------------------------------------------- walking
    def walk(self, model, inputs: list[str]) -> list[str]:
        """Emits the nodes of ``model`` applied to the IR tensors ``inputs``; returns its outputs."""
        if isinstance(model, keras.Sequential):
            x = inputs
            for layer in model.layers:
                x = self.emit(layer, x, None)
            return x
        if len(model.inputs) != len(inputs):
            raise GraphReadError(f"sub-model {model.name!r} takes {len(model.inputs)} inputs; got {len(inputs)}")
        names = {id(t): n for t, n in zip(model.inputs, inputs)}
        for op, node in _topological_nodes(model):
            ins = [names[id(t)] for t in node.input_tensors]
            outs = self.emit(op, ins, node)
            if len(outs) != len(node.output_tensors):
                raise GraphReadError(f"layer {op.name!r} ({type(op).__name__}) returns several tensors")
            for t, n in zip(node.output_tensors, outs):
                names[id(t)] = n
        return [names[id(t)] for t in model.outputs]

    def emit(self, op, inputs: list[str], node) -> list[str]:
        """Emits the IR node(s) of one Keras operation (its registry rule, else opaque); returns its outputs."""
        cls = type(op).__name__
        if isinstance(op, keras.layers.InputLayer):
            return inputs
        if isinstance(op, keras.Model):
            return self.walk(op, inputs)
        shapes = [self.shapes[i] for i in inputs]
        if isinstance(op, keras.layers.Layer):
            converted = registry.read_layer(self, op, inputs, shapes)
        else:
            converted = registry.read_operation(self, op, inputs, shapes, node)
        if converted is not None:
            return [converted]
        return [self._opaque(op, _variant(op, cls), inputs, shapes, node)]

    def activation_after(self, layer, out: str) -> str:
        """A weighted layer's built-in activation as its own node (fused again by the passes)."""
        name = keras.activations.serialize(layer.activation)
        if name == "linear":
            return out
        fn = KERAS_ACTIVATIONS.get(name)
        shape = self.shapes[out]
        if fn is None:
            activation = layer.activation
            return self.add(f"{layer.name}_{name}", registry.OPAQUE, [out], shape, f"activation {name}",
                            call=lambda xs: activation(xs[0]))
        attrs = {**activation_attrs(fn), "keras_output": layer.name}
        return self.add(f"{layer.name}_{fn}", "activation", [out], shape, type(layer).__name__, attrs=attrs)

    def _opaque(self, op, cls: str, inputs: list[str], shapes, node) -> str:
        """A node the exporter runs through Keras itself (frozen part only).

        Its output shape comes from Keras' symbolic call (``compute_output_spec`` on ``KerasTensor``
        inputs, which traces the layer's ``call``), so a layer only needs to run: custom layers
        without ``compute_output_shape`` are read like built-in ones.

        Raises:
          GraphReadError: the layer cannot be called on its inputs' shapes, or returns several tensors.
        """
        out = _output_shape(op, cls, node, shapes)
        call = _opaque_call(op, node, len(inputs))
        weights = tuple(np.array(v) for v in op.variables) if isinstance(op, keras.layers.Layer) else ()
        return self.add(op.name, registry.OPAQUE, inputs, out, cls, call=call, weights=weights)


def _output_shape(op, cls: str, node, shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
    """Output shape (without the batch axis) of ``op`` called symbolically on inputs of ``shapes``.

    Raises:
      GraphReadError: Keras cannot trace the call (the layer's own error, first line), or the call
        returns several tensors or a tensor of unknown size.
    """
    specs = [keras.KerasTensor((None, *s), dtype="float32") for s in shapes]
    if node is None:
        args, kwargs = (specs[0] if len(specs) == 1 else specs,), {}
    else:
        args, kwargs = node.arguments.fill_in(dict(zip([id(t) for t in node.input_tensors], specs)))
    try:
        out = op.compute_output_spec(*args, **kwargs)
    except Exception as err:  # noqa: BLE001 - any failure of the user's layer means the same to the user
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise GraphReadError(f"layer {op.name!r} ({cls}) cannot be called on input shape(s) "
                             f"{', '.join(str(s) for s in shapes)}: {first}") from err
    if not isinstance(out, keras.KerasTensor):
        raise GraphReadError(f"layer {op.name!r} ({cls}) returns several tensors")
    shape = tuple(out.shape[1:])
    if any(v is None for v in shape):
        raise GraphReadError(f"layer {op.name!r} ({cls}) returns a tensor of unknown shape {tuple(out.shape)} "
                             f"for input shape(s) {', '.join(str(s) for s in shapes)}")
    return tuple(int(v) for v in shape)


def _variant(op, cls: str) -> str:
    """The class name of a layer the exporter runs frozen, with the setting that keeps a built-in layer
    from having a gradient here (e.g. ``Conv2D with groups=4``), for messages."""
    if not isinstance(op, keras.layers.Layer):
        return cls
    settings = []
    if getattr(op, "data_format", "channels_last") not in ("channels_last", None):
        settings.append(f"data_format={op.data_format}")
    settings += registry.frozen_settings(op)
    return f"{cls} with {', '.join(settings)}" if settings else cls


def _opaque_call(op, node, num_inputs: int) -> Callable[[list], Any]:
    """Runs a Keras operation on values; a layer with weights runs statelessly on constant copies
    of them (``Layer.stateless_call``), so the export holds no variables of the frozen part."""
    ids = [id(t) for t in node.input_tensors] if node is not None else []

    def arguments(xs):
        if node is None:
            return (xs[0] if num_inputs == 1 else xs,), {}
        return node.arguments.fill_in(dict(zip(ids, xs)))

    if not isinstance(op, keras.layers.Layer) or not op.variables:
        def call(xs):
            args, kwargs = arguments(xs)
            return op(*args, **kwargs)
        return call
    trainable = [np.array(v) for v in op.trainable_variables]
    frozen = [np.array(v) for v in op.non_trainable_variables]

    def stateless(xs):
        args, kwargs = arguments(xs)
        consts = [[keras.ops.convert_to_tensor(v) for v in group] for group in (trainable, frozen)]
        return op.stateless_call(*consts, *args, **kwargs)[0]
    return stateless


def _topological_nodes(model) -> list[tuple[Any, Any]]:
    """(operation, node) pairs of a Functional model from its inputs to its outputs, in topological order."""
    order: list[tuple[Any, Any]] = []
    seen: set[int] = set()
    inputs = {id(t) for t in model.inputs}

    def visit(tensor) -> None:
        if id(tensor) in inputs:
            return
        op, node_index, _ = tensor._keras_history
        node = op._inbound_nodes[node_index]
        if id(node) in seen:
            return
        seen.add(id(node))
        for t in node.input_tensors:
            visit(t)
        order.append((op, node))

    for t in model.outputs:
        visit(t)
    return order


def output_names(model) -> list[str]:
    """The names of the model's outputs: the Keras layers that compute them."""
    return [t._keras_history[0].name for t in model.outputs]


def read_keras(model, input_shape: tuple[int, int, int], output: str | None = None) -> tuple[list[Node], str]:
    """IR nodes of ``model`` at ``input_shape`` (H, W, C) and the name of its output node.

    Args:
      model: A Keras model with one image input.
      input_shape: (H, W, C).
      output: Which output (its layer name, ``output_names``) the returned node is, for a model with several
        (``--model-output``); None for a model with one.

    Raises:
      GraphReadError: several inputs, a non-image input, several outputs and no ``output`` (naming them and the
        flag that picks one), an ``output`` that is not one, a layer returning several tensors.
    """
    inputs = model.inputs if not isinstance(model, keras.Sequential) or model.inputs else None
    if inputs is None or len(inputs) != 1:
        raise GraphReadError(f"model {model.name!r} must have exactly one input (an NHWC image); "
                             f"got {0 if inputs is None else len(inputs)}")
    rank = len(inputs[0].shape)
    if rank != 4:
        raise GraphReadError(f"model {model.name!r} takes rank-{rank} input {tuple(inputs[0].shape)}; "
                             "only image CNNs (N, H, W, C) can be exported")
    names = output_names(model)
    if output is None and len(names) > 1:
        raise GraphReadError(f"model {model.name!r} has {len(names)} outputs ({', '.join(names)}); give --model-output "
                             f"{names[0]} (or another of them) to export the path to that output, its classifier "
                             "dropped, or --feature-layer LAYER")
    if output is not None and output not in names:
        raise GraphReadError(f"--model-output {output!r} is not an output of model {model.name!r}; its outputs: "
                             f"{', '.join(names)}")
    reader = _Reader()
    image = reader.add("image", "input", [], input_shape, "InputLayer")
    outs = reader.walk(model, [image])
    return reader.nodes, outs[0 if output is None else names.index(output)]
