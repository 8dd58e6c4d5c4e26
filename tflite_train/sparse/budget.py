"""Backward-pass budgets (B_mem, B_compute of paper Algorithm 1) and the error for one that fits nothing.

A :class:`Budget` bounds the :class:`~tflite_train.sparse.cost_model.BackwardCost` of a selection:

    cost.total_bytes   <= memory_bytes                                   (B_mem)
    cost.backward_macs <= compute_macs                                   (B_compute, absolute), or
    cost.backward_macs <= compute_fraction * full_backward_macs(table)   (B_compute, relative)

The relative B_compute is the paper's (§3.3, "15 % of the total MACs" of the backward pass): a
fraction of the **full backward pass**, i.e. FullTrain's backward MACs (every layer's weight
gradient plus every input gradient above the first layer; ``cost_model.full_backward_macs``) at
the model's input size, per sample (batch 1). It is the one definition used by the library
(``AdaptConfig``), the CLI (``adapt --compute-budget``), the demo, the benchmark and the Java core
(``Budget.java``). Under it a fraction of 1 admits every selection. For scale: MCUNet at 128x128
has 22.45M forward and 43.14M full backward MACs, so 15 % is 6.47M MACs, about the paper's own
TinyTrain row (6.51M), whereas 15 % of the forward MACs (3.37M) would be half of it.

B_mem bounds the paper's peak memory of the backward pass (appendix A.4, "Further Details on
Memory Usage"), in bytes, per sample (batch 1): (B1) the weights being updated, plus (B2) the
optimizer state and gradient buffer, plus the activation memory max(F2, B3 + B4), i.e. the
inference buffer (F2), which the backward pass reuses for (B3) the 1-bit ReLU masks and (B4) the
saved inputs of the updated layers; frozen weights (F1) stay in storage and are not counted
(``BackwardCost.total_bytes``, ``cost_model``).

The default B_mem is the paper's one number carried to the model at hand. The paper gives "around
1 MB" (§3.3) for MCUNet at 128x128; other backbones and resolutions need a budget as tight
*relative to their own size*, since Lite0 at 128 px needs 1.8 MB for one inference activation and
1 MiB admits none of its layers. The scale is the smallest conventional update, LastLayer (all
output channels of the last layer, Adam, batch 1), of the model against MCUNet@128's:

    B_mem(table, b) = b * M_LastLayer(table) / M_LastLayer(MCUNet@128),   b = 1 MiB by default,

with M_LastLayer(MCUNet@128) = 2,132,480 bytes (2.03 MiB), so B_mem = b exactly for MCUNet@128,
0.770 MiB for MCUNet@64 and 4.005 MiB for EfficientNet-Lite0@128 (``scaled_memory_budget``). It is
the paper's budget carried to the model, the base of the default budget below. An explicit
``--mem-budget`` / ``memory_bytes`` is an absolute number of bytes (the device's own limit) and is not scaled.

The default budget (``default_budget``) must let ``adapt`` train something on every model. On a small
model the scaled B_mem (and 15 % of its short backward pass) can be below the cost of its cheapest candidate
layer: ``tiny`` at 128 px has B_mem 193.0 KiB and B_compute 1.13 M MACs, and each of its candidates exceeds
one or the other. So the default is the paper's budget raised, only when it admits no candidate layer
alone, just enough to admit the candidate that needs the least raise (``admitting_budget``; ``tiny`` at
128 px: 384.6 KiB and 2.13 M MACs, admitting ``b01_depthwise``):

    c_l = backward_cost(table, {l: channel_count(C_out_l, r)})       (the selection's channels, r the ratio)
    need_l = max(c_l.total_bytes / B_mem, c_l.backward_macs / B_compute)
    if min_l need_l > 1:  l* = argmin_l need_l (first in forward order on ties),
        B_mem <- max(B_mem, c_l*.total_bytes),  B_compute <- max(B_compute, c_l*.backward_macs) (in MACs)

over the candidate layers l, at the run's channel ratio, optimizer and batch size; a bound the user gave
is never raised (a layer over it is not eligible). Where some candidate fits the paper's budget, the
default is that budget unchanged: MCUNet@128 keeps B_mem 1 MiB, EfficientNet-Lite0@128 4.005 MiB (13 of
its 19 default candidates fit). It is the one definition used by the CLI (``adapt`` without
``--mem-budget`` / ``--compute-budget``), the exporter's default candidate choice, the demo, the
benchmark and the Java core (``Budget.defaultBudget``, ``Budget.admitting``).

Both bounds are inclusive: a cost exactly equal to the budget fits. The paper's example budget for
MCUNet@128 is about 1 MB and 15 % of the backward pass: ``Budget(memory_bytes=2**20,
compute_fraction=0.15)``; for any model, ``Budget(scaled_memory_budget(table), compute_fraction=0.15)``.
Missing bounds are unlimited.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

from tflite_train.sparse.cost_model import BackwardCost, backward_cost, channel_count, full_backward_macs
from tflite_train.sparse.layer_table import LayerTable

PAPER_MEMORY_BYTES = 2**20
"""b, the paper's B_mem ("around 1 MB", beside the 15 % of §3.3; "roughly 1 MB" in the appendix on
Fisher information on activations), set for MCUNet at 128x128."""
REFERENCE_MODEL = ("mcunet", 128)
"""The model the paper's B_mem was set for: MCUNet at 128x128."""
REFERENCE_LAST_LAYER_BYTES = 2_132_480
"""M_LastLayer(MCUNet@128): ``last_layer_memory`` of ``build_layer_table("mcunet", 128)`` (a test
recomputes it); a constant so that the on-device code and Java need no backbone builder."""


