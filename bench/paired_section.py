"""The paired accuracy section (Table 1 shape): every policy of a backbone on the same tasks.

``Runs`` runs (method, target, pool, tasks) requests through ``bench.policy_runs.run_records``; every
finished task is stored in its cell file (``bench.task_store``), so a rerun with the same config runs
only the tasks that are missing. ``paired_section`` chooses each policy's (learning rate, passes) by
successive halving on validation-pool tasks (``bench.successive_halving``) and then runs every policy on
the same test-pool tasks of every target; ``assemble_run`` turns the stored tasks into means, paired
deltas, verdicts and the no-op check (also for a partial run: ``refresh_partial``).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import logging
import os
import pathlib
import time
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from bench.config import BenchConfig
from bench.learning_rates import with_settings
from bench.methods import no_update_row, paired_methods
from bench.models import BASELINE, BASELINE_FULL, FULL, SPARSE, ensure_models, model_key
from bench.paired_accuracy import summarize
from bench.policy_runs import Job, Method, MethodResult, model_memory_budget, run_records, source_fisher_tasks
from bench.successive_halving import NO_OP_SHARE, TUNING_RULE, ValidationScore, kept_choices, successive_halving
from bench.task_store import TaskRecord, model_identity, open_cell, read_records, stored_cells, task_fingerprint
from bench.tasks import Task, cache_for_size, source_tasks, target_pools, target_tasks
from bench.validation_split import TEST, VALIDATION
from tflite_train import contract as C
from tflite_train.data import read_manifest
from tflite_train.runtime import TrainableModel
from tflite_train.sparse.policies import policy_spec

__all__ = ["Request", "Runs", "assemble_run", "paired_section", "refresh_partial", "split_sizes"]

LOG = logging.getLogger(__name__)
SOURCE_FISHER_TASKS = 8
"""Source meta-training tasks of SparseUpdate's static Fisher ranking."""


@dataclasses.dataclass(frozen=True, eq=False)
class Request:
    """One method on the first ``len(tasks)`` tasks of a target's pool."""

    method: Method
    target: str
    pool: str
    tasks: Sequence[Task]
    progress: str = ""
    """Prefix of the per-task log lines."""


