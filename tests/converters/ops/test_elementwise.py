"""Add, Multiply (with squeeze-excite broadcasting), constants and the BN affine vs TF autodiff."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from op_parity import autodiff, rel
from converters.ops import elementwise


def test_add_with_broadcast(rng):
    a = rng.normal(size=(2, 5, 5, 3)).astype(np.float32)
    b = rng.normal(size=(2, 1, 1, 3)).astype(np.float32)
    g = rng.normal(size=(2, 5, 5, 3)).astype(np.float32)
    ref = autodiff(lambda x, y: elementwise.add_forward([x, y]), [a, b], g)
    got = elementwise.add_backward(tf.constant(g), [(5, 5, 3), (1, 1, 3)], (5, 5, 3))
    for r, x in zip(ref, got):
        assert rel(x, r) < 1e-6


def test_squeeze_excite_multiply(rng):
    a = rng.normal(size=(2, 7, 6, 4)).astype(np.float32)
    gate = rng.uniform(size=(2, 1, 1, 4)).astype(np.float32)
    g = rng.normal(size=a.shape).astype(np.float32)
    ref = autodiff(elementwise.multiply_forward, [a, gate], g)
    got = elementwise.multiply_backward(tf.constant(a), tf.constant(gate), tf.constant(g), [(7, 6, 4), (1, 1, 4)],
                                        (7, 6, 4))
    for r, x in zip(ref, got):
        assert rel(x, r) < 1e-5


def test_affine(rng):
    x = rng.normal(size=(2, 3, 3, 5)).astype(np.float32)
    scale, shift = rng.normal(size=5).astype(np.float32), rng.normal(size=5).astype(np.float32)
    g = rng.normal(size=x.shape).astype(np.float32)
    (ref,) = autodiff(lambda v: elementwise.affine_forward(v, scale, shift), [x], g)
    assert rel(elementwise.affine_backward(tf.constant(g), scale), ref) < 1e-6


def test_reduce_to_by_hand():
    g = tf.ones([2, 3, 4, 5])
    assert elementwise.reduce_to(g, (1, 1, 5), (3, 4, 5)).numpy().tolist() == np.full((2, 1, 1, 5), 12.0).tolist()
    assert elementwise.reduce_to(g, (5,), (3, 4, 5)).shape == (2, 5)
