"""Pooling: average, max, global average and global max pooling, forward and builtin-op backward; the
family's registry entry (``FAMILY``: AveragePooling2D, MaxPooling2D, GlobalAveragePooling2D,
GlobalMaxPooling2D).

* avg_pool: y[i] = 1/c_i sum_{t in window i} x_pad[s i + t], where c_i counts the window's real
  (non-padding) elements (TF excludes padding). Backward: the adjoint of that sum, i.e. the
  depthwise-conv input gradient (``conv.depthwise_input_grad``) of g_y / c with a kernel of ones.
* max_pool: y[i] = max_{t} x_pad[s i + t]; the gradient goes to the first maximal element of each
  window in row-major tap order (TF's rule for ties): for tap t, m_t = [x_t == y] and not taken by
  an earlier tap; g_x_pad += place_t(g_y * m_t), where place_t puts position i at s i + t
  (zero-insertion and padding), then the padding is cropped.
* global_pool: y = mean over H x W (keepdims or not), g_x = g_y / (H W) broadcast over H x W.
* global_max_pool: y_c = max over H x W of x_c (keepdims or not); the gradient is shared by the maximal
  elements, as TF's ``reduce_max`` gradient: with m = [x == y] (y broadcast over H x W),
  g_x = g_y m / sum_{H x W} m.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from tflite_train.converters.ops.conv import _dilate, depthwise_input_grad, pad_amounts, window_taps
from tflite_train.converters.ops.spec import LayerRule, OpFamily, OpKind, ReadContext, pair

POOL_PAD_VALUE = -3.0e38
"""Padding value of max pooling's recomputation: below any finite activation."""


def window_counts(in_hw, out_hw, pool, strides, padding) -> np.ndarray:
    """c[i, j]: real input elements under window (i, j), as float32 [H', W']."""
    axes = []
    for a in (0, 1):
        before, _, _ = pad_amounts(in_hw[a], pool[a], strides[a], padding)
        starts = np.arange(out_hw[a]) * strides[a] - before
        ends = starts + pool[a]
        axes.append(np.minimum(ends, in_hw[a]) - np.maximum(starts, 0))
    return np.outer(axes[0], axes[1]).astype(np.float32)


def avg_pool_forward(x, pool, strides, padding):
    """TF average pooling (one AVERAGE_POOL_2D)."""
    return tf.nn.avg_pool2d(x, list(pool), list(strides), padding.upper())


def avg_pool_backward(g_y, in_hw, out_hw, pool, strides, padding):
    """g_x of average pooling (module docstring)."""
    channels = g_y.shape[-1]
    counts = window_counts(in_hw, out_hw, pool, strides, padding)
    ones = tf.ones([pool[0], pool[1], channels, 1], tf.float32)
    scaled = g_y * tf.constant(1.0 / counts[None, :, :, None])
    return depthwise_input_grad(scaled, ones, in_hw, out_hw, pool, strides, padding)


def max_pool_forward(x, pool, strides, padding):
    """TF max pooling (one MAX_POOL_2D)."""
    return tf.nn.max_pool2d(x, list(pool), list(strides), padding.upper())


def max_pool_backward(x, y, g_y, in_hw, out_hw, pool, strides, padding):
    """g_x of max pooling (module docstring)."""
    (hb, ha, _), (wb, wa, _) = (pad_amounts(in_hw[a], pool[a], strides[a], padding) for a in (0, 1))
    x_pad = tf.pad(x, [[0, 0], [hb, ha], [wb, wa], [0, 0]], constant_values=POOL_PAD_VALUE) if hb + ha + wb + wa else x
    hp, wp = in_hw[0] + hb + ha, in_hw[1] + wb + wa
    channels = g_y.shape[-1]
    dh, dw = (out_hw[0] - 1) * strides[0] + 1, (out_hw[1] - 1) * strides[1] + 1
    taken = tf.zeros_like(y)
    g_pad = None
    taps = window_taps(x_pad, out_hw, pool, strides)
    for dy in range(pool[0]):
        for dx in range(pool[1]):
            hit = tf.cast(tf.equal(taps[dy * pool[1] + dx], y), tf.float32) * (1.0 - taken)
            taken = taken + hit
            placed = _dilate(g_y * hit, out_hw, strides, channels)
            placed = tf.pad(placed, [[0, 0], [dy, hp - dy - dh], [dx, wp - dx - dw], [0, 0]])
            g_pad = placed if g_pad is None else g_pad + placed
    return g_pad[:, hb:hb + in_hw[0], wb:wb + in_hw[1], :]


