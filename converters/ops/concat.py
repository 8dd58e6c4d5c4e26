"""Concatenate: forward and builtin-op backward.

y = concat(x_1, ..., x_n) along a non-batch axis a (sizes c_1, ..., c_n on that axis). Each input
is a slice of the output, so the backward is the split of the upstream gradient at the same
offsets: g_{x_k} = g_y[..., o_k : o_k + c_k, ...] with o_k = c_1 + ... + c_{k-1} (one SPLIT_V).
"""

from __future__ import annotations

import tensorflow as tf


def concat_forward(inputs, axis: int):
    """y = concat(inputs) along IR axis ``axis`` (batch excluded; one CONCATENATION)."""
    return tf.concat(list(inputs), axis=axis + 1)


def concat_backward(g_y, in_shapes: list[tuple[int, ...]], axis: int) -> list:
    """One gradient per input: ``g_y`` split along ``axis`` into the inputs' sizes."""
    return list(tf.split(g_y, [int(s[axis]) for s in in_shapes], axis=axis + 1))
