"""LayerNormalization over the channels: the Keras layer read as a layer_norm node, forward equal to the
layer, builtin-op input gradient equal to TF autodiff of the layer (1e-5 relative)."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.converters.ops.op_parity import autodiff, rel
from tflite_train.converters.graph.keras_reader import read_keras
from tflite_train.converters.ops import dispatch


def _read(layer, shape):
    inputs = keras.Input(shape)
    nodes, _ = read_keras(keras.Model(inputs, layer(inputs)), shape)
    return nodes[-1]


@pytest.mark.parametrize("shape,center,scale", [((5, 5, 8), True, True), ((2, 6, 16), True, False),
                                                ((3, 4, 7), False, True)])
def test_layer_norm_forward_and_gradient(rng, shape, center, scale):
    layer = keras.layers.LayerNormalization(epsilon=1e-6, center=center, scale=scale, name="ln")
    layer.build((None, *shape))
    layer.set_weights([rng.normal(size=w.shape).astype(np.float32) for w in layer.weights])
    node = _read(layer, shape)
    assert node.op == "layer_norm" and node.attrs["epsilon"] == pytest.approx(1e-6)
    x = (3.0 + 2.0 * rng.normal(size=(2, *shape))).astype(np.float32)  # a mean far from 0: centring matters
    z, y = dispatch.forward(node, [tf.constant(x)])
    assert rel(y, layer(x)) < 1e-5
    g = rng.normal(size=y.shape).astype(np.float32)
    (ref,) = autodiff(lambda v: layer(v), [x], g)
    (got,) = dispatch.backward(node, [tf.constant(x)], z, y, tf.constant(g), [shape])
    assert got.shape == x.shape and rel(got, ref) < 1e-5


def test_layer_norm_variants_without_a_gradient_stay_frozen():
    assert _read(keras.layers.LayerNormalization(axis=1, name="h"), (4, 4, 3)).op == "opaque"
    assert _read(keras.layers.LayerNormalization(axis=[1, 2, 3], name="all"), (4, 4, 3)).op == "opaque"
    assert _read(keras.layers.LayerNormalization(rms_scaling=True, name="rms"), (4, 4, 3)).op == "opaque"
