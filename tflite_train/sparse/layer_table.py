"""The ordered layer table of a backbone, as plain data.

A *layer* here is a convolution in the paper's sense (TinyTrain §4, Table 5): the stem conv, each
inverted-residual block's expand / depthwise / project convs, and the optional final 1x1 conv.
BatchNorm, activations, residual adds and pooling are not layers. The table is the contract
between the offline half (Keras models, the exporter) and the on-device half (cost model,
selection, trainer): it is embedded in every exported ``.tflite`` file as JSON and read back
without TensorFlow.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

ROLES = ("stem", "expand", "depthwise", "project", "final", "conv", "dense")
ACTIVATIONS = ("relu6", "linear", "relu", "leaky_relu", "hard_swish", "hard_sigmoid", "swish", "sigmoid")
MASK_ACTIVATIONS = ("relu", "relu6", "leaky_relu")
"""Activations whose backward needs only a 1-bit mask of the output (the cost model's B3)."""


@dataclasses.dataclass(frozen=True)
class LayerSpec:
    """One convolution of a backbone.

    Attributes:
      index: Position in forward order, from 0 (the stem).
      name: Stable name, e.g. ``"b07_expand"``; also the Keras layer name.
      block: Inverted-residual block index; -1 for the stem, ``num_blocks`` for the final conv.
      role: One of ``ROLES``.
      kernel: Square kernel size k.
      stride: Stride s (same in both spatial axes).
      in_channels: Input channels C_in.
      out_channels: Output channels C_out.
      groups: 1 for a dense conv, ``in_channels`` for a depthwise conv.
      in_hw: Input spatial size (H, W).
      out_hw: Output spatial size (H', W') = (ceil(H/s), ceil(W/s)) ("same" padding).
      activation: ``"relu6"`` or ``"linear"`` (applied after the conv and its BatchNorm).
    """

    index: int
    name: str
    block: int
    role: str
    kernel: int
    stride: int
    in_channels: int
    out_channels: int
    groups: int
    in_hw: tuple[int, int]
    out_hw: tuple[int, int]
    activation: str

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"role must be one of {ROLES}; got {self.role!r}")
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {ACTIVATIONS}; got {self.activation!r}")
        for field in ("kernel", "stride", "in_channels", "out_channels", "groups"):
            value = getattr(self, field)
            if not isinstance(value, int) or value <= 0:
                raise ValueError(f"{field} must be a positive int; got {value!r} for layer {self.name!r}")
        if self.in_channels % self.groups or self.out_channels % self.groups:
            raise ValueError(
                f"groups={self.groups} must divide in_channels={self.in_channels} and "
                f"out_channels={self.out_channels} (layer {self.name!r})"
            )
        object.__setattr__(self, "in_hw", tuple(int(v) for v in self.in_hw))
        object.__setattr__(self, "out_hw", tuple(int(v) for v in self.out_hw))

    @property
    def is_depthwise(self) -> bool:
        """True when each output channel sees exactly one input channel."""
        return self.groups > 1 and self.groups == self.in_channels == self.out_channels

    @property
    def fan_in(self) -> int:
        """Weights per output channel: k * k * C_in / groups."""
        return self.kernel * self.kernel * (self.in_channels // self.groups)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (tuples become lists)."""
        out = dataclasses.asdict(self)
        out["in_hw"] = list(self.in_hw)
        out["out_hw"] = list(self.out_hw)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "LayerSpec":
        """Inverse of ``to_dict``; unknown keys are rejected."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - names
        missing = names - set(data)
        if unknown or missing:
            raise ValueError(f"layer entry has unknown keys {sorted(unknown)} / missing keys {sorted(missing)}")
        return cls(**{**data, "in_hw": tuple(data["in_hw"]), "out_hw": tuple(data["out_hw"])})


@dataclasses.dataclass(frozen=True)
class LayerTable:
    """The ordered convolutions of a backbone; indices are positions in ``layers``."""

    layers: tuple[LayerSpec, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "layers", tuple(self.layers))
        if not self.layers:
            raise ValueError("layers must not be empty")
        seen: set[str] = set()
        for position, layer in enumerate(self.layers):
            if not isinstance(layer, LayerSpec):
                raise TypeError(f"layers[{position}] must be a LayerSpec; got {type(layer).__name__}")
            if layer.index != position:
                raise ValueError(f"layers[{position}] has index {layer.index}; indices must be 0..n-1 in order")
            if layer.name in seen:
                raise ValueError(f"duplicate layer name {layer.name!r}")
            seen.add(layer.name)

    def __len__(self) -> int:
        return len(self.layers)

    def __iter__(self):
        return iter(self.layers)

    def __getitem__(self, key: int | str) -> LayerSpec:
        return self.layers[self.index_of(key)]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(layer.name for layer in self.layers)

    @property
    def num_blocks(self) -> int:
        """Number of blocks (stem and the trailing "final" layers excluded)."""
        return len({layer.block for layer in self.layers if layer.role not in ("stem", "final")})

    def index_of(self, key: int | str) -> int:
        """Resolves a layer name or index to an index.

        Raises:
          ValueError: if the name or index does not exist.
          TypeError: if ``key`` is neither an int nor a str.
        """
        if isinstance(key, bool) or not isinstance(key, (int, str)):
            raise TypeError(f"layer must be a name (str) or index (int); got {key!r}")
        if isinstance(key, int):
            if not 0 <= key < len(self.layers):
                raise ValueError(f"layer index {key} out of range 0..{len(self.layers) - 1}")
            return key
        for layer in self.layers:
            if layer.name == key:
                return layer.index
        raise ValueError(f"layer {key!r} does not exist; known layers: {', '.join(self.names)}")

    def last_blocks(self, k: int) -> tuple[int, ...]:
        """Indices of the layers in the last ``k`` blocks, plus the final conv if present.

        Args:
          k: Number of trailing inverted-residual blocks, 1..num_blocks.
        """
        if not isinstance(k, int) or not 1 <= k <= self.num_blocks:
            raise ValueError(f"k must be an int in 1..{self.num_blocks}; got {k!r}")
        first_block = self.num_blocks - k
        return tuple(layer.index for layer in self.layers if layer.block >= first_block)

    def to_list(self) -> list[dict[str, Any]]:
        return [layer.to_dict() for layer in self.layers]

    @classmethod
    def from_list(cls, entries: Iterable[Mapping[str, Any]]) -> "LayerTable":
        return cls(tuple(LayerSpec.from_dict(entry) for entry in entries))


def resolve_layers(table: LayerTable, layers: Sequence[int | str]) -> tuple[int, ...]:
    """Maps names or indices to sorted unique indices, validating each."""
    return tuple(sorted({table.index_of(layer) for layer in layers}))


def check_candidates(table: LayerTable, candidates: Sequence[str]) -> tuple[str, ...]:
    """Validates a candidate-layer list (names of ``table``, non-empty, no repeats); keeps its order.

    Raises:
      TypeError: a single str instead of a sequence of names.
      ValueError: empty, repeated or unknown names.
    """
    if isinstance(candidates, str):
        raise TypeError(f"candidates must be a sequence of layer names, not a str; got {candidates!r}")
    names = tuple(candidates)
    if not names:
        raise ValueError("candidates must not be empty")
    if len(set(names)) != len(names):
        raise ValueError(f"candidates must not repeat a layer; got {list(names)}")
    for name in names:
        table.index_of(name)
    return names
