"""Add, Multiply (with squeeze-excite broadcasting), constants, the BN affine and ConvNeXt's LayerScale vs TF
autodiff."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from tests.converters.ops.op_parity import autodiff, rel
from tflite_train.converters.ops import elementwise


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


def test_convnext_layer_scale_is_a_frozen_per_channel_scale_that_stays_unfolded(rng):
    """keras.applications ConvNeXt's LayerScale reads as an affine (t = 0) whose forward and input gradient equal
    the layer's; after a Dense it is not folded into it (the Dense keeps its own kernel); a user's class of the
    same name only runs frozen."""
    import keras
    from keras.src.applications.convnext import LayerScale

    from tflite_train.converters.graph.keras_reader import read_keras
    from tflite_train.converters.graph.passes import fold_batchnorm
    from tflite_train.converters.ops import dispatch

    inputs = keras.Input((3, 3, 6))
    dense = keras.layers.Dense(6, name="pw")
    scale = LayerScale(1e-6, 6, name="ls")
    model = keras.Model(inputs, scale(dense(inputs)))
    scale.set_weights([rng.normal(size=6).astype(np.float32)])
    nodes, output = read_keras(model, (3, 3, 6))
    node = nodes[-1]
    assert (node.op, node.keras_class) == ("affine", "LayerScale")
    x = rng.normal(size=(2, 3, 3, 6)).astype(np.float32)
    z, y = dispatch.forward(node, [tf.constant(x)])
    assert rel(y, scale(x)) < 1e-6
    g = rng.normal(size=x.shape).astype(np.float32)
    (ref,) = autodiff(lambda v: scale(v), [x], g)
    (got,) = dispatch.backward(node, [tf.constant(x)], z, y, tf.constant(g), [(3, 3, 6)])
    assert rel(got, ref) < 1e-6
    folded, _ = fold_batchnorm(nodes, output)
    assert [n.op for n in folded][-2:] == ["dense", "affine"]
    np.testing.assert_array_equal(folded[-2].weights[0], dense.get_weights()[0])

    class LayerScale(keras.layers.Layer):  # noqa: F811 -- a user's layer of the same name
        def build(self, input_shape) -> None:
            self.gamma = self.add_weight(shape=(input_shape[-1],), initializer="ones")

        def call(self, v):
            return v * self.gamma + 1.0

    inputs = keras.Input((3, 3, 6))
    nodes, _ = read_keras(keras.Model(inputs, LayerScale(name="mine")(inputs)), (3, 3, 6))
    assert nodes[-1].op == "opaque"
