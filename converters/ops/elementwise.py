"""Element-wise ops with broadcasting (residual Add, squeeze-excite Multiply, constants, BN affine).

For y = a + b (or a * b) with NumPy broadcasting, the gradient of an input is the output gradient
(times the other factor for Multiply) summed over the axes the input was broadcast along:
g_a = reduce_to(g_y * (1 or b), shape(a)). ``reduce_to`` sums the axes where the input has size 1
and the output does not (keepdims), then drops leading axes the input lacks.

* add_const:  y = x + c,           g_x = g_y
* scale:      y = c x,             g_x = c g_y
* affine:     y = x * s + t (per channel, an unfolded BatchNormalization), g_x = g_y * s
"""

from __future__ import annotations

import tensorflow as tf


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
