"""SeparableConv2D read as its two weighted nodes (depthwise half, 1x1 pointwise half): the builtin-op
forward equals the Keras layer, and the input gradient and the gradients of both kernels and the bias
equal TF autodiff of the layer's own op. Tolerance 1e-5 relative."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.converters.ops.op_parity import autodiff, rel
from tflite_train.converters.graph.keras_reader import read_keras
from tflite_train.converters.ops import dispatch

CASES = [  # (H, W, kernel, stride, padding)
    (9, 9, 3, 1, "same"), (8, 8, 3, 2, "same"), (9, 8, 3, 2, "same"), (11, 11, 5, 2, "valid"), (7, 7, 5, 1, "same"),
]


def _separable(rng, h, w, k, s, padding, channels=4, filters=6):
    x = inputs = keras.Input((h, w, channels))
    layer = keras.layers.SeparableConv2D(filters, k, strides=s, padding=padding, name="sep")
    model = keras.Model(inputs, layer(x))
    depthwise, pointwise, bias = (rng.normal(size=v.shape).astype(np.float32) for v in
                                  (layer.depthwise_kernel, layer.pointwise_kernel, layer.bias))
    layer.set_weights([depthwise, pointwise, bias])
    return model, layer, (depthwise, pointwise, bias)


@pytest.mark.parametrize("variables", [False, True])
@pytest.mark.parametrize("h,w,k,s,padding", CASES)
def test_separable_forward_and_gradients(rng, h, w, k, s, padding, variables):
    model, layer, (depthwise, pointwise, bias) = _separable(rng, h, w, k, s, padding)
    nodes, out = read_keras(model, (h, w, 4))
    dw_node, pw_node = nodes[1], nodes[2]
    assert (dw_node.op, dw_node.name, pw_node.op, pw_node.name, out) == ("depthwise", "sep_depthwise", "conv2d",
                                                                           "sep", "sep")
    assert dw_node.attrs["separable"] == "sep" and pw_node.attrs["kernel"] == (1, 1)
    x = rng.normal(size=(2, h, w, 4)).astype(np.float32)

    u = dispatch.weighted_pre_activation(dw_node, tf.constant(x), *dw_node.weights, weights_are_variables=variables)
    z = dispatch.weighted_pre_activation(pw_node, u, *pw_node.weights, weights_are_variables=variables)
    assert rel(z, layer(x)) < 1e-5

    def reference(a, d, p, b):
        return tf.nn.separable_conv2d(a, d, p, [1, s, s, 1], padding.upper()) + b

    g = rng.normal(size=z.shape).astype(np.float32)
    gx_ref, gd_ref, gp_ref, gb_ref = autodiff(reference, [x, depthwise, pointwise, bias], g)
    u_shape, x_shape = tuple(u.shape[1:]), (h, w, 4)
    dp, db = dispatch.weighted_weight_grad(pw_node, u, tf.constant(g), u_shape)
    g_u = dispatch.weighted_input_grad(pw_node, tf.constant(g), pointwise, u_shape, kernel_is_variable=variables)
    dd, db_u = dispatch.weighted_weight_grad(dw_node, tf.constant(x), g_u, x_shape)
    gx = dispatch.weighted_input_grad(dw_node, g_u, depthwise, x_shape)
    assert dp.shape == pointwise.shape and dd.shape == depthwise.shape
    assert rel(dp, gp_ref) < 1e-5 and rel(db, gb_ref) < 1e-5
    assert rel(dd, gd_ref) < 1e-5 and rel(gx, gx_ref) < 1e-5
    # the depthwise half's own (zero-initialised) bias: the gradient of a per-channel shift of u
    (gu_ref,) = autodiff(lambda v: tf.nn.conv2d(v, pointwise, 1, "VALID") + bias, [u.numpy()], g)
    assert rel(db_u, gu_ref.sum(axis=(0, 1, 2))) < 1e-5


def test_separable_activation_and_unsupported_variants(rng):
    inputs = keras.Input((8, 8, 3))
    relu = keras.layers.SeparableConv2D(4, 3, padding="same", activation="relu", name="a")(inputs)
    multi = keras.layers.SeparableConv2D(4, 3, padding="same", depth_multiplier=2, name="b")(relu)
    nodes, _ = read_keras(keras.Model(inputs, multi), (8, 8, 3))
    by_name = {n.name: n for n in nodes}
    assert by_name["a_relu"].op == "activation" and by_name["a_relu"].inputs == ("a",)
    assert by_name["b"].op == "opaque" and by_name["b"].keras_class == "SeparableConv2D with depth_multiplier=2"
