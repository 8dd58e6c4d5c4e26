"""Each method's Adam learning rate, chosen on tuning episodes disjoint from the reported ones.

Methods that update 0.1 MiB of weights at batch 1 and methods that update every weight at batch 50
do not share a best learning rate, so one fixed rate would favour whichever method it happens to
suit. For every method with training steps, the benchmark runs each rate of
``BenchConfig.learning_rates`` on ``BenchConfig.tuning_tasks`` episodes per target drawn with a
different seed (``tuning_config``) and keeps the rate with the best mean accuracy over all targets
(``best_learning_rate``); the reported tables then use the chosen rates on the benchmark's own
episodes. The targets have no validation classes, so tuning episodes share the test classes (not
the episodes): the choice is optimistic for every method alike.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence

from bench.config import BenchConfig
from bench.policy_runs import Method

TUNING_SEED_OFFSET = 7919
"""Added to ``BenchConfig.seed`` for the tuning episodes (a prime, far from any task index)."""


def tuning_config(config: BenchConfig) -> BenchConfig:
    """``config`` with the tuning episodes' seed (``target_tasks`` of it gives the tuning tasks)."""
    return dataclasses.replace(config, seed=config.seed + TUNING_SEED_OFFSET)


def best_learning_rate(scores: Mapping[float, float]) -> float:
    """argmax_lr scores[lr]; ties go to the smaller rate (the more conservative update).

    Args:
      scores: learning rate -> mean tuning accuracy.

    Raises:
      ValueError: empty ``scores`` or a non-finite score.
    """
    if not scores:
        raise ValueError("scores must hold at least one learning rate")
    bad = {lr: s for lr, s in scores.items() if not math.isfinite(s)}
    if bad:
        raise ValueError(f"scores must be finite; got {bad}")
    return min(scores, key=lambda lr: (-scores[lr], lr))


def choose_learning_rates(
    methods: Sequence[Method],
    grid: Sequence[float],
    mean_accuracies: Callable[[list[Method]], Sequence[float]],
) -> dict[str, dict]:
    """Per method label: ``{"chosen": lr, "scores": {lr: mean accuracy}}``.

    Methods without training (``adapt`` None or policy ``none``) are skipped; with a one-rate grid
    every method gets that rate without a run.

    Args:
      methods: The rows to tune (their ``adapt.learning_rate`` is replaced by each grid rate).
      grid: Candidate rates.
      mean_accuracies: Runs a list of methods on the tuning tasks (in one batch, so that it can
        run them in parallel) and returns each one's mean accuracy (%).
    """
    if not grid:
        raise ValueError("grid must hold at least one learning rate")
    trained = [m for m in methods if m.adapt is not None and m.adapt.policy != "none"]
    if len(grid) == 1:
        return {m.label: {"chosen": float(grid[0]), "scores": {}} for m in trained}
    trials = [dataclasses.replace(m, adapt=dataclasses.replace(m.adapt, learning_rate=lr)) for m in trained for lr in grid]
    accuracies = list(mean_accuracies(trials))
    if len(accuracies) != len(trials):
        raise ValueError(f"mean_accuracies returned {len(accuracies)} values for {len(trials)} methods")
    out = {}
    for k, method in enumerate(trained):
        scores = {float(lr): float(a) for lr, a in zip(grid, accuracies[k * len(grid):(k + 1) * len(grid)])}
        out[method.label] = {"chosen": best_learning_rate(scores), "scores": {str(lr): a for lr, a in scores.items()}}
    return out


def with_learning_rates(methods: Sequence[Method], chosen: Mapping[str, float]) -> list[Method]:
    """``methods`` with ``adapt.learning_rate`` set from ``chosen`` (label -> rate) where given."""
    return [m if m.adapt is None or m.label not in chosen else
            dataclasses.replace(m, adapt=dataclasses.replace(m.adapt, learning_rate=chosen[m.label]))
            for m in methods]
