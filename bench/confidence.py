"""Means and paired differences with 95 % Student-t confidence intervals over tasks.

Three estimates, all two-sided 95 %:

* ``mean_ci95(x)``: one policy on one target, n tasks:
    mean ± t_{0.975, n-1} · s / sqrt(n),  s the sample standard deviation (ddof = 1).
* ``paired_delta_ci95(a, b)``: policy A − policy B on the *same* n tasks: the interval above on the
  per-task differences d_i = a_i − b_i (a paired t-interval; the task-to-task variation that both
  policies share cancels, so it is much narrower than the two unpaired intervals suggest).
* ``mean_over_groups_ci95(groups)``: the average over T targets, defined as the mean of the per-target
  means (each target weighs the same whatever its N), with targets' tasks independent:
    m = (1/T) Σ_t mean_t,   SE² = (1/T²) Σ_t s_t² / n_t,
    df = (Σ_t v_t)² / Σ_t (v_t² / (n_t − 1)),  v_t = s_t² / n_t   (Welch–Satterthwaite),
    m ± t_{0.975, df} · SE.
  Given per-target *differences*, it is the paired CI of the average delta.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np
from scipy import stats

LEVEL = 0.95


def t_quantile(df: float) -> float:
    """t_{0.975, df}: the two-sided 95 % quantile of Student's t with ``df`` degrees of freedom."""
    return float(stats.t.ppf(0.5 + LEVEL / 2, df))


@dataclasses.dataclass(frozen=True)
class MeanCI:
    """mean ± ci95 of ``n`` values (percent when built from accuracies in percent); ``df`` of the t quantile."""

    mean: float
    ci95: float
    n: int
    df: float = math.nan

    def format(self, digits: int = 1, signed: bool = False) -> str:
        """``"mean ± ci"`` (``signed``: "+1.2 ± 0.3")."""
        sign = "+" if signed else ""
        return f"{self.mean:{sign}.{digits}f} ± {self.ci95:.{digits}f}"

    @property
    def low(self) -> float:
        return self.mean - self.ci95

    @property
    def high(self) -> float:
        return self.mean + self.ci95

    def to_dict(self) -> dict[str, float]:
        return dataclasses.asdict(self)


def _values(values: Sequence[float], name: str = "values") -> np.ndarray:
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1 or x.size < 2:
        raise ValueError(f"{name} must be 1-D with at least 2 entries; got shape {x.shape}")
    if not np.isfinite(x).all():
        raise ValueError(f"{name} must be finite")
    return x


def mean_ci95(values: Sequence[float]) -> MeanCI:
    """mean ± t_{0.975, n-1} · s / sqrt(n) (module docstring).

    Raises:
      ValueError: fewer than 2 values or a non-finite value.
    """
    x = _values(values)
    df = x.size - 1
    return MeanCI(float(x.mean()), float(t_quantile(df) * x.std(ddof=1) / math.sqrt(x.size)), int(x.size), float(df))


def paired_delta_ci95(a: Sequence[float], b: Sequence[float]) -> MeanCI:
    """Mean of a_i − b_i with the paired t-interval (``a`` and ``b`` scored on the same tasks, in order).

    Raises:
      ValueError: different lengths, fewer than 2 pairs or a non-finite value.
    """
    x, y = _values(a, "a"), _values(b, "b")
    if x.shape != y.shape:
        raise ValueError(f"paired values need the same tasks: {x.size} vs {y.size} values")
    return mean_ci95(x - y)


def mean_over_groups_ci95(groups: Sequence[Sequence[float]]) -> MeanCI:
    """The mean over groups (targets) of each group's mean, with the Welch–Satterthwaite t-interval.

    ``n`` of the result is the total number of values. With one group it equals ``mean_ci95``.

    Raises:
      ValueError: no group, or a group with fewer than 2 values or a non-finite value.
    """
    if len(groups) == 0:
        raise ValueError("groups must hold at least one group")
    arrays = [_values(g, f"group {k}") for k, g in enumerate(groups)]
    count = len(arrays)
    v = np.array([x.var(ddof=1) / x.size for x in arrays]) / count**2
    n = np.array([x.size for x in arrays])
    mean = float(np.mean([x.mean() for x in arrays]))
    se = math.sqrt(float(v.sum()))
    denominator = float(np.sum(v**2 / (n - 1)))
    df = float(v.sum() ** 2 / denominator) if denominator > 0 else float(np.sum(n - 1))
    return MeanCI(mean, t_quantile(df) * se, int(n.sum()), df)
