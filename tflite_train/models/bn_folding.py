"""Folding BatchNorm into the preceding convolution, for export.

In inference mode BatchNorm computes y = gamma * (z - mu) / sqrt(var + eps) + beta on the conv
output z = W * x. With the per-output-channel scale a_o = gamma_o / sqrt(var_o + eps) this is a
conv with weights W'[..., o] = a_o * W[..., o] and bias b'_o = beta_o - a_o * mu_o. For a
depthwise kernel of shape (k, k, C, 1) the output channel is axis 2; for a dense kernel of shape
(k, k, C_in, C_out) it is axis 3.
"""

from __future__ import annotations

import numpy as np

from tflite_train.models.keras_backbone import Backbone, build_backbone


def fold_batchnorm(backbone: Backbone) -> Backbone:
    """Returns an equivalent backbone without BatchNorm (conv weights scaled, biases added).

    The result computes the input backbone's inference-mode function (BatchNorm with its moving
    statistics) up to float rounding.

    Args:
      backbone: A backbone built with ``batch_norm=True``.

    Raises:
      ValueError: if ``backbone`` has no BatchNorm to fold.
    """
    if not backbone.batch_norm:
        raise ValueError(f"backbone {backbone.model.name!r} has no BatchNorm to fold")
    stem = backbone.table.layers[0]
    folded = build_backbone(
        backbone.config, stem.in_hw, stem.in_channels, batch_norm=False
    )
    for spec in backbone.table:
        kernel = backbone.model.get_layer(spec.name).get_weights()[0]
        bn = backbone.model.get_layer(f"{spec.name}_bn")
        gamma, beta, mean, var = bn.get_weights()
        scale = gamma / np.sqrt(var + bn.epsilon)
        if spec.is_depthwise:
            new_kernel = kernel * scale[None, None, :, None]
        else:
            new_kernel = kernel * scale[None, None, None, :]
        bias = beta - mean * scale
        folded.model.get_layer(spec.name).set_weights(
            [new_kernel.astype(np.float32), bias.astype(np.float32)]
        )
    return folded
