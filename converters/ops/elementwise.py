"""Element-wise ops with broadcasting (residual Add, squeeze-excite Multiply, constants, BN affine); the
family's registry entry (``FAMILY``: BatchNormalization, Rescaling, Normalization, ConvNeXt's LayerScale, Add,
Multiply and the functional ``x + c``, ``x - c``, ``x * c``, ``x / c``, ``a + b``, ``a * b``).

For y = a + b (or a * b) with NumPy broadcasting, the gradient of an input is the output gradient
(times the other factor for Multiply) summed over the axes the input was broadcast along:
g_a = reduce_to(g_y * (1 or b), shape(a)). ``reduce_to`` sums the axes where the input has size 1
and the output does not (keepdims), then drops leading axes the input lacks.

* add_const:  y = x + c,           g_x = g_y
* scale:      y = c x,             g_x = c g_y
* affine:     y = x * s + t (per channel: an unfolded BatchNormalization, a LayerScale), g_x = g_y * s
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from tflite_train.converters.ops.spec import LayerRule, OperationRule, OpFamily, OpKind, ReadContext, broadcast, f32


def reduce_to(g, in_shape: tuple[int, ...], out_shape: tuple[int, ...]):
    """Sums ``g`` (batch + ``out_shape``) down to batch + ``in_shape`` (broadcasting's adjoint)."""
    rank_out = len(out_shape)
    padded = (1,) * (rank_out - len(in_shape)) + tuple(in_shape)
    axes = [a + 1 for a in range(rank_out) if padded[a] == 1 and out_shape[a] != 1]
    if axes:
        g = tf.reduce_sum(g, axis=axes, keepdims=True)
    if len(in_shape) != rank_out:
        g = tf.reshape(g, [-1, *in_shape])
    return g


def add_forward(inputs):
    """y = sum of the inputs."""
    out = inputs[0]
    for x in inputs[1:]:
        out = out + x
    return out


def add_backward(g_y, in_shapes, out_shape):
    """One gradient per input."""
    return [reduce_to(g_y, s, out_shape) for s in in_shapes]


def multiply_forward(a, b):
    """y = a * b."""
    return a * b


def multiply_backward(a, b, g_y, in_shapes, out_shape):
    """(g_a, g_b)."""
    return reduce_to(g_y * b, in_shapes[0], out_shape), reduce_to(g_y * a, in_shapes[1], out_shape)


def affine_forward(x, scale, shift):
    """y = x * s + t."""
    return x * scale + shift


def affine_backward(g_y, scale):
    """g_x = g_y * s."""
    return g_y * scale


# ------------------------------------------------------------------ the family's registry entry
def read_batchnorm(ctx: ReadContext, layer, inputs: list[str], shapes) -> str | None:
    """BatchNormalization over the last axis (inference statistics) -> affine s = gamma / sqrt(var + eps),
    t = beta - mean s (folded into the layer before it by ``converters.graph.passes.fold_batchnorm``)."""
    shape = shapes[0]
    if layer.axis not in (-1, len(shape)):
        return None
    mean, var = f32(layer.moving_mean), f32(layer.moving_variance)
    gamma = f32(layer.gamma) if layer.scale else np.ones_like(mean)
    beta = f32(layer.beta) if layer.center else np.zeros_like(mean)
    scale = (gamma / np.sqrt(var + layer.epsilon)).astype(np.float32)
    return ctx.add(layer.name, "affine", inputs, shape, "BatchNormalization",
                   weights=(scale, (beta - mean * scale).astype(np.float32)))


def read_preprocessing(ctx: ReadContext, layer, inputs: list[str], shapes) -> str | None:
    """Rescaling / Normalization as a per-channel affine flagged ``preprocessing`` (absorbed into the input
    spec when it follows the input: ``converters.graph.passes.absorb_preprocessing``)."""
    cls, channels = type(layer).__name__, shapes[0][-1]
    if cls == "Rescaling":
        scale = np.broadcast_to(np.asarray(layer.scale, np.float32), (channels,))
        shift = np.broadcast_to(np.asarray(layer.offset, np.float32), (channels,))
    else:
        mean = np.broadcast_to(f32(layer.mean).reshape(-1), (channels,))
        std = np.sqrt(np.maximum(np.broadcast_to(f32(layer.variance).reshape(-1), (channels,)), 1e-7))
        if getattr(layer, "invert", False):
            scale, shift = std, mean
        else:
            scale, shift = 1.0 / std, -mean / std
    return ctx.add(layer.name, "affine", inputs, shapes[0], cls, attrs={"preprocessing": True},
                   weights=(np.array(scale, np.float32), np.array(shift, np.float32)))


def read_layer_scale(ctx: ReadContext, layer, inputs: list[str], shapes) -> str | None:
    """keras.applications ConvNeXt's LayerScale (y = x * gamma over the channels) -> affine with t = 0, gamma
    frozen; never folded into the layer before it (``fold_batchnorm`` folds BatchNormalization only), so the
    device trains that layer's own kernel, as Keras would with gamma frozen. A user's class of the same name
    only runs frozen (its ``call`` is unknown)."""
    gamma = f32(getattr(layer, "gamma", np.zeros(0)))
    if not type(layer).__module__.startswith("keras.") or gamma.shape != (shapes[0][-1],):
        return None
    return ctx.add(layer.name, "affine", inputs, shapes[0], "LayerScale", weights=(gamma, np.zeros_like(gamma)))


def read_add(ctx: ReadContext, layer, inputs: list[str], shapes) -> str | None:
    """Add of two or more tensors (broadcasting) -> add."""
    return ctx.add(layer.name, "add", inputs, broadcast(shapes), "Add") if len(inputs) >= 2 else None


def read_multiply(ctx: ReadContext, layer, inputs: list[str], shapes) -> str | None:
    """Multiply of two tensors (broadcasting, e.g. a squeeze-excite gate) -> multiply."""
    return ctx.add(layer.name, "multiply", inputs, broadcast(shapes), "Multiply") if len(inputs) == 2 else None


def read_operation(ctx: ReadContext, op, inputs: list[str], shapes, node) -> str | None:
    """Keras ops used functionally (e.g. ``x + 3.0`` and ``x * (1 / 6)`` in MobileNetV3): two tensors ->
    add / multiply; a tensor and a scalar -> add_const (x + c, x - c) or scale (c x, x / c)."""
    cls = type(op).__name__
    args = node.arguments.args
    tensors = [a for a in args if isinstance(a, keras.KerasTensor)]
    consts = [a for a in args if not isinstance(a, keras.KerasTensor)]
    if len(tensors) == 2 and not consts and cls in ("Add", "Multiply"):
        return ctx.add(op.name, cls.lower(), inputs, broadcast(shapes), cls)
    if len(tensors) != 1 or len(consts) != 1 or np.ndim(consts[0]) != 0:
        return None
    value = float(consts[0])
    tensor_first = isinstance(args[0], keras.KerasTensor)
    if cls == "Add":
        return ctx.add(op.name, "add_const", inputs, shapes[0], cls, attrs={"value": value})
    if cls == "Subtract" and tensor_first:
        return ctx.add(op.name, "add_const", inputs, shapes[0], cls, attrs={"value": -value})
    if cls == "Multiply":
        return ctx.add(op.name, "scale", inputs, shapes[0], cls, attrs={"value": value})
    if cls in ("Divide", "TrueDivide") and tensor_first and value != 0:
        return ctx.add(op.name, "scale", inputs, shapes[0], cls, attrs={"value": 1.0 / value})
    return None


FAMILY = OpFamily(
    __name__,
    kinds=(
        OpKind("affine", lambda node, xs: (None, affine_forward(xs[0], *node.weights)),
               lambda node, xs, z, y, g_y, in_shapes: [affine_backward(g_y, node.weights[0])],
               channel_scale=True, head=True),
        OpKind("add", lambda node, xs: (None, add_forward(xs)),
               lambda node, xs, z, y, g_y, in_shapes: add_backward(g_y, in_shapes, node.shape), residual_join=True),
        OpKind("add_const", lambda node, xs: (None, xs[0] + node.attrs["value"]),
               lambda node, xs, z, y, g_y, in_shapes: [g_y]),
        OpKind("multiply", lambda node, xs: (None, multiply_forward(*xs)),
               lambda node, xs, z, y, g_y, in_shapes: list(multiply_backward(xs[0], xs[1], g_y, in_shapes,
                                                                              node.shape))),
        OpKind("scale", lambda node, xs: (None, xs[0] * node.attrs["value"]),
               lambda node, xs, z, y, g_y, in_shapes: [g_y * node.attrs["value"]]),
    ),
    layers=(
        LayerRule("BatchNormalization", read_batchnorm, ("affine",),
                  "over the channels; folded into the Conv2D/DepthwiseConv2D/Dense before it, else a per-channel "
                  "affine", folds=True),
        LayerRule("Rescaling", read_preprocessing, ("affine",), "a per-channel affine; right after the input, the input spec"),
        LayerRule("Normalization", read_preprocessing, ("affine",), "a per-channel affine; right after the input, the input spec"),
        LayerRule("LayerScale", read_layer_scale, ("affine",), "keras.applications ConvNeXt's: a per-channel "
                  "scale, gamma frozen"),
        LayerRule("Add", read_add, ("add",), "broadcasting"),
        LayerRule("Multiply", read_multiply, ("multiply",), "two inputs, broadcasting (squeeze-excite)"),
    ),
    operations=tuple(OperationRule(cls, read_operation, kinds, supports) for cls, kinds, supports in (
        ("Add", ("add", "add_const"), "a + b, x + c"), ("Multiply", ("multiply", "scale"), "a * b, c * x"),
        ("Subtract", ("add_const",), "x - c"), ("Divide", ("scale",), "x / c"), ("TrueDivide", ("scale",), "x / c"))),
)