class BudgetError(ValueError):
    """No layer fits the budget and the caller asked for an error rather than "no update"."""


def _check_limit(argument: str, value: float | int | None) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{argument} must be a number >= 0; got {value!r}")
    if math.isnan(value) or value < 0:
        raise ValueError(f"{argument} must be a number >= 0 (not NaN); got {value!r}")


@dataclasses.dataclass(frozen=True)
class Budget:
    """Memory and compute budget of one backward pass (per sample for MACs).

    Attributes:
      memory_bytes: B_mem in bytes, compared with ``BackwardCost.total_bytes``; ``math.inf`` = unlimited.
      compute_macs: B_compute as an absolute number of backward MACs; None = not given.
      compute_fraction: B_compute as a fraction of the full backward pass (FullTrain's backward MACs
        per sample at the table's input size), e.g. 0.15; values >= 1 admit every selection;
        None = not given.
        At most one of ``compute_macs`` and ``compute_fraction`` may be given.
    """

    memory_bytes: float = math.inf
    compute_macs: float | None = None
    compute_fraction: float | None = None

    def __post_init__(self) -> None:
        _check_limit("memory_bytes", self.memory_bytes)
        _check_limit("compute_macs", self.compute_macs)
        _check_limit("compute_fraction", self.compute_fraction)
        if self.memory_bytes is None:
            raise ValueError("memory_bytes must be a number >= 0 (math.inf for unlimited); got None")
        if self.compute_macs is not None and self.compute_fraction is not None:
            raise ValueError(
                f"give compute_macs or compute_fraction, not both; got {self.compute_macs!r} and "
                f"{self.compute_fraction!r}"
            )

    def compute_limit(self, table: LayerTable) -> float:
        """B_compute in MACs: ``compute_macs``, or ``compute_fraction * full_backward_macs(table)``, or inf."""
        if self.compute_macs is not None:
            return float(self.compute_macs)
        if self.compute_fraction is not None:
            return self.compute_fraction * full_backward_macs(table)
        return math.inf

    def admits(self, cost: BackwardCost, table: LayerTable) -> bool:
        """True when ``cost`` fits both bounds (inclusive)."""
        return cost.total_bytes <= self.memory_bytes and cost.backward_macs <= self.compute_limit(table)

    def to_dict(self) -> dict[str, float | None]:
        """JSON-ready dict; an unlimited memory budget is written as None."""
        return {
            "memory_bytes": None if math.isinf(self.memory_bytes) else self.memory_bytes,
            "compute_macs": self.compute_macs,
            "compute_fraction": self.compute_fraction,
        }


def last_layer_memory(table: LayerTable) -> int:
    """M_LastLayer: backward memory (bytes) of updating every output channel of the table's last
    layer with Adam at batch 1 (``BackwardCost.total_bytes``: weights, gradient, two Adam slots, its
    saved input beyond the inference buffer)."""
    last = table.layers[-1]
    return backward_cost(table, {last.name: last.out_channels}, optimizer="adam").total_bytes


def scaled_memory_budget(table: LayerTable, reference_bytes: float = PAPER_MEMORY_BYTES) -> float:
    """B_mem in bytes for the model of ``table``: ``reference_bytes`` (a budget for MCUNet@128, by
    default the paper's 1 MiB) scaled by the model's LastLayer backward memory (module docstring):

        B_mem = reference_bytes * M_LastLayer(table) / M_LastLayer(MCUNet@128)

    Args:
      table: The model's layer table (``runtime.layer_table(metadata)`` or ``build_layer_table``).
      reference_bytes: The budget as it would be for MCUNet at 128x128, >= 0 (``math.inf`` stays inf).

    Returns:
      B_mem in bytes (a float; compare with ``BackwardCost.total_bytes``).

    Raises:
      ValueError: a negative or NaN ``reference_bytes``.
    """
    _check_limit("reference_bytes", reference_bytes)
    return reference_bytes * last_layer_memory(table) / REFERENCE_LAST_LAYER_BYTES


