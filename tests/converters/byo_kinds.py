"""Small bring-your-own Keras models of the kinds users bring (issue 40), one builder per kind, used by
``test_byo_kinds`` (export here, then verify, adapt and predict in the Pi env).

Each is seeded, random weights, BatchNorm uncalibrated, a 10-class classifier on top, inputs of about 32 px so
that an export takes seconds. ``KINDS`` maps a kind to its builder; ``HEADS`` are the pooling kinds and head
shapes whose embedding the exporter must find (name -> (builder, the Keras layer that is the embedding)).
"""

from __future__ import annotations

from collections.abc import Callable

import keras

L = keras.layers


def _conv_bn(x, filters: int, name: str, kernel: int = 3, strides: int = 1, **kwargs):
    x = L.Conv2D(filters, kernel, strides=strides, padding="same", name=name, **kwargs)(x)
    x = L.BatchNormalization(name=f"{name}_bn")(x)
    return L.ReLU(name=f"{name}_relu")(x)


def _two_stages(x, widths: tuple[int, int] = (8, 16)):
    """conv0 and conv1: two stride-2 3x3 conv/BN/ReLU stages."""
    return _conv_bn(_conv_bn(x, widths[0], "conv0", strides=2), widths[1], "conv1", strides=2)


def _classifier(inputs, x, name: str, activation: str | None = None) -> keras.Model:
    """The usual top: global average pooling "gap", a 10-class Dense "cls"."""
    x = L.GlobalAveragePooling2D(name="gap")(x)
    return keras.Model(inputs, L.Dense(10, activation=activation, name="cls")(x), name=name)


def sequential() -> keras.Model:
    """A keras.Sequential CNN: two conv/ReLU/max-pool stages, Flatten, a Dense chain (hidden, dropout, logits)."""
    keras.utils.set_random_seed(0)
    return keras.Sequential([
        keras.Input((32, 32, 3)),
        L.Conv2D(8, 3, padding="same", activation="relu", name="conv0"), L.MaxPooling2D(name="pool0"),
        L.Conv2D(16, 3, padding="same", activation="relu", name="conv1"), L.MaxPooling2D(name="pool1"),
        L.Flatten(name="flatten"), L.Dense(32, activation="relu", name="hidden"), L.Dropout(0.2, name="drop"),
        L.Dense(10, name="logits"),
    ], name="sequential_kind")


def grayscale() -> keras.Model:
    """An MNIST-style 28x28x1 CNN (the device converts RGB images to one channel)."""
    keras.utils.set_random_seed(0)
    inputs = keras.Input((28, 28, 1))
    return _classifier(inputs, _two_stages(inputs), "grayscale_kind", activation="softmax")


def non_square() -> keras.Model:
    """A 24x40 (landscape) input."""
    keras.utils.set_random_seed(0)
    inputs = keras.Input((24, 40, 3))
    return _classifier(inputs, _two_stages(inputs), "non_square_kind")


def dilated() -> keras.Model:
    """A dilated (atrous) 3x3 conv in the middle (frozen: it has no on-device gradient), plain convs above."""
    keras.utils.set_random_seed(0)
    x = inputs = keras.Input((32, 32, 3))
    x = _conv_bn(x, 8, "conv0", strides=2)
    x = _conv_bn(x, 16, "atrous", dilation_rate=2)
    x = _conv_bn(x, 16, "conv1", strides=2)
    return _classifier(inputs, _conv_bn(x, 32, "conv2"), "dilated_kind")


def depth_multiplier() -> keras.Model:
    """A DepthwiseConv2D with depth_multiplier=2 (frozen), then a MobileNet-style depthwise-separable top."""
    keras.utils.set_random_seed(0)
    x = inputs = keras.Input((32, 32, 3))
    x = _conv_bn(x, 8, "stem", strides=2)
    x = L.DepthwiseConv2D(3, padding="same", depth_multiplier=2, name="dw_x2")(x)
    x = L.ReLU(name="dw_x2_relu")(x)
    x = L.DepthwiseConv2D(3, strides=2, padding="same", activation="relu", name="dw")(x)
    return _classifier(inputs, _conv_bn(x, 32, "pw", kernel=1), "depth_multiplier_kind")