class Runs:
    """Runs ``Request``s, storing every finished task in its cell file under ``config.out_dir`` and
    skipping the tasks stored there already; with ``executor``, each batch of requests is spread over
    its worker processes at once.

    Args:
      config: The run (out_dir, threads, seed and sampler of the source tasks).
      paths: Model key -> exported ``.tflite``.
      executor: A process pool, or None (this process).
      interpreter: The interpreter module and version (part of every cell's key).
    """

    def __init__(self, config: BenchConfig, paths: dict[str, pathlib.Path],
                 executor: concurrent.futures.Executor | None, interpreter: str) -> None:
        self.config, self.paths, self.executor, self.interpreter = config, paths, executor, interpreter
        self._identity: dict[pathlib.Path, dict] = {}
        self._fingerprints: dict[Task, str] = {}
        self._fisher: dict[str, list | None] = {}
        self._source: dict[int, tuple[str, list[Task]]] = {}
        self._input_size: dict[str, int] = {}

    def fingerprints(self, tasks: Sequence[Task]) -> list[str]:
        """``task_fingerprint`` of each task (memoised per task object)."""
        for task in tasks:
            if task not in self._fingerprints:
                self._fingerprints[task] = task_fingerprint(task)
        return [self._fingerprints[task] for task in tasks]

    def identity(self, model: str) -> dict:
        """``task_store.model_identity`` of model key ``model``."""
        path = pathlib.Path(self.paths[model])
        if path not in self._identity:
            self._identity[path] = model_identity(path)
        return self._identity[path]

    def input_size(self, model: str) -> int:
        """The input height of model key ``model`` (its metadata, read once)."""
        from tflite_train.runtime import read_metadata

        if model not in self._input_size:
            self._input_size[model] = int(read_metadata(str(self.paths[model]))[C.F_INPUT][C.F_HEIGHT])
        return self._input_size[model]

    def _source_tasks(self, model: str) -> tuple[str, list[Task]] | None:
        """The first source data set's meta-training tasks, from the cache for ``model``'s input size."""
        size = self.input_size(model)
        if size not in self._source:
            names = [n for n, e in read_manifest(self.config.cache_dir)["datasets"].items() if e["role"] == "source"]
            self._source[size] = (names[0], source_tasks(self.config, names[0], SOURCE_FISHER_TASKS, size)) \
                if names else ("", [])
        return self._source[size] if self._source[size][1] else None

    @staticmethod
    def needs_fisher(method: Method) -> bool:
        """SparseUpdate without a fixed layer list ranks layers by the source tasks' Fisher."""
        return policy_spec(method.adapt.policy).static_ranking and method.adapt.sparse_update_layers is None

    def fisher(self, model: str) -> list | None:
        """The source tasks' Fisher on model key ``model`` (computed once; None without a source data set)."""
        if model not in self._fisher:
            source = self._source_tasks(model)
            self._fisher[model] = None if source is None else source_fisher_tasks(
                self.paths[model], source[1], self.config.threads)
        return self._fisher[model]

    def cell(self, request: Request) -> pathlib.Path:
        """The cell file of ``request`` (created with its header when new)."""
        method = request.method
        fisher = None
        if self.needs_fisher(method):
            source = self._source_tasks(method.model)
            fisher = None if source is None else {"source": source[0], "tasks": self.fingerprints(source[1])}
        cell = {"model": self.identity(method.model), "adapt": method.adapt.to_dict(), "target": request.target,
                "pool": request.pool, "fisher": fisher, "interpreter": self.interpreter, "threads": self.config.threads}
        return open_cell(self.config.out_dir, method.model, method.label, request.target, request.pool, cell)

    def run_many(self, requests: Sequence[Request]) -> list[list[TaskRecord]]:
        """Each request's task records, in task order; runs only the tasks its cell file lacks.

        Raises:
          ValueError: a request's method has no adaptation config.
          RuntimeError: a task is still missing after its run.
        """
        for r in requests:
            if r.method.adapt is None:
                raise ValueError(f"method {r.method.label!r} has no adaptation config (not built)")
        cells = [self.cell(r) for r in requests]
        longest: dict[pathlib.Path, Request] = {}
        for path, r in zip(cells, requests):  # requests of one cell are prefixes of the same task list
            if path not in longest or len(r.tasks) > len(longest[path].tasks):
                longest[path] = r
        jobs = []
        for path, r in longest.items():
            done = read_records(path, self.fingerprints(r.tasks))
            missing = [i for i in range(len(r.tasks)) if i not in done]
            if missing:
                fisher = self.fisher(r.method.model) if self.needs_fisher(r.method) else None
                jobs.append(Job(r.method, self.paths[r.method.model], [r.tasks[i] for i in missing], fisher,
                                progress=r.progress, indices=missing, total=len(r.tasks), store=path))
        if jobs:
            run_records(jobs, threads=self.config.threads, executor=self.executor)
        out = []
        for path, r in zip(cells, requests):
            done = read_records(path, self.fingerprints(r.tasks))
            missing = [i for i in range(len(r.tasks)) if i not in done]
            if missing:
                raise RuntimeError(f"{path}: tasks {missing} are missing after their run")
            out.append([done[i] for i in range(len(r.tasks))])
        return out

    def relative(self, path: pathlib.Path) -> str:
        """``path`` relative to ``config.out_dir`` (as results.json names cell files)."""
        return os.path.relpath(path, self.config.out_dir)


