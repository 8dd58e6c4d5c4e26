"""Keras 3 backbones (MCUNet-5FPS, MobileNetV2-w0.35, ProxylessNAS-w0.3, tiny; EfficientNet-Lite0 with
ImageNet weights read without torch) and BN folding."""

from tflite_train.architectures import (
    BACKBONES,
    PAPER_BACKBONES,
    PRETRAINED_BACKBONES,
    BackboneConfig,
    BlockConfig,
    build_layer_table,
    get_config,
)
from tflite_train.models.bn_folding import fold_batchnorm
from tflite_train.models.efficientnet_lite import (
    WeightsError,
    assign_torch_state_dict,
    block_output_layer,
    build_efficientnet_lite0,
    efficientnet_lite0,
    imagenet_weights_path,
    split_lite0,
)
from tflite_train.models.lite0_meta import (
    efficientnet_lite0_meta,
    lite0_model,
    load_meta_weights,
    save_meta_weights,
)
from tflite_train.models.keras_backbone import Backbone, build_backbone, conv_layers
from tflite_train.models.torch_pickle import TorchPickleError, UnsafePickleError, load_torch_pickle

__all__ = [
    "BACKBONES",
    "PAPER_BACKBONES",
    "PRETRAINED_BACKBONES",
    "Backbone",
    "BackboneConfig",
    "BlockConfig",
    "TorchPickleError",
    "UnsafePickleError",
    "WeightsError",
    "assign_torch_state_dict",
    "build_backbone",
    "block_output_layer",
    "build_efficientnet_lite0",
    "build_layer_table",
    "conv_layers",
    "efficientnet_lite0",
    "efficientnet_lite0_meta",
    "lite0_model",
    "load_meta_weights",
    "save_meta_weights",
    "split_lite0",
    "fold_batchnorm",
    "get_config",
    "imagenet_weights_path",
    "load_torch_pickle",
]