def squeeze_excite() -> keras.Model:
    """A conv stage with a squeeze-and-excite gate (keepdims pooling, two 1x1 convs, sigmoid, multiply)."""
    keras.utils.set_random_seed(0)
    x = inputs = keras.Input((32, 32, 3))
    x = _conv_bn(x, 16, "conv0", strides=2)
    x = _conv_bn(x, 32, "conv1", strides=2)
    s = L.GlobalAveragePooling2D(keepdims=True, name="se_pool")(x)
    s = L.Conv2D(8, 1, activation="relu", name="se_reduce")(s)
    s = L.Conv2D(32, 1, activation="sigmoid", name="se_expand")(s)
    x = L.Multiply(name="se_gate")([x, s])
    return _classifier(inputs, _conv_bn(x, 32, "conv2"), "squeeze_excite_kind")


def preprocessing_inside() -> keras.Model:
    """Data augmentation (RandomFlip, RandomRotation: identities at inference) then Rescaling and Normalization
    at the input (absorbed into the input spec: the device feeds 0..255)."""
    keras.utils.set_random_seed(0)
    x = inputs = keras.Input((32, 32, 3))
    x = L.RandomFlip("horizontal", name="flip")(x)
    x = L.RandomRotation(0.1, name="rotate")(x)
    x = L.Rescaling(1 / 255.0, name="rescale")(x)
    x = L.Normalization(mean=[0.5, 0.4, 0.3], variance=[0.04, 0.05, 0.06], name="norm")(x)
    return _classifier(inputs, _two_stages(x), "preprocessing_kind")


def concat_branches() -> keras.Model:
    """An Inception-style module: 1x1, 3x3 and pooled branches joined by Concatenate, a conv above."""
    keras.utils.set_random_seed(0)
    x = inputs = keras.Input((32, 32, 3))
    x = _conv_bn(x, 16, "stem", strides=2)
    a = _conv_bn(x, 8, "branch_1x1", kernel=1)
    b = _conv_bn(x, 8, "branch_3x3")
    c = L.MaxPooling2D(3, strides=1, padding="same", name="branch_pool")(x)
    c = _conv_bn(c, 8, "branch_pool_proj", kernel=1)
    x = L.Concatenate(name="mixed")([a, b, c])
    return _classifier(inputs, _conv_bn(x, 32, "top", strides=2), "concat_kind")


def padding_cropping() -> keras.Model:
    """ZeroPadding2D before a valid conv, Cropping2D after one."""
    keras.utils.set_random_seed(0)
    x = inputs = keras.Input((32, 32, 3))
    x = L.ZeroPadding2D(1, name="pad")(x)
    x = L.Conv2D(8, 3, strides=2, activation="relu", name="conv0")(x)
    x = L.Conv2D(16, 3, padding="same", activation="relu", name="conv1")(x)
    x = L.Cropping2D(((1, 1), (2, 2)), name="crop")(x)
    x = L.ZeroPadding2D(((0, 1), (0, 1)), name="pad2")(x)
    return _classifier(inputs, L.Conv2D(32, 3, strides=2, activation="relu", name="conv2")(x), "padding_kind")


def upsampling() -> keras.Model:
    """An encoder-decoder: two stride-2 convs down, UpSampling2D back up, a conv on the upsampled map."""
    keras.utils.set_random_seed(0)
    x = inputs = keras.Input((32, 32, 3))
    x = _conv_bn(x, 8, "down0", strides=2)
    x = _conv_bn(x, 16, "down1", strides=2)
    x = L.UpSampling2D(2, name="up")(x)
    return _classifier(inputs, _conv_bn(x, 16, "up_conv"), "upsampling_kind")


def max_pooled() -> keras.Model:
    """A classifier on GlobalMaxPooling2D (its embedding is the max-pooled map, not the logits)."""
    keras.utils.set_random_seed(0)
    inputs = keras.Input((32, 32, 3))
    x = L.GlobalMaxPooling2D(name="gmp")(_two_stages(inputs))
    return keras.Model(inputs, L.Dense(10, name="cls")(x), name="max_pooled_kind")


