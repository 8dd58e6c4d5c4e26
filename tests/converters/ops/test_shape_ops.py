"""ZeroPadding2D (asymmetric), Flatten/Reshape: backward vs TF autodiff; the augmentation layers read as
inference identities."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.converters.ops.op_parity import autodiff, rel
from tflite_train.converters.graph.keras_reader import read_keras
from tflite_train.converters.ops import shape_ops


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


@pytest.mark.parametrize("cls", shape_ops.AUGMENTATION_LAYERS)
def test_augmentation_layers_are_identities_at_inference(rng, cls):
    """Each random augmentation layer, built with its class's usual arguments, returns its input unchanged with
    training=False (so the reader may drop it)."""
    kwargs = {"RandomRotation": {"factor": 0.2}, "RandomZoom": {"height_factor": 0.2},
              "RandomTranslation": {"height_factor": 0.1, "width_factor": 0.1}, "RandomContrast": {"factor": 0.3},
              "RandomBrightness": {"factor": 0.2}, "RandomHue": {"factor": 0.2}, "RandomSaturation": {"factor": 0.2},
              "RandomSharpness": {"factor": 0.2}, "RandomPosterization": {"factor": (1, 4)},
              "RandomShear": {"x_factor": 0.2}, "RandomColorDegeneration": {"factor": 0.2}}.get(cls, {})
    x = rng.uniform(0, 1, size=(2, 16, 12, 3)).astype(np.float32)
    layer = getattr(keras.layers, cls)(**kwargs)
    np.testing.assert_array_equal(np.asarray(layer(x, training=False)), x)


def test_random_crop_is_an_identity_only_at_its_own_size():
    inputs = keras.Input((16, 12, 3))
    same = read_keras(keras.Model(inputs, keras.layers.RandomCrop(16, 12, name="crop")(inputs)), (16, 12, 3))[0]
    other = read_keras(keras.Model(inputs, keras.layers.RandomCrop(8, 8, name="crop")(inputs)), (16, 12, 3))[0]
    assert [n.op for n in same] == ["input", "identity"] and [n.op for n in other] == ["input", "opaque"]