def global_pool_forward(x, keepdims: bool):
    """Mean over H and W (one MEAN)."""
    return tf.reduce_mean(x, axis=[1, 2], keepdims=keepdims)


def global_pool_backward(g_y, in_shape):
    """g_x = g_y / (H W) broadcast over H x W."""
    h, w, c = in_shape
    g = tf.reshape(g_y, [-1, 1, 1, c]) * (1.0 / float(h * w))
    return g + tf.zeros([1, h, w, c], tf.float32)


def global_max_pool_forward(x, keepdims: bool):
    """Max over H and W (one REDUCE_MAX)."""
    return tf.reduce_max(x, axis=[1, 2], keepdims=keepdims)


def global_max_pool_backward(x, y, g_y):
    """g_x of the global max (module docstring): shared equally by the elements equal to the maximum."""
    channels = x.shape[-1]
    hit = tf.cast(tf.equal(x, tf.reshape(y, [-1, 1, 1, channels])), tf.float32)
    return hit * (tf.reshape(g_y, [-1, 1, 1, channels]) / tf.reduce_sum(hit, axis=[1, 2], keepdims=True))


# ------------------------------------------------------------------ the family's registry entry
def read_pool(ctx: ReadContext, layer, inputs: list[str], shapes) -> str | None:
    """AveragePooling2D / MaxPooling2D on an [H, W, C] map -> avg_pool / max_pool."""
    shape, cls = shapes[0], type(layer).__name__
    if len(shape) != 3:
        return None
    pool, strides = pair(layer.pool_size), pair(layer.strides)
    out = [pad_amounts(shape[a], pool[a], strides[a], layer.padding)[2] for a in (0, 1)]
    return ctx.add(layer.name, "avg_pool" if cls == "AveragePooling2D" else "max_pool", inputs, (*out, shape[2]),
                   cls, attrs={"pool": pool, "strides": strides, "padding": layer.padding})


def read_global_pool(ctx: ReadContext, layer, inputs: list[str], shapes) -> str | None:
    """GlobalAveragePooling2D / GlobalMaxPooling2D (keepdims or not, channels last) -> global_pool / global_max_pool."""
    shape, cls = shapes[0], type(layer).__name__
    if len(shape) != 3 or getattr(layer, "data_format", "channels_last") != "channels_last":
        return None
    keep = bool(layer.keepdims)
    return ctx.add(layer.name, "global_pool" if cls == "GlobalAveragePooling2D" else "global_max_pool", inputs,
                   (1, 1, shape[2]) if keep else (shape[2],), cls, attrs={"keepdims": keep})


def _pool_backward(node, xs, z, y, g_y, in_shapes):
    a = node.attrs
    if node.op == "avg_pool":
        return [avg_pool_backward(g_y, in_shapes[0][:2], node.shape[:2], a["pool"], a["strides"], a["padding"])]
    return [max_pool_backward(xs[0], y, g_y, in_shapes[0][:2], node.shape[:2], a["pool"], a["strides"], a["padding"])]


FAMILY = OpFamily(
    __name__,
    kinds=(
        OpKind("avg_pool", lambda node, xs: (None, avg_pool_forward(xs[0], node.attrs["pool"], node.attrs["strides"],
                                                                    node.attrs["padding"])),
               _pool_backward),
        OpKind("max_pool", lambda node, xs: (None, max_pool_forward(xs[0], node.attrs["pool"], node.attrs["strides"],
                                                                    node.attrs["padding"])),
               _pool_backward),
        OpKind("global_pool", lambda node, xs: (None, global_pool_forward(xs[0], node.attrs["keepdims"])),
               lambda node, xs, z, y, g_y, in_shapes: [global_pool_backward(g_y, in_shapes[0])]),
        OpKind("global_max_pool", lambda node, xs: (None, global_max_pool_forward(xs[0], node.attrs["keepdims"])),
               lambda node, xs, z, y, g_y, in_shapes: [global_max_pool_backward(xs[0], y, g_y)]),
    ),
    layers=(
        LayerRule("AveragePooling2D", read_pool, ("avg_pool",), "any window and stride, `same` or `valid`"),
        LayerRule("MaxPooling2D", read_pool, ("max_pool",), "any window and stride, `same` or `valid`"),
        LayerRule("GlobalAveragePooling2D", read_global_pool, ("global_pool",), "keepdims or not",
                  embedding="global average pooling"),
        LayerRule("GlobalMaxPooling2D", read_global_pool, ("global_max_pool",), "keepdims or not",
                  embedding="global max pooling"),
    ),
)
