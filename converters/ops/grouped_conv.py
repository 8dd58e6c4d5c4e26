"""Grouped convolution (Keras ``Conv2D(groups=g)``, 1 < g): forward and builtin-op gradients; the family's
registry entry (``FAMILY``: Conv2D with groups > 1 -> grouped_conv2d).

With c = C_in / g input and m = C_out / g output channels per group, kernel W [kh, kw, c, C_out] and
output channel o in group j = o // m:

  z[i, o] = sum_{t, ci < c} x_pad[s i + t, j c + ci] W[t, ci, o] + b[o]      (one grouped CONV_2D).

* input gradient: per group, the dense conv's full correlation of the dilated gradient with the
  flipped kernel (``conv``); all groups at once as one grouped VALID conv whose kernel
  K [kh, kw, m, C_in] has K[t, oi, j c + ci] = flip(W)[t, ci, j m + oi] (SPLIT of W into its g groups,
  TRANSPOSE of each to [kh, kw, m, c], CONCATENATION on the last axis: 4-D ops only);
* weight gradient: dW[:, :, :, group j] = the dense conv's weight gradient of x[..., group j] and
  g_z[..., group j] (SPLIT of x and g_z, one im2col MATMUL per group, CONCATENATION);
  db[o] = sum_{n, i} g_z[n, i, o];
* layer table: groups = g (``geometry``), so the cost model prices M = H' W' k^2 c C_out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import tensorflow as tf

from tflite_train.converters.ops.conv import (_flip, _full_correlation_input, add_conv_node, conv2d_forward,
                                              conv2d_weight_grad, pad_amounts)
from tflite_train.converters.ops.spec import LayerRule, OpFamily, ReadContext, WeightedKind, f32, pair

if TYPE_CHECKING:
    from tflite_train.converters.graph.ir import Node


def grouped_conv_forward(x, kernel, bias, strides, padding):
    """z = grouped_conv(x, W) + b: TF infers g = C_in / kernel's c, the converter emits one CONV_2D."""
    return conv2d_forward(x, kernel, bias, strides, padding)


def grouped_backward_kernel(kernel, groups: int):
    """K [kh, kw, m, C_in] of the input gradient's grouped conv (module docstring)."""
    parts = tf.split(_flip(kernel), groups, axis=3)
    return tf.concat([tf.transpose(p, [0, 1, 3, 2]) for p in parts], axis=3)


def grouped_input_grad(g_z, kernel, groups: int, in_hw, out_hw, kernel_hw, strides, padding):
    """g_x [N, H, W, C_in] of a grouped conv (module docstring)."""
    d = _full_correlation_input(g_z, in_hw, out_hw, kernel_hw, strides, padding, g_z.shape[-1])
    return tf.nn.conv2d(d, grouped_backward_kernel(kernel, groups), 1, "VALID")


def grouped_weight_grad(x, g_z, groups: int, in_hw, out_hw, kernel_hw, strides, padding):
    """dW [kh, kw, c, C_out] and db [C_out] of every output channel (module docstring)."""
    xs, gs = tf.split(x, groups, axis=3), tf.split(g_z, groups, axis=3)
    parts = [conv2d_weight_grad(xj, gj, in_hw, out_hw, kernel_hw, strides, padding) for xj, gj in zip(xs, gs)]
    return tf.concat([dw for dw, _ in parts], axis=3), tf.concat([db for _, db in parts], axis=0)


# ------------------------------------------------------------------ the family's registry entry
def _forward(node: Node, x, kernel, bias, variables: bool = False):
    return grouped_conv_forward(x, kernel, bias, node.attrs["strides"], node.attrs["padding"])


def _input_grad(node: Node, g_z, kernel, in_shape, kernel_is_variable: bool = False):
    a = node.attrs
    return grouped_input_grad(g_z, kernel, a["groups"], in_shape[:2], node.shape[:2], a["kernel"], a["strides"],
                              a["padding"])


def _weight_grad(node: Node, x, g_z, in_shape):
    a = node.attrs
    return grouped_weight_grad(x, g_z, a["groups"], in_shape[:2], node.shape[:2], a["kernel"], a["strides"],
                               a["padding"])


def _geometry(node: Node, in_shape) -> tuple[int, int, int]:
    return int(node.attrs["kernel"][0]), int(node.attrs["strides"][0]), int(node.attrs["groups"])


def read_grouped_conv2d(ctx: ReadContext, layer, inputs: list[str], shapes) -> str | None:
    """Conv2D with groups > 1 (dilation 1, square kernel and stride) -> grouped_conv2d; with groups = input =
    output channels (a depthwise conv written as Conv2D, e.g. ConvNeXt's) -> depthwise, whose gradients are one op
    each instead of one per group."""
    shape, groups = shapes[0], int(layer.groups)
    if groups == 1 or pair(layer.dilation_rate) != (1, 1) or len(shape) != 3:
        return None
    kernel_hw, strides = pair(layer.kernel_size), pair(layer.strides)
    if kernel_hw[0] != kernel_hw[1] or strides[0] != strides[1]:
        return None
    out_hw = [pad_amounts(shape[a], kernel_hw[a], strides[a], layer.padding)[2] for a in (0, 1)]
    filters = int(layer.filters)
    bias = f32(layer.bias) if layer.use_bias else np.zeros(filters, np.float32)
    if groups == shape[2] == filters:  # a depthwise conv (ConvNeXt's): one DEPTHWISE_CONV_2D, not g tiny convs
        return add_conv_node(ctx, layer, "depthwise", inputs[0], shape, filters,
                             kernel=np.transpose(f32(layer.kernel), (0, 1, 3, 2)))  # [kh, kw, 1, C] -> [kh, kw, C, 1]
    out = ctx.add(layer.name, "grouped_conv2d", inputs, (*out_hw, filters), "Conv2D",
                  weights=(f32(layer.kernel), bias),
                  attrs={"kernel": kernel_hw, "strides": strides, "padding": layer.padding, "groups": groups,
                         "activation": "linear", "keras_output": layer.name})
    return ctx.activation_after(layer, out)


FAMILY = OpFamily(
    __name__,
    kinds=(WeightedKind("grouped_conv2d", _forward, _input_grad, _weight_grad, out_axis=3,
                        filter_layout=lambda node, kernel: tf.transpose(kernel, [3, 0, 1, 2]),  # [C_out, kh, kw, c]
                        kernel_mask=lambda mask: mask, geometry=_geometry, role="conv"),),
    layers=(LayerRule("Conv2D", read_grouped_conv2d, ("grouped_conv2d", "depthwise"),
                      "groups > 1, dilation 1, square kernel and stride, `same` or `valid`; groups = channels "
                      "as a DepthwiseConv2D"),),
)
