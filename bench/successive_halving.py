"""Each training policy's (learning rate, passes) by successive halving on validation tasks.

A full grid of |L| x |E| settings on every validation task costs |L| * sum(E) passes per task and policy;
most of that goes to settings that are clearly worse after a couple of tasks. Successive halving
(Jamieson & Talwalkar 2016) spends the validation budget on the promising settings instead:

  round 1:  every setting of the grid on the first n_1 validation tasks of every target;
  round r:  the best ceil(k / eta) of the k settings of round r - 1, on the first n_r tasks
            (n_1 < n_2 < ... < n_R = ``BenchConfig.tuning_tasks``);
  choice:   the best setting of round R.

"Best" is the highest mean validation accuracy (the mean over targets of the per-target task means),
ties broken towards the cheaper setting: fewer passes first, then the smaller learning rate
(``bench.learning_rates.best_setting``'s order). Each round's tasks begin with the previous round's
(the validation episodes are one seeded list per target), so a setting that survives reuses its earlier
results and runs only the new tasks (``bench.task_store``). With R = 1 this is the plain grid search.

``successive_halving`` is pure: it takes the scoring as a callback and returns every choice with every
score it saw.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

from bench.learning_rates import Setting, best_setting, setting_key, with_setting
from bench.policy_runs import Method

__all__ = ["ranked", "successive_halving"]


def ranked(scores: Mapping[Setting, float]) -> list[Setting]:
    """The settings of ``scores``, best first (``best_setting``'s order: higher score, fewer passes,
    smaller rate).

    Raises:
      ValueError: empty ``scores`` or a non-finite score (from ``best_setting``).
    """
    best_setting(scores)  # validates
    return sorted(scores, key=lambda k: (-scores[k], k[1], k[0]))


def successive_halving(
    methods: Sequence[Method],
    grid: Sequence[Setting],
    rounds: Sequence[int],
    eta: int,
    mean_accuracies: Callable[[list[Method], int], Sequence[float]],
) -> dict[str, dict]:
    """Per method label: the chosen setting and the validation scores of every round (module docstring).

    Methods without training (``adapt`` None or policy ``none``) are skipped; with a one-setting grid
    every method gets that setting without a run.

    Args:
      methods: The rows to tune (their ``adapt.learning_rate`` and ``adapt.epochs`` are replaced by
        each setting).
      grid: Candidate (learning rate, passes) settings.
      rounds: Validation tasks per target of each round, increasing (the last: all tuning tasks).
      eta: Each round but the last keeps ceil(k / eta) of its k settings per method.
      mean_accuracies: ``(trials, n) -> scores``: runs every method of ``trials`` on the first ``n``
        validation tasks of every target (in one batch, so that it can run them in parallel) and
        returns each one's mean accuracy (%), in order.

    Returns:
      ``{label: {"learning_rate", "epochs", "scores": {"lr/epochs": score of the last round},
      "rounds": [{"tasks": n_r, "scores": {"lr/epochs": score}}, ...]}}``.

    Raises:
      ValueError: an empty grid or ``rounds``, ``rounds`` not increasing, ``eta`` < 2, or a callback
        that returns another number of scores than trials.
    """
    if not grid:
        raise ValueError("grid must hold at least one setting")
    if not rounds or any(n < 1 for n in rounds) or any(a >= b for a, b in zip(rounds, rounds[1:])):
        raise ValueError(f"rounds must be increasing task counts >= 1; got {list(rounds)}")
    if isinstance(eta, bool) or not isinstance(eta, int) or eta < 2:
        raise ValueError(f"eta must be an int >= 2; got {eta!r}")
    trained = [m for m in methods if m.adapt is not None and m.adapt.policy != "none"]
    settings = [(float(lr), int(e)) for lr, e in grid]
    if len(settings) == 1:
        lr, epochs = settings[0]
        return {m.label: {"learning_rate": lr, "epochs": epochs, "scores": {}, "rounds": []} for m in trained}
    alive = {m.label: list(settings) for m in trained}
    history: dict[str, list[dict]] = {m.label: [] for m in trained}
    for r, tasks in enumerate(rounds):
        trials = [(m, s) for m in trained for s in alive[m.label]]
        scores = list(mean_accuracies([with_setting(m, s) for m, s in trials], int(tasks)))
        if len(scores) != len(trials):
            raise ValueError(f"mean_accuracies returned {len(scores)} values for {len(trials)} methods")
        for m in trained:
            seen = {s: float(a) for (n, s), a in zip(trials, scores) if n is m}
            history[m.label].append({"tasks": int(tasks), "scores": {setting_key(s): a for s, a in seen.items()}})
            keep = 1 if r == len(rounds) - 1 else math.ceil(len(seen) / eta)
            alive[m.label] = ranked(seen)[:keep]
    out = {}
    for m in trained:
        lr, epochs = alive[m.label][0]
        out[m.label] = {"learning_rate": lr, "epochs": epochs, "scores": dict(history[m.label][-1]["scores"]),
                        "rounds": history[m.label]}
    return out
