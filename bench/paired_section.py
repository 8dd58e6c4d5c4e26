"""The paired accuracy section (Table 1 shape): every policy of a backbone on the same tasks.

``Runs`` runs (method, tag, tasks) requests through ``bench.policy_runs.run_methods`` and caches the
results so rows shared between sections run once; ``paired_section`` tunes (learning rate, epochs)
per policy on validation-pool tasks and then runs every policy on the same test-pool tasks of every
target, with means, paired deltas and verdicts (``bench.paired_accuracy.summarize``).
"""

from __future__ import annotations

import concurrent.futures
import logging
import pathlib
import time

import numpy as np

from bench.config import BenchConfig
from bench.learning_rates import choose_settings, with_settings
from bench.methods import paired_methods
from bench.models import SPARSE, ensure_models, export_configs, model_key
from bench.paired_accuracy import summarize
from bench.policy_runs import Job, Method, memory_budget_bytes, run_methods, source_fisher_tasks
from bench.tasks import Task, source_tasks, target_pools, target_tasks
from bench.validation_split import VALIDATION
from tflite_train import contract as C
from tflite_train.data import read_manifest
from tflite_train.runtime import TrainableModel, layer_table

__all__ = ["Runs", "paired_section", "source_fisher", "split_sizes"]

LOG = logging.getLogger(__name__)


class Runs:
    """Runs (method, tag, tasks) requests through ``run_methods``, caching results by (model,
    config, tag, task count) so shared rows run once; with ``executor``, each batch of requests
    is spread over its worker processes at once. ``fisher_tasks``: model key -> source-task Fisher
    of SparseUpdate's static ranking (where it has no fixed layer list)."""

    def __init__(self, config: BenchConfig, paths: dict[str, pathlib.Path], fisher_tasks: dict[str, list],
                 executor: concurrent.futures.Executor | None) -> None:
        self.config, self.paths, self.fisher_tasks, self.executor, self.cache = config, paths, fisher_tasks, executor, {}

    def run_many(self, requests: list[tuple[Method, str, list[Task]]]) -> list[dict]:
        keys = [(m.model, m.adapt, tag, len(tasks)) for m, tag, tasks in requests]
        todo = {}
        for key, (method, tag, tasks) in zip(keys, requests):
            if key not in self.cache and key not in todo:
                fisher = self.fisher_tasks.get(method.model) if method.adapt.policy == "sparse_update" else None
                todo[key] = Job(method, self.paths[method.model], tasks, fisher, progress=tag)
        results = run_methods(list(todo.values()), threads=self.config.threads, executor=self.executor)
        for key, result in zip(todo, results):
            self.cache[key] = result.to_dict()
        return [{**self.cache[key], "label": method.label} for key, (method, _, _) in zip(keys, requests)]


def source_fisher(config: BenchConfig, model_path: pathlib.Path) -> list | None:
    """Fisher of 8 source meta-training tasks on ``model_path`` (SparseUpdate's static ranking), or None
    when the cache has no source data set."""
    source = [name for name, e in read_manifest(config.cache_dir)["datasets"].items() if e["role"] == "source"]
    if not source:
        return None
    return source_fisher_tasks(model_path, source_tasks(config, source[0], 8), config.threads)


def paired_section(config: BenchConfig, targets: tuple[str, ...], paths: dict[str, pathlib.Path], runs: Runs,
                    previous: dict | None) -> dict:
    """The paired accuracy section: per backbone run, (lr, epochs) tuned per policy on validation-pool
    tasks, then every policy on the same test-pool tasks of every target; means, paired deltas, verdicts."""
    validation = {t: target_tasks(config, t, config.tuning_tasks, VALIDATION) for t in targets}
    tests = {t: target_tasks(config, t, config.tasks) for t in targets}
    pools = {t: target_pools(config, t)[1].summary(target_pools(config, t)[0].labels) for t in targets}
    out = {"pools": pools, "runs": {}}
    for run in config.backbones:
        t0 = time.time()
        # exported when first needed (in run order), so a cached backbone starts while another is missing
        paths.update(ensure_models(config, tuple(k for k in export_configs(config) if k.startswith(run.key + "/"))))
        sparse = paths[model_key(run, SPARSE)]
        probe = TrainableModel(str(sparse), num_threads=config.threads)
        memory = memory_budget_bytes(layer_table(probe.metadata), config.memory_budget_mib)
        methods = paired_methods(config, run, memory, probe.candidates)
        for m in methods:
            if m.adapt.policy == "sparse_update" and m.adapt.sparse_update_layers is None and m.model not in runs.fisher_tasks:
                runs.fisher_tasks[m.model] = source_fisher(config, paths[m.model])

        def mean_accuracies(trials: list[Method]) -> list[float]:
            rows = runs.run_many([(m, f"{run.key} validation/{t}", validation[t]) for m in trials for t in targets])
            return [float(np.mean([np.mean(r["accuracies"]) for r in trial]))  # mean over targets of target means
                    for trial in split_sizes(rows, [len(targets)] * len(trials))]

        kept = (previous or {}).get("runs", {}).get(run.key, {}).get("tuning")
        tuning = kept if kept is not None else choose_settings(methods, config.tuning_grid, mean_accuracies)
        tuned_seconds = time.time() - t0
        methods = with_settings(methods, tuning)
        LOG.info("%s settings: %s", run.key, {k: (v["learning_rate"], v["epochs"]) for k, v in tuning.items()})
        t0 = time.time()
        done = iter(runs.run_many([(m, f"{run.key} {t}", tests[t]) for t in targets for m in methods]))
        per_target = {t: {m.label: next(done) for m in methods} for t in targets}
        accuracies = {m.label: {t: per_target[t][m.label]["accuracies"] for t in targets} for m in methods}
        out["runs"][run.key] = {
            "backbone": run.backbone, "input_size": run.input_size, "label": run.label,
            "weights": run.weights, "baseline_weights": run.baseline_weights, "meta_trained": run.meta_trained,
            "memory_budget_bytes": memory, C.F_CANDIDATES: list(probe.candidates),
            "model_bytes": sparse.stat().st_size, "tuning": tuning,
            "methods": {m.label: {"model": m.model, "adapt": m.adapt.to_dict()} for m in methods},
            "per_target": {t: {label: {k: v for k, v in r.items() if k != "label"} for label, r in rows.items()}
                           for t, rows in per_target.items()},
            "cost": {m.label: {"memory_bytes": float(np.mean([per_target[t][m.label]["memory_bytes"] for t in targets])),
                               "backward_macs": float(np.mean([per_target[t][m.label]["backward_macs"] for t in targets])),
                               "seconds_per_task": float(sum(per_target[t][m.label]["seconds"] for t in targets)
                                                         / (len(targets) * config.tasks))} for m in methods},
            "summary": summarize(accuracies, targets),
            "seconds": {"tuning": tuned_seconds, "tests": time.time() - t0},
        }
    return out


def split_sizes(items: list, sizes: list[int]) -> list[list]:
    """``items`` cut into consecutive pieces of ``sizes``."""
    bounds = np.cumsum([0, *sizes])
    return [items[a:b] for a, b in zip(bounds[:-1], bounds[1:])]
