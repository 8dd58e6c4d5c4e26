"""Small bring-your-own models whose trainable top holds SeparableConv2D or Concatenate layers (32 px,
random weights, BatchNorm not calibrated), shared by the export tests."""

from __future__ import annotations

import keras


def separable_cnn(size: int = 32, widths: tuple[int, ...] = (32,)) -> keras.Model:
    """Xception-style: a conv stem, per width a stage of two SeparableConv2D/BN (ReLU between) and a max-pool added
    to a 1x1 stride-2 projection, a separable head with ReLU, global pooling, a classifier."""
    keras.utils.set_random_seed(0)
    x = inputs = keras.Input((size, size, 3))
    x = keras.layers.Conv2D(16, 3, strides=2, padding="same", name="stem")(x)
    x = keras.layers.BatchNormalization(name="stem_bn")(x)
    x = keras.layers.ReLU(name="stem_relu")(x)
    for k, width in enumerate(widths):
        shortcut = keras.layers.Conv2D(width, 1, strides=2, padding="same", name=f"s{k}_proj")(x)
        shortcut = keras.layers.BatchNormalization(name=f"s{k}_proj_bn")(shortcut)
        y = keras.layers.SeparableConv2D(width, 3, padding="same", name=f"s{k}_sep1")(x)
        y = keras.layers.BatchNormalization(name=f"s{k}_sep1_bn")(y)
        y = keras.layers.ReLU(name=f"s{k}_sep1_relu")(y)
        y = keras.layers.SeparableConv2D(width, 3, padding="same", name=f"s{k}_sep2")(y)
        y = keras.layers.BatchNormalization(name=f"s{k}_sep2_bn")(y)
        y = keras.layers.MaxPooling2D(3, strides=2, padding="same", name=f"s{k}_pool")(y)
        x = keras.layers.Add(name=f"s{k}_add")([shortcut, y])
    x = keras.layers.SeparableConv2D(96, 3, padding="same", activation="relu", name="head_sep")(x)
    x = keras.layers.GlobalAveragePooling2D(name="gap")(x)
    return keras.Model(inputs, keras.layers.Dense(10, name="cls")(x))


def dense_cnn(size: int = 32, growth: int = 8) -> keras.Model:
    """DenseNet-style: a stem, two dense blocks (two layers, then one) of BN-ReLU-conv1x1-BN-ReLU-conv3x3
    whose output is concatenated to its input, a BN-ReLU-conv1x1-avgpool transition, a final BN-ReLU."""
    keras.utils.set_random_seed(0)
    x = inputs = keras.Input((size, size, 3))
    x = keras.layers.Conv2D(16, 3, strides=2, padding="same", use_bias=False, name="stem")(x)
    for b, depth in enumerate((2, 1)):
        for k in range(depth):
            name = f"b{b}_l{k}"
            y = keras.layers.BatchNormalization(name=f"{name}_bn0")(x)
            y = keras.layers.ReLU(name=f"{name}_relu0")(y)
            y = keras.layers.Conv2D(2 * growth, 1, use_bias=False, name=f"{name}_conv1")(y)
            y = keras.layers.BatchNormalization(name=f"{name}_bn1")(y)
            y = keras.layers.ReLU(name=f"{name}_relu1")(y)
            y = keras.layers.Conv2D(growth, 3, padding="same", use_bias=False, name=f"{name}_conv2")(y)
            x = keras.layers.Concatenate(name=f"{name}_concat")([x, y])
        if b == 0:
            x = keras.layers.BatchNormalization(name="t_bn")(x)
            x = keras.layers.ReLU(name="t_relu")(x)
            x = keras.layers.Conv2D(x.shape[-1] // 2, 1, use_bias=False, name="t_conv")(x)
            x = keras.layers.AveragePooling2D(2, name="t_pool")(x)
    x = keras.layers.BatchNormalization(name="final_bn")(x)
    x = keras.layers.ReLU(name="final_relu")(x)
    x = keras.layers.GlobalAveragePooling2D(name="gap")(x)
    return keras.Model(inputs, keras.layers.Dense(10, name="cls")(x))


def grouped_cnn(size: int = 32, groups: int = 4) -> keras.Model:
    """ResNeXt-style: a stem, two bottleneck blocks (1x1 conv, 3x3 grouped conv with ``groups`` groups,
    1x1 conv, each with BN; a residual add, ReLU after it), global pooling, a classifier."""
    keras.utils.set_random_seed(0)
    x = inputs = keras.Input((size, size, 3))
    x = keras.layers.Conv2D(32, 3, strides=2, padding="same", name="stem")(x)
    x = keras.layers.BatchNormalization(name="stem_bn")(x)
    x = keras.layers.ReLU(name="stem_relu")(x)
    for k, stride in enumerate((1, 2)):
        y = keras.layers.Conv2D(32, 1, name=f"b{k}_reduce")(x)
        y = keras.layers.BatchNormalization(name=f"b{k}_reduce_bn")(y)
        y = keras.layers.ReLU(name=f"b{k}_reduce_relu")(y)
        y = keras.layers.Conv2D(32, 3, strides=stride, padding="same", groups=groups, name=f"b{k}_grouped")(y)
        y = keras.layers.BatchNormalization(name=f"b{k}_grouped_bn")(y)
        y = keras.layers.ReLU(name=f"b{k}_grouped_relu")(y)
        y = keras.layers.Conv2D(32, 1, name=f"b{k}_expand")(y)
        y = keras.layers.BatchNormalization(name=f"b{k}_expand_bn")(y)
        shortcut = x if stride == 1 else keras.layers.AveragePooling2D(2, name=f"b{k}_down")(x)
        x = keras.layers.ReLU(name=f"b{k}_out")(keras.layers.Add(name=f"b{k}_add")([shortcut, y]))
    x = keras.layers.GlobalAveragePooling2D(name="gap")(x)
    return keras.Model(inputs, keras.layers.Dense(10, name="cls")(x))


def convnext_cnn(size: int = 32, width: int = 32, depth: int = 2) -> keras.Model:
    """ConvNeXt-style: a 4x4 stride-4 patchify stem with LayerNormalization, ``depth`` blocks of
    7x7 depthwise conv, LayerNormalization, Dense 4x (GELU), Dense back, residual add; global pooling,
    LayerNormalization, a classifier (the head's LayerNormalization is dropped with it)."""
    keras.utils.set_random_seed(0)
    x = inputs = keras.Input((size, size, 3))
    x = keras.layers.Conv2D(width, 4, strides=4, name="stem")(x)
    x = keras.layers.LayerNormalization(epsilon=1e-6, name="stem_ln")(x)
    for k in range(depth):
        y = keras.layers.DepthwiseConv2D(7, padding="same", name=f"b{k}_dw")(x)
        y = keras.layers.LayerNormalization(epsilon=1e-6, name=f"b{k}_ln")(y)
        y = keras.layers.Dense(4 * width, name=f"b{k}_pw1")(y)
        y = keras.layers.Activation("gelu", name=f"b{k}_gelu")(y)
        y = keras.layers.Dense(width, name=f"b{k}_pw2")(y)
        x = keras.layers.Add(name=f"b{k}_add")([x, y])
    x = keras.layers.GlobalAveragePooling2D(name="gap")(x)
    x = keras.layers.LayerNormalization(epsilon=1e-6, name="head_ln")(x)
    return keras.Model(inputs, keras.layers.Dense(10, name="cls")(x))
