"""Preprocessing that lives outside a Keras network: the ``keras.applications`` modes as export presets,
and the warning for a known family exported without the preprocessing it expects.

``keras.applications`` models of most families take raw 0..255 RGB pixels through a separate
``preprocess_input`` (``keras.applications.imagenet_utils``), one of three modes:

* ``caffe`` (ResNet50/101/152, VGG16/19): RGB -> BGR, then subtract the ImageNet mean pixel (BGR
  order), no scaling;
* ``tf`` (MobileNet, MobileNetV2, ResNetV2, Xception, InceptionV3, InceptionResNetV2, NASNet):
  x / 127.5 - 1;
* ``torch`` (DenseNet): x / 255, then the ImageNet mean/std per channel.

The exporter cannot see that function in the model, so without flags such a model is exported as
taking [0, 1] with the identity normalisation and computes garbage on the device's images. A preset
(``export --preprocessing MODE``, :func:`preset_fields`) states the same thing in export terms: the
device feeds 0..255 RGB (metadata ``input.range``), the graph reverses the channels for ``caffe``
(``input.channel_order``) and normalises (x - mean) / std with the mode's constants (in the
network's channel order). EfficientNet(V2), ConvNeXt and MobileNetV3 carry their preprocessing as
layers, which the exporter absorbs into the input spec by itself.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from typing import Any

from tflite_train import contract as C
from tflite_train.converters.export_config import ExportConfig

__all__ = ["CAFFE", "TF", "TORCH", "PRESETS", "Preset", "KerasFamily", "KERAS_FAMILIES", "preset_fields",
           "keras_family", "uses_preprocessing_fields", "missing_preprocessing_warning", "warn_missing_preprocessing"]

LOG = logging.getLogger(__name__)

CAFFE, TF, TORCH = "caffe", "tf", "torch"
"""The ``keras.applications.imagenet_utils.preprocess_input`` modes (the preset names)."""


@dataclasses.dataclass(frozen=True)
class Preset:
    """One preprocessing mode in ``ExportConfig`` terms.

    Attributes:
      input_range: (low, high) of the pixels the device feeds.
      mean, std: Per-channel (x - mean) / std, in the network's channel order.
      channel_order: ``contract.CHANNEL_ORDER_RGB`` or ``CHANNEL_ORDER_BGR``.
      summary: A few words for messages, e.g. "BGR, mean-subtracted 0..255".
    """

    input_range: tuple[float, float]
    mean: tuple[float, ...]
    std: tuple[float, ...]
    channel_order: str
    summary: str


_IMAGENET_MEAN = (0.485, 0.456, 0.406)
_IMAGENET_STD = (0.229, 0.224, 0.225)

PRESETS: dict[str, Preset] = {
    CAFFE: Preset((0.0, 255.0), (103.939, 116.779, 123.68), (1.0, 1.0, 1.0), C.CHANNEL_ORDER_BGR,
                  "BGR, mean-subtracted 0..255"),
    TF: Preset((0.0, 255.0), (127.5,) * 3, (127.5,) * 3, C.CHANNEL_ORDER_RGB, "0..255 scaled to [-1, 1]"),
    TORCH: Preset((0.0, 255.0), tuple(round(255.0 * m, 6) for m in _IMAGENET_MEAN),
                  tuple(round(255.0 * s, 6) for s in _IMAGENET_STD), C.CHANNEL_ORDER_RGB,
                  "0..255 scaled to [0, 1], then the ImageNet mean/std"),
}
"""Preset name -> its fields. All take 0..255 RGB, as ``preprocess_input`` does (``torch``: 255 x the
ImageNet mean and std, i.e. x / 255 then (x - m) / s)."""


@dataclasses.dataclass(frozen=True)
class KerasFamily:
    """A ``keras.applications`` family whose preprocessing is outside the model.

    Attributes:
      pattern: Regular expression the model's name matches in full (case-insensitive).
      name: The family as Keras names its constructor, e.g. "ResNet50"; ``{0}`` is replaced by the
        pattern's first group.
      preset: The preprocessing mode it expects (a key of ``PRESETS``).
    """

    pattern: str
    name: str
    preset: str


KERAS_FAMILIES: tuple[KerasFamily, ...] = (
    KerasFamily(r"resnet(50|101|152)", "ResNet{0}", CAFFE),
    KerasFamily(r"resnet(50|101|152)v2", "ResNet{0}V2", TF),
    KerasFamily(r"vgg(16|19)", "VGG{0}", CAFFE),
    KerasFamily(r"mobilenet_\d+\.\d+_\d+", "MobileNet", TF),
    KerasFamily(r"mobilenetv2_\d+\.\d+_\d+", "MobileNetV2", TF),
    KerasFamily(r"densenet(121|169|201)?", "DenseNet{0}", TORCH),
    KerasFamily(r"xception", "Xception", TF),
    KerasFamily(r"inception_v3", "InceptionV3", TF),
    KerasFamily(r"inception_resnet_v2", "InceptionResNetV2", TF),
    KerasFamily(r"nasnet(?:_(mobile|large))?", "NASNet{0}", TF),
)
"""The default model names of the ``keras.applications`` constructors whose preprocessing is a separate
``preprocess_input`` (keras 3). EfficientNet, EfficientNetV2, ConvNeXt and MobileNetV3 are absent: they
contain their preprocessing layers (``include_preprocessing``), which the exporter absorbs."""


def preset_fields(name: str) -> dict[str, Any]:
    """The ``ExportConfig`` fields of preset ``name``: input_range, mean, std, channel_order.

    Raises:
      ValueError: an unknown preset.
    """
    if name not in PRESETS:
        raise ValueError(f"preprocessing must be one of {', '.join(PRESETS)}; got {name!r}")
    preset = PRESETS[name]
    return dict(input_range=preset.input_range, mean=preset.mean, std=preset.std, channel_order=preset.channel_order)


def keras_family(model_name: str) -> tuple[str, str] | None:
    """(family, preset) of a ``keras.applications`` model by its name, e.g. ("ResNet50", "caffe"), or
    None for any other name (including the families that contain their own preprocessing)."""
    for family in KERAS_FAMILIES:
        match = re.fullmatch(family.pattern, model_name, re.IGNORECASE)
        if match:
            group = match.group(1) if match.re.groups else None
            suffix = {"mobile": "Mobile", "large": "Large"}.get(group or "", group or "")
            return family.name.format(suffix), family.preset
    return None


def uses_preprocessing_fields(config: ExportConfig) -> bool:
    """True when ``config`` states any preprocessing: mean/std, input range or BGR."""
    return (config.mean is not None or config.input_range is not None
            or config.channel_order != C.CHANNEL_ORDER_RGB)


def missing_preprocessing_warning(model_name: str, model_normalises: bool, config: ExportConfig) -> str | None:
    """The warning for a known family exported without the preprocessing it expects, or None.

    Args:
      model_name: The Keras model's name.
      model_normalises: Whether the model's own Rescaling/Normalization layers became the input spec.
      config: The export config; a user model (backbone "keras") that states no preprocessing
        (:func:`uses_preprocessing_fields`) is the only case that may warn.
    """
    if model_normalises or config.backbone != "keras" or uses_preprocessing_fields(config):
        return None
    found = keras_family(model_name)
    if found is None:
        return None
    family, preset = found
    return (f"keras {family} expects {preset} preprocessing ({PRESETS[preset].summary}) outside the model; "
            f"pass --preprocessing {preset}")


def warn_missing_preprocessing(model_name: str, model_normalises: bool, config: ExportConfig) -> str | None:
    """Logs :func:`missing_preprocessing_warning` (one ``logging.warning`` line) when there is one; returns it."""
    message = missing_preprocessing_warning(model_name, model_normalises, config)
    if message is not None:
        LOG.warning("%s", message)
    return message
