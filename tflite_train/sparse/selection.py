"""The result of a layer/channel selection policy, as plain immutable data.

A :class:`Selection` names the layers to update (in forward order) and, for each, the output
channels to update (sorted ascending). It converts to the exported model's ``set_selection``
channel mask (CONTRACT.md): an f32 vector of length S = sum of C_out over the model's candidate
layers, concatenated in candidate order, 1.0 where an output channel is updated. It round-trips
through JSON and prices itself with the cost model.
"""

from __future__ import annotations

import dataclasses
import json
import types
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tflite_train import contract as C
from tflite_train.sparse.cost_model import BackwardCost, backward_cost
from tflite_train.sparse.layer_table import LayerTable, check_candidates

SELECTION_FORMAT = C.SELECTION_FORMAT
SELECTION_FORMAT_VERSION = C.SELECTION_FORMAT_VERSION


@dataclasses.dataclass(frozen=True)
class Selection:
    """Layers and output channels to update.

    Attributes:
      layers: Selected layer names (the trainer and ``ordered`` use forward order).
      channels: Layer name -> selected output-channel indices (sorted, unique, non-empty); exactly
        the keys of ``layers``. Stored as a read-only mapping.
      policy: Name of the policy that produced it (informational), e.g. ``"tinytrain"``.
    """

    layers: tuple[str, ...]
    channels: Mapping[str, tuple[int, ...]]
    policy: str = ""

    def __post_init__(self) -> None:
        layers = tuple(self.layers)
        if not all(isinstance(n, str) for n in layers):
            raise TypeError(f"layers must be layer names (str); got {layers!r}")
        if len(set(layers)) != len(layers):
            raise ValueError(f"layers must not repeat a layer; got {layers!r}")
        if not isinstance(self.channels, Mapping):
            raise TypeError(f"channels must be a mapping; got {type(self.channels).__name__}")
        if set(self.channels) != set(layers):
            raise ValueError(
                f"channels must have exactly the selected layers as keys; layers={sorted(layers)}, "
                f"channels keys={sorted(self.channels)}"
            )
        frozen: dict[str, tuple[int, ...]] = {}
        for name in layers:
            raw = self.channels[name]
            values = tuple(int(c) for c in raw)
            if any(isinstance(c, bool) or not isinstance(c, (int, np.integer)) for c in raw):
                raise TypeError(f"channels[{name!r}] must hold ints; got {raw!r}")
            if not values:
                raise ValueError(f"channels[{name!r}] must not be empty (drop the layer instead)")
            if list(values) != sorted(set(values)) or values[0] < 0:
                raise ValueError(f"channels[{name!r}] must be sorted, unique and >= 0; got {values!r}")
            frozen[name] = values
        if not isinstance(self.policy, str):
            raise TypeError(f"policy must be a str; got {self.policy!r}")
        object.__setattr__(self, "layers", layers)
        object.__setattr__(self, "channels", types.MappingProxyType(frozen))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Selection):
            return NotImplemented
        return (self.layers, dict(self.channels), self.policy) == (other.layers, dict(other.channels), other.policy)

    def __hash__(self) -> int:
        return hash((self.layers, tuple(sorted(self.channels.items())), self.policy))

    @property
    def is_empty(self) -> bool:
        """True for "no update" (the None policy, or a budget that fits nothing)."""
        return not self.layers

    def channel_counts(self) -> dict[str, int]:
        """Layer name -> number of selected channels K (the input of ``backward_cost``)."""
        return {name: len(self.channels[name]) for name in self.layers}

    def ordered(self, table: LayerTable) -> "Selection":
        """The same selection with ``layers`` in forward (table) order; validates the channels."""
        self.validate(table)
        return dataclasses.replace(self, layers=tuple(sorted(self.layers, key=table.index_of)))

    def validate(self, table: LayerTable) -> None:
        """Every layer exists in ``table`` and every channel index is < its C_out (ValueError)."""
        for name in self.layers:
            out_channels = table[name].out_channels
            if self.channels[name][-1] >= out_channels:
                raise ValueError(
                    f"channels[{name!r}] has index {self.channels[name][-1]} >= C_out = {out_channels}"
                )

    def cost(
        self,
        table: LayerTable,
        *,
        optimizer: str = "adam",
        batch_size: int = 1,
        gradient_buffer: bool = True,
    ) -> BackwardCost:
        """Backward-pass memory and compute of this selection (``cost_model.backward_cost``)."""
        self.validate(table)
        return backward_cost(
            table, self.channel_counts(), optimizer=optimizer, batch_size=batch_size,
            gradient_buffer=gradient_buffer,
        )

    def channel_mask(self, table: LayerTable, candidates: Sequence[str]) -> np.ndarray:
        """The ``set_selection`` mask: f32[S], S = sum of C_out over ``candidates``, in candidate order.

        mask[offset(l) + o] = 1.0 if channel o of candidate l is selected, else 0.0, where
        offset(l) = sum of C_out of the candidates before l.

        Raises:
          ValueError: a selected layer is not a candidate, a repeated candidate, or a bad index.
        """
        candidates = check_candidates(table, candidates)
        self.validate(table)
        outside = [n for n in self.layers if n not in candidates]
        if outside:
            raise ValueError(f"selected layers {outside} are not candidate layers {list(candidates)}")
        parts = []
        for name in candidates:
            part = np.zeros(table[name].out_channels, dtype=np.float32)
            if name in self.channels:
                part[list(self.channels[name])] = 1.0
            parts.append(part)
        return np.concatenate(parts)

    @classmethod
    def from_channel_mask(
        cls, table: LayerTable, candidates: Sequence[str], mask: np.ndarray, *, policy: str = ""
    ) -> "Selection":
        """Inverse of ``channel_mask``: layers with at least one 1.0, in candidate order.

        Raises:
          ValueError: wrong length, or entries other than 0.0 and 1.0.
        """
        candidates = check_candidates(table, candidates)
        vector = np.asarray(mask, dtype=np.float64)
        expected = sum(table[n].out_channels for n in candidates)
        if vector.shape != (expected,):
            raise ValueError(f"mask must have shape ({expected},) for these candidates; got {vector.shape}")
        if not np.all((vector == 0.0) | (vector == 1.0)):
            raise ValueError("mask must hold only 0.0 and 1.0")
        layers, channels, offset = [], {}, 0
        for name in candidates:
            width = table[name].out_channels
            chosen = tuple(int(i) for i in np.flatnonzero(vector[offset:offset + width]))
            offset += width
            if chosen:
                layers.append(name)
                channels[name] = chosen
        return cls(tuple(layers), channels, policy)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict with a format tag and version."""
        return {
            C.F_FORMAT: SELECTION_FORMAT,
            C.F_FORMAT_VERSION: SELECTION_FORMAT_VERSION,
            C.SEL_POLICY: self.policy,
            C.SEL_LAYERS: list(self.layers),
            C.SEL_CHANNELS: {name: list(self.channels[name]) for name in self.layers},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Selection":
        """Inverse of ``to_dict``: checked field by field against the declared schema first
        (``tflite_train.runtime.checkpoint.checkpoint_schema.SELECTION``: format, version, types, no unknown keys,
        channels an object of layer -> sorted unique non-negative ints, exactly the layers as keys).

        Raises:
          ValueError: ``SchemaError`` (a ``UserError``), one line naming the field and what is wrong.
        """
        from tflite_train.runtime.checkpoint.checkpoint_schema import SELECTION
        from tflite_train.runtime.model.header_schema import check_header

        data = check_header(SELECTION, data, "selection")
        return cls(tuple(data[C.SEL_LAYERS]), {k: tuple(v) for k, v in data[C.SEL_CHANNELS].items()},
                   data[C.SEL_POLICY])

    def to_json(self) -> str:
        """Compact, key-sorted JSON text."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> "Selection":
        """Parses ``to_json`` output as strict JSON (``contract.loads_strict``; ValueError on malformed JSON,
        a duplicate key or a NaN)."""
        try:
            data = C.loads_strict(text)
        except ValueError as error:
            raise ValueError(f"selection JSON is malformed: {error}") from error
        return cls.from_dict(data)


