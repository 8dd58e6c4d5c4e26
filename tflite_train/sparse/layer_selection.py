"""Greedy budgeted layer selection (paper §4 "Dynamic layer selection", Algorithm 1 line 4).

The paper's objective: the largest set of highest-scoring layers whose backward pass fits both
budgets,

    max |L_sel|  s.t.  MemoryCost(L_sel) <= B_mem,  ComputeCost(L_sel) <= B_compute.

Greedy rule implemented here, over a ranking (highest score first, see ``scoring.rank_layers``):

    L_sel = {}
    for layer i in ranking:
        if cost(L_sel + {i}) fits the budget: L_sel = L_sel + {i}
        else: skip i and CONTINUE with the next layer     ("select as many layers as possible")

A layer that does not fit is skipped, not a stopping point: a lower-ranked layer may still fit
(e.g. a deeper one, which needs no back-propagation through the layers below the current deepest
one). The cost of a set is ``cost_model.backward_cost`` with K_i = channel_count(C_out_i, ratio)
channels per layer; both bounds are inclusive (``Budget.admits``).

If no layer fits at all, ``on_empty`` decides: ``"raise"`` -> :class:`~tflite_train.sparse.budget.BudgetError`;
``"empty"`` -> an empty selection ("no update"), logged at INFO (the caller chose it and reports it).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from tflite_train.sparse.budget import Budget, BudgetError
from tflite_train.sparse.cost_model import backward_cost, channel_count
from tflite_train.sparse.layer_table import LayerTable
from tflite_train.sparse.units import format_bytes, format_count

ON_EMPTY = ("raise", "empty")
"""What to do when a budget fits no layer: raise ``BudgetError`` or return no layers."""

logger = logging.getLogger(__name__)


def check_on_empty(on_empty: str) -> str:
    """Returns ``on_empty`` if it is one of ``ON_EMPTY``; else ValueError."""
    if on_empty not in ON_EMPTY:
        raise ValueError(f"on_empty must be one of {ON_EMPTY}; got {on_empty!r}")
    return on_empty


def layer_channel_counts(table: LayerTable, layers: Sequence[str], channel_ratio: float) -> dict[str, int]:
    """K_i = channel_count(C_out_i, channel_ratio) for each named layer."""
    return {name: channel_count(table[name].out_channels, channel_ratio) for name in layers}


def greedy_select_layers(
    table: LayerTable,
    ranking: Sequence[str],
    budget: Budget,
    *,
    channel_ratio: float | Mapping[str, float],
    optimizer: str = "adam",
    batch_size: int = 1,
    gradient_buffer: bool = True,
    on_empty: str = "raise",
) -> tuple[str, ...]:
    """Adds layers in ``ranking`` order while the backward cost stays within ``budget``.

    Args:
      table: The model's layer table.
      ranking: Candidate layer names, most important first (no duplicates).
      budget: B_mem and B_compute.
      channel_ratio: Fraction of output channels updated per layer (one number for all, or a
        mapping name -> ratio covering every ranked layer); K = channel_count(C_out, ratio).
      optimizer, batch_size, gradient_buffer: Passed to ``backward_cost``.
      on_empty: ``"raise"`` or ``"empty"`` when no layer fits (see module docstring).

    Returns:
      The selected layer names in the order they were added (rank order).

    Raises:
      BudgetError: no layer fits and ``on_empty == "raise"``.
      ValueError: unknown/duplicate layer, bad ratio, unknown ``on_empty``.
    """
    check_on_empty(on_empty)
    if not isinstance(budget, Budget):
        raise TypeError(f"budget must be a Budget; got {type(budget).__name__}")
    names = list(ranking)
    if len(set(names)) != len(names):
        raise ValueError(f"ranking must not repeat a layer; got {names}")
    for name in names:
        table.index_of(name)
    if isinstance(channel_ratio, Mapping):
        missing = [n for n in names if n not in channel_ratio]
        if missing:
            raise ValueError(f"channel_ratio has no ratio for layers {missing}")
        counts = {n: channel_count(table[n].out_channels, channel_ratio[n]) for n in names}
    else:
        counts = layer_channel_counts(table, names, channel_ratio)

    selected: list[str] = []
    for name in names:
        trial = {n: counts[n] for n in (*selected, name)}
        cost = backward_cost(
            table, trial, optimizer=optimizer, batch_size=batch_size, gradient_buffer=gradient_buffer
        )
        if budget.admits(cost, table):
            selected.append(name)
        else:
            logger.debug("layer %s skipped: %d B, %d MACs exceed the budget", name, cost.total_bytes, cost.backward_macs)
    if not selected and names:
        message = (
            f"no candidate layer fits the budget (B_mem {format_bytes(budget.memory_bytes)}, B_compute "
            f"{_macs(budget.compute_limit(table))}); the cheapest single layer needs "
            + _cheapest(table, names, counts, optimizer, batch_size, gradient_buffer)
        )
        if on_empty == "raise":
            raise BudgetError(message)
        # the caller asked for an empty selection here and reports it (adapt's summary: "none (no update)")
        logger.info("%s; returning an empty selection (no update)", message)
    return tuple(selected)


def _cheapest(
    table: LayerTable,
    names: Sequence[str],
    counts: Mapping[str, int],
    optimizer: str,
    batch_size: int,
    gradient_buffer: bool,
) -> str:
    costs = [
        (backward_cost(table, {n: counts[n]}, optimizer=optimizer, batch_size=batch_size,
                       gradient_buffer=gradient_buffer), n)
        for n in names
    ]
    memory, name_m = min((c.total_bytes, n) for c, n in costs)
    compute, name_c = min((c.backward_macs, n) for c, n in costs)
    return f"{format_bytes(memory)} ({name_m}) and {_macs(compute)} ({name_c})"


def _macs(value: float) -> str:
    return "unlimited" if value == float("inf") else f"{format_count(value)} MACs"

