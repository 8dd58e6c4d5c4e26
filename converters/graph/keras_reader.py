"""Reads a Keras 3 model (Functional or Sequential, nested sub-models flattened) into the graph IR.

Each Keras operation becomes one IR node (``converters.graph.ir``) with its output shape inferred
for the requested input size; Conv2D/Dense layers with a built-in activation become the weighted
node followed by an activation node (fused back by the passes). Layers the exporter has no
gradient for become ``opaque`` nodes: they run in the frozen part of the model through the Keras
layer itself and are refused inside the gradient region (``converters.graph.region``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import keras
import numpy as np

from converters.graph.ir import Node
from converters.ops.conv import pad_amounts

KERAS_ACTIVATIONS = {
    "linear": "linear", "relu": "relu", "relu6": "relu6", "sigmoid": "sigmoid", "hard_sigmoid": "hard_sigmoid",
    "silu": "swish", "swish": "swish", "hard_silu": "hard_swish", "hard_swish": "hard_swish",
    "leaky_relu": "leaky_relu",
}
"""Keras activation names -> IR activation functions."""

IDENTITY_LAYERS = ("Dropout", "SpatialDropout1D", "SpatialDropout2D", "GaussianDropout", "GaussianNoise",
                   "AlphaDropout", "ActivityRegularization", "Identity")
PREPROCESSING_LAYERS = ("Rescaling", "Normalization")


class GraphReadError(ValueError):
    """A Keras model the exporter cannot read (names the layer and what is wrong)."""


def _pair(value) -> tuple[int, int]:
    return (int(value), int(value)) if isinstance(value, int) else (int(value[0]), int(value[1]))


def _broadcast(shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
    return tuple(int(v) for v in np.broadcast_shapes(*shapes))


def _f32(value) -> np.ndarray:
    return np.asarray(keras.ops.convert_to_numpy(value), np.float32)


class _Reader:
    """Accumulates IR nodes while walking (possibly nested) Keras models."""

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
        """Emits the IR node(s) of one Keras operation; returns its output names."""
        cls = type(op).__name__
        if isinstance(op, keras.layers.InputLayer):
            return inputs
        if isinstance(op, keras.Model):
            return self.walk(op, inputs)
        shapes = [self.shapes[i] for i in inputs]
        if isinstance(op, keras.layers.Layer):
            converted = self._layer(op, cls, inputs, shapes)
        else:
            converted = self._operation(op, cls, inputs, shapes, node)
        if converted is not None:
            return [converted]
        return [self._opaque(op, _variant(op, cls), inputs, shapes, node)]

    # --------------------------------------------------------------- layers
    def _layer(self, layer, cls: str, inputs: list[str], shapes) -> str | None:
        name = layer.name
        shape = shapes[0]
        if getattr(layer, "data_format", "channels_last") not in ("channels_last", None):
            return None
        if cls == "Conv2D" and layer.groups == 1 and _pair(layer.dilation_rate) == (1, 1) and len(shape) == 3:
            return self._conv(layer, "conv2d", inputs[0], shape, int(layer.filters))
        if cls == "DepthwiseConv2D" and layer.depth_multiplier == 1 and _pair(layer.dilation_rate) == (1, 1) \
                and len(shape) == 3:
            return self._conv(layer, "depthwise", inputs[0], shape, shape[2])
        if cls == "SeparableConv2D" and layer.depth_multiplier == 1 and _pair(layer.dilation_rate) == (1, 1) \
                and len(shape) == 3:
            return self._separable(layer, inputs[0], shape)
        if cls == "Dense" and len(shape) in (1, 3):
            kernel = _f32(layer.kernel)
            bias = _f32(layer.bias) if layer.use_bias else np.zeros(kernel.shape[1], np.float32)
            out = self.add(name, "dense", inputs, (*shape[:-1], kernel.shape[1]), cls, weights=(kernel, bias),
                           attrs={"activation": "linear", "keras_output": name})
            return self._activation_after(layer, out)
        if cls == "BatchNormalization" and layer.axis in (-1, len(shape)):
            mean, var = _f32(layer.moving_mean), _f32(layer.moving_variance)
            gamma = _f32(layer.gamma) if layer.scale else np.ones_like(mean)
            beta = _f32(layer.beta) if layer.center else np.zeros_like(mean)
            scale = (gamma / np.sqrt(var + layer.epsilon)).astype(np.float32)
            return self.add(name, "affine", inputs, shape, cls, weights=(scale, (beta - mean * scale).astype(np.float32)))
        if cls in PREPROCESSING_LAYERS:
            return self._preprocessing(layer, cls, inputs, shape)
        if cls == "ReLU":
            fn = _relu_kind(layer)
            return None if fn is None else self.add(name, "activation", inputs, shape, cls, attrs=fn)
        if cls == "LeakyReLU":
            return self.add(name, "activation", inputs, shape, cls,
                            attrs={"fn": "leaky_relu", "alpha": float(layer.negative_slope)})
        if cls == "Activation":
            fn = KERAS_ACTIVATIONS.get(keras.activations.serialize(layer.activation))
            if fn is None:
                return None
            attrs = {"fn": fn, "alpha": 0.2} if fn == "leaky_relu" else {"fn": fn}
            return self.add(name, "identity" if fn == "linear" else "activation", inputs, shape, cls, attrs=attrs)
        if cls == "Concatenate" and len(inputs) >= 2:
            return self._concat(layer, inputs, shapes)
        if cls == "Add" and len(inputs) >= 2:
            return self.add(name, "add", inputs, _broadcast(shapes), cls)
        if cls == "Multiply" and len(inputs) == 2:
            return self.add(name, "multiply", inputs, _broadcast(shapes), cls)
        if cls == "ZeroPadding2D" and len(shape) == 3:
            (t, b), (lft, r) = layer.padding
            return self.add(name, "zero_pad", inputs, (shape[0] + t + b, shape[1] + lft + r, shape[2]), cls,
                            attrs={"pads": ((int(t), int(b)), (int(lft), int(r)))})
        if cls in ("AveragePooling2D", "MaxPooling2D") and len(shape) == 3:
            pool, strides = _pair(layer.pool_size), _pair(layer.strides)
            out = [pad_amounts(shape[a], pool[a], strides[a], layer.padding)[2] for a in (0, 1)]
            op = "avg_pool" if cls == "AveragePooling2D" else "max_pool"
            return self.add(name, op, inputs, (*out, shape[2]), cls,
                            attrs={"pool": pool, "strides": strides, "padding": layer.padding})
        if cls == "GlobalAveragePooling2D" and len(shape) == 3:
            keep = bool(layer.keepdims)
            return self.add(name, "global_pool", inputs, (1, 1, shape[2]) if keep else (shape[2],), cls,
                            attrs={"keepdims": keep})
        if cls == "Flatten":
            return self.add(name, "reshape", inputs, (math.prod(shape),), cls)
        if cls == "Reshape":
            target = list(layer.target_shape)
            if -1 in target:
                known = math.prod(v for v in target if v != -1)
                target[target.index(-1)] = math.prod(shape) // known
            if math.prod(target) != math.prod(shape):
                raise GraphReadError(f"layer {name!r} (Reshape) cannot reshape {shape} to {tuple(layer.target_shape)}")
            return self.add(name, "reshape", inputs, tuple(target), cls)
        if cls in IDENTITY_LAYERS:
            return self.add(name, "identity", inputs, shape, cls)
        return None

    def _conv(self, layer, op: str, x: str, shape, out_channels: int) -> str | None:
        kernel_hw, strides = _pair(layer.kernel_size), _pair(layer.strides)
        if kernel_hw[0] != kernel_hw[1] or strides[0] != strides[1]:
            return None  # the layer table holds square kernels and strides; the layer stays frozen
        out_hw = [pad_amounts(shape[a], kernel_hw[a], strides[a], layer.padding)[2] for a in (0, 1)]
        kernel = _f32(layer.kernel)
        bias = _f32(layer.bias) if layer.use_bias else np.zeros(out_channels, np.float32)
        out = self.add(layer.name, op, [x], (*out_hw, out_channels), type(layer).__name__, weights=(kernel, bias),
                       attrs={"kernel": kernel_hw, "strides": strides, "padding": layer.padding,
                              "activation": "linear", "keras_output": layer.name})
        return self._activation_after(layer, out)

    def _separable(self, layer, x: str, shape) -> str | None:
        """SeparableConv2D as two weighted nodes, both trainable: z = pointwise(depthwise(x, D), P) + b.

        The depthwise half ``<layer>_depthwise`` (kernel D [kh, kw, C, 1], a zero bias, linear) computes
        u = depthwise(x, D); the pointwise half, named like the layer, is a 1x1 conv2d (kernel P
        [1, 1, C, C_out], the layer's bias and activation). The extra depthwise bias b_u adds nothing
        the pointwise bias cannot express (P^T b_u) and starts at 0, so the pair computes the layer.
        """
        kernel_hw, strides = _pair(layer.kernel_size), _pair(layer.strides)
        if kernel_hw[0] != kernel_hw[1] or strides[0] != strides[1]:
            return None
        out_hw = [pad_amounts(shape[a], kernel_hw[a], strides[a], layer.padding)[2] for a in (0, 1)]
        channels, cls = shape[2], type(layer).__name__
        depthwise = self.add(f"{layer.name}_depthwise", "depthwise", [x], (*out_hw, channels), cls,
                             weights=(_f32(layer.depthwise_kernel), np.zeros(channels, np.float32)),
                             attrs={"kernel": kernel_hw, "strides": strides, "padding": layer.padding,
                                    "activation": "linear", "separable": layer.name})
        pointwise = _f32(layer.pointwise_kernel)
        out_channels = pointwise.shape[-1]
        bias = _f32(layer.bias) if layer.use_bias else np.zeros(out_channels, np.float32)
        out = self.add(layer.name, "conv2d", [depthwise], (*out_hw, out_channels), cls, weights=(pointwise, bias),
                       attrs={"kernel": (1, 1), "strides": (1, 1), "padding": "valid", "activation": "linear",
                              "keras_output": layer.name})
        return self._activation_after(layer, out)

    def _concat(self, layer, inputs: list[str], shapes) -> str | None:
        """Concatenate along a non-batch axis (inputs of one rank, equal sizes elsewhere)."""
        rank = len(shapes[0])
        axis = int(layer.axis)
        axis = axis + rank if axis < 0 else axis - 1  # IR shapes have no batch axis
        if not 0 <= axis < rank or any(len(s) != rank for s in shapes):
            return None
        if any(tuple(s[:axis]) + tuple(s[axis + 1:]) != tuple(shapes[0][:axis]) + tuple(shapes[0][axis + 1:])
               for s in shapes):
            return None
        out = list(shapes[0])
        out[axis] = sum(s[axis] for s in shapes)
        return self.add(layer.name, "concat", inputs, out, type(layer).__name__, attrs={"axis": axis})

    def _activation_after(self, layer, out: str) -> str:
        """A weighted layer's built-in activation as its own node (fused again by the passes)."""
        name = keras.activations.serialize(layer.activation)
        if name == "linear":
            return out
        fn = KERAS_ACTIVATIONS.get(name)
        shape = self.shapes[out]
        if fn is None:
            activation = layer.activation
            return self.add(f"{layer.name}_{name}", "opaque", [out], shape, f"activation {name}",
                            call=lambda xs: activation(xs[0]))
        attrs = {"fn": fn, "alpha": 0.2} if fn == "leaky_relu" else {"fn": fn}
        attrs["keras_output"] = layer.name
        return self.add(f"{layer.name}_{fn}", "activation", [out], shape, type(layer).__name__, attrs=attrs)

    def _preprocessing(self, layer, cls: str, inputs: list[str], shape) -> str:
        """Rescaling / Normalization as a per-channel affine flagged ``preprocessing``."""
        channels = shape[-1]
        if cls == "Rescaling":
            scale = np.broadcast_to(np.asarray(layer.scale, np.float32), (channels,))
            shift = np.broadcast_to(np.asarray(layer.offset, np.float32), (channels,))
        else:
            mean = np.broadcast_to(_f32(layer.mean).reshape(-1), (channels,))
            std = np.sqrt(np.maximum(np.broadcast_to(_f32(layer.variance).reshape(-1), (channels,)), 1e-7))
            if getattr(layer, "invert", False):
                scale, shift = std, mean
            else:
                scale, shift = 1.0 / std, -mean / std
        return self.add(layer.name, "affine", inputs, shape, cls, attrs={"preprocessing": True},
                        weights=(np.array(scale, np.float32), np.array(shift, np.float32)))

    # ----------------------------------------------------------- raw ops
    def _operation(self, op, cls: str, inputs: list[str], shapes, node) -> str | None:
        """Keras ops used functionally (e.g. ``x + 3.0`` and ``x * (1 / 6)`` in MobileNetV3)."""
        if node is None or cls not in ("Add", "Multiply", "Subtract", "Divide", "TrueDivide"):
            return None
        args = node.arguments.args
        tensors = [a for a in args if isinstance(a, keras.KerasTensor)]
        consts = [a for a in args if not isinstance(a, keras.KerasTensor)]
        if len(tensors) == 2 and not consts and cls in ("Add", "Multiply"):
            return self.add(op.name, cls.lower(), inputs, _broadcast(shapes), cls)
        if len(tensors) != 1 or len(consts) != 1 or np.ndim(consts[0]) != 0:
            return None
        value = float(consts[0])
        tensor_first = isinstance(args[0], keras.KerasTensor)
        if cls == "Add":
            return self.add(op.name, "add_const", inputs, shapes[0], cls, attrs={"value": value})
        if cls == "Subtract" and tensor_first:
            return self.add(op.name, "add_const", inputs, shapes[0], cls, attrs={"value": -value})
        if cls == "Multiply":
            return self.add(op.name, "scale", inputs, shapes[0], cls, attrs={"value": value})
        if cls in ("Divide", "TrueDivide") and tensor_first and value != 0:
            return self.add(op.name, "scale", inputs, shapes[0], cls, attrs={"value": 1.0 / value})
        return None

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
        return self.add(op.name, "opaque", inputs, out, cls, call=call, weights=weights)


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
    if cls in ("Conv2D", "DepthwiseConv2D", "SeparableConv2D"):
        if int(getattr(op, "groups", 1) or 1) != 1:
            settings.append(f"groups={op.groups}")
        if int(getattr(op, "depth_multiplier", 1) or 1) != 1:
            settings.append(f"depth_multiplier={op.depth_multiplier}")
        if _pair(op.dilation_rate) != (1, 1):
            settings.append(f"dilation_rate={_pair(op.dilation_rate)}")
        kernel, strides = _pair(op.kernel_size), _pair(op.strides)
        if kernel[0] != kernel[1]:
            settings.append(f"a {kernel[0]}x{kernel[1]} kernel")
        if strides[0] != strides[1]:
            settings.append(f"strides={strides}")
    return f"{cls} with {', '.join(settings)}" if settings else cls


def _relu_kind(layer) -> dict | None:
    """IR attrs of a keras ReLU layer, or None for a variant without a gradient here."""
    if float(layer.threshold or 0.0) != 0.0:
        return None
    slope = float(layer.negative_slope or 0.0)
    top = layer.max_value
    if top is None:
        return {"fn": "leaky_relu", "alpha": slope} if slope else {"fn": "relu"}
    if float(top) == 6.0 and not slope:
        return {"fn": "relu6"}
    return None


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


def read_keras(model, input_shape: tuple[int, int, int]) -> tuple[list[Node], str]:
    """IR nodes of ``model`` at ``input_shape`` (H, W, C) and the name of its output node.

    Raises:
      GraphReadError: several inputs or outputs, a non-image input, a layer returning several tensors.
    """
    inputs = model.inputs if not isinstance(model, keras.Sequential) or model.inputs else None
    if inputs is None or len(inputs) != 1:
        raise GraphReadError(f"model {model.name!r} must have exactly one input (an NHWC image); "
                             f"got {0 if inputs is None else len(inputs)}")
    rank = len(inputs[0].shape)
    if rank != 4:
        raise GraphReadError(f"model {model.name!r} takes rank-{rank} input {tuple(inputs[0].shape)}; "
                             "only image CNNs (N, H, W, C) can be exported")
    if len(model.outputs) != 1:
        raise GraphReadError(f"model {model.name!r} has {len(model.outputs)} outputs; exactly one is supported")
    reader = _Reader()
    image = reader.add("image", "input", [], input_shape, "InputLayer")
    (out,) = reader.walk(model, [image])
    return reader.nodes, out