def paired_section(config: BenchConfig, targets: tuple[str, ...], paths: dict[str, pathlib.Path], runs: Runs,
                    previous: dict | None, checkpoint: Callable[[dict], None] | None = None) -> dict:
    """The paired accuracy section: per backbone run, (lr, passes) chosen per policy by successive halving
    on validation-pool tasks, then every policy on the same test-pool tasks of every target; means, paired
    deltas, verdicts, the no-op check.

    Args:
      config, targets, paths, runs: The run, its targets, model paths and task runner.
      previous: A saved run whose tuning choices are kept (or None).
      checkpoint: Called with the section so far whenever it changes stage (before the tuning rounds and
        the test tasks, and after each backbone), so that a partial run can be rendered.
    """
    save = checkpoint or (lambda section: None)
    pools = {}
    for t in targets:
        data, split = target_pools(config, t)
        pools[t] = split.summary(data.labels)
    out = {"pools": pools, "runs": {}}
    for run in config.backbones:
        t0 = time.time()
        # each backbone's images come from the cache at its input size (bench.tasks.cache_for_size)
        validation = {t: target_tasks(config, t, config.tuning_tasks, VALIDATION, run.input_size) for t in targets}
        tests = {t: target_tasks(config, t, config.tasks, TEST, run.input_size) for t in targets}
        # exported when first needed (in run order), so a cached backbone starts while another is missing
        paths.update(ensure_models(config, tuple(model_key(run, m) for m in (SPARSE, FULL, BASELINE, BASELINE_FULL))))
        sparse = paths[model_key(run, SPARSE)]
        probe = TrainableModel(str(sparse), num_threads=config.threads)
        memory = model_memory_budget(config, probe)
        methods = paired_methods(config, run, memory, probe.candidates)
        entry = out["runs"][run.key] = {
            "backbone": run.backbone, "input_size": run.input_size, "label": run.label,
            "weights": run.weights, "baseline_weights": run.baseline_weights, "meta_trained": run.meta_trained,
            "memory_budget_bytes": memory, C.F_CANDIDATES: list(probe.candidates),
            "cache": cache_for_size(config, run.input_size),
            "fingerprints": {t: runs.fingerprints(tests[t]) for t in targets},
            "model_bytes": sparse.stat().st_size,
            "model_ids": {m.model: runs.identity(m.model)[C.F_MODEL_ID] for m in methods}, "stage": "tuning"}
        save(out)

        by_label = {m.label: m for m in methods}

        def mean_accuracies(trials: list[Method], n: int) -> list[ValidationScore]:
            # the untrained rows on the same tasks: the reference of each trial's no-op share
            references = list(dict.fromkeys(no_update_row(m.label) for m in trials))
            requests = [Request(m, t, VALIDATION, validation[t][:n], f"{run.key} validation/{t}")
                        for m in [*trials, *(by_label[r] for r in references)] for t in targets]
            entry["tuning_progress"] = {"tasks": n, "cells": [runs.relative(runs.cell(r)) for r in requests]}
            save(out)
            cells = split_sizes(runs.run_many(requests), [len(targets)] * (len(trials) + len(references)))
            untrained = dict(zip(references, cells[len(trials):]))
            scores = []
            for m, trial in zip(trials, cells):
                pairs = [(a, b) for cell, ref in zip(trial, untrained[no_update_row(m.label)]) for a, b in zip(cell, ref)]
                scores.append(ValidationScore(
                    accuracy=float(np.mean([np.mean([r.accuracy for r in cell]) for cell in trial])),  # of target means
                    unchanged=sum(a.unchanged_from(b) for a, b in pairs) / len(pairs)))
            return scores

        kept = kept_choices((previous or {}).get("runs", {}).get(run.key, {}), methods, entry["model_ids"])
        retune = [m for m in methods if m.label not in kept]
        if kept and retune:
            LOG.info("%s: tuning %s again (changed since the saved run); keeping %s", run.key,
                     [m.label for m in retune if m.adapt is not None and policy_spec(m.adapt.policy).trains],
                     sorted(kept))
        tuning = {**kept, **successive_halving(retune, config.tuning_grid, config.tuning_schedule,
                                               config.halving_eta, mean_accuracies)}
        tuning = {m.label: tuning[m.label] for m in methods if m.label in tuning}  # row order
        entry.pop("tuning_progress", None)
        methods = with_settings(methods, tuning)
        LOG.info("%s settings: %s", run.key, {k: (v["learning_rate"], v["epochs"]) for k, v in tuning.items()})
        requests = {t: {m.label: Request(m, t, TEST, tests[t], f"{run.key} {t}") for m in methods} for t in targets}
        entry.update({
            "tuning": tuning, "tuning_rule": TUNING_RULE,
            "methods": {m.label: {"model": m.model, "adapt": m.adapt.to_dict()} for m in methods},
            "cells": {t: {label: runs.relative(runs.cell(r)) for label, r in rows.items()}
                      for t, rows in requests.items()},
            "stage": "tests", "seconds": {"tuning": time.time() - t0}})
        save(out)
        t0 = time.time()
        done = iter(runs.run_many([requests[t][m.label] for t in targets for m in methods]))
        records = {t: {m.label: {r.task: r for r in next(done)} for m in methods} for t in targets}
        entry.update(assemble_run(config.tasks, entry["methods"], targets, records))
        for n in entry["noop"]:
            LOG.warning("%s: %s on %s left %s's query outcome unchanged on %d of %d tasks (no-op?)", run.key,
                        n["label"], n["target"], n["reference"], n["equal"], n["tasks"])
        entry["seconds"]["tests"] = time.time() - t0
        entry["stored_seconds"] = stored_seconds(config.out_dir, run.key, entry)
        entry["stage"] = "done"
        save(out)
    return out


