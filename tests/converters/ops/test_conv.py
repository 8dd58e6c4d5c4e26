"""Conv2D, DepthwiseConv2D and Dense: builtin-op input and weight gradients vs TF autodiff.

Stride 1 and 2, odd and even sizes, "same" (Keras-asymmetric at stride 2) and "valid" padding,
kernels 1, 3, 5; weight gradients of every channel in the kernel's layout. Tolerance 1e-5 relative.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tests.converters.ops.op_parity import autodiff, rel
from tflite_train.converters.ops import conv

CASES = [  # (H, W, kernel, stride, padding)
    (9, 9, 3, 1, "same"), (9, 8, 3, 2, "same"), (8, 8, 3, 2, "same"), (11, 11, 5, 2, "valid"),
    (12, 11, 5, 2, "same"), (7, 7, 1, 1, "same"), (8, 8, 1, 2, "same"), (10, 10, 3, 2, "valid"),
]


@pytest.mark.parametrize("h,w,k,s,padding", CASES)
def test_conv2d_gradients(rng, h, w, k, s, padding):
    x = rng.normal(size=(2, h, w, 3)).astype(np.float32)
    kernel = rng.normal(size=(k, k, 3, 5)).astype(np.float32)
    bias = rng.normal(size=5).astype(np.float32)
    y = conv.conv2d_forward(tf.constant(x), kernel, bias, (s, s), padding)
    g = rng.normal(size=y.shape).astype(np.float32)
    gx_ref, gk_ref, gb_ref = autodiff(lambda a, b, c: conv.conv2d_forward(a, b, c, (s, s), padding), [x, kernel, bias], g)
    out_hw = tuple(y.shape[1:3])
    gx = conv.conv2d_input_grad(tf.constant(g), kernel, (h, w), out_hw, (k, k), (s, s), padding)
    assert gx.shape == x.shape
    assert rel(gx, gx_ref) < 1e-5
    dw_all, db_all = conv.conv2d_weight_grad(tf.constant(x), tf.constant(g), (h, w), out_hw, (k, k), (s, s), padding)
    assert dw_all.shape == kernel.shape
    assert rel(dw_all, gk_ref) < 1e-5
    assert rel(db_all, gb_ref) < 1e-5


@pytest.mark.parametrize("h,w,k,s,padding", CASES)
def test_depthwise_gradients(rng, h, w, k, s, padding):
    c = 4
    x = rng.normal(size=(2, h, w, c)).astype(np.float32)
    kernel = rng.normal(size=(k, k, c, 1)).astype(np.float32)
    bias = rng.normal(size=c).astype(np.float32)
    y = conv.depthwise_forward(tf.constant(x), kernel, bias, (s, s), padding)
    g = rng.normal(size=y.shape).astype(np.float32)
    gx_ref, gk_ref, gb_ref = autodiff(lambda a, b, cc: conv.depthwise_forward(a, b, cc, (s, s), padding),
                                      [x, kernel, bias], g)
    out_hw = tuple(y.shape[1:3])
    gx = conv.depthwise_input_grad(tf.constant(g), kernel, (h, w), out_hw, (k, k), (s, s), padding)
    assert rel(gx, gx_ref) < 1e-5
    dw_all, db_all = conv.depthwise_weight_grad(tf.constant(x), tf.constant(g), (h, w), out_hw, (k, k), (s, s),
                                                    padding)
    assert dw_all.shape == kernel.shape
    assert rel(dw_all, gk_ref) < 1e-5
    assert rel(db_all, gb_ref) < 1e-5


@pytest.mark.parametrize("shape", [(3, 7), (2, 3, 3, 7)])
def test_dense_gradients(rng, shape):
    x = rng.normal(size=shape).astype(np.float32)
    kernel = rng.normal(size=(7, 6)).astype(np.float32)
    bias = rng.normal(size=6).astype(np.float32)
    y = conv.dense_forward(tf.constant(x), kernel, bias)
    g = rng.normal(size=y.shape).astype(np.float32)
    gx_ref, gk_ref, gb_ref = autodiff(conv.dense_forward, [x, kernel, bias], g)
    assert rel(conv.dense_input_grad(tf.constant(g), kernel), gx_ref) < 1e-5
    dw_all, db_all = conv.dense_weight_grad(tf.constant(x), tf.constant(g), kernel.shape)
    assert rel(dw_all, gk_ref) < 1e-5
    assert rel(db_all, gb_ref) < 1e-5


@pytest.mark.parametrize("size,kernel,stride,padding,expected", [
    (33, 3, 2, "same", (1, 1, 17)),   # total = 16*2 + 3 - 33 = 2
    (32, 3, 2, "same", (0, 1, 16)),   # total = 15*2 + 3 - 32 = 1: Keras pads the extra row after
    (9, 5, 2, "same", (2, 2, 5)),     # total = 4*2 + 5 - 9 = 4
    (8, 1, 1, "same", (0, 0, 8)),
    (11, 5, 2, "valid", (0, 0, 4)),   # floor((11 - 5) / 2) + 1
])
def test_pad_amounts_by_hand(size, kernel, stride, padding, expected):
    assert conv.pad_amounts(size, kernel, stride, padding) == expected


@pytest.mark.parametrize("h,w,cin", [(2, 2, 6), (3, 2, 6), (4, 4, 16)])
def test_pointwise_input_grad_of_a_variable_kernel(rng, h, w, cin):
    """A wide 1x1 kernel read from a variable takes the transposed BATCH_MATMUL form (C_in >= H W);
    batch 3 so that the rows of several samples are ordered right."""
    x = rng.normal(size=(3, h, w, cin)).astype(np.float32)
    kernel = rng.normal(size=(1, 1, cin, 7)).astype(np.float32)
    bias = rng.normal(size=7).astype(np.float32)
    g = rng.normal(size=(3, h, w, 7)).astype(np.float32)
    gx_ref = autodiff(lambda a: conv.conv2d_forward(a, kernel, bias, (1, 1), "same"), [x], g)[0]
    var = tf.Variable(kernel)
    gx = conv.conv2d_input_grad(tf.constant(g), var, (h, w), (h, w), (1, 1), (1, 1), "same", kernel_is_variable=True)
    assert gx.shape == x.shape
    assert rel(gx, gx_ref) < 1e-5
    assert rel(conv.pointwise_input_grad_transposed(tf.constant(g), var, (h, w)), gx_ref) < 1e-5
