"""Forward and backward of one graph node, looked up by its IR kind in the op registry
(``converters.ops.registry``; the op families live beside this module).

``forward`` returns (z, y): y the node's output and z the pre-activation of weighted and activation
nodes (None elsewhere), which the backward of the z-based activations needs. ``backward`` returns
the gradient of every input of a non-weighted node (the trainable module handles weighted nodes,
whose update depends on the channel selection).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tflite_train.converters.ops import activations, registry

if TYPE_CHECKING:
    from tflite_train.converters.graph.ir import Node


def weighted_pre_activation(node: Node, x, kernel, bias, weights_are_variables: bool = False):
    """z of a weighted node; ``weights_are_variables``: the kernel is read from a variable (a 1x1
    stride-1 conv then runs as a BATCH_MATMUL, ``conv.pointwise_matmul_forward``)."""
    return registry.weighted_kind(node.op).forward(node, x, kernel, bias, weights_are_variables)


def weighted_activation(node: Node, z):
    """y = f(z) of a weighted node."""
    return activations.activation_forward(z, node.attrs.get("activation", "linear"), node.attrs.get("alpha", 0.0))


def forward_filter_layout(node: Node, kernel):
    """A weighted node's kernel (Keras layout) in the layout of its TFLite forward op's filter:
    CONV_2D [C_out, kh, kw, C_in], DEPTHWISE_CONV_2D [1, kh, kw, C] (the same bytes as [kh, kw, C, 1]),
    FULLY_CONNECTED [D_out, D_in]. On a constant the converter folds this, giving the bytes the
    forward op stores."""
    return registry.weighted_kind(node.op).filter_layout(node, kernel)


def forward(node: Node, xs: list, params=None):
    """(z, y) of ``node`` on input values ``xs``; ``params`` = (kernel, bias) of weighted nodes."""
    if registry.is_opaque(node):
        return None, node.call(xs)
    spec = registry.kind(node.op)
    if node.is_weighted:
        z = spec.forward(node, xs[0], *params)
        return z, weighted_activation(node, z)
    return spec.forward(node, xs)


def backward(node: Node, xs: list, z, y, g_y, in_shapes: list[tuple[int, ...]]) -> list:
    """Gradients of the inputs of a non-weighted differentiable node.

    Raises:
      ValueError: the node has no on-device gradient (``registry.gradient_refusal``).
    """
    spec = registry.require_gradient(node)
    if node.is_weighted:
        raise ValueError(f"node {node.name!r} is weighted: its gradient is weighted_input_grad/weighted_weight_grad")
    return spec.backward(node, xs, z, y, g_y, in_shapes)


def weighted_input_grad(node: Node, g_z, kernel, in_shape: tuple[int, ...], kernel_is_variable: bool = False):
    """g_x of a weighted node from g_z; ``kernel_is_variable``: the kernel is read from a variable
    (a wide 1x1 conv then takes ``conv.pointwise_input_grad_transposed``)."""
    return registry.weighted_kind(node.op).input_grad(node, g_z, kernel, in_shape, kernel_is_variable)


def weighted_weight_grad(node: Node, x, g_z, in_shape: tuple[int, ...]):
    """(dW, db) of every output channel of a weighted node, dW in the kernel's shape."""
    return registry.weighted_kind(node.op).weight_grad(node, x, g_z, in_shape)


def kernel_mask(node: Node, mask):
    """A weighted node's output-channel mask [C_out] broadcastable to its kernel (depthwise: [C, 1])."""
    return registry.weighted_kind(node.op).kernel_mask(mask)
