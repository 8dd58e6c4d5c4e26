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
the one definition used by the CLI (``adapt`` without ``--mem-budget``), the demo, the benchmark and
the Java core (``Budget.scaledMemoryBytes``). An explicit ``--mem-budget`` / ``memory_bytes`` is an
absolute number of bytes (the device's own limit) and is not scaled.

Both bounds are inclusive: a cost exactly equal to the budget fits. The paper's example budget for
MCUNet@128 is about 1 MB and 15 % of the backward pass: ``Budget(memory_bytes=2**20,
compute_fraction=0.15)``; for any model, ``Budget(scaled_memory_budget(table), compute_fraction=0.15)``.
Missing bounds are unlimited.
"""

from __future__ import annotations

import dataclasses
import math

from tflite_train.sparse.cost_model import BackwardCost, backward_cost, full_backward_macs
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
