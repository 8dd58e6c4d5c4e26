"""The default candidate layers of a bring-your-own export: what ``--candidates`` resolves to when not given.

``ExportConfig.candidates == AUTO`` (the CLI's ``export --keras-model`` without ``--candidates`` or
``--candidate-blocks``) resolves, before anything is converted, to the first of

1. ``blocks:K`` for K = ``DEFAULT_BLOCKS`` (2), then fewer, down to 1 -- the deepest one whose gradient
   region exports (``converters.graph.region.check_region``), on a model with blocks (linear bottlenecks);
2. ``layers:K`` -- the trailing layers from the deepest cut that exports
   (``converters.graph.region.deepest_cut``) upward, bounded below by the lowest of them that the
   default adaptation budget can train alone, and K at most ``MAX_AUTO_LAYERS`` (while a layer of the
   top ``MAX_AUTO_LAYERS`` fits that budget);

such that at least one candidate fits the paper's budget carried to the model: B_mem =
``tflite_train.sparse.scaled_memory_budget`` of the model's layer table and the default B_compute, channel
ratio and batch size of ``tflite_train.runtime.AdaptConfig``, with the model's optimizer
(``tflite_train.sparse.cost_model.backward_cost``). A layer below that bound could never be selected by
``adapt`` with its defaults (a selection costs at least as much as each of its layers), so it is left frozen.
When no layer of the model fits it (on small models the inference buffer alone can exceed the scaled B_mem),
the choice is the same without the bound -- ``blocks:K`` where it exports, else every trailing layer from the
deepest cut -- and ``adapt``'s default budget for those candidates is that budget raised just enough to
admit one of them (``tflite_train.sparse.default_budget``, the one definition ``adapt`` uses too): every
export can train a layer under ``adapt``'s defaults, and the logged line says what the default budget is.

The resolved spec (never ``AUTO``) is what the export records (``<out>.config.json``, the metadata's
``config``), so exporting again with ``--candidates <spec>`` reproduces the file.
"""

from __future__ import annotations

import dataclasses
import logging
import math

from tflite_train.converters.graph.ir import Graph, InputSpec, Node
from tflite_train.converters.graph.layer_table import graph_layer_table
from tflite_train.converters.graph.passes import prepare_graph
from tflite_train.converters.graph.region import RegionError, check_region, deepest_cut, gradient_region, parse_candidates
from tflite_train.runtime.adaptation.adapt_config import AdaptConfig
from tflite_train.sparse.budget import Budget, default_budget as sparse_default_budget, scaled_memory_budget
from tflite_train.sparse.cost_model import BackwardCost, backward_cost, channel_count
from tflite_train.sparse.layer_table import LayerTable
from tflite_train.sparse.units import format_count

LOG = logging.getLogger(__name__)

AUTO = "auto"
"""``ExportConfig.candidates`` value that asks for the default choice (module docstring)."""
DEFAULT_BLOCKS = 2
"""Trailing blocks a bring-your-own model with blocks gets (the exporter's long-standing default)."""
MAX_AUTO_LAYERS = 20
"""Most trailing layers the ``layers:K`` default takes. Each candidate layer adds its own train-step
variables and the export's depth-specific signatures grow with the candidate region, so conversion time
grows with K: DenseNet121 at 32 px, where every one of its top 81 layers fits the default budget,
exported for more than 6.5 minutes. The shipped Lite0 default has 19 candidate layers; the selection
under the default budget keeps a few of them. ``--candidates layers:K`` asks for more."""
FEATURE_LAYER_TRIES = 64
"""Most layers tried, from the top, when looking for a ``--feature-layer`` that would export."""


@dataclasses.dataclass(frozen=True)
class CandidateChoice:
    """The resolved default candidates.

    Attributes:
      spec: The ``--candidates`` spec that reproduces the choice, e.g. ``"blocks:2"`` or ``"layers:5"``.
      candidates: Table indices of the candidate layers, ascending.
      fitting: The candidates whose update alone fits ``budget`` (never empty).
      budget: ``adapt``'s default budget for these candidates (``default_budget``).
      paper: The paper's budget carried to the model (``paper_budget``); ``budget`` is it, or it raised.
    """

    spec: str
    candidates: tuple[int, ...]
    fitting: tuple[int, ...]
    budget: Budget
    paper: Budget


