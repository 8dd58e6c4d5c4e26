"""Activations: forward and builtin-op backward g_z = f'(z) * g_y; the family's registry entry
(``FAMILY``: ReLU, LeakyReLU, Activation -> activation).

With y = f(z):

* linear:       f' = 1
* relu:         f' = [y > 0] = ceil(min(y, 1))                (y >= 0)
* relu6:        f' = [0 < y < 6] = ceil(min(y (6 - y), 1))    (0 <= y <= 6)
* leaky_relu:   f' = 1 if y > 0 else alpha (alpha > 0, so y > 0 iff z > 0)
* sigmoid:      f' = y (1 - y)
* hard_sigmoid: f = relu6(z + 3) / 6 (Keras 3), f' = [-3 < z < 3] / 6
* swish:        f = z sigma(z), f' = sigma(z) (1 + z (1 - sigma(z)))
* hard_swish:   f = z relu6(z + 3) / 6, f' = 0 (z <= -3), (2 z + 3) / 6 (-3 < z < 3), 1 (z >= 3)
* gelu (exact): f = z Phi(z) (one GELU), f' = Phi(z) + z phi(z) with phi(z) = exp(-z^2 / 2) / sqrt(2 pi)
  and Phi(z) = y / z read off the forward's output (TFLite has no ERF builtin); for |z| < 1e-3,
  Phi(z) = 1/2 + z phi(0) (error below 1e-10). GELU is never fused into a weighted layer (the layer
  table's activations are ``ACTIVATIONS``): it stays an activation node after it.

The ReLU masks are written in float arithmetic (MUL, SUB, MINIMUM, CEIL), not as comparisons and a
LOGICAL_AND: the delegate takes the float ops, while GREATER/LESS/LOGICAL_AND/CAST run on TFLite's
reference kernels (~5 % of an EfficientNet-Lite0 train step, perf profile of issue 26). They are exact:
on the output's range the product is 0 exactly at the boundaries and positive inside (a denormal y
flushed to zero is the only difference, and a gradient through it is negligible).
"""

from __future__ import annotations

import keras
import tensorflow as tf

from tflite_train.converters.ops.spec import LayerRule, OpFamily, OpKind, ReadContext

ACTIVATIONS = ("linear", "relu", "relu6", "leaky_relu", "hard_swish", "hard_sigmoid", "swish", "sigmoid")
"""The activation functions a weighted layer may fuse (the layer table's ``LayerSpec.activation``)."""
NODE_ACTIVATIONS = ("gelu",)
"""Activation functions with a builtin-op gradient that stay activation nodes (never fused)."""
KERAS_ACTIVATIONS = {
    "linear": "linear", "relu": "relu", "relu6": "relu6", "sigmoid": "sigmoid", "hard_sigmoid": "hard_sigmoid",
    "silu": "swish", "swish": "swish", "hard_silu": "hard_swish", "hard_swish": "hard_swish",
    "leaky_relu": "leaky_relu", "gelu": "gelu",
}
"""Keras activation names -> IR activation functions."""

NEEDS_PREACTIVATION = ("hard_sigmoid", "swish", "hard_swish", "gelu")
"""Activations whose derivative is computed from z (the others use y)."""


def activation_forward(z, fn: str, alpha: float = 0.0):
    """y = f(z)."""
    if fn == "linear":
        return z
    if fn == "relu":
        return tf.nn.relu(z)
    if fn == "relu6":
        return tf.clip_by_value(z, 0.0, 6.0)
    if fn == "leaky_relu":
        return tf.nn.leaky_relu(z, alpha=alpha)
    if fn == "sigmoid":
        return tf.sigmoid(z)
    if fn == "hard_sigmoid":
        return tf.clip_by_value(z + 3.0, 0.0, 6.0) * (1.0 / 6.0)
    if fn == "swish":
        return z * tf.sigmoid(z)
    if fn == "hard_swish":
        return z * tf.clip_by_value(z + 3.0, 0.0, 6.0) * (1.0 / 6.0)
    if fn == "gelu":
        return tf.nn.gelu(z, approximate=False)
    raise ValueError(f"activation must be one of {ACTIVATIONS + NODE_ACTIVATIONS}; got {fn!r}")