def _need(used: float, limit: float) -> float:
    """used / limit, with 0 for an unlimited bound and inf for a zero bound that something exceeds."""
    if math.isinf(limit) or used == 0:
        return 0.0
    return used / limit if limit > 0 else math.inf


@dataclasses.dataclass(frozen=True)
class Admission:
    """A budget raised, or not, to admit one candidate layer alone (``admitting_budget``).

    Attributes:
      budget: The budget: the one given, or it raised.
      layer: Table index of the candidate it was raised to admit; None when it was not raised (it admits a
        candidate already, or no raise allowed would admit one).
      cost: That layer's single-layer backward cost, or None.
    """

    budget: Budget
    layer: int | None = None
    cost: BackwardCost | None = None


def admitting_budget(
    budget: Budget,
    table: LayerTable,
    candidates: Sequence[int | str],
    *,
    channel_ratio: float,
    optimizer: str = "adam",
    batch_size: int = 1,
    raise_memory: bool = True,
    raise_compute: bool = True,
) -> Admission:
    """``budget``, raised when it admits none of ``candidates`` alone just enough to admit the candidate that
    needs the least raise (module docstring): l* = argmin_l max(c_l.total_bytes / B_mem, c_l.backward_macs /
    B_compute), first in forward order on ties; B_mem <- max(B_mem, c_l*.total_bytes), B_compute <-
    max(B_compute, c_l*.backward_macs), the latter then in absolute MACs.

    Args:
      budget: The budget to raise (the paper's scaled budget, with any bound the user gave).
      table: The model's layer table.
      candidates: The candidate layers (names or table indices).
      channel_ratio: The selection's channel ratio r: a layer updates ``channel_count(C_out, r)`` channels.
      optimizer, batch_size: The cost model's settings of the run (``cost_model.backward_cost``).
      raise_memory, raise_compute: Which bounds are defaults that may be raised; a layer over a bound
        that may not be raised is not eligible.

    Returns:
      The budget (raised or not) and the layer it was raised for.
    """
    memory, compute = budget.memory_bytes, budget.compute_limit(table)
    best: tuple[float, int, BackwardCost] | None = None
    for index in sorted({table.index_of(c) for c in candidates}):
        layer = table.layers[index]
        cost = backward_cost(table, {index: channel_count(layer.out_channels, channel_ratio)}, optimizer=optimizer,
                             batch_size=batch_size)
        if budget.admits(cost, table):
            return Admission(budget)
        if (not raise_memory and cost.total_bytes > memory) or (not raise_compute and cost.backward_macs > compute):
            continue
        need = max(_need(cost.total_bytes, memory) if raise_memory else 0.0,
                   _need(cost.backward_macs, compute) if raise_compute else 0.0)
        if best is None or need < best[0]:
            best = (need, index, cost)
    if best is None:
        return Admission(budget)
    _, index, cost = best
    raised_memory = max(memory, cost.total_bytes) if raise_memory else memory
    if raise_compute and cost.backward_macs > compute:
        return Admission(Budget(memory_bytes=raised_memory, compute_macs=float(cost.backward_macs)), index, cost)
    return Admission(Budget(memory_bytes=raised_memory, compute_macs=budget.compute_macs,
                            compute_fraction=budget.compute_fraction), index, cost)


def default_budget(
    table: LayerTable,
    candidates: Sequence[int | str],
    *,
    compute_fraction: float | None,
    channel_ratio: float,
    optimizer: str = "adam",
    batch_size: int = 1,
) -> Budget:
    """The default budget of a run (module docstring): the paper's budget carried to the model,
    ``Budget(scaled_memory_budget(table), compute_fraction=compute_fraction)``, raised by ``admitting_budget``
    when it admits none of ``candidates`` alone.

    Args:
      table: The model's layer table.
      candidates: Its candidate layers (names or table indices).
      compute_fraction: The default B_compute as a fraction of the full backward pass (the protocol's
        0.15, ``runtime.DEFAULT_PROTOCOL``), or None for no compute bound.
      channel_ratio, optimizer, batch_size: The run's selection settings (``admitting_budget``).
    """
    paper = Budget(memory_bytes=scaled_memory_budget(table), compute_fraction=compute_fraction)
    return admitting_budget(paper, table, candidates, channel_ratio=channel_ratio, optimizer=optimizer,
                            batch_size=batch_size).budget