def _cell(label: str, records: Sequence[TaskRecord]) -> dict:
    """One cell of ``per_target``: the ``MethodResult`` of its records (task order) + seconds per task."""
    if not records:
        return {"accuracies": [], "summary": None, "memory_bytes": 0.0, "backward_macs": 0.0, "seconds": 0.0,
                "layers": [], "tasks": 0, "cache_used": 0, "seconds_per_task": None}
    cell = MethodResult.from_records(label, records).to_dict()
    del cell["label"]
    return {**cell, "seconds_per_task": cell["seconds"] / len(records)}


def assemble_run(expected: int, methods: Mapping[str, Mapping], targets: Sequence[str],
                 records: Mapping[str, Mapping[str, Mapping[int, TaskRecord]]]) -> dict:
    """The results of one backbone run from its stored test tasks (pure).

    Args:
      expected: N, test tasks per target.
      methods: Label -> ``{"model", "adapt"}`` (report order).
      targets: The targets.
      records: Target -> label -> task index -> record (a partial run: any subset of 0..N-1).

    Returns:
      ``{"per_target": {target: {label: cell}}, "cost": {label: {...}}, "summary": summarize(...) over the
      tasks every policy has done (None while no target has two), "summary_targets", "paired_tasks":
      {target: tasks every policy has done}, "noop": [{"label", "target", "equal", "tasks"}],
      "queries_per_task": {target: mean query images per task, from the records holding predictions},
      "complete"}``.
      A cell holds ``MethodResult.to_dict`` (minus the label), ``seconds_per_task`` and, for a training
      policy, out of the ``compared_to_none`` tasks it and its no-update row (``methods.no_update_row``)
      have both done: ``equal_to_none``, the tasks of equal accuracy; ``unchanged_from_none``, the tasks
      the adaptation left unchanged (``TaskRecord.unchanged_from``: equal predictions where both records
      hold them, their number ``predictions_compared``; else equal accuracy), which the no-op check counts.
    """
    labels = list(methods)
    per_target: dict[str, dict] = {}
    common: dict[str, list[int]] = {}
    noop = []
    queries: dict[str, float] = {}
    for t in targets:
        rows = {label: records.get(t, {}).get(label, {}) for label in labels}
        common[t] = sorted(set.intersection(*(set(r) for r in rows.values()))) if labels else []
        per_target[t] = {}
        for label in labels:
            cell = _cell(label, [rows[label][i] for i in sorted(rows[label])])
            reference = no_update_row(label)
            trained = policy_spec(methods[label]["adapt"]["policy"]).trains
            if trained and reference in rows:
                both = [i for i in rows[label] if i in rows[reference]]
                pairs = [(rows[label][i], rows[reference][i]) for i in both]
                unchanged = sum(a.unchanged_from(b) for a, b in pairs)
                cell.update(equal_to_none=sum(a.accuracy == b.accuracy for a, b in pairs), compared_to_none=len(both),
                            unchanged_from_none=unchanged,
                            predictions_compared=sum(a.predictions is not None and b.predictions is not None
                                                     for a, b in pairs))
                if both and unchanged > NO_OP_SHARE * len(both):
                    noop.append({"label": label, "target": t, "reference": reference, "equal": unchanged,
                                 "tasks": len(both)})
            per_target[t][label] = cell
        sizes = {i: len(r.predictions) for cells in rows.values() for i, r in cells.items() if r.predictions is not None}
        if sizes:  # a task's query set is the same for every policy: one size per task index
            queries[t] = float(np.mean(list(sizes.values())))
    summary_targets = [t for t in targets if len(common[t]) >= 2]
    summary = None
    if summary_targets:
        summary = summarize({label: {t: [records[t][label][i].accuracy for i in common[t]] for t in summary_targets}
                             for label in labels}, summary_targets)
    cost = {}
    for label in labels:
        cells = [per_target[t][label] for t in targets if per_target[t][label]["tasks"]]
        tasks = sum(c["tasks"] for c in cells)
        cost[label] = {"memory_bytes": float(np.mean([c["memory_bytes"] for c in cells])) if cells else 0.0,
                       "backward_macs": float(np.mean([c["backward_macs"] for c in cells])) if cells else 0.0,
                       "seconds_per_task": float(sum(c["seconds"] for c in cells) / tasks) if tasks else None,
                       "cache_used": sum(c["cache_used"] for c in cells), "tasks": tasks}
    complete = all(per_target[t][label]["tasks"] >= expected for t in targets for label in labels)
    return {"per_target": per_target, "cost": cost, "summary": summary, "summary_targets": summary_targets,
            "paired_tasks": {t: len(common[t]) for t in targets}, "noop": noop, "queries_per_task": queries,
            "complete": complete}


