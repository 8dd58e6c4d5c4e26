"""Small Keras models covering the supported layer families (test fixtures and examples).

Each builder returns a Keras model with its own weights (seeded) and, where random BatchNorm
statistics matter, non-trivial moving statistics so that BN folding is exercised.
"""

from __future__ import annotations

import keras
import numpy as np


def randomize_batchnorm(model: keras.Model, seed: int = 0) -> keras.Model:
    """Gives every top-level BatchNormalization non-trivial, calibrated statistics.

    Layer by layer in graph order, the moving mean and variance are set to the statistics of the
    BN's input on random images (as if the model had been trained on them), and gamma, beta get
    random values near 1 and 0. A random-weight net then keeps activations of unit scale through
    all its blocks (untouched, deep random nets such as MobileNetV2 give near-constant embeddings
    and gradients at float-noise level, which make parity tests weak).
    """
    rng = np.random.default_rng(seed)
    shape = tuple(model.inputs[0].shape[1:])
    images = rng.uniform(0.0, 255.0 if _takes_raw_pixels(model) else 1.0, (16, *shape)).astype(np.float32)
    for layer in model.layers:
        if not isinstance(layer, keras.layers.BatchNormalization):
            continue
        probe = keras.Model(model.inputs, layer.input)
        x = np.asarray(probe(images, training=False)).reshape(-1, layer.moving_mean.shape[0])
        c = x.shape[1]
        layer.moving_mean.assign(x.mean(axis=0).astype(np.float32))
        layer.moving_variance.assign((x.var(axis=0) + 1e-3).astype(np.float32))
        if layer.gamma is not None:
            layer.gamma.assign(rng.uniform(0.6, 1.4, c).astype(np.float32))
        if layer.beta is not None:
            layer.beta.assign(rng.normal(0, 0.2, c).astype(np.float32))
    return model


def _takes_raw_pixels(model: keras.Model) -> bool:
    return any(isinstance(layer, keras.layers.Rescaling) for layer in model.layers)


def plain_cnn(input_size: int = 23, channels: int = 3, classes: int = 10, seed: int = 0) -> keras.Model:
    """Conv 3x3/s2 + LeakyReLU, asymmetric ZeroPadding2D, Conv 5x5/s2 'valid' + ReLU, BN after the
    activation (an affine), AveragePooling 'same', MaxPooling, Flatten, Dense + LeakyReLU, Dropout
    (layer ``features``), Dense classifier."""
    keras.utils.set_random_seed(seed)
    x = inputs = keras.Input((input_size, input_size, channels), name="pixels")
    x = keras.layers.Conv2D(8, 3, strides=2, padding="same", name="conv1")(x)
    x = keras.layers.LeakyReLU(negative_slope=0.1, name="conv1_leaky")(x)
    x = keras.layers.ZeroPadding2D(((1, 0), (0, 1)), name="pad")(x)
    x = keras.layers.Conv2D(12, 5, strides=2, padding="valid", activation="relu", name="conv2")(x)
    x = keras.layers.BatchNormalization(name="conv2_post_bn")(x)
    x = keras.layers.AveragePooling2D(2, strides=1, padding="same", name="avg")(x)
    x = keras.layers.MaxPooling2D(2, name="max")(x)
    x = keras.layers.Flatten(name="flatten")(x)
    x = keras.layers.Dense(16, name="fc")(x)
    x = keras.layers.LeakyReLU(negative_slope=0.2, name="fc_leaky")(x)
    x = keras.layers.Dropout(0.3, name="features")(x)
    outputs = keras.layers.Dense(classes, activation="softmax", name="classifier")(x)
    return randomize_batchnorm(keras.Model(inputs, outputs, name="plain_cnn"), seed)


def rescaling_net(input_size: int = 20, seed: int = 0) -> keras.Model:
    """A raw-pixel net: Rescaling input, swish/sigmoid/hard-sigmoid/hard-swish activations, a
    depthwise conv, a residual Add, a squeeze-excite Multiply, BN, global pooling, classifier."""
    keras.utils.set_random_seed(seed)
    x = inputs = keras.Input((input_size, input_size, 3), name="raw")
    x = keras.layers.Rescaling(1.0 / 127.5, offset=-1.0, name="rescale")(x)
    x = keras.layers.Conv2D(8, 3, strides=2, padding="same", use_bias=False, name="stem")(x)
    x = keras.layers.BatchNormalization(name="stem_bn")(x)
    stem = keras.layers.Activation("swish", name="stem_swish")(x)
    x = keras.layers.DepthwiseConv2D(3, padding="same", activation="sigmoid", name="dw")(stem)
    gate = keras.layers.GlobalAveragePooling2D(keepdims=True, name="se_pool")(x)
    gate = keras.layers.Conv2D(8, 1, activation="hard_sigmoid", name="se_gate")(gate)
    x = keras.layers.Multiply(name="se_mul")([x, gate])
    x = keras.layers.Conv2D(8, 1, name="project")(x)
    x = keras.layers.Add(name="residual")([stem, x])
    x = keras.layers.Conv2D(16, 1, name="head_conv")(x)
    x = keras.layers.Activation("hard_swish", name="head_hswish")(x)
    x = keras.layers.GlobalAveragePooling2D(name="pool")(x)
    outputs = keras.layers.Dense(5, name="logits")(x)
    return randomize_batchnorm(keras.Model(inputs, outputs, name="rescaling_net"), seed)


def mobilenet_v2(input_size: int = 32, seed: int = 0) -> keras.Model:
    """``keras.applications.MobileNetV2(alpha=0.35, weights=None)`` with random BN statistics."""
    keras.utils.set_random_seed(seed)
    model = keras.applications.MobileNetV2(input_shape=(input_size, input_size, 3), alpha=0.35, weights=None)
    return randomize_batchnorm(model, seed)


def mobilenet_v3_small(input_size: int = 32, seed: int = 0) -> keras.Model:
    """``keras.applications.MobileNetV3Small(minimalistic=False, weights=None)`` (hard-swish,
    squeeze-excite, Rescaling input) with random BN statistics."""
    keras.utils.set_random_seed(seed)
    model = keras.applications.MobileNetV3Small(input_shape=(input_size, input_size, 3), minimalistic=False,
                                                weights=None)
    return randomize_batchnorm(model, seed)


EXAMPLE_MODELS = {"plain_cnn": plain_cnn, "rescaling_net": rescaling_net, "mobilenet_v2": mobilenet_v2,
                  "mobilenet_v3_small": mobilenet_v3_small}
