"""Candidate layers and the gradient region of a graph; refusal of what cannot be trained on device.

Candidate specs (``ExportConfig.candidates`` / ``--candidates``):

* ``blocks:K`` -- the layers of the last K blocks plus the trailing group (the stem too when
  K = num_blocks): the paper's setting on inverted-residual nets;
* ``layers:K`` -- the last K weighted layers;
* ``from:NAME`` -- every weighted layer at or after node NAME (any layer name of the model);
* ``all`` -- every weighted layer (FullTrain).

The gradient region is every node that reads, transitively, the output of a candidate layer: the
backward pass runs through it, so each of its nodes needs a builtin-op gradient. Nodes below it
(the frozen part) may be anything TFLite converts.
"""

from __future__ import annotations

from collections.abc import Callable

from tflite_train.converters.graph.ir import Graph
from tflite_train.converters.ops import registry
from tflite_train.sparse.layer_table import LayerTable


class RegionError(ValueError):
    """The candidate region holds a node without an on-device gradient, or the spec is invalid."""


def parse_candidates(spec: str, graph: Graph, table: LayerTable) -> tuple[int, ...]:
    """Table indices of the candidate layers of ``spec`` (module docstring), ascending.

    Raises:
      RegionError: a malformed spec, K out of range, an unknown layer name.
    """
    kind, _, arg = str(spec).partition(":")
    n = len(table)
    if kind == "all" and not arg:
        return tuple(range(n))
    if kind in ("blocks", "layers"):
        try:
            k = int(arg)
        except ValueError:
            raise RegionError(f"--candidates {spec!r}: {kind}:K needs an integer K") from None
        if kind == "layers":
            if not 1 <= k <= n:
                raise RegionError(f"--candidates {spec!r}: K must lie in 1..{n} (the model's weighted layers)")
            return tuple(range(n - k, n))
        if table.num_blocks == 0:
            raise RegionError(f"--candidates {spec!r}: the model has no blocks (no linear bottlenecks); "
                              f"use layers:K (1..{n}) or from:LAYER")
        if not 1 <= k <= table.num_blocks:
            raise RegionError(f"--candidates {spec!r}: K must lie in 1..{table.num_blocks} (the model's blocks)")
        indices = set(table.last_blocks(k))
        if k == table.num_blocks:
            indices.add(0)
        return tuple(sorted(indices))
    if kind == "from" and arg:
        position = graph.position()
        if arg not in position:
            raise RegionError(f"--candidates {spec!r}: the model has no layer {arg!r}")
        chosen = tuple(i for i, layer in enumerate(table.layers) if position[layer.name] >= position[arg])
        if not chosen:
            raise RegionError(f"--candidates {spec!r}: no Conv2D/DepthwiseConv2D/Dense layer at or after {arg!r}")
        return chosen
    raise RegionError(f"--candidates {spec!r} must be blocks:K, layers:K, from:LAYER or all")


def gradient_region(graph: Graph, layer_names: list[str] | tuple[str, ...]) -> set[str]:
    """The nodes the backward pass visits when ``layer_names`` are trainable (module docstring)."""
    return graph.descendants(set(layer_names))


def deepest_cut(graph: Graph, table: LayerTable) -> str | None:
    """The lowest layer L such that "every layer from L upward" has a region of differentiable nodes."""
    by_name = graph.by_name
    best = None
    names: list[str] = []
    for layer in reversed(table.layers):
        names.append(layer.name)
        if any(not by_name[n].differentiable for n in gradient_region(graph, names)):
            break
        best = layer.name
    return best


def check_region(graph: Graph, table: LayerTable, candidates: tuple[int, ...],
                 way_out: Callable[[], str | None] | None = None) -> set[str]:
    """The gradient region of ``candidates``; refuses a region with a non-differentiable node.

    Args:
      graph, table: The prepared graph and its layer table.
      candidates: Table indices of the candidate layers.
      way_out: Called only when no ``--candidates`` would export (even the last layer's region holds a
        node without a gradient): the flags that would, e.g. ``--feature-layer X --candidates from:Y``
        (``converters.candidate_choice.feature_layer_flags``), or None when none would.

    Raises:
      RegionError: one line naming the first offending layer, its class, and the flags with which the
        export would work (the deepest cut, else a ``--feature-layer``), or that none would.
    """
    region = gradient_region(graph, [table.layers[i].name for i in candidates])
    bad = [n for n in graph.nodes if n.name in region and not n.differentiable]
    if bad:
        node = bad[0]
        cut = deepest_cut(graph, table)
        if cut:
            hint = f"candidates from {cut!r} upward would export (--candidates from:{cut})"
        else:
            flags = way_out() if way_out is not None else None
            hint = ("no --candidates would export: it lies between the last trainable layer and the embedding" +
                    (f"; {flags} would export" if flags else ", and no --feature-layer would export either"))
        raise RegionError(f"{registry.gradient_refusal(node)}; {hint}")
    return region