def activation_backward(z, y, g_y, fn: str, alpha: float = 0.0):
    """g_z = f'(z) * g_y (module docstring); ``z`` may be None unless fn is in NEEDS_PREACTIVATION."""
    if fn == "linear":
        return g_y
    if fn == "relu":
        return g_y * tf.math.ceil(tf.minimum(y, 1.0))
    if fn == "relu6":
        return g_y * tf.math.ceil(tf.minimum(y * (6.0 - y), 1.0))
    if fn == "leaky_relu":
        return tf.where(y > 0.0, g_y, alpha * g_y)
    if fn == "sigmoid":
        return g_y * y * (1.0 - y)
    if fn == "hard_sigmoid":
        return g_y * tf.cast((z > -3.0) & (z < 3.0), tf.float32) * (1.0 / 6.0)
    if fn == "swish":
        s = tf.sigmoid(z)
        return g_y * s * (1.0 + z * (1.0 - s))
    if fn == "hard_swish":
        inside = tf.cast((z > -3.0) & (z < 3.0), tf.float32)
        above = tf.cast(z >= 3.0, tf.float32)
        return g_y * (inside * (2.0 * z + 3.0) * (1.0 / 6.0) + above)
    if fn == "gelu":
        return g_y * gelu_derivative(z, y)
    raise ValueError(f"activation must be one of {ACTIVATIONS + NODE_ACTIVATIONS}; got {fn!r}")


GELU_SMALL = 1e-3
"""|z| below which GELU's Phi(z) is its first-order expansion instead of y / z."""


def gelu_derivative(z, y):
    """f'(z) = Phi(z) + z phi(z) of the exact GELU from z and y = GELU(z) (module docstring)."""
    inv_sqrt_2pi = 0.3989422804014327
    small = tf.abs(z) < GELU_SMALL
    safe_z = tf.where(small, tf.ones_like(z), z)
    cdf = tf.where(small, 0.5 + inv_sqrt_2pi * z, y / safe_z)
    return cdf + z * (inv_sqrt_2pi * tf.exp(-0.5 * z * z))


# ------------------------------------------------------------------ the family's registry entry
def activation_attrs(fn: str) -> dict:
    """IR attributes of activation ``fn`` (Keras' leaky_relu activation has slope 0.2)."""
    return {"fn": fn, "alpha": 0.2} if fn == "leaky_relu" else {"fn": fn}


def relu_attrs(layer) -> dict | None:
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


def read_relu(ctx: ReadContext, layer, inputs: list[str], shapes) -> str | None:
    """ReLU (threshold 0; max_value None or 6) -> activation relu / relu6 / leaky_relu."""
    attrs = relu_attrs(layer)
    return None if attrs is None else ctx.add(layer.name, "activation", inputs, shapes[0], "ReLU", attrs=attrs)


def read_leaky_relu(ctx: ReadContext, layer, inputs: list[str], shapes) -> str | None:
    """LeakyReLU -> activation leaky_relu."""
    return ctx.add(layer.name, "activation", inputs, shapes[0], "LeakyReLU",
                   attrs={"fn": "leaky_relu", "alpha": float(layer.negative_slope)})


def read_activation(ctx: ReadContext, layer, inputs: list[str], shapes) -> str | None:
    """Activation(f) for f in ``KERAS_ACTIVATIONS`` -> activation (linear: identity)."""
    fn = KERAS_ACTIVATIONS.get(keras.activations.serialize(layer.activation))
    if fn is None:
        return None
    return ctx.add(layer.name, "identity" if fn == "linear" else "activation", inputs, shapes[0], "Activation",
                   attrs=activation_attrs(fn))


FAMILY = OpFamily(
    __name__,
    kinds=(OpKind("activation",
                  lambda node, xs: (xs[0], activation_forward(xs[0], node.attrs["fn"], node.attrs.get("alpha", 0.0))),
                  lambda node, xs, z, y, g_y, in_shapes: [activation_backward(z, y, g_y, node.attrs["fn"],
                                                                              node.attrs.get("alpha", 0.0))],
                  fusable_activation=True, head=True),),
    layers=(
        LayerRule("ReLU", read_relu, ("activation",), "threshold 0, max_value none or 6"),
        LayerRule("LeakyReLU", read_leaky_relu, ("activation",)),
        LayerRule("Activation", read_activation, ("activation", "identity"),
                  ", ".join(k for k in KERAS_ACTIVATIONS)),
    ),
)
