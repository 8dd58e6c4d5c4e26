"""ZeroPadding2D (asymmetric), Flatten/Reshape: backward vs TF autodiff."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from op_parity import autodiff, rel
from converters.ops import shape_ops


def test_zero_pad(rng):
    x = rng.normal(size=(2, 5, 4, 3)).astype(np.float32)
    pads = ((1, 0), (0, 2))
    y = shape_ops.zero_pad_forward(tf.constant(x), pads)
    assert y.shape == (2, 6, 6, 3)
    g = rng.normal(size=y.shape).astype(np.float32)
    (ref,) = autodiff(lambda v: shape_ops.zero_pad_forward(v, pads), [x], g)
    assert rel(shape_ops.zero_pad_backward(tf.constant(g), pads, (5, 4, 3)), ref) == 0.0


def test_flatten(rng):
    x = rng.normal(size=(2, 3, 4, 5)).astype(np.float32)
    g = rng.normal(size=(2, 60)).astype(np.float32)
    (ref,) = autodiff(lambda v: shape_ops.reshape_forward(v, (60,)), [x], g)
    assert rel(shape_ops.reshape_backward(tf.constant(g), (3, 4, 5)), ref) == 0.0
