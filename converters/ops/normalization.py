"""LayerNormalization over the channels: forward and builtin-op backward; the family's registry entry
(``FAMILY``: LayerNormalization -> layer_norm; gamma and beta stay frozen).

Per position, over the D channels (means over the last axis, one MEAN each):

  mu = mean(x),  v = mean((x - mu)^2),  r = (v + eps)^(-1/2),  xhat = (x - mu) r,  y = xhat gamma + beta.

Backward (the forward keeps (xhat, r) as its ``z``):

  g_xhat = g_y gamma,  g_x = r (g_xhat - mean(g_xhat) - xhat mean(g_xhat xhat)).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import tensorflow as tf

from tflite_train.converters.ops.spec import LayerRule, OpFamily, OpKind, ReadContext, f32

if TYPE_CHECKING:
    from tflite_train.converters.graph.ir import Node

def layer_norm_forward(x, gamma, beta, epsilon: float):
    """((xhat, r), y) of LayerNormalization over the last axis (module docstring)."""
    centred = x - tf.reduce_mean(x, axis=-1, keepdims=True)
    r = tf.math.rsqrt(tf.reduce_mean(centred * centred, axis=-1, keepdims=True) + epsilon)
    xhat = centred * r
    return (xhat, r), xhat * gamma + beta


def layer_norm_backward(g_y, xhat, r, gamma):
    """g_x of LayerNormalization (module docstring)."""
    g_xhat = g_y * gamma
    mean_g = tf.reduce_mean(g_xhat, axis=-1, keepdims=True)
    mean_gx = tf.reduce_mean(g_xhat * xhat, axis=-1, keepdims=True)
    return r * (g_xhat - mean_g - xhat * mean_gx)


# ------------------------------------------------------------------ the family's registry entry
def read_layer_norm(ctx: ReadContext, layer, inputs: list[str], shapes) -> str | None:
    """LayerNormalization over the last axis only, without RMS scaling -> layer_norm."""
    shape = shapes[0]
    axes = [int(a) for a in (layer.axis if isinstance(layer.axis, (list, tuple)) else [layer.axis])]
    if getattr(layer, "rms_scaling", False) or [a % (len(shape) + 1) for a in axes] != [len(shape)]:
        return None
    channels = shape[-1]
    gamma = f32(layer.gamma) if layer.scale else np.ones(channels, np.float32)
    beta = f32(layer.beta) if layer.center else np.zeros(channels, np.float32)
    return ctx.add(layer.name, "layer_norm", inputs, shape, "LayerNormalization", weights=(gamma, beta),
                   attrs={"epsilon": float(layer.epsilon)})


def _forward(node: Node, xs):
    return layer_norm_forward(xs[0], *node.weights, node.attrs["epsilon"])


def _backward(node: Node, xs, z, y, g_y, in_shapes):
    xhat, r = z
    return [layer_norm_backward(g_y, xhat, r, node.weights[0])]


FAMILY = OpFamily(
    __name__,
    kinds=(OpKind("layer_norm", _forward, _backward),),
    layers=(LayerRule("LayerNormalization", read_layer_norm, ("layer_norm",),
                      "over the channels (last axis), gamma and beta frozen; not rms_scaling"),),
)
