"""Keras 3 backbones (MCUNet-5FPS, MobileNetV2-w0.35, ProxylessNAS-w0.3, tiny) and BN folding."""

from tflite_train.architectures import (
    BACKBONES,
    PAPER_BACKBONES,
    BackboneConfig,
    BlockConfig,
    build_layer_table,
    get_config,
)
from tflite_train.models.bn_folding import fold_batchnorm
from tflite_train.models.keras_backbone import Backbone, build_backbone, conv_layers

__all__ = [
    "BACKBONES",
    "PAPER_BACKBONES",
    "Backbone",
    "BackboneConfig",
    "BlockConfig",
    "build_backbone",
    "build_layer_table",
    "conv_layers",
    "fold_batchnorm",
    "get_config",
]
