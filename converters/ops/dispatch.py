"""Forward and backward of one graph node by its op kind (the op families live beside this module).

``forward`` returns (z, y): y the node's output and z the pre-activation of weighted and activation
nodes (None elsewhere), which the backward of the z-based activations needs. ``backward`` returns
the gradient of every input of a non-weighted node (the trainable module handles weighted nodes,
whose update depends on the channel selection).
"""

from __future__ import annotations

import tensorflow as tf

from converters.graph.ir import Node
from converters.ops import activations, concat, conv, elementwise, pooling, shape_ops


def weighted_pre_activation(node: Node, x, kernel, bias, weights_are_variables: bool = False):
    """z of a conv2d / depthwise / dense node; ``weights_are_variables``: the kernel is read from a
    variable (a 1x1 stride-1 conv then runs as a BATCH_MATMUL, ``conv.pointwise_matmul_forward``)."""
    a = node.attrs
    if node.op == "conv2d":
        if weights_are_variables and tuple(a["kernel"]) == (1, 1) and tuple(a["strides"]) == (1, 1):
            return conv.pointwise_matmul_forward(x, kernel, bias)
        return conv.conv2d_forward(x, kernel, bias, a["strides"], a["padding"])
    if node.op == "depthwise":
        return conv.depthwise_forward(x, kernel, bias, a["strides"], a["padding"])
    return conv.dense_forward(x, kernel, bias)


def weighted_activation(node: Node, z):
    """y = f(z) of a weighted node."""
    return activations.activation_forward(z, node.attrs.get("activation", "linear"), node.attrs.get("alpha", 0.0))


def forward_filter_layout(node: Node, kernel):
    """A weighted node's kernel (Keras layout) in the layout of its TFLite forward op's filter:
    CONV_2D [C_out, kh, kw, C_in], DEPTHWISE_CONV_2D [1, kh, kw, C] (the same bytes as [kh, kw, C, 1]),
    FULLY_CONNECTED [D_out, D_in]. On a constant the converter folds this, giving the bytes the
    forward op stores."""
    if node.op == "conv2d":
        return tf.transpose(kernel, [3, 0, 1, 2])
    if node.op == "depthwise":
        kh, kw, c, m = kernel.shape
        return tf.reshape(kernel, [1, kh, kw, c * m])
    return tf.transpose(kernel)


def forward(node: Node, xs: list, params=None):
    """(z, y) of ``node`` on input values ``xs``; ``params`` = (kernel, bias) of weighted nodes."""
    a = node.attrs
    if node.is_weighted:
        z = weighted_pre_activation(node, xs[0], *params)
        return z, activations.activation_forward(z, a.get("activation", "linear"), a.get("alpha", 0.0))
    if node.op == "activation":
        return xs[0], activations.activation_forward(xs[0], a["fn"], a.get("alpha", 0.0))
    if node.op == "affine":
        return None, elementwise.affine_forward(xs[0], *node.weights)
    if node.op == "add":
        return None, elementwise.add_forward(xs)
    if node.op == "add_const":
        return None, xs[0] + a["value"]
    if node.op == "multiply":
        return None, elementwise.multiply_forward(*xs)
    if node.op == "concat":
        return None, concat.concat_forward(xs, a["axis"])
    if node.op == "scale":
        return None, xs[0] * a["value"]
    if node.op == "zero_pad":
        return None, shape_ops.zero_pad_forward(xs[0], a["pads"])
    if node.op == "avg_pool":
        return None, pooling.avg_pool_forward(xs[0], a["pool"], a["strides"], a["padding"])
    if node.op == "max_pool":
        return None, pooling.max_pool_forward(xs[0], a["pool"], a["strides"], a["padding"])
    if node.op == "global_pool":
        return None, pooling.global_pool_forward(xs[0], a["keepdims"])
    if node.op == "reshape":
        return None, shape_ops.reshape_forward(xs[0], node.shape)
    if node.op == "identity":
        return None, xs[0]
    if node.op == "opaque":
        return None, node.call(xs)
    raise ValueError(f"node {node.name!r}: unknown op {node.op!r}")


def backward(node: Node, xs: list, z, y, g_y, in_shapes: list[tuple[int, ...]]) -> list:
    """Gradients of the inputs of a non-weighted differentiable node."""
    a = node.attrs
    if node.op == "activation":
        return [activations.activation_backward(z, y, g_y, a["fn"], a.get("alpha", 0.0))]
    if node.op == "affine":
        return [elementwise.affine_backward(g_y, node.weights[0])]
    if node.op == "add":
        return elementwise.add_backward(g_y, in_shapes, node.shape)
    if node.op in ("add_const", "identity"):
        return [g_y]
    if node.op == "scale":
        return [g_y * a["value"]]
    if node.op == "multiply":
        return list(elementwise.multiply_backward(xs[0], xs[1], g_y, in_shapes, node.shape))
    if node.op == "concat":
        return concat.concat_backward(g_y, in_shapes, a["axis"])
    if node.op == "zero_pad":
        return [shape_ops.zero_pad_backward(g_y, a["pads"], in_shapes[0])]
    if node.op == "avg_pool":
        return [pooling.avg_pool_backward(g_y, in_shapes[0][:2], node.shape[:2], a["pool"], a["strides"], a["padding"])]
    if node.op == "max_pool":
        return [pooling.max_pool_backward(xs[0], y, g_y, in_shapes[0][:2], node.shape[:2], a["pool"], a["strides"],
                                          a["padding"])]
    if node.op == "global_pool":
        return [pooling.global_pool_backward(g_y, in_shapes[0])]
    if node.op == "reshape":
        return [shape_ops.reshape_backward(g_y, in_shapes[0])]
    raise ValueError(f"node {node.name!r} ({node.keras_class or node.op}) has no on-device gradient")


def weighted_input_grad(node: Node, g_z, kernel, in_shape: tuple[int, ...], kernel_is_variable: bool = False):
    """g_x of a weighted node from g_z; ``kernel_is_variable``: the kernel is read from a variable
    (a wide 1x1 conv then takes ``conv.pointwise_input_grad_transposed``)."""
    a = node.attrs
    if node.op == "dense":
        return conv.dense_input_grad(g_z, kernel)
    if node.op == "depthwise":
        return conv.depthwise_input_grad(g_z, kernel, in_shape[:2], node.shape[:2], a["kernel"], a["strides"],
                                         a["padding"])
    return conv.conv2d_input_grad(g_z, kernel, in_shape[:2], node.shape[:2], a["kernel"], a["strides"], a["padding"],
                                  kernel_is_variable=kernel_is_variable)


def weighted_weight_grad(node: Node, x, g_z, in_shape: tuple[int, ...]):
    """(dW, db) of every output channel of a weighted node, dW in the kernel's shape."""
    a = node.attrs
    if node.op == "dense":
        return conv.dense_weight_grad(x, g_z, tuple(node.weights[0].shape))
    fn = conv.depthwise_weight_grad if node.op == "depthwise" else conv.conv2d_weight_grad
    return fn(x, g_z, in_shape[:2], node.shape[:2], a["kernel"], a["strides"], a["padding"])
