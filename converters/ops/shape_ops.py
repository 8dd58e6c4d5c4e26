"""Shape ops: ZeroPadding2D, Flatten/Reshape, Dropout (inference identity).

* zero_pad:  y = pad(x, ((t, b), (l, r))),  g_x = g_y[:, t:t + H, l:l + W, :]
* reshape:   y = reshape(x, shape),         g_x = reshape(g_y, shape(x))
* identity:  y = x,                         g_x = g_y
"""

from __future__ import annotations

import tensorflow as tf


def zero_pad_forward(x, pads):
    """Zero padding of H and W by ((top, bottom), (left, right))."""
    (t, b), (lft, r) = pads
    return tf.pad(x, [[0, 0], [t, b], [lft, r], [0, 0]])


def zero_pad_backward(g_y, pads, in_shape):
    """The crop of ``g_y`` back to the input."""
    (t, _), (lft, _) = pads
    return g_y[:, t:t + in_shape[0], lft:lft + in_shape[1], :]


def reshape_forward(x, shape):
    """Reshape to batch + ``shape``."""
    return tf.reshape(x, [-1, *shape])


def reshape_backward(g_y, in_shape):
    """Reshape back to batch + ``in_shape``."""
    return tf.reshape(g_y, [-1, *in_shape])
