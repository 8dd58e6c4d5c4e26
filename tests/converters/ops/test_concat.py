"""Concatenate: the builtin-op backward (a split of the upstream gradient) vs TF autodiff."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tests.converters.ops.op_parity import autodiff, rel
from tflite_train.converters.ops import concat


@pytest.mark.parametrize("shapes,axis", [
    ([(5, 5, 3), (5, 5, 4)], 2),              # DenseNet: channels
    ([(5, 5, 2), (5, 5, 7), (5, 5, 1)], 2),   # several inputs (NASNet cells)
    ([(3, 6, 4), (5, 6, 4)], 0),              # along H
    ([(6,), (2,)], 0),                        # vectors
])
def test_concat_gradients(rng, shapes, axis):
    xs = [rng.normal(size=(2, *s)).astype(np.float32) for s in shapes]
    y = concat.concat_forward([tf.constant(x) for x in xs], axis)
    np.testing.assert_array_equal(y.numpy(), np.concatenate(xs, axis=axis + 1))
    g = rng.normal(size=y.shape).astype(np.float32)
    ref = autodiff(lambda *ts: concat.concat_forward(ts, axis), xs, g)
    got = concat.concat_backward(tf.constant(g), shapes, axis)
    assert len(got) == len(xs)
    for r, x in zip(ref, got):
        assert x.shape == r.shape
        assert rel(x, r) == 0.0  # a split is exact
