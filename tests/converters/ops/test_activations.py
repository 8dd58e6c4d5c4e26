"""Activations: builtin-op backward vs TF autodiff on values around every kink (1e-5 relative)."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tests.converters.ops.op_parity import autodiff, rel
from tflite_train.converters.graph.ir import ACTIVATIONS
from tflite_train.converters.ops.activations import NODE_ACTIVATIONS, activation_backward, activation_forward


@pytest.mark.parametrize("fn", ACTIVATIONS + NODE_ACTIVATIONS)
def test_activation_backward_matches_autodiff(rng, fn):
    # values away from the kinks at -3, 0, 3, 6 (where the derivative is a convention)
    z = rng.uniform(-8, 9, size=(3, 5, 5, 4)).astype(np.float32)
    z = np.where(np.min(np.abs(z[..., None] - np.array([-3, 0, 3, 6])), axis=-1) < 0.05, 1.0, z).astype(np.float32)
    g = rng.normal(size=z.shape).astype(np.float32)
    (ref,) = autodiff(lambda x: activation_forward(x, fn, 0.1), [z], g)
    y = activation_forward(tf.constant(z), fn, 0.1)
    assert rel(activation_backward(tf.constant(z), y, tf.constant(g), fn, 0.1), ref) < 1e-5


def test_hard_swish_by_hand():
    z = tf.constant([-4.0, -1.5, 0.0, 1.5, 4.0])
    # f' = 0, (2z+3)/6, (2z+3)/6, (2z+3)/6, 1
    expected = [0.0, 0.0, 0.5, 1.0, 1.0]
    got = activation_backward(z, None, tf.ones(5), "hard_swish").numpy()
    np.testing.assert_allclose(got, expected, atol=1e-7)


def test_gelu_is_keras_gelu_and_its_derivative_holds_near_zero_and_in_the_tails():
    """GELU's derivative reads Phi(z) = y / z off the forward; near 0 (|z| < 1e-3) and far in the tails it
    still equals TF autodiff of the exact GELU (absolute 1e-6: f' lies in [-0.17, 1.13])."""
    import keras

    z = np.concatenate([np.linspace(-1e-3, 1e-3, 41), [0.0, 1e-8, -1e-8], np.linspace(-12, 12, 97)]).astype(np.float32)
    y = activation_forward(tf.constant(z), "gelu")
    np.testing.assert_allclose(y.numpy(), keras.activations.gelu(z).numpy(), rtol=1e-6, atol=1e-7)
    g = np.ones_like(z)
    (ref,) = autodiff(lambda x: activation_forward(x, "gelu"), [z], g)
    got = activation_backward(tf.constant(z), y, tf.constant(g), "gelu").numpy()
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, ref, atol=1e-6)


@pytest.mark.parametrize("fn,lo,hi", [("relu", 0.0, np.inf), ("relu6", 0.0, 6.0)])
def test_relu_masks_are_exact_at_and_next_to_the_kinks(fn, lo, hi):
    """The float-arithmetic masks (module docstring) equal [lo < y < hi] exactly, at the kinks, one ulp
    inside them, on tiny normal values and in the middle: g_z is g_y or 0, never a fraction."""
    z = np.array([-1.0, 0.0, np.float32(1e-37), np.nextafter(np.float32(0), np.float32(1)) * 2 ** 23, 1e-7, 0.5,
                  3.0, np.nextafter(np.float32(6), np.float32(0)), 6.0, np.nextafter(np.float32(6), np.float32(7)),
                  100.0], np.float32)
    y = activation_forward(tf.constant(z), fn)
    g = np.linspace(1.0, 2.0, z.size, dtype=np.float32)
    expected = np.where((y.numpy() > lo) & (y.numpy() < hi), g, 0.0)
    got = activation_backward(None, y, tf.constant(g), fn).numpy()
    np.testing.assert_array_equal(got, expected)