def paper_budget(table: LayerTable) -> Budget:
    """The paper's budget carried to the model: the scaled B_mem and ``adapt``'s default B_compute."""
    defaults = AdaptConfig()
    return Budget(memory_bytes=scaled_memory_budget(table), compute_macs=defaults.compute_macs,
                  compute_fraction=defaults.compute_fraction)


def default_budget(table: LayerTable, candidates: tuple[int, ...], optimizer: str) -> Budget:
    """The budget ``adapt`` uses without flags on this model with these candidates
    (``tflite_train.sparse.default_budget`` at ``AdaptConfig``'s defaults and the model's optimizer)."""
    defaults = AdaptConfig()
    return sparse_default_budget(table, candidates, compute_fraction=defaults.compute_fraction,
                                 channel_ratio=defaults.channel_ratio, optimizer=optimizer,
                                 batch_size=defaults.batch_size)


def single_layer_cost(table: LayerTable, index: int, optimizer: str) -> BackwardCost:
    """Backward cost of updating layer ``index`` alone as ``adapt`` does by default (its channel ratio
    and batch size, the model's ``optimizer``)."""
    defaults = AdaptConfig()
    layer = table.layers[index]
    return backward_cost(table, {index: channel_count(layer.out_channels, defaults.channel_ratio)},
                         optimizer=optimizer, batch_size=defaults.batch_size)


def trainable_alone(table: LayerTable, budget: Budget, optimizer: str) -> frozenset[int]:
    """Indices of the layers whose update alone fits ``budget`` (``single_layer_cost``): the layers
    ``adapt`` could select under it."""
    return frozenset(i for i in range(len(table)) if budget.admits(single_layer_cost(table, i, optimizer), table))


def _exporting_blocks(graph: Graph, table: LayerTable) -> list[tuple[str, tuple[int, ...]]]:
    """``blocks:K`` for K = DEFAULT_BLOCKS .. 1 (at most the model's blocks) whose region exports, deepest first."""
    out = []
    for k in range(min(DEFAULT_BLOCKS, table.num_blocks), 0, -1):
        chosen = parse_candidates(f"blocks:{k}", graph, table)
        try:
            check_region(graph, table, chosen)
        except RegionError:
            continue
        out.append((f"blocks:{k}", chosen))
    return out


def choose_candidates(graph: Graph, table: LayerTable, optimizer: str) -> CandidateChoice | None:
    """The default candidates of a prepared graph (module docstring); None when no layer can be one.

    Args:
      graph: The prepared graph (``converters.graph.prepare_graph``).
      table: Its layer table (``converters.graph.graph_layer_table``).
      optimizer: The export's optimizer (its slots count in the memory cost).
    """
    paper = paper_budget(table)
    fitting = trainable_alone(table, paper, optimizer)

    def choice(spec: str, chosen: tuple[int, ...]) -> CandidateChoice:
        budget = default_budget(table, chosen, optimizer)
        fits = fitting if budget == paper else trainable_alone(table, budget, optimizer)
        return CandidateChoice(spec, chosen, tuple(i for i in chosen if i in fits), budget, paper)

    blocks = _exporting_blocks(graph, table)
    for spec, chosen in blocks:
        if fitting.intersection(chosen):
            return choice(spec, chosen)
    cut = deepest_cut(graph, table)
    if cut is not None:
        lowest = table.index_of(cut)
        trainable = sorted(fitting.intersection(range(lowest, len(table))))
        if trainable or not blocks:  # bounded below by the lowest layer the default budget can train
            lowest = trainable[0] if trainable else lowest
            # at most MAX_AUTO_LAYERS, unless that would leave no layer the budget can train (every suffix
            # of the deepest cut's region exports: deepest_cut grows it one layer at a time)
            top = len(table) - MAX_AUTO_LAYERS
            if lowest < top and (not trainable or trainable[-1] >= top):
                lowest = top
            return choice(f"layers:{len(table) - lowest}", tuple(range(lowest, len(table))))
    if blocks:  # no layer fits the paper's budget: the long-standing default where it exports
        return choice(*blocks[0])
    return None


