"""Grouped Conv2D (groups > 1): the Keras layer read as one grouped_conv2d node, its builtin-op forward
equal to the layer, input and weight gradients equal to TF autodiff (strides 1 and 2, "same" and
"valid", kernels 1, 3, 5, 2 and 4 groups). Tolerance 1e-5 relative.

TF has no CPU gradient of a grouped conv ("Gradients for grouped convolutions are not supported on
CPU"), so the autodiff reference is the same conv written per group: concat_j conv(x_j, W_j) + b."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.converters.ops.op_parity import autodiff, rel
from tflite_train.converters.graph.keras_reader import read_keras
from tflite_train.converters.ops import dispatch

CASES = [  # (H, W, kernel, stride, padding, groups)
    (9, 9, 3, 1, "same", 2), (8, 8, 3, 2, "same", 4), (9, 8, 3, 2, "same", 2), (11, 11, 5, 2, "valid", 4),
    (7, 7, 1, 1, "same", 4), (8, 8, 1, 2, "same", 2),
]


def _per_group(x, kernel, bias, groups, stride, padding):
    parts = [tf.nn.conv2d(xj, kj, stride, padding.upper())
             for xj, kj in zip(tf.split(x, groups, axis=3), tf.split(kernel, groups, axis=3))]
    return tf.concat(parts, axis=3) + bias


@pytest.mark.parametrize("variables", [False, True])
@pytest.mark.parametrize("h,w,k,s,padding,groups", CASES)
def test_grouped_conv_forward_and_gradients(rng, h, w, k, s, padding, groups, variables):
    cin, cout = 8, 12
    inputs = keras.Input((h, w, cin))
    layer = keras.layers.Conv2D(cout, k, strides=s, padding=padding, groups=groups, name="g")
    model = keras.Model(inputs, layer(inputs))
    kernel = rng.normal(size=(k, k, cin // groups, cout)).astype(np.float32)
    bias = rng.normal(size=cout).astype(np.float32)
    layer.set_weights([kernel, bias])
    nodes, _ = read_keras(model, (h, w, cin))
    node = nodes[1]
    assert (node.op, node.attrs["groups"], node.keras_class) == ("grouped_conv2d", groups, "Conv2D")
    x = rng.normal(size=(2, h, w, cin)).astype(np.float32)
    z = dispatch.weighted_pre_activation(node, tf.constant(x), kernel, bias, weights_are_variables=variables)
    assert rel(z, layer(x)) < 1e-5
    assert rel(z, _per_group(x, kernel, bias, groups, s, padding)) < 1e-5

    g = rng.normal(size=z.shape).astype(np.float32)
    gx_ref, gk_ref, gb_ref = autodiff(lambda a, b, c: _per_group(a, b, c, groups, s, padding), [x, kernel, bias], g)
    gx = dispatch.weighted_input_grad(node, tf.constant(g), kernel, (h, w, cin), kernel_is_variable=variables)
    assert gx.shape == x.shape and rel(gx, gx_ref) < 1e-5
    dw, db = dispatch.weighted_weight_grad(node, tf.constant(x), tf.constant(g), (h, w, cin))
    assert dw.shape == kernel.shape
    assert rel(dw, gk_ref) < 1e-5 and rel(db, gb_ref) < 1e-5


def test_grouped_variants_without_a_gradient_stay_frozen_and_are_named():
    inputs = keras.Input((8, 8, 4))
    x = keras.layers.Conv2D(4, 3, padding="same", groups=2, dilation_rate=2, name="dilated")(inputs)
    nodes, _ = read_keras(keras.Model(inputs, x), (8, 8, 4))
    assert nodes[-1].op == "opaque" and nodes[-1].keras_class == "Conv2D with groups=2, dilation_rate=(2, 2)"


@pytest.mark.parametrize("s,padding", [(1, "same"), (2, "valid")])
def test_conv2d_with_one_group_per_channel_reads_as_a_depthwise_conv(rng, s, padding):
    """Conv2D(groups = channels = filters), ConvNeXt's depthwise conv, becomes one depthwise node (kernel
    [kh, kw, C, 1]) whose forward and gradients equal the per-group reference."""
    c, k = 6, 3
    inputs = keras.Input((7, 7, c))
    layer = keras.layers.Conv2D(c, k, strides=s, padding=padding, groups=c, name="dw")
    model = keras.Model(inputs, layer(inputs))
    kernel = rng.normal(size=(k, k, 1, c)).astype(np.float32)
    bias = rng.normal(size=c).astype(np.float32)
    layer.set_weights([kernel, bias])
    nodes, _ = read_keras(model, (7, 7, c))
    node = nodes[1]
    assert (node.op, node.keras_class) == ("depthwise", "Conv2D")
    stored = node.weights[0]
    assert stored.shape == (k, k, c, 1)
    x = rng.normal(size=(2, 7, 7, c)).astype(np.float32)
    z = dispatch.weighted_pre_activation(node, tf.constant(x), stored, bias)
    assert rel(z, layer(x)) < 1e-5
    g = rng.normal(size=z.shape).astype(np.float32)
    gx_ref, gk_ref, gb_ref = autodiff(lambda a, b, d: _per_group(a, b, d, c, s, padding), [x, kernel, bias], g)
    gx = dispatch.weighted_input_grad(node, tf.constant(g), stored, (7, 7, c))
    assert rel(gx, gx_ref) < 1e-5
    dw, db = dispatch.weighted_weight_grad(node, tf.constant(x), tf.constant(g), (7, 7, c))
    assert rel(np.transpose(np.asarray(dw), (0, 1, 3, 2)), gk_ref) < 1e-5 and rel(db, gb_ref) < 1e-5
