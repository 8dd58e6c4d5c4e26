"""Mean and 95 % confidence interval over tasks (the paper's Table 1 convention)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np

Z_95 = 1.959963984540054
"""Two-sided 95 % normal quantile (Meta-Dataset reports mean ± 1.96 · std / sqrt(N))."""


@dataclasses.dataclass(frozen=True)
class MeanCI:
    """mean ± ci95 of ``n`` values (percent when built from accuracies in percent)."""

    mean: float
    ci95: float
    n: int

    def format(self, digits: int = 1) -> str:
        """``"mean ± ci"``."""
        return f"{self.mean:.{digits}f} ± {self.ci95:.{digits}f}"

    def to_dict(self) -> dict[str, float]:
        return dataclasses.asdict(self)


def mean_ci95(values: Sequence[float]) -> MeanCI:
    """mean and 1.96 · s / sqrt(n), s the sample standard deviation (ddof = 1).

    Raises:
      ValueError: fewer than 2 values or a non-finite value.
    """
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1 or x.size < 2:
        raise ValueError(f"values must be 1-D with at least 2 entries; got shape {x.shape}")
    if not np.isfinite(x).all():
        raise ValueError("values must be finite")
    return MeanCI(float(x.mean()), float(Z_95 * x.std(ddof=1) / math.sqrt(x.size)), int(x.size))