def refresh_partial(out_dir: str | os.PathLike, expected: int, section: dict) -> dict:
    """The accuracy ``section`` of an unfinished run's results.json, brought up to what its cell files hold.

    A backbone run at its test tasks gets ``assemble_run`` of the stored tasks (N done per cell); one still
    tuning gets ``tuning_progress["done"]``, the validation tasks stored of the current round.
    """
    out_dir = pathlib.Path(out_dir)
    for entry in section["runs"].values():
        if entry.get("stage") == "tests":
            targets = list(entry["cells"])
            records = {t: {label: read_records(out_dir / path, entry["fingerprints"][t])
                           for label, path in entry["cells"][t].items()} for t in targets}
            entry.update(assemble_run(expected, entry["methods"], targets, records))
        elif entry.get("stage") == "tuning" and "tuning_progress" in entry:
            progress = entry["tuning_progress"]
            progress["done"] = sum(min(len(read_records(out_dir / path, None)), progress["tasks"])
                                   for path in progress["cells"])
    return section


def stored_seconds(out_dir: str | os.PathLike, key: str, entry: Mapping) -> dict[str, float]:
    """The adaptation seconds (one interpreter thread each) of every task stored for a backbone run, over all
    the sessions it took: ``{"tuning": every validation-pool cell of the run's models (every round and
    setting), "tests": the reported cells}``. Measured per task, so it survives resumes; evaluation, exports
    and idle time are not in it."""
    out_dir = pathlib.Path(out_dir)

    def total(paths: Sequence[pathlib.Path]) -> float:
        return float(sum(r.seconds for path in paths for r in read_records(path, None).values()))

    tests = [out_dir / path for rows in entry["cells"].values() for path in rows.values()]
    return {"tuning": total(stored_cells(out_dir, key, VALIDATION, list(entry["model_ids"].values()))),
            "tests": total(tests)}


def split_sizes(items: list, sizes: list[int]) -> list[list]:
    """``items`` cut into consecutive pieces of ``sizes``."""
    bounds = np.cumsum([0, *sizes])
    return [items[a:b] for a, b in zip(bounds[:-1], bounds[1:])]
