"""Keras 3 functional backbones built from the plain-data layer table.

The Keras model is generated layer by layer from :func:`build_layer_table`, so the conv names, the
order and the shapes of the model and of its table agree by construction. Convs carry the table's
names (``stem``, ``b07_expand``, ...); their BatchNorm layers are ``<name>_bn`` and their ReLU6
layers ``<name>_relu6``; residual adds are ``bNN_add``; the output is the pooled embedding
(``embedding``), of width ``config.feature_dim``.
"""

from __future__ import annotations

import dataclasses

import keras

from tflite_train.architectures import BackboneConfig, build_layer_table, get_config
from tflite_train.sparse.layer_table import LayerSpec, LayerTable


def he_normal(spec: LayerSpec, seed: int | None = None) -> keras.initializers.Initializer:
    """He initialisation, Var(w) = 2 / fan_in, with the true fan-in k^2 * C_in / groups of ``spec``.

    Keras' ``HeNormal`` derives fan_in from the kernel shape, which for a DepthwiseConv2D kernel
    (k, k, C, 1) gives k^2 * C although each output channel sees only k^2 inputs: its variance is C
    times too small, and through 14-20 blocks the random-init embeddings shrink to norm ~1e-6. The
    scale below corrects that (it is 1 for dense convs).
    """
    shape_fan_in = spec.kernel * spec.kernel * spec.in_channels
    return keras.initializers.VarianceScaling(
        scale=2.0 * shape_fan_in / spec.fan_in, mode="fan_in", distribution="truncated_normal", seed=seed
    )


@dataclasses.dataclass(frozen=True)
class Backbone:
    """A Keras backbone together with its configuration and layer table.

    Attributes:
      config: The architecture configuration.
      table: The ordered conv layers (plain data, see ``LayerTable``).
      model: Keras model mapping NHWC float32 images to ``config.feature_dim`` embeddings.
      batch_norm: True for the training form (conv -> BN), False for the folded form (conv + bias).
    """

    config: BackboneConfig
    table: LayerTable
    model: keras.Model
    batch_norm: bool

    @property
    def input_shape(self) -> tuple[int, int, int]:
        """(H, W, C) of one input image."""
        stem = self.table.layers[0]
        return (stem.in_hw[0], stem.in_hw[1], stem.in_channels)


def build_backbone(
    backbone: str | BackboneConfig,
    input_size: int | tuple[int, int] = 128,
    in_channels: int = 3,
    *,
    batch_norm: bool = True,
    seed: int | None = None,
) -> Backbone:
    """Builds a backbone as a Keras functional model.

    Args:
      backbone: ``"mcunet"``, ``"mbv2"``, ``"proxyless"``, ``"tiny"``, or a config.
      input_size: Input H = W (int) or (H, W).
      in_channels: Image channels.
      batch_norm: Conv -> BatchNorm (no conv bias) when True; conv with bias when False (the form
        that :func:`~tflite_train.models.bn_folding.fold_batchnorm` fills and the exporter uses).
      seed: Seed for the weight initialisers (reproducible builds).

    Raises:
      ValueError: unknown backbone, input size the net cannot take, in_channels <= 0.
    """
    config = backbone if isinstance(backbone, BackboneConfig) else get_config(backbone)
    table = build_layer_table(config, input_size, in_channels)
    stem = table.layers[0]
    inputs = keras.Input(shape=(stem.in_hw[0], stem.in_hw[1], in_channels), name="image")
    seeds = iter(range(0 if seed is None else seed, 10**9))

    def conv(x, spec: LayerSpec):
        init = he_normal(spec, seed=None if seed is None else next(seeds))
        common = dict(strides=spec.stride, padding="same", use_bias=not batch_norm, name=spec.name)
        if spec.is_depthwise:
            x = keras.layers.DepthwiseConv2D(spec.kernel, depthwise_initializer=init, **common)(x)
        else:
            x = keras.layers.Conv2D(spec.out_channels, spec.kernel, kernel_initializer=init, **common)(x)
        if batch_norm:
            x = keras.layers.BatchNormalization(
                epsilon=config.bn_epsilon, momentum=config.bn_momentum, name=f"{spec.name}_bn"
            )(x)
        if spec.activation == "relu6":
            x = keras.layers.ReLU(max_value=6.0, name=f"{spec.name}_relu6")(x)
        return x

    by_block: dict[int, list[LayerSpec]] = {}
    for spec in table:
        by_block.setdefault(spec.block, []).append(spec)
    x = conv(inputs, table.layers[0])
    for b, block in enumerate(config.blocks):
        block_input = x
        for spec in by_block[b]:
            x = conv(x, spec)
        if block.residual:
            x = keras.layers.Add(name=f"b{b:02d}_add")([block_input, x])
    for spec in by_block.get(len(config.blocks), []):
        x = conv(x, spec)
    outputs = keras.layers.GlobalAveragePooling2D(name="embedding")(x)
    model = keras.Model(inputs, outputs, name=f"{config.name}_{'bn' if batch_norm else 'folded'}")
    return Backbone(config=config, table=table, model=model, batch_norm=batch_norm)


def conv_layers(backbone: Backbone) -> list[keras.layers.Layer]:
    """The Keras conv layers of a backbone, in layer-table order."""
    return [backbone.model.get_layer(name) for name in backbone.table.names]
