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
from tflite_train.models.weights_card import WeightsCard, card_path, read_weights_card

__all__ = [
    "BACKBONES",
    "PAPER_BACKBONES",
    "Backbone",
    "BackboneConfig",
    "BlockConfig",
    "WeightsCard",
    "build_backbone",
    "build_layer_table",
    "card_path",
    "conv_layers",
    "fold_batchnorm",
    "get_config",
    "read_weights_card",
]
