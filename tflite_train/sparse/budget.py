"""Backward-pass budgets (B_mem, B_compute of paper Algorithm 1) and the error for one that fits nothing.

A :class:`Budget` bounds the :class:`~tflite_train.sparse.cost_model.BackwardCost` of a selection:

    cost.total_bytes   <= memory_bytes                                   (B_mem)
    cost.backward_macs <= compute_macs                                   (B_compute, absolute), or
    cost.backward_macs <= compute_fraction * total_forward_macs(table)   (B_compute, relative)

Both bounds are inclusive: a cost exactly equal to the budget fits. The paper's example budget is
about 1 MB and 15 % of the model's (forward) MACs: ``Budget(memory_bytes=2**20, compute_fraction=0.15)``.
Missing bounds are unlimited.
"""

from __future__ import annotations

import dataclasses
import math

from tflite_train.sparse.cost_model import BackwardCost, total_forward_macs
from tflite_train.sparse.layer_table import LayerTable


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
      compute_fraction: B_compute as a fraction of the model's total forward MACs (e.g. 0.15; may
        exceed 1 since a full backward pass costs about 2x the forward pass); None = not given.
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
        """B_compute in MACs: ``compute_macs``, or ``compute_fraction * total_forward_macs(table)``, or inf."""
        if self.compute_macs is not None:
            return float(self.compute_macs)
        if self.compute_fraction is not None:
            return self.compute_fraction * total_forward_macs(table)
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