def working_feature_layer(nodes: list[Node], output: str, spec: InputSpec, graph: Graph) -> tuple[str, str] | None:
    """A ``--feature-layer`` under which some layer could be a candidate: (the output, after its fused
    BatchNorm and activation, of the highest weighted layer of ``graph`` whose region then exports; the
    deepest cut under it, for ``--candidates from:CUT``), or None.

    Args:
      nodes, output, spec: The model as read (``converters.graph.read_keras``) and its input spec.
      graph: The model prepared with the embedding that failed (its weighted layers are tried).
    """
    for node in list(reversed(graph.weighted()))[:FEATURE_LAYER_TRIES]:
        name = node.attrs.get("keras_output", node.name)
        try:
            trial = prepare_graph(nodes, output, spec, name)
            cut = deepest_cut(trial, graph_layer_table(trial))
        except ValueError:  # EmbeddingError or a table without layers: not this one
            continue
        if cut is not None:
            return name, cut
    return None


def feature_layer_flags(nodes: list[Node], output: str, spec: InputSpec, graph: Graph,
                        feature_layer: str | None) -> str | None:
    """The flags that would export a model whose explicit ``--candidates`` cannot (no layer has a
    gradient path to the embedding): ``--feature-layer X --candidates from:CUT``, or None."""
    working = working_feature_layer(nodes, output, spec, graph)
    if working is None or working[0] == feature_layer:
        return None
    return f"--feature-layer {working[0]} --candidates from:{working[1]}"


def refusal(nodes: list[Node], output: str, spec: InputSpec, graph: Graph, feature_layer: str | None) -> str:
    """The one-line refusal when no layer of ``graph`` can be a candidate, naming the flag that would work
    (``working_feature_layer``); no ``--candidates`` can help, since even the last layer's gradient is blocked."""
    working = working_feature_layer(nodes, output, spec, graph)
    where = f"the --feature-layer {feature_layer!r}" if feature_layer else "the embedding"
    region = gradient_region(graph, [graph.weighted()[-1].name])
    bad = next((n for n in graph.nodes if n.name in region and not n.differentiable), None)
    what = "a layer" if bad is None else f"layer {bad.name!r} ({bad.keras_class})"
    first = (f"no layer can be a candidate: {what}, without an on-device gradient, lies between the last trainable "
             f"layer and {where}")
    if working is not None and working[0] != feature_layer:
        return f"{first}; --feature-layer {working[0]} would export"
    return f"{first}, and no --feature-layer would export"


def describe(choice: CandidateChoice, table: LayerTable) -> str:
    """One line: what was chosen, how much of it the default budget can train, and the flag that changes it."""
    names = [table.layers[i].name for i in choice.candidates]
    span = names[0] if len(names) == 1 else f"{names[0]} .. {names[-1]}"
    fit = f"{len(choice.fitting)} of them fit adapt's default budget ({_budget(choice.budget, table)}) alone"
    if choice.budget != choice.paper:
        fit += f", the paper's ({_budget(choice.paper, table)}) raised to admit one"
    return f"candidates {choice.spec} ({len(names)} layers, {span}); {fit}; --candidates changes them"


def _budget(budget: Budget, table: LayerTable) -> str:
    return f"B_mem {_size(budget.memory_bytes)}, B_compute {format_count(budget.compute_limit(table))} MACs"


def _size(n: float) -> str:
    if math.isinf(n):
        return "unlimited"
    return f"{n / 2**20:.2f} MiB" if n >= 2**20 else f"{n / 1024:.1f} KiB"
