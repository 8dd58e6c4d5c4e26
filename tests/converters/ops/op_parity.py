"""Helpers of the op-family parity tests: TF autodiff of <f(x), r> as the reference backward."""

from __future__ import annotations

import numpy as np
import tensorflow as tf


def autodiff(fn, inputs: list[np.ndarray], g_y: np.ndarray) -> list[np.ndarray]:
    """d<fn(*inputs), g_y>/d inputs by tf.GradientTape."""
    tensors = [tf.constant(x) for x in inputs]
    with tf.GradientTape() as tape:
        tape.watch(tensors)
        y = fn(*tensors)
        total = tf.reduce_sum(y * g_y)
    return [g.numpy() for g in tape.gradient(total, tensors)]


def rel(a, b) -> float:
    """max |a - b| / max |b|."""
    b = np.asarray(b, np.float64)
    return float(np.max(np.abs(np.asarray(a, np.float64) - b)) / max(np.max(np.abs(b)), 1e-12))
