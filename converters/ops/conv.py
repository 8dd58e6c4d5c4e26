"""Convolutions and Dense: forward, input gradient and weight gradient in builtin ops; the family's
registry entry (``FAMILY``: Conv2D, DepthwiseConv2D, SeparableConv2D and Dense -> conv2d, depthwise, dense).

Notation (one spatial axis; both axes alike): input x of size H, kernel k, stride s, padding
(p_b, p_a), output size H'. Forward: z[i] = sum_t x_pad[s i + t] W[t] + b with x_pad = pad(x).

* "same" (TF/Keras): H' = ceil(H / s), total = max((H' - 1) s + k - H, 0), p_b = total // 2 (the
  extra row goes after: Keras is asymmetric at stride 2 on even sizes); "valid": p_b = 0,
  H' = floor((H - k) / s) + 1.
* weight gradient of every output channel, in the kernel's own layout (no transpose):
  dW[t, ci, o] = sum_{n, i} x_pad[n, s i + t, ci] g_z[n, i, o] (im2col + one MATMUL, dW = cols^T g
  as [kh*kw*C_in, C_out]; depthwise: one MUL and one reduction per tap), db[o] = sum_{n, i} g_z[n, i, o].
* input gradient: g_xpad[j] = sum_{i, t: s i + t = j} g_z[i] W[t] = a full correlation of the
  zero-dilated gradient d (d[s i] = g_z[i]) with the flipped kernel; only the H rows that map to x
  are computed (d is padded by k - 1 - p_b before and cut/padded to H + k - 1 rows), then a VALID
  conv (dense: kernel transposed to [k, k, C_out, C_in]; depthwise: per channel).
* Dense: z = x W + b; dW = x^T g_z; g_x = g_z W^T.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import tensorflow as tf

from tflite_train.converters.ops.spec import LayerRule, OpFamily, ReadContext, WeightedKind, f32, pair

if TYPE_CHECKING:
    from tflite_train.converters.graph.ir import Node


def pad_amounts(size: int, kernel: int, stride: int, padding: str) -> tuple[int, int, int]:
    """(pad_before, pad_after, out_size) along one axis for TF/Keras "same" or "valid" padding."""
    if padding == "same":
        out = math.ceil(size / stride)
        total = max((out - 1) * stride + kernel - size, 0)
        return total // 2, total - total // 2, out
    if padding == "valid":
        out = (size - kernel) // stride + 1
        if out < 1:
            raise ValueError(f"a {kernel}-wide 'valid' window does not fit an input of {size}")
        return 0, 0, out
    raise ValueError(f"padding must be 'same' or 'valid'; got {padding!r}")


def _pads(in_hw, kernel, strides, padding):
    return [pad_amounts(in_hw[a], kernel[a], strides[a], padding) for a in (0, 1)]


def pad_input(x, in_hw, kernel, strides, padding):
    """x padded as the forward pads it (zeros)."""
    (hb, ha, _), (wb, wa, _) = _pads(in_hw, kernel, strides, padding)
    if hb == ha == wb == wa == 0:
        return x
    return tf.pad(x, [[0, 0], [hb, ha], [wb, wa], [0, 0]])


def window_taps(x_pad, out_hw, kernel_hw, strides) -> list:
    """x_pad[:, s_h i + dy, s_w j + dx, :] for every tap (dy, dx) of the window, row-major.

    Stride 1: plain slices. Stride s > 1: x_pad is cut or zero-padded once to s_h H_q rows and
    s_w W_q columns (H_q = H' + (k_h - 1) // s_h; rows past the last one a tap reads are never
    read) and split once into its s_h s_w phases P[a, b][q, r] = x_pad[s_h q + a, s_w r + b]
    (RESHAPE + SPLIT: contiguous copies); tap (dy, dx) is then the unit-stride slice
    P[dy % s_h, dx % s_w][dy // s_h + i, dx // s_w + j]. TFLite's STRIDED_SLICE at stride 2
    copies element by element (measured ~25x slower per element than these copies).
    """
    (ho, wo), (kh, kw), (sh, sw) = out_hw, kernel_hw, strides
    if (sh, sw) == (1, 1):
        return [x_pad[:, dy:dy + ho, dx:dx + wo, :] for dy in range(kh) for dx in range(kw)]
    hq, wq = ho + (kh - 1) // sh, wo + (kw - 1) // sw
    rows, cols = x_pad.shape[1], x_pad.shape[2]
    x_fit = x_pad[:, :min(rows, sh * hq), :min(cols, sw * wq), :]
    if rows < sh * hq or cols < sw * wq:
        x_fit = tf.pad(x_fit, [[0, 0], [0, max(sh * hq - rows, 0)], [0, max(sw * wq - cols, 0)], [0, 0]])
    c = x_pad.shape[-1]
    row_phases = tf.split(tf.reshape(x_fit, [-1, sh, sw * wq * c]), sh, axis=1)
    phases = [[tf.reshape(p, [-1, hq, wq, c]) for p in tf.split(tf.reshape(rp, [-1, sw, c]), sw, axis=1)]
              for rp in row_phases]
    return [phases[dy % sh][dx % sw][:, dy // sh:dy // sh + ho, dx // sw:dx // sw + wo, :]
            for dy in range(kh) for dx in range(kw)]


def conv2d_forward(x, kernel, bias, strides, padding):
    """z = conv(x, W) + b (TF semantics, so the converter emits one CONV_2D)."""
    return tf.nn.conv2d(x, kernel, list(strides), padding.upper()) + bias


def pointwise_matmul_forward(x, kernel, bias):
    """z = conv1x1(x, W) + b of a 1x1 stride-1 conv as one BATCH_MATMUL: [1, N H W, C_in] x
    [1, C_in, C_out] on the kernel as stored (HWIO). For a kernel read from a variable: CONV_2D needs
    the filter as [C_out, 1, 1, C_in], so the converter inserts a TRANSPOSE of the whole kernel at
    every call and the conv runs off the delegate; the BATCH_MATMUL reads it in place (measured
    ~1.5-2x faster on ai-edge-litert, about even on tflite-runtime 2.14,
    ``bench/results/VARIABLE_WEIGHT_FORWARD.md``)."""
    h, w, cin = x.shape[1], x.shape[2], x.shape[3]
    cout = kernel.shape[-1]
    z = tf.linalg.matmul(tf.reshape(x, [1, -1, cin]), tf.reshape(kernel, [1, cin, cout]))
    return tf.reshape(z, [-1, h, w, cout]) + bias


def depthwise_forward(x, kernel, bias, strides, padding):
    """z = depthwise_conv(x, W) + b (one DEPTHWISE_CONV_2D)."""
    return tf.nn.depthwise_conv2d(x, kernel, [1, strides[0], strides[1], 1], padding.upper()) + bias


def dense_forward(x, kernel, bias):
    """z = x W + b over the last axis (one FULLY_CONNECTED for rank-2 inputs)."""
    if len(x.shape) == 2:
        return tf.matmul(x, kernel) + bias
    return tf.tensordot(x, kernel, axes=1) + bias


def _dilate(d, out_hw, strides, channels: int):
    """Zero-insertion d[s i] = g[i] along H and W (RESHAPE + PAD only)."""
    (ho, wo), (sh, sw) = out_hw, strides
    if sh > 1:
        d = tf.reshape(d, [-1, ho, 1, wo * channels])
        d = tf.pad(d, [[0, 0], [0, 0], [0, sh - 1], [0, 0]])
        d = tf.reshape(d, [-1, ho * sh, wo, channels])[:, : (ho - 1) * sh + 1]
    rows = (ho - 1) * sh + 1
    if sw > 1:
        d = tf.reshape(d, [-1, wo, 1, channels])
        d = tf.pad(d, [[0, 0], [0, 0], [0, sw - 1], [0, 0]])
        d = tf.reshape(d, [-1, rows, wo * sw, channels])[:, :, : (wo - 1) * sw + 1]
    return d


def _full_correlation_input(g_z, in_hw, out_hw, kernel, strides, padding, channels: int):
    """The dilated, re-padded gradient whose VALID correlation with the flipped kernel is g_x."""
    (hb, _, _), (wb, _, _) = _pads(in_hw, kernel, strides, padding)
    d = _dilate(g_z, out_hw, strides, channels)
    (h, w), (kh, kw) = in_hw, kernel
    dh, dw = (out_hw[0] - 1) * strides[0] + 1, (out_hw[1] - 1) * strides[1] + 1
    top, left = kh - 1 - hb, kw - 1 - wb
    bottom, right = h + kh - 1 - top - dh, w + kw - 1 - left - dw
    d = tf.pad(d, [[0, 0], [max(top, 0), max(bottom, 0)], [max(left, 0), max(right, 0)], [0, 0]])
    if top < 0 or left < 0 or bottom < 0 or right < 0:
        t, lft = max(-top, 0), max(-left, 0)
        d = d[:, t:t + h + kh - 1, lft:lft + w + kw - 1, :]
    return d


def _flip(kernel):
    return tf.reverse(tf.reverse(kernel, [0]), [1])  # one axis per op: tflite-runtime 2.14 REVERSE_V2


def pointwise_input_grad_transposed(g_z, kernel, in_hw):
    """g_x of a 1x1 stride-1 conv whose kernel is read from a variable, as g_x^T = W g_z^T: one
    BATCH_MATMUL [1, C_in, C_out] x [1, N H W, C_out]^T with the kernel as stored (HWIO) on the left
    and the gradient adjoint on the right, then a TRANSPOSE of the [C_in, N H W] result.

    TFLite's BATCH_MATMUL lays out a non-adjoint right-hand side at every call and packs a
    non-constant FULLY_CONNECTED weight at every call; here the large operand (the kernel) needs
    neither, only the small one does. Measured (``bench/results/TRAIN_STEP_PROFILE.md``, single-op
    models, ai-edge-litert, 1 thread, batch 1): ~2x faster than FULLY_CONNECTED on the variable at
    EfficientNet-Lite0@128's 4x4 layers. Used when C_in >= H W (the kernel is larger than one
    sample's gradient)."""
    cin, cout = kernel.shape[2], kernel.shape[3]
    g_t = tf.linalg.matmul(tf.reshape(kernel, [1, cin, cout]), tf.reshape(g_z, [1, -1, cout]), adjoint_b=True)
    return tf.reshape(tf.transpose(tf.reshape(g_t, [cin, -1])), [-1, in_hw[0], in_hw[1], cin])


def conv2d_input_grad(g_z, kernel, in_hw, out_hw, kernel_hw, strides, padding, kernel_is_variable: bool = False):
    """g_x of a dense conv (module docstring); a 1x1 stride-1 conv is one FULLY_CONNECTED with W as
    stored, or (``kernel_is_variable`` and C_in >= H W) ``pointwise_input_grad_transposed``."""
    if tuple(kernel_hw) == (1, 1) and tuple(strides) == (1, 1):
        if kernel_is_variable and kernel.shape[2] >= in_hw[0] * in_hw[1]:
            return pointwise_input_grad_transposed(g_z, kernel, in_hw)
        # g_x[p, ci] = sum_o g_z[p, o] W[ci, o]: one FULLY_CONNECTED whose weights are W as stored
        # ([C_in, C_out] = [units, depth]), with no runtime transpose of the kernel
        cin, cout = kernel.shape[2], kernel.shape[3]
        g = tf.matmul(tf.reshape(g_z, [-1, cout]), tf.reshape(kernel, [cin, cout]), transpose_b=True)
        return tf.reshape(g, [-1, in_hw[0], in_hw[1], cin])
    cout = g_z.shape[-1]
    d = _full_correlation_input(g_z, in_hw, out_hw, kernel_hw, strides, padding, cout)
    return tf.nn.conv2d(d, tf.transpose(_flip(kernel), [0, 1, 3, 2]), 1, "VALID")


def depthwise_input_grad(g_z, kernel, in_hw, out_hw, kernel_hw, strides, padding):
    """g_x of a depthwise conv (module docstring)."""
    channels = g_z.shape[-1]
    d = _full_correlation_input(g_z, in_hw, out_hw, kernel_hw, strides, padding, channels)
    return tf.nn.depthwise_conv2d(d, _flip(kernel), [1, 1, 1, 1], "VALID")


def dense_input_grad(g_z, kernel):
    """g_x = g_z W^T."""
    if len(g_z.shape) == 2:
        return tf.matmul(g_z, kernel, transpose_b=True)
    return tf.tensordot(g_z, tf.transpose(kernel), axes=1)


def _im2col(x, in_hw, out_hw, kernel_hw, strides, padding):
    """[N*H'*W', kh*kw*C_in] patches, fan order (dy, dx, ci) (a 1x1 stride-1 conv: x itself)."""
    cin = x.shape[-1]
    if tuple(kernel_hw) == (1, 1) and tuple(strides) == (1, 1):
        return tf.reshape(x, [-1, cin])
    taps = window_taps(pad_input(x, in_hw, kernel_hw, strides, padding), out_hw, kernel_hw, strides)
    return tf.reshape(tf.concat(taps, axis=3), [-1, kernel_hw[0] * kernel_hw[1] * cin])


def conv2d_weight_grad(x, g_z, in_hw, out_hw, kernel_hw, strides, padding):
    """dW [kh, kw, C_in, C_out] and db [C_out] of every output channel: dW = cols^T g_z, no gather."""
    cin, cout = x.shape[-1], g_z.shape[-1]
    g_mat = tf.reshape(g_z, [-1, cout])
    cols = _im2col(x, in_hw, out_hw, kernel_hw, strides, padding)
    dw = tf.matmul(cols, g_mat, transpose_a=True)
    return tf.reshape(dw, [kernel_hw[0], kernel_hw[1], cin, cout]), tf.reduce_sum(g_mat, axis=0)


def depthwise_weight_grad(x, g_z, in_hw, out_hw, kernel_hw, strides, padding):
    """dW [kh, kw, C, 1] and db [C] of every channel (one reduction per tap, no gather)."""
    channels = g_z.shape[-1]
    db = tf.reduce_sum(g_z, axis=[0, 1, 2])
    x_pad = pad_input(x, in_hw, kernel_hw, strides, padding)
    taps = [tf.reduce_sum(tap * g_z, axis=[0, 1, 2]) for tap in window_taps(x_pad, out_hw, kernel_hw, strides)]
    return tf.reshape(tf.stack(taps, axis=0), [kernel_hw[0], kernel_hw[1], channels, 1]), db


def dense_weight_grad(x, g_z, kernel_shape):
    """dW [D_in, D_out] = x^T g_z and db [D_out] of every unit."""
    din, dout = kernel_shape
    g_mat = tf.reshape(g_z, [-1, dout])
    return tf.matmul(tf.reshape(x, [-1, din]), g_mat, transpose_a=True), tf.reduce_sum(g_mat, axis=0)


# ------------------------------------------------------------------ the family's registry entry
def _pre_activation(node: Node, x, kernel, bias, variables: bool = False):
    """z of a conv2d node; a 1x1 stride-1 conv whose kernel is read from a variable runs as one
    BATCH_MATMUL (``pointwise_matmul_forward``)."""
    a = node.attrs
    if variables and tuple(a["kernel"]) == (1, 1) and tuple(a["strides"]) == (1, 1):
        return pointwise_matmul_forward(x, kernel, bias)
    return conv2d_forward(x, kernel, bias, a["strides"], a["padding"])


def _conv_input_grad(node: Node, g_z, kernel, in_shape, kernel_is_variable: bool = False):
    a = node.attrs
    return conv2d_input_grad(g_z, kernel, in_shape[:2], node.shape[:2], a["kernel"], a["strides"], a["padding"],
                             kernel_is_variable=kernel_is_variable)


def _conv_weight_grad(node: Node, x, g_z, in_shape):
    a = node.attrs
    return conv2d_weight_grad(x, g_z, in_shape[:2], node.shape[:2], a["kernel"], a["strides"], a["padding"])


def _depthwise_input_grad(node: Node, g_z, kernel, in_shape, kernel_is_variable: bool = False):
    a = node.attrs
    return depthwise_input_grad(g_z, kernel, in_shape[:2], node.shape[:2], a["kernel"], a["strides"], a["padding"])


def _depthwise_weight_grad(node: Node, x, g_z, in_shape):
    a = node.attrs
    return depthwise_weight_grad(x, g_z, in_shape[:2], node.shape[:2], a["kernel"], a["strides"], a["padding"])


def _depthwise_layout(node: Node, kernel):
    kh, kw, c, m = kernel.shape
    return tf.reshape(kernel, [1, kh, kw, c * m])  # DEPTHWISE_CONV_2D [1, kh, kw, C]: the same bytes


def _geometry(node: Node, in_shape) -> tuple[int, int, int]:
    return int(node.attrs.get("kernel", (1, 1))[0]), int(node.attrs.get("strides", (1, 1))[0]), 1


def _depthwise_geometry(node: Node, in_shape) -> tuple[int, int, int]:
    kernel, stride, _ = _geometry(node, in_shape)
    return kernel, stride, int(in_shape[-1])


def frozen_settings(layer) -> list[str]:
    """The settings of a Conv2D / DepthwiseConv2D / SeparableConv2D that keep it from being read (it then runs
    frozen, named e.g. ``Conv2D with groups=4, dilation_rate=(2, 2)``)."""
    settings = []
    if int(getattr(layer, "groups", 1) or 1) != 1:
        settings.append(f"groups={layer.groups}")
    if int(getattr(layer, "depth_multiplier", 1) or 1) != 1:
        settings.append(f"depth_multiplier={layer.depth_multiplier}")
    if pair(layer.dilation_rate) != (1, 1):
        settings.append(f"dilation_rate={pair(layer.dilation_rate)}")
    kernel, strides = pair(layer.kernel_size), pair(layer.strides)
    if kernel[0] != kernel[1]:
        settings.append(f"a {kernel[0]}x{kernel[1]} kernel")
    if strides[0] != strides[1]:
        settings.append(f"strides={strides}")
    return settings


def add_conv_node(ctx: ReadContext, layer, op: str, x: str, shape, out_channels: int,
                  kernel: np.ndarray | None = None) -> str | None:
    """A conv-like Keras layer as one weighted IR node of kind ``op`` (and its activation); ``kernel``: the
    kernel in the kind's layout when the layer's own differs (e.g. a groups = channels Conv2D as depthwise)."""
    kernel_hw, strides = pair(layer.kernel_size), pair(layer.strides)
    if kernel_hw[0] != kernel_hw[1] or strides[0] != strides[1]:
        return None  # the layer table holds square kernels and strides; the layer stays frozen
    out_hw = [pad_amounts(shape[a], kernel_hw[a], strides[a], layer.padding)[2] for a in (0, 1)]
    kernel = f32(layer.kernel) if kernel is None else kernel
    bias = f32(layer.bias) if layer.use_bias else np.zeros(out_channels, np.float32)
    out = ctx.add(layer.name, op, [x], (*out_hw, out_channels), type(layer).__name__, weights=(kernel, bias),
                  attrs={"kernel": kernel_hw, "strides": strides, "padding": layer.padding, "activation": "linear",
                         "keras_output": layer.name})
    return ctx.activation_after(layer, out)


def read_conv2d(ctx: ReadContext, layer, inputs: list[str], shapes) -> str | None:
    """Conv2D (groups 1, dilation 1, square kernel and stride) -> conv2d."""
    if layer.groups != 1 or pair(layer.dilation_rate) != (1, 1) or len(shapes[0]) != 3:
        return None
    return add_conv_node(ctx, layer, "conv2d", inputs[0], shapes[0], int(layer.filters))


def read_depthwise(ctx: ReadContext, layer, inputs: list[str], shapes) -> str | None:
    """DepthwiseConv2D (depth multiplier 1, dilation 1, square kernel and stride) -> depthwise."""
    if layer.depth_multiplier != 1 or pair(layer.dilation_rate) != (1, 1) or len(shapes[0]) != 3:
        return None
    return add_conv_node(ctx, layer, "depthwise", inputs[0], shapes[0], shapes[0][2])


def read_separable(ctx: ReadContext, layer, inputs: list[str], shapes) -> str | None:
    """SeparableConv2D as two weighted nodes, both trainable: z = pointwise(depthwise(x, D), P) + b.

    The depthwise half ``<layer>_depthwise`` (kernel D [kh, kw, C, 1], a zero bias, linear, attribute
    ``separable``) computes u = depthwise(x, D); the pointwise half, named like the layer, is a 1x1
    conv2d (kernel P [1, 1, C, C_out], the layer's bias and activation). The extra depthwise bias b_u
    adds nothing the pointwise bias cannot express (P^T b_u) and starts at 0, so the pair computes the
    layer.
    """
    shape = shapes[0]
    if layer.depth_multiplier != 1 or pair(layer.dilation_rate) != (1, 1) or len(shape) != 3:
        return None
    kernel_hw, strides = pair(layer.kernel_size), pair(layer.strides)
    if kernel_hw[0] != kernel_hw[1] or strides[0] != strides[1]:
        return None
    out_hw = [pad_amounts(shape[a], kernel_hw[a], strides[a], layer.padding)[2] for a in (0, 1)]
    channels, cls = shape[2], type(layer).__name__
    depthwise = ctx.add(f"{layer.name}_depthwise", "depthwise", [inputs[0]], (*out_hw, channels), cls,
                        weights=(f32(layer.depthwise_kernel), np.zeros(channels, np.float32)),
                        attrs={"kernel": kernel_hw, "strides": strides, "padding": layer.padding,
                               "activation": "linear", "separable": layer.name})
    pointwise = f32(layer.pointwise_kernel)
    out_channels = pointwise.shape[-1]
    bias = f32(layer.bias) if layer.use_bias else np.zeros(out_channels, np.float32)
    out = ctx.add(layer.name, "conv2d", [depthwise], (*out_hw, out_channels), cls, weights=(pointwise, bias),
                  attrs={"kernel": (1, 1), "strides": (1, 1), "padding": "valid", "activation": "linear",
                         "keras_output": layer.name})
    return ctx.activation_after(layer, out)


def read_dense(ctx: ReadContext, layer, inputs: list[str], shapes) -> str | None:
    """Dense on a vector or an [H, W, C] map (over the last axis) -> dense."""
    shape = shapes[0]
    if len(shape) not in (1, 3):
        return None
    kernel = f32(layer.kernel)
    bias = f32(layer.bias) if layer.use_bias else np.zeros(kernel.shape[1], np.float32)
    out = ctx.add(layer.name, "dense", inputs, (*shape[:-1], kernel.shape[1]), type(layer).__name__,
                  weights=(kernel, bias), attrs={"activation": "linear", "keras_output": layer.name})
    return ctx.activation_after(layer, out)


SQUARE = "square kernel and stride, `same` (asymmetric at stride 2, as Keras pads) or `valid`"
FAMILY = OpFamily(
    __name__,
    kinds=(
        WeightedKind("conv2d", _pre_activation, _conv_input_grad, _conv_weight_grad, out_axis=3,
                     filter_layout=lambda node, kernel: tf.transpose(kernel, [3, 0, 1, 2]),  # CONV_2D OHWI
                     kernel_mask=lambda mask: mask, geometry=_geometry, role="conv"),
        WeightedKind("depthwise", lambda node, x, kernel, bias, variables=False: depthwise_forward(
                         x, kernel, bias, node.attrs["strides"], node.attrs["padding"]),
                     _depthwise_input_grad, _depthwise_weight_grad, out_axis=2,
                     filter_layout=_depthwise_layout, kernel_mask=lambda mask: tf.reshape(mask, [-1, 1]),
                     geometry=_depthwise_geometry, role="depthwise"),
        WeightedKind("dense", lambda node, x, kernel, bias, variables=False: dense_forward(x, kernel, bias),
                     lambda node, g_z, kernel, in_shape, kernel_is_variable=False: dense_input_grad(g_z, kernel),
                     lambda node, x, g_z, in_shape: dense_weight_grad(x, g_z, tuple(node.weights[0].shape)),
                     out_axis=1, filter_layout=lambda node, kernel: tf.transpose(kernel),  # [D_out, D_in]
                     kernel_mask=lambda mask: mask, geometry=_geometry, role="dense", head=True),
    ),
    layers=(
        LayerRule("Conv2D", read_conv2d, ("conv2d",), f"groups 1, dilation 1, {SQUARE}",
                  frozen_settings=frozen_settings),
        LayerRule("DepthwiseConv2D", read_depthwise, ("depthwise",), f"depth multiplier 1, dilation 1, {SQUARE}",
                  frozen_settings=frozen_settings),
        LayerRule("SeparableConv2D", read_separable, ("depthwise", "conv2d"),
                  f"depthwise and pointwise kernels both trainable; depth multiplier 1, dilation 1, {SQUARE}",
                  frozen_settings=frozen_settings),
        LayerRule("Dense", read_dense, ("dense",), "on a vector or over the channels of a feature map"),
    ),
)
