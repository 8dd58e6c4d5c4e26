"""Average, max, global average and global max pooling: builtin-op backward vs TF autodiff (stride 1 and 2,
odd sizes, "same" with its padding-excluding counts, "valid")."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tests.converters.ops.op_parity import autodiff, rel
from tflite_train.converters.graph.ir import Node
from tflite_train.converters.ops import pooling, registry

CASES = [((9, 9), (2, 2), (2, 2), "valid"), ((9, 8), (3, 3), (2, 2), "same"), ((7, 7), (2, 2), (1, 1), "same"),
         ((8, 8), (3, 3), (1, 1), "valid"), ((10, 9), (2, 2), (2, 2), "same")]


@pytest.mark.parametrize("hw,pool,strides,padding", CASES)
def test_avg_pool(rng, hw, pool, strides, padding):
    x = rng.normal(size=(2, *hw, 3)).astype(np.float32)
    y = pooling.avg_pool_forward(tf.constant(x), pool, strides, padding)
    g = rng.normal(size=y.shape).astype(np.float32)
    (ref,) = autodiff(lambda v: pooling.avg_pool_forward(v, pool, strides, padding), [x], g)
    got = pooling.avg_pool_backward(tf.constant(g), hw, tuple(y.shape[1:3]), pool, strides, padding)
    assert rel(got, ref) < 1e-5


@pytest.mark.parametrize("hw,pool,strides,padding", CASES)
def test_max_pool(rng, hw, pool, strides, padding):
    x = rng.normal(size=(2, *hw, 3)).astype(np.float32)
    y = pooling.max_pool_forward(tf.constant(x), pool, strides, padding)
    g = rng.normal(size=y.shape).astype(np.float32)
    (ref,) = autodiff(lambda v: pooling.max_pool_forward(v, pool, strides, padding), [x], g)
    got = pooling.max_pool_backward(tf.constant(x), y, tf.constant(g), hw, tuple(y.shape[1:3]), pool, strides, padding)
    assert rel(got, ref) < 1e-6


def test_window_counts_by_hand():
    # 5 wide, window 3, stride 2, "same": out 3, pad 1 before and after -> counts 2, 3, 2
    np.testing.assert_array_equal(pooling.window_counts((5, 5), (3, 3), (3, 3), (2, 2), "same"),
                                  np.outer([2, 3, 2], [2, 3, 2]))


@pytest.mark.parametrize("kind", ["global_pool", "global_max_pool"])
@pytest.mark.parametrize("keepdims", [True, False])
def test_global_pools(rng, kind, keepdims):
    """Global average and max pooling, forward and backward as the registry runs them."""
    spec = registry.kind(kind)
    node = Node("pool", kind, ("x",), (1, 1, 4) if keepdims else (4,), attrs={"keepdims": keepdims})
    x = rng.normal(size=(2, 5, 3, 4)).astype(np.float32)
    _, y = spec.forward(node, [tf.constant(x)])
    g = rng.normal(size=y.shape).astype(np.float32)
    (ref,) = autodiff(lambda v: spec.forward(node, [v])[1], [x], g)
    (got,) = spec.backward(node, [tf.constant(x)], None, y, tf.constant(g), [(5, 3, 4)])
    assert rel(got, ref) < 1e-6


def test_global_max_pool_shares_the_gradient_of_ties_as_tf():
    """Two maxima of a channel get half of its gradient each (TF's reduce_max rule), computed by hand."""
    x = np.zeros((1, 2, 2, 2), np.float32)
    x[0, :, :, 0] = [[1.0, 3.0], [3.0, 2.0]]  # channel 0: two maxima
    x[0, :, :, 1] = [[5.0, 0.0], [0.0, 0.0]]  # channel 1: one
    y = pooling.global_max_pool_forward(tf.constant(x), False)
    g = np.array([[4.0, 2.0]], np.float32)
    got = pooling.global_max_pool_backward(tf.constant(x), y, tf.constant(g)).numpy()
    expected = np.zeros_like(x)
    expected[0, 0, 1, 0] = expected[0, 1, 0, 0] = 2.0
    expected[0, 0, 0, 1] = 2.0
    np.testing.assert_array_equal(got, expected)
    (ref,) = autodiff(lambda v: pooling.global_max_pool_forward(v, False), [x], g)
    np.testing.assert_array_equal(got, ref)
