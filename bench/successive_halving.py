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
(``bench.learning_rates.best_setting``'s order) -- among the settings that *train*. A setting that left
the untrained row's (``bench.methods.no_update_row``) query predictions unchanged (equal accuracy, for
tasks stored before predictions were) on more than ``NO_OP_SHARE`` of the round's validation tasks
changed (almost) nothing: it ranks below every setting that did,
whatever its score. Without this rule a policy whose updates hurt on validation picks its smallest rate
and is reported as a copy of None (SparseUpdate on Lite0 chose 3e-5 and equalled None on 48 of 60 Tux
Paint test tasks); the benchmark compares training policies, so each one is measured training.

Each round's tasks begin with the previous round's (the validation episodes are one seeded list per
target), so a setting that survives reuses its earlier results and runs only the new tasks
(``bench.task_store``). With R = 1 this is the plain grid search.

``successive_halving`` is pure: it takes the scoring as a callback and returns every choice with every
score it saw.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence

from bench.learning_rates import Setting, best_setting, setting_key, with_setting
from bench.policy_runs import Method
from bench.task_store import stored_adapt
from tflite_train.sparse.policies import policy_spec

__all__ = ["NO_OP_SHARE", "TUNING_RULE", "ValidationScore", "kept_choices", "ranked", "successive_halving"]

NO_OP_SHARE = 0.5
"""A training setting or policy that leaves the untrained row's query predictions unchanged on more than
this share of its tasks is a no-op: ranked last by the tuning, flagged in the report."""
TUNING_RULE = "no-ops last"
"""Recorded beside a run's tuning choices: a saved run's choices are kept only if made by this rule."""


def kept_choices(saved: Mapping, methods: Sequence[Method], model_ids: Mapping[str, str]) -> dict[str, dict]:
    """The saved run's tuning choices that still hold, per method label.

    A choice is kept when the saved run was tuned by ``TUNING_RULE`` and its method is unchanged: the same
    model key with the same model id, and the same adaptation config apart from the tuned learning rate
    and passes. A method whose policy, budget or selection changed (or a new method) is tuned again, alone:
    the others keep their choices and their stored test tasks.

    Args:
      saved: A saved backbone run of ``results.json`` (``tuning``, ``tuning_rule``, ``methods``,
        ``model_ids``), or ``{}``.
      methods: This run's rows (learning rate and epochs are placeholders).
      model_ids: This run's model key -> model id.
    """
    if saved.get("tuning_rule") != TUNING_RULE:
        return {}

    def untuned(adapt: Mapping) -> dict:
        return {k: v for k, v in stored_adapt(adapt).items() if k not in ("learning_rate", "epochs")}

    saved_methods, saved_ids, tuning = saved.get("methods", {}), saved.get("model_ids", {}), saved.get("tuning", {})
    out = {}
    for m in methods:
        before = saved_methods.get(m.label)
        if (m.adapt is None or m.label not in tuning or before is None or before.get("model") != m.model
                or saved_ids.get(m.model) != model_ids.get(m.model)):
            continue
        if untuned(before.get("adapt", {})) == untuned(m.adapt.to_dict()):
            out[m.label] = tuning[m.label]
    return out


@dataclasses.dataclass(frozen=True)
class ValidationScore:
    """One setting's result on a round's validation tasks.

    Attributes:
      accuracy: Mean accuracy (%), the mean over targets of the per-target task means.
      unchanged: Share of the tasks (all targets pooled) the adaptation left as the untrained row had them
        (``bench.task_store.TaskRecord.unchanged_from``: equal predictions, or equal accuracy for tasks
        stored without predictions).
    """

    accuracy: float
    unchanged: float = 0.0


def ranked(scores: Mapping[Setting, float], unchanged: Mapping[Setting, float] | None = None) -> list[Setting]:
    """The settings of ``scores``, best first: settings that train before no-ops (``unchanged`` share >
    ``NO_OP_SHARE``; none without ``unchanged``), then ``best_setting``'s order (higher score, fewer
    passes, smaller rate).

    Raises:
      ValueError: empty ``scores`` or a non-finite score (from ``best_setting``).
    """
    best_setting(scores)  # validates
    unchanged = unchanged or {}
    return sorted(scores, key=lambda k: (unchanged.get(k, 0.0) > NO_OP_SHARE, -scores[k], k[1], k[0]))


def successive_halving(
    methods: Sequence[Method],
    grid: Sequence[Setting],
    rounds: Sequence[int],
    eta: int,
    mean_accuracies: Callable[[list[Method], int], Sequence[ValidationScore]],
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
        returns each one's ``ValidationScore``, in order.

    Returns:
      ``{label: {"learning_rate", "epochs", "scores": {"lr/epochs": score of the last round},
      "rounds": [{"tasks": n_r, "scores": {"lr/epochs": score}, "unchanged": {"lr/epochs": share}}, ...]}}``.

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
    trained = [m for m in methods if m.adapt is not None and policy_spec(m.adapt.policy).trains]
    if not trained:
        return {}
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
            mine = [(s, score) for (n, s), score in zip(trials, scores) if n is m]
            seen = {s: float(score.accuracy) for s, score in mine}
            unchanged = {s: float(score.unchanged) for s, score in mine}
            history[m.label].append({"tasks": int(tasks), "scores": {setting_key(s): a for s, a in seen.items()},
                                     "unchanged": {setting_key(s): u for s, u in unchanged.items()}})
            keep = 1 if r == len(rounds) - 1 else math.ceil(len(seen) / eta)
            alive[m.label] = ranked(seen, unchanged)[:keep]
    out = {}
    for m in trained:
        lr, epochs = alive[m.label][0]
        out[m.label] = {"learning_rate": lr, "epochs": epochs, "scores": dict(history[m.label][-1]["scores"]),
                        "rounds": history[m.label]}
    return out
