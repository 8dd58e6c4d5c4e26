"""The wall time of the paired accuracy section, estimated from the per-task costs a run measured.

Training dominates and is proportional to the passes over the support set, so a run's measured
seconds per task and policy, divided by the passes it trained, give a cost per (task, pass) c_p
(fixed costs such as the head and the Fisher pass are folded in, which over-estimates short runs
and so errs on the long side). For a config with grid G = L x E (rates x passes), successive-halving
rounds of n_1 < ... < n_R validation tasks per target keeping k_1 = |G|, k_(r+1) = ceil(k_r / eta)
settings, N test tasks, T targets and W workers:

    tuning  = T sum_p c_p sum_r (n_r - n_(r-1)) P_r,   n_0 = 0,
              P_r = the sum of the k_r largest pass counts of G (the survivors of round r at most;
              a survivor runs only the round's new tasks, its earlier ones are stored)
    tests   = N T (sum_p c_p e_p + sum_q s_q),   e_p = max(E) (the chosen passes are at most that),
              s_q the measured seconds per task of the policies without training
    total   = (tuning + tests) / W   per backbone run of the config, summed

The costs are those of the measuring run's FullTrain batch: a config with another
``full_train_batch`` takes another number of FullTrain steps per pass.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from bench.config import BenchConfig
from tflite_train.sparse.policies import policy_spec


def per_epoch_costs(run: Mapping) -> dict[str, float]:
    """Policy label -> measured seconds per (task, pass) of one backbone run of ``results.json`` (policies
    with no finished task are left out)."""
    out = {}
    for label, cost in run["cost"].items():
        if cost.get("seconds_per_task") is None:
            continue
        epochs = run["methods"][label]["adapt"].get("epochs") or 1
        out[label] = cost["seconds_per_task"] / epochs
    return out


def tuning_passes(config: BenchConfig) -> float:
    """sum_r (n_r - n_(r-1)) P_r of the module docstring: passes per target and training policy."""
    grid = config.tuning_grid
    if len(grid) == 1:
        return 0.0
    passes = sorted((e for _, e in grid), reverse=True)
    kept, before, total = len(grid), 0, 0.0
    for n in config.tuning_schedule:
        total += (n - before) * sum(passes[:kept])
        before, kept = n, math.ceil(kept / config.halving_eta)
    return total


def estimate_seconds(config: BenchConfig, runs: Mapping[str, Mapping], num_targets: int) -> dict[str, dict]:
    """Per backbone run of ``config`` measured in ``runs``: ``{"tuning": s, "tests": s, "total": s}``
    (module docstring). Runs of ``runs`` that ``config`` does not have are left out.
    """
    out = {}
    wanted = {b.key for b in config.backbones}
    per_target_passes = tuning_passes(config)
    longest = max(config.epochs_grid)
    for key, run in runs.items():
        if key not in wanted or "cost" not in run:
            continue
        costs = per_epoch_costs(run)
        trained = {label: c for label, c in costs.items()
                   if policy_spec(run["methods"][label]["adapt"]["policy"]).trains}
        fixed = sum(run["cost"][label]["seconds_per_task"] for label in costs if label not in trained)
        tuning = num_targets * per_target_passes * sum(trained.values())
        tests = config.tasks * num_targets * (longest * sum(trained.values()) + fixed)
        out[key] = {"tuning": tuning / config.workers, "tests": tests / config.workers,
                    "total": (tuning + tests) / config.workers}
    return out
