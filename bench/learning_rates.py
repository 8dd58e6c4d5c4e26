"""Each policy's Adam learning rate and epochs, chosen on validation tasks that no reported task uses.

Methods that update 0.1 MiB of weights at batch 1 and methods that update every weight at batch 50
share neither a best learning rate nor a best training length, so one fixed setting would favour
whichever method it happens to suit. For every policy with training steps, the benchmark runs each
(learning rate, epochs) pair of ``BenchConfig.tuning_grid`` on ``BenchConfig.tuning_tasks`` episodes
per target drawn from that target's *validation pool* (``bench.validation_split``: images, or whole
classes, that no reported task contains) and keeps the pair with the best mean accuracy over all
targets (``best_setting``); the reported tables then use the chosen pair on the test-pool tasks.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence

from bench.policy_runs import Method

Setting = tuple[float, int]
"""(learning rate, epochs)."""


def setting_key(setting: Setting) -> str:
    """``"lr/epochs"``: the JSON key of a setting's score."""
    return f"{setting[0]:g}/{setting[1]}"


def best_setting(scores: Mapping[Setting, float]) -> Setting:
    """argmax_(lr, epochs) scores; ties go to fewer epochs, then the smaller rate (the cheaper, more
    conservative update).

    Args:
      scores: (learning rate, epochs) -> mean validation accuracy.

    Raises:
      ValueError: empty ``scores`` or a non-finite score.
    """
    if not scores:
        raise ValueError("scores must hold at least one setting")
    bad = {k: s for k, s in scores.items() if not math.isfinite(s)}
    if bad:
        raise ValueError(f"scores must be finite; got {bad}")
    return min(scores, key=lambda k: (-scores[k], k[1], k[0]))


def best_learning_rate(scores: Mapping[float, float]) -> float:
    """argmax_lr scores[lr] (one epoch count); ties go to the smaller rate."""
    return best_setting({(lr, 0): s for lr, s in scores.items()})[0]


def choose_settings(
    methods: Sequence[Method],
    grid: Sequence[Setting],
    mean_accuracies: Callable[[list[Method]], Sequence[float]],
) -> dict[str, dict]:
    """Per method label: ``{"learning_rate": lr, "epochs": e, "scores": {"lr/epochs": mean accuracy}}``.

    Methods without training (``adapt`` None or policy ``none``) are skipped; with a one-setting grid
    every method gets that setting without a run.

    Args:
      methods: The rows to tune (their ``adapt.learning_rate`` and ``adapt.epochs`` are replaced by
        each grid setting).
      grid: Candidate (learning rate, epochs) pairs.
      mean_accuracies: Runs a list of methods on the validation tasks (in one batch, so that it can
        run them in parallel) and returns each one's mean accuracy (%).
    """
    if not grid:
        raise ValueError("grid must hold at least one setting")
    trained = [m for m in methods if m.adapt is not None and m.adapt.policy != "none"]
    if len(grid) == 1:
        lr, epochs = grid[0]
        return {m.label: {"learning_rate": float(lr), "epochs": int(epochs), "scores": {}} for m in trained}
    trials = [with_setting(m, s) for m in trained for s in grid]
    accuracies = list(mean_accuracies(trials))
    if len(accuracies) != len(trials):
        raise ValueError(f"mean_accuracies returned {len(accuracies)} values for {len(trials)} methods")
    out = {}
    for k, method in enumerate(trained):
        scores = {(float(lr), int(e)): float(a) for (lr, e), a in zip(grid, accuracies[k * len(grid):(k + 1) * len(grid)])}
        lr, epochs = best_setting(scores)
        out[method.label] = {"learning_rate": lr, "epochs": epochs,
                             "scores": {setting_key(s): a for s, a in scores.items()}}
    return out


def with_setting(method: Method, setting: Setting) -> Method:
    """``method`` training at (learning rate, epochs) = ``setting``."""
    lr, epochs = setting
    return dataclasses.replace(method, adapt=dataclasses.replace(method.adapt, learning_rate=float(lr),
                                                                 epochs=int(epochs)))


def with_settings(methods: Sequence[Method], chosen: Mapping[str, Mapping]) -> list[Method]:
    """``methods`` with the chosen learning rate and epochs (label -> choice) where given."""
    return [m if m.adapt is None or m.label not in chosen else
            with_setting(m, (chosen[m.label]["learning_rate"], chosen[m.label]["epochs"])) for m in methods]
