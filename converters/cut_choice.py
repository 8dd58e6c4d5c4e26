"""Which cuts of the candidate region get signatures of their own.

A *cut* is the table index of the lowest layer a train step reaches. Two kinds of signatures are cut:

* depth-specific train steps (``train_step_<layer>``, ``train_cuts``): the backward stops at the cut;
* cached-cut signatures (``features_<layer>``, ``train_step_from_<layer>``,
  ``infer_from_<layer>``, ``cache_cut_indices``): the step starts from the stored activation at the cut.

The runtime steps a selection whose deepest layer is d from the highest cut at or below d, so a cut is
worth its signatures only if selections start at or above it. Each cut costs export time (the cache
triplet of one Lite0 @ 128 cut took ~20 s of TFLite conversion on 2 busy cores) and file size, so by
default the cache cuts are those a selection within the default adaptation protocol's compute budget
can use (``tflite_train.runtime.adaptation.protocol.DEFAULT_PROTOCOL``):

  d_min = the lowest candidate d with  C_bwd({d: 1 channel}) <= f * C_bwd(FullTrain),

where C_bwd is the backward MACs of ``tflite_train.sparse.cost_model.backward_cost`` (the input gradients
from the top down to d, plus d's weight gradient) and f the protocol's B_compute fraction. Every
selection whose deepest layer is d costs at least C_bwd({d: 1}), so no selection within the budget
starts below d_min; the cuts kept are the highest block cut at or below d_min and every cut above it,
plus the lowest candidate (which serves any selection, e.g. under a larger budget).
"""

from __future__ import annotations

from collections.abc import Sequence

from tflite_train.sparse.cost_model import backward_cost, full_backward_macs
from tflite_train.sparse.layer_table import LayerTable

__all__ = ["block_cuts", "cache_cut_indices", "lowest_reachable", "train_cuts"]


def block_cuts(table: LayerTable, candidates: Sequence[int]) -> tuple[int, ...]:
    """The first candidate of each block holding candidates (each candidate layer when the candidates
    span fewer than two blocks), ascending, the lowest candidate excluded."""
    firsts: dict[int, int] = {}
    for i in candidates:
        firsts.setdefault(table.layers[i].block, i)
    groups = list(firsts.values()) if len(firsts) > 1 else list(candidates)
    return tuple(sorted(i for i in groups if i != candidates[0]))


def train_cuts(table: LayerTable, candidates: tuple[int, ...], variants: int) -> tuple[int, ...]:
    """Lowest layers of the depth-specific train steps, ascending: the highest ``variants`` of
    ``block_cuts`` (the general ``train_step`` stops at the lowest candidate)."""
    cuts = block_cuts(table, candidates)
    return tuple(cuts[max(0, len(cuts) - variants):]) if variants > 0 else ()


def lowest_reachable(table: LayerTable, candidates: Sequence[int], compute_fraction: float) -> int | None:
    """d_min of the module docstring: the lowest candidate that a selection within B_compute =
    ``compute_fraction`` x FullTrain's backward MACs can reach, or None when not even the top candidate fits."""
    limit = compute_fraction * full_backward_macs(table)
    for i in sorted(candidates):
        if backward_cost(table, {i: 1}).backward_macs <= limit:
            return i
    return None


def cache_cut_indices(table: LayerTable, candidates: tuple[int, ...], cache_cuts: int | None,
                      compute_fraction: float) -> tuple[int, ...]:
    """Cuts with cached-cut signatures, ascending, the lowest candidate first.

    Args:
      table: The model's layer table.
      candidates: Table indices of the candidate layers, ascending.
      cache_cuts: At most this many cuts: the lowest candidate and the highest ``cache_cuts - 1`` block
        cuts. None: the cuts selections within ``compute_fraction`` can use (module docstring).
      compute_fraction: B_compute as a fraction of FullTrain's backward MACs (used when ``cache_cuts``
        is None).
    """
    cuts = block_cuts(table, candidates)
    if cache_cuts is not None:
        return (candidates[0], *cuts[max(0, len(cuts) - (cache_cuts - 1)):]) if cache_cuts > 1 else (candidates[0],)
    reach = lowest_reachable(table, candidates, compute_fraction)
    if reach is None:
        return (candidates[0],)
    below = [c for c in cuts if c <= reach]
    start = below[-1] if below else candidates[0]
    return (candidates[0], *(c for c in cuts if c >= start))
