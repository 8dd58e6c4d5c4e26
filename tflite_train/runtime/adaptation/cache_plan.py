"""Whether an adaptation trains from the cached cut, and what the cache costs (pure).

A step from the cache (``train_step_from_<layer>``) starts from the activation at a cut instead of the
image: the layers below the cut never change while only layers above it are selected, so their output
for each pseudo-query view is computed once (``features_<layer>``) and reused by every step
(``converters.cached_cut``; CONTRACT.md). The cut is the highest one at or below the deepest
selected layer (``TrainableModel.cache_cut``).

Memory: the cache holds V * N activations of the cut's shape (float32), in place of the V * N augmented
views as float32 images that full steps read. It is used only when its bytes do not exceed the limit,
by default the bytes of those views, so caching never raises the adaptation's memory; the report
states both figures. B_mem bounds the backward pass per image (paper appendix A.4) and does not
include the support set in either form.
"""

from __future__ import annotations

import dataclasses
from typing import Any

__all__ = ["CachePlan", "plan_cache"]


@dataclasses.dataclass(frozen=True)
class CachePlan:
    """The decision for one adaptation.

    Attributes:
      used: True when the steps run from the cache.
      reason: Why not (empty when used).
      layer: The cut's lowest layer (None when the model offers no cut for this selection).
      cache_bytes: Bytes of the cache (V * N activations; 0 without a cut).
      image_bytes: Bytes of the V * N float32 views the full steps read.
      limit_bytes: The limit the cache was held to.
      step_forward_macs: Forward MACs per image of a step: above the cut when used, else the whole forward.
    """

    used: bool
    reason: str
    layer: str | None
    cache_bytes: int
    image_bytes: int
    limit_bytes: float
    step_forward_macs: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready record."""
        return dataclasses.asdict(self)


def plan_cache(cut: Any, *, has_cuts: bool, enabled: bool, num_views: int, image_shape: tuple[int, ...],
               limit_bytes: float | None, forward_macs: int, unsafe: str = "") -> CachePlan:
    """Decides whether ``num_views`` pseudo-query views train from the cache at ``cut``.

    Args:
      cut: ``TrainableModel.cache_cut()`` for the selection (a ``CachedCut``), or None.
      has_cuts: The model has cache signatures at all (files exported before them have none).
      enabled: ``AdaptConfig.cache``.
      num_views: V * N, the pseudo-query images the steps read.
      image_shape: (H, W, C) of one image.
      limit_bytes: The cache's limit; None = ``image_bytes``.
      forward_macs: The model's whole forward MACs per image.
      unsafe: Why the interpreter must not run the cache's signatures (empty: it may).
    """
    pixels = 1
    for d in image_shape:
        pixels *= int(d)
    image_bytes = 4 * pixels * num_views
    limit = float(image_bytes if limit_bytes is None else limit_bytes)
    cache_bytes = 0 if cut is None else cut.bytes_per_image * num_views
    layer = None if cut is None else cut.layer
    if not enabled:
        reason = "cache off (AdaptConfig.cache / --no-cache)"
    elif unsafe:
        reason = f"{unsafe}: full steps"
    elif not has_cuts:
        reason = "the model has no cached-cut signatures (exported before them): full steps"
    elif cut is None:
        reason = "no cached cut lies at or below the deepest selected layer: full steps"
    elif cache_bytes > limit:
        reason = f"the cache would take {cache_bytes} bytes, over its limit of {limit:.0f}: full steps"
    else:
        return CachePlan(True, "", layer, cache_bytes, image_bytes, limit, int(cut.suffix_forward_macs))
    return CachePlan(False, reason, layer, cache_bytes, image_bytes, limit, int(forward_macs))
