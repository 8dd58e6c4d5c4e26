"""The wall time of the paired accuracy section, estimated from the per-task costs a finished run measured.

Training dominates and is proportional to the passes over the support set, so a run's measured
seconds per task and policy, divided by the epochs it trained, give a cost per (task, epoch) c_p
(fixed costs such as the head and the Fisher pass are folded in, which over-estimates short runs
and so errs on the long side). For a config with grid L x E (rates x epochs), V validation tasks,
N test tasks, T targets and W workers:

    tuning  = V T sum_p c_p |L| sum_(e in E) e
    tests   = N T sum_p c_p e_p,   e_p = max(E) (the longest setting; the chosen one is at most that)
    total   = (tuning + tests) / W   per backbone, summed over backbones
"""

from __future__ import annotations

from collections.abc import Mapping

from bench.config import BenchConfig


def per_epoch_costs(run: Mapping) -> dict[str, float]:
    """Policy label -> measured seconds per (task, epoch) of one backbone run of ``results.json``."""
    out = {}
    for label, cost in run["cost"].items():
        epochs = run["methods"][label]["adapt"].get("epochs") or 1
        out[label] = cost["seconds_per_task"] / epochs
    return out


def estimate_seconds(config: BenchConfig, runs: Mapping[str, Mapping], num_targets: int) -> dict[str, dict]:
    """Per backbone run key: ``{"tuning": s, "tests": s, "total": s}`` of ``config`` (module docstring).

    Policies without training (None) cost their measured seconds per task, once per test task.
    """
    out = {}
    grid_epochs = len(config.learning_rates) * sum(config.epochs_grid)
    longest = max(config.epochs_grid)
    for key, run in runs.items():
        costs = per_epoch_costs(run)
        trained = {label: c for label, c in costs.items() if run["methods"][label]["adapt"]["policy"] != "none"}
        fixed = sum(run["cost"][label]["seconds_per_task"] for label in costs if label not in trained)
        tuning = config.tuning_tasks * num_targets * grid_epochs * sum(trained.values())
        tests = config.tasks * num_targets * (longest * sum(trained.values()) + fixed)
        out[key] = {"tuning": tuning / config.workers, "tests": tests / config.workers,
                    "total": (tuning + tests) / config.workers}
    return out
