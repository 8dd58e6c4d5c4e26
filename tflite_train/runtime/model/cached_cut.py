"""A cached cut of an exported model (metadata ``cached_cuts``; ``converters.cached_cut``), as plain data."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from tflite_train import contract as C

__all__ = ["CachedCut", "cached_cuts"]


@dataclasses.dataclass(frozen=True)
class CachedCut:
    """One cached cut of a model (metadata ``cached_cuts``; ``converters.cached_cut``).

    Attributes:
      layer: The cut's lowest layer L: a step from the cache updates layers from L upward only.
      index: L's table index.
      shape: The cached activation's shape without the batch.
      features, train_step, infer: Signature names: images -> activation; (activation, labels) -> one
        optimizer step; activation -> embeddings and logits.
      suffix_forward_macs: Forward MACs per image of the layers above the cut.
      episode_signature: ``episode_step_from_<layer>`` (activations, labels, support_mask) -> one step on the
        episode loss with in-graph prototypes; None for files exported without it.
      accumulate_signature: ``accumulate_from_<layer>`` (activations, labels) -> the rows' gradient added
        into the accumulators (``apply_accumulated`` steps with it); None for files exported without it.
    """

    layer: str
    index: int
    shape: tuple[int, ...]
    features: str
    train_step: str
    infer: str
    suffix_forward_macs: int
    episode_signature: str | None = None
    accumulate_signature: str | None = None

    @property
    def bytes_per_image(self) -> int:
        """Bytes of one cached float32 activation."""
        return 4 * int(np.prod(self.shape))


def cached_cuts(metadata: Mapping[str, Any]) -> tuple[CachedCut, ...]:
    """The model's cuts, ascending by index (empty for files exported before the cache)."""
    return tuple(sorted(
        (CachedCut(c[C.F_LOWEST_LAYER], int(c[C.F_LOWEST_INDEX]), tuple(int(d) for d in c[C.F_SHAPE]),
                   c[C.F_FEATURES_SIGNATURE], c[C.F_TRAIN_SIGNATURE], c[C.F_INFER_SIGNATURE],
                   int(c[C.F_SUFFIX_FORWARD_MACS]), c.get(C.F_EPISODE_SIGNATURE), c.get(C.F_ACCUMULATE_SIGNATURE))
         for c in metadata.get(C.F_CACHED_CUTS, [])),
        key=lambda cut: cut.index))
