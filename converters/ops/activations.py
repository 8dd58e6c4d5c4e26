"""Activations: forward and builtin-op backward g_z = f'(z) * g_y.

With y = f(z):

* linear:       f' = 1
* relu:         f' = [y > 0]
* relu6:        f' = [0 < y < 6]
* leaky_relu:   f' = 1 if y > 0 else alpha (alpha > 0, so y > 0 iff z > 0)
* sigmoid:      f' = y (1 - y)
* hard_sigmoid: f = relu6(z + 3) / 6 (Keras 3), f' = [-3 < z < 3] / 6
* swish:        f = z sigma(z), f' = sigma(z) (1 + z (1 - sigma(z)))
* hard_swish:   f = z relu6(z + 3) / 6, f' = 0 (z <= -3), (2 z + 3) / 6 (-3 < z < 3), 1 (z >= 3)
"""

from __future__ import annotations

import tensorflow as tf

from converters.graph.ir import ACTIVATIONS

NEEDS_PREACTIVATION = ("hard_sigmoid", "swish", "hard_swish")
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
    raise ValueError(f"activation must be one of {ACTIVATIONS}; got {fn!r}")


def activation_backward(z, y, g_y, fn: str, alpha: float = 0.0):
    """g_z = f'(z) * g_y (module docstring); ``z`` may be None unless fn is in NEEDS_PREACTIVATION."""
    if fn == "linear":
        return g_y
    if fn == "relu":
        return g_y * tf.cast(y > 0.0, tf.float32)
    if fn == "relu6":
        return g_y * tf.cast((y > 0.0) & (y < 6.0), tf.float32)
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
    raise ValueError(f"activation must be one of {ACTIVATIONS}; got {fn!r}")
