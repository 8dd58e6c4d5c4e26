"""Where a train step can start from a cached activation: the frozen prefix below a cut (pure graph functions).

A depth-specific train step whose backward stops at layer ``L`` (``train_step_<L>``) changes only the
layers from ``L`` upward, so every node whose value does not depend on one of them is a function of the
image alone while the adaptation runs. Split the graph at ``L``:

* the **suffix** S(L): every node that (transitively) reads a weighted layer of table index >= index(L),
  those layers included: what a step must recompute;
* the **prefix**: every other node; its values are fixed for a given image as long as no layer below L
  changes (the runtime uses a cut only when nothing below it is selected);
* the **frontier** F(L): the prefix nodes that suffix nodes read.

When F(L) is one tensor (a MobileNet-style block input: the expand conv and the residual add both read
it), the exporter adds ``features_<L>`` (image -> that tensor), ``train_step_from_<L>`` and
``infer_from_<L>`` (that tensor -> the rest). A cut whose frontier holds several tensors gets no cache
signatures (the runtime trains it with full steps).

Cost of a cached step, per image: the forward MACs of the weighted layers in S(L) (their sum is the
metadata ``suffix_forward_macs``) plus the backward of the selected layers, against the whole forward
of a full step.
"""

from __future__ import annotations

import dataclasses

from tflite_train.converters.graph.ir import Graph
from tflite_train.sparse.cost_model import layer_cost
from tflite_train.sparse.layer_table import LayerTable

__all__ = ["CachedCut", "cache_cut", "suffix_nodes"]


@dataclasses.dataclass(frozen=True)
class CachedCut:
    """A cut with a single-tensor frontier.

    Attributes:
      index: Table index of the cut's lowest layer L.
      layer: Its name.
      frontier: The graph node whose value the suffix starts from.
      shape: That node's shape without the batch.
      suffix: The suffix nodes S(L).
      suffix_forward_macs: Forward MACs per image of the weighted layers in S(L).
    """

    index: int
    layer: str
    frontier: str
    shape: tuple[int, ...]
    suffix: frozenset[str]
    suffix_forward_macs: int


def suffix_nodes(graph: Graph, table: LayerTable, cut: int) -> frozenset[str]:
    """S(L) for L = ``table.layers[cut]`` (module docstring)."""
    return frozenset(graph.descendants({layer.name for layer in table.layers[cut:]}))


def cache_cut(graph: Graph, table: LayerTable, cut: int) -> CachedCut | None:
    """The cache cut at table index ``cut``, or None when its frontier is not exactly one tensor, is the
    graph's input itself (nothing to cache), or the embedding does not lie above it."""
    suffix = suffix_nodes(graph, table, cut)
    if graph.output not in suffix:
        return None
    frontier = sorted({i for n in graph.nodes if n.name in suffix for i in n.inputs if i not in suffix},
                      key=graph.position().__getitem__)
    if len(frontier) != 1 or frontier[0] == graph.nodes[0].name:
        return None
    weighted = {layer.name: layer for layer in table.layers}
    macs = sum(layer_cost(weighted[n]).forward_macs for n in suffix if n in weighted)
    shape = tuple(int(d) for d in graph.by_name[frontier[0]].shape)
    return CachedCut(cut, table.layers[cut].name, frontier[0], shape, suffix, int(macs))