def _pooled_head(pool: str, keepdims: bool, head: str) -> Callable[[], keras.Model]:
    """Builder: two convs, a global ``pool`` ("avg" or "max") with ``keepdims``, then ``head``: "dense" (one
    Dense), "dense_chain" (Dense-ReLU-Dropout-Dense-softmax), "conv1x1" (MobileNetV3's 1x1 convs on the kept
    1x1 map, Flatten; keepdims only) or "none" (the pooling is the output)."""
    def build() -> keras.Model:
        keras.utils.set_random_seed(0)
        inputs = keras.Input((32, 32, 3))
        layer = L.GlobalAveragePooling2D if pool == "avg" else L.GlobalMaxPooling2D
        x = layer(keepdims=keepdims, name="pool")(_two_stages(inputs))
        if head == "dense":
            x = L.Dense(10, name="cls")(x)
        elif head == "dense_chain":
            x = L.Dense(24, activation="relu", name="hidden")(x)
            x = L.Dropout(0.3, name="drop")(x)
            x = L.Dense(10, activation="softmax", name="cls")(x)
        elif head == "conv1x1":
            x = L.Conv2D(24, 1, activation="hard_swish", name="head_conv")(x)
            x = L.Dropout(0.3, name="drop")(x)
            x = L.Conv2D(10, 1, name="logits")(x)
            x = L.Flatten(name="flatten")(x)
            x = L.Activation("softmax", name="softmax")(x)
        return keras.Model(inputs, x, name=f"{pool}_{'keep' if keepdims else 'flat'}_{head}")
    return build


def flatten_dense_chain() -> keras.Model:
    """No pooling: Flatten of the last map, a Dense chain."""
    keras.utils.set_random_seed(0)
    inputs = keras.Input((32, 32, 3))
    x = L.Flatten(name="flatten")(_two_stages(inputs, (8, 8)))
    x = L.Dense(16, activation="relu", name="hidden")(x)
    return keras.Model(inputs, L.Dense(10, name="cls")(x), name="flatten_dense_chain")


def reshape_dense_chain() -> keras.Model:
    """Neither pooling nor Flatten: a Reshape to a vector, then a Dense chain (its input is the embedding)."""
    keras.utils.set_random_seed(0)
    inputs = keras.Input((32, 32, 3))
    x = L.Reshape((8 * 8 * 8,), name="vector")(_two_stages(inputs, (8, 8)))
    x = L.Dense(16, activation="relu", name="hidden")(x)
    x = L.Dropout(0.1, name="drop")(x)
    return keras.Model(inputs, L.Dense(10, activation="softmax", name="cls")(x), name="reshape_dense_chain")


def two_outputs() -> keras.Model:
    """A classifier and an auxiliary head on the same pooled features: two outputs."""
    keras.utils.set_random_seed(0)
    inputs = keras.Input((32, 32, 3))
    x = L.GlobalAveragePooling2D(name="gap")(_two_stages(inputs))
    return keras.Model(inputs, [L.Dense(10, name="logits")(x), L.Dense(4, name="aux")(x)], name="two_outputs")


KINDS: dict[str, Callable[[], keras.Model]] = {
    "sequential": sequential,
    "grayscale": grayscale,
    "non_square": non_square,
    "dilated": dilated,
    "depth_multiplier": depth_multiplier,
    "squeeze_excite": squeeze_excite,
    "preprocessing": preprocessing_inside,
    "concat": concat_branches,
    "padding_cropping": padding_cropping,
    "upsampling": upsampling,
    "max_pooled": max_pooled,
}
"""Kind -> builder of the models every default must serve: exported with no flags, they train a layer."""

HEADS: dict[str, tuple[Callable[[], keras.Model], str]] = {
    **{f"{pool}_{'keep' if keep else 'flat'}_{head}": (_pooled_head(pool, keep, head), "pool")
       for pool in ("avg", "max") for keep in (False, True) for head in ("dense", "dense_chain", "none")},
    **{f"{pool}_keep_conv1x1": (_pooled_head(pool, True, "conv1x1"), "pool") for pool in ("avg", "max")},
    "flatten_dense_chain": (flatten_dense_chain, "flatten"),
    "reshape_dense_chain": (reshape_dense_chain, "vector"),
    "sequential": (sequential, "flatten"),
}
"""Pooling kind and head shape -> (builder, the Keras layer whose output must be the embedding)."""
