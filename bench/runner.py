"""``run_benchmarks``: runs the configured sections and writes results.json, the PNGs and BENCHMARKS.md.

Outputs in ``config.out_dir``: ``config.json`` (resolved ``BenchConfig``), ``results.json`` (every
number of the run), ``BENCHMARKS.md`` (rendered by ``bench.report``), ``accuracy_vs_compute.png``
(Figure 1) and ``fisher_layers.png`` (per-layer potential/score of one task).
"""

from __future__ import annotations

import concurrent.futures
import json
import logging
import multiprocessing
import math
import pathlib
import time

import numpy as np

from bench import plots
from bench.adaptation_time import time_method
from bench.config import SECTIONS, BenchConfig
from bench.environment import environment
from bench.learning_rates import choose_settings, with_settings
from bench.methods import TINYTL_NOTE, ablation_methods, accuracy_methods, paired_methods, timing_methods
from bench.models import FULL, SPARSE, ensure_models, export_configs, model_key
from bench.paired_accuracy import summarize
from bench.policy_runs import (Job, Method, compute_budget_macs, for_model, memory_budget_bytes, run_methods,
                               scaled_memory_budget, source_fisher_tasks)
from bench.report import render_report
from bench.tasks import Task, cache_targets, source_tasks, target_pools, target_tasks, timing_task
from bench.validation_split import VALIDATION
from tflite_train import contract as C
from tflite_train.data import read_manifest
from tflite_train.runtime import AdaptConfig, TrainableModel, class_prototypes, embed, layer_table, support_fisher

LOG = logging.getLogger(__name__)
PEER_STEPS = 40
"""Timed steps of the TF-recipe peer (its step time is the median)."""


class _Runs:
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


def _source_fisher(config: BenchConfig, model_path: pathlib.Path) -> list | None:
    """Fisher of 8 source meta-training tasks on ``model_path`` (SparseUpdate's static ranking), or None
    when the cache has no source data set."""
    source = [name for name, e in read_manifest(config.cache_dir)["datasets"].items() if e["role"] == "source"]
    if not source:
        return None
    return source_fisher_tasks(model_path, source_tasks(config, source[0], 8), config.threads)


def _paired_section(config: BenchConfig, targets: tuple[str, ...], paths: dict[str, pathlib.Path], runs: _Runs,
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
                runs.fisher_tasks[m.model] = _source_fisher(config, paths[m.model])

        def mean_accuracies(trials: list[Method]) -> list[float]:
            rows = runs.run_many([(m, f"{run.key} validation/{t}", validation[t]) for m in trials for t in targets])
            return [float(np.mean([np.mean(r["accuracies"]) for r in trial]))  # mean over targets of target means
                    for trial in _split(rows, [len(targets)] * len(trials))]

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


def _fisher_task_figures(config: BenchConfig, model_path: pathlib.Path, task: Task, tinytrain: AdaptConfig) -> dict:
    """Fisher potential, Eq. 3 score and the selection of ``tinytrain`` (the accuracy section's
    TinyTrain config, its budgets) on one task (for the plot)."""
    from tflite_train.sparse import fisher_potentials, fisher_scores, select

    model = TrainableModel(str(model_path), num_threads=config.threads)
    task = for_model(task, model)
    table = layer_table(model.metadata)
    model.reset_state()
    model.set_head(class_prototypes(embed(model, task.support), task.support_labels))
    fisher = support_fisher(model, task.support, task.support_labels)
    selection = select(table, tinytrain.selection_config(model.metadata[C.F_OPTIMIZER][C.F_NAME]),
                       candidates=model.candidates, fisher=fisher)
    potentials = fisher_potentials(fisher)
    scores = fisher_scores(table, fisher, criterion="tinytrain")
    names = list(model.candidates)
    return {"layers": names, "potentials": [potentials[n] for n in names], "scores": [scores[n] for n in names],
            "chosen": list(selection.layers), "fisher": {n: fisher[n].tolist() for n in names}}


def _backward_cost_section(config: BenchConfig, measured_fisher: dict | None) -> dict:
    from tflite_train.architectures import build_layer_table
    from tflite_train.cost_report import selection_report
    from tflite_train.sparse import unfused_activation_bytes

    out = {}
    for backbone in ("mcunet", "mbv2", "proxyless"):
        fisher = None
        if measured_fisher and backbone == config.backbone:
            table = build_layer_table(backbone, config.cost_input_size)
            if all(n in table.names for n in measured_fisher):
                fisher = {n: np.asarray(v, np.float32) for n, v in measured_fisher.items()}
        for optimizer in ("adam", "sgd"):
            rows = selection_report(backbone, config.cost_input_size, optimizer=optimizer,
                                    memory_bytes=config.memory_budget_mib * 2**20,
                                    compute_macs=compute_budget_macs(backbone, config.cost_input_size,
                                                                     config.compute_fraction),
                                    tinytrain_ratio=config.channel_ratio,
                                    sparse_update_ratio=config.sparse_update_channel_ratio,
                                    full_train_batch=config.cost_full_train_batch, fisher=fisher, seed=config.seed)
            out[f"{backbone}/{optimizer}"] = [{
                "method": r.method, "description": r.description, "batch_size": r.batch_size,
                "weights_bytes": r.cost.updated_weight_bytes, "optimizer_bytes": r.cost.optimizer_bytes,
                "activation_bytes": r.cost.activation_bytes, "total_bytes": r.cost.total_bytes,
                "backward_macs": r.cost.backward_macs,
                "paper": None if r.paper is None else {"total_mib": r.paper.total_mib, "macs": r.paper.macs,
                                                        "weights_mib": r.paper.weights_mib,
                                                        "optimizer_mib": r.paper.optimizer_mib,
                                                        "activation_mib": r.paper.activation_mib},
            } for r in rows]
        table = build_layer_table(backbone, config.cost_input_size)
        full = out[f"{backbone}/adam"][0]
        out[f"{backbone}/unfused_full_train_bytes"] = (
            unfused_activation_bytes(table, config.cost_full_train_batch) + full["weights_bytes"] + full["optimizer_bytes"])
    return out


def _timing_section(config: BenchConfig, paths: dict, accuracy_rows: list[Method], target: str,
                    fisher_tasks: list | None) -> dict:
    task = timing_task(config, target)
    size = int(task.support.shape[0])
    rows = [time_method(m, paths[m.model], task, config.timing_runs, config.threads, fisher_tasks).to_dict()
            for m in timing_methods(config, accuracy_rows)]
    model = TrainableModel(str(paths["sparse"]), num_threads=config.threads)
    task = for_model(task, model)
    model.set_head(class_prototypes(embed(model, task.support), task.support_labels))
    one = task.support[:1]
    model.infer(one)
    t0 = time.perf_counter()
    for _ in range(20):
        model.infer(one)
    infer_seconds = (time.perf_counter() - t0) / 20
    out = {"task": {"target": target, "ways": task.ways, "support": size}, "rows": rows,
           "infer_seconds_batch1": infer_seconds}
    if config.tf_recipe:
        from bench.tf_recipe import build_recipe_model, time_recipe_steps

        t0 = time.perf_counter()
        module, flex_model = build_recipe_model(config.backbone, config.input_size, config.weights, task.ways, 1,
                                                seed=config.seed)
        peer = time_recipe_steps(module, flex_model, 1, config.input_size, task.ways, PEER_STEPS,
                                 threads=config.threads, seed=config.seed)
        peer.update({"convert_seconds": time.perf_counter() - t0, "flex_model_bytes": len(flex_model), "batch_size": 1})
        out["tf_recipe"] = peer
    return out


def _write_plots(config: BenchConfig, results: dict, out: pathlib.Path) -> dict[str, str]:
    """Writes the PNGs from the run's results; returns plot name -> file name."""
    figures = {}
    targets = results["targets"]
    for key, run in (results["sections"].get("accuracy") or {}).get("runs", {}).items():
        means = run["summary"]["means"]
        rows = [{"label": label, "accuracy": means[label]["average"]["mean"], "backward_macs": c["backward_macs"],
                 "memory_bytes": c["memory_bytes"]} for label, c in run["cost"].items()]
        figures[f"accuracy_vs_compute/{key}"] = plots.accuracy_vs_compute(
            rows, out / f"accuracy_vs_compute_{key}.png",
            f"{run['label']} px, average over {len(targets)} targets, N={config.tasks} tasks each").name
    task = results["sections"]["plots"]["fisher_task"]
    figures["fisher_layers"] = plots.fisher_layers(
        task["layers"], task["potentials"], task["scores"], task["chosen"], out / "fisher_layers.png",
        f"one {task['target']} task: candidates of {config.backbone} @ {config.input_size}px "
        "(red = TinyTrain's selection)").name
    return figures


UPDATE_FREE_FIELDS = ("sections", "workers", "out_dir", "model_dir")
"""Config fields an ``update`` run may change (they do not change any result)."""


def run_benchmarks(config: BenchConfig, command: str = "", update: bool = False) -> pathlib.Path:
    """Runs ``config.sections`` and writes the outputs; returns the path of BENCHMARKS.md.

    Args:
      config: The run.
      command: The command line, for the report.
      update: Rerun only ``config.sections`` of the finished run in ``config.out_dir`` and keep its
        other sections (and its learning-rate choice): for a section whose code changed, or to
        re-time on a quiet machine. The saved config must equal ``config`` apart from
        ``UPDATE_FREE_FIELDS``.

    Raises:
      ValueError: ``update`` without a finished run in ``config.out_dir``, or with another config.
    """
    if not isinstance(config, BenchConfig):
        raise TypeError(f"config must be a BenchConfig; got {type(config).__name__}")
    export_configs(config)  # refuses missing weights files before any work or output
    previous = _previous_run(config) if update else None
    if config.workers == 1:
        return _run(config, command, None, previous)
    # spawn, not fork: the parent has TensorFlow's threads running (exports), the workers need only
    # numpy and the interpreter.
    with concurrent.futures.ProcessPoolExecutor(config.workers, mp_context=multiprocessing.get_context("spawn"),
                                                initializer=_worker_logging,
                                                initargs=(logging.getLogger().level,)) as pool:
        return _run(config, command, pool, previous)


def _previous_run(config: BenchConfig) -> dict:
    """The saved results of the finished run that an update extends (checked to match ``config``)."""
    out = pathlib.Path(config.out_dir)
    try:
        saved = json.loads((out / "config.json").read_text())
        results = json.loads((out / "results.json").read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise ValueError(f"update needs a finished benchmark run in {out} (config.json + results.json): {err}") from err
    if "command" in results:  # runs written before updates existed
        results["commands"] = [results.pop("command")]
    mine = config.to_dict()
    saved = {**BenchConfig().to_dict(), **saved}  # a field added since the run: the run had its default
    differ = sorted(k for k in set(saved) | set(mine)
                    if k not in UPDATE_FREE_FIELDS and saved.get(k) != mine.get(k))
    if differ:
        raise ValueError("update must keep the saved run's config; these fields differ: "
                         + ", ".join(f"{k} ({saved.get(k)!r} saved, {mine.get(k)!r} now)" for k in differ))
    return results


def _worker_logging(level: int) -> None:
    """Spawned workers start with logging unconfigured: log their per-task progress at the parent's level."""
    logging.basicConfig(level=level, format="%(levelname)s %(name)s [worker %(process)d]: %(message)s")


def _run(config: BenchConfig, command: str, executor: concurrent.futures.Executor | None,
         previous: dict | None) -> pathlib.Path:
    started = time.time()
    out = pathlib.Path(config.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if previous is None:
        (out / "config.json").write_text(json.dumps(config.to_dict(), indent=2) + "\n")
    targets = cache_targets(config)
    paths = ensure_models(config, (SPARSE,))
    probe = TrainableModel(str(paths["sparse"]), num_threads=config.threads)
    memory_bytes = scaled_memory_budget(config)
    results: dict = {
        "commands": [*(previous or {}).get("commands", []), command], "environment": environment(probe.runtime),
        "targets": list(targets),
        "memory_budget_bytes": memory_bytes, C.F_CANDIDATES: list(probe.candidates),
        "models": {k: str(v) for k, v in paths.items()}, "tinytl_note": TINYTL_NOTE, "sections": {},
    }
    section_seconds = {}
    methods = accuracy_methods(config, memory_bytes, probe.candidates)
    fisher = {}
    if any(m.adapt is not None and m.adapt.policy == "sparse_update" and m.adapt.sparse_update_layers is None
           for m in methods):
        fisher["sparse"] = _source_fisher(config, paths["sparse"])
    runs = _Runs(config, paths, fisher, executor)

    if "accuracy" in config.sections:
        t0 = time.time()
        results["sections"]["accuracy"] = _paired_section(config, targets, paths, runs, None)
        section_seconds["accuracy"] = time.time() - t0
    accuracy = results["sections"].get("accuracy") or (previous or {}).get("sections", {}).get("accuracy")
    # The single-backbone sections (timing, ablations) train at the paired run's chosen settings of the
    # same backbone, resolution and weights, when there is one.
    same = next((r for r in config.backbones if (r.backbone, r.input_size, r.weights)
                 == (config.backbone, config.input_size, config.weights)), None)
    chosen = accuracy["runs"][same.key]["tuning"] if accuracy and same and same.key in accuracy["runs"] else {}
    # their learning rates; their length stays config.epochs (the paper's Table 8 protocol)
    methods = with_settings(methods, {label: {**c, "epochs": config.epochs} for label, c in chosen.items()})
    fisher_tasks = fisher.get("sparse")

    fisher_figures = None
    if "plots" in config.sections or "backward_cost" in config.sections:
        first = target_tasks(config, targets[0], 1)[0]
        tinytrain = next(m.adapt for m in methods if m.label == "TinyTrain")
        fisher_figures = _fisher_task_figures(config, paths["sparse"], first, tinytrain)
        fisher_figures["target"] = targets[0]

    if "backward_cost" in config.sections:
        t0 = time.time()
        results["sections"]["backward_cost"] = _backward_cost_section(
            config, fisher_figures["fisher"] if fisher_figures else None)
        section_seconds["backward_cost"] = time.time() - t0

    if "timing" in config.sections:
        t0 = time.time()
        paths.update(ensure_models(config, (SPARSE, FULL)))
        results["sections"]["timing"] = _timing_section(config, paths, methods, targets[0], fisher_tasks)
        section_seconds["timing"] = time.time() - t0

    if "ablations" in config.sections:
        t0 = time.time()
        target = config.ablation_target or targets[0]
        if target not in targets:
            raise ValueError(f"ablation_target {target!r} is not one of the cache's targets {list(targets)}")
        tasks = target_tasks(config, target, config.ablation_tasks)
        groups = ablation_methods(config, memory_bytes, chosen.get("TinyTrain", {}).get("learning_rate"))
        results["sections"]["ablations"] = {
            "target": target, "tasks": len(tasks),
            "groups": dict(zip(groups, _split(runs.run_many([(m, target, tasks) for g in groups.values() for m in g]),
                                              [len(g) for g in groups.values()]))),
        }
        section_seconds["ablations"] = time.time() - t0

    if "plots" in config.sections:
        results["sections"]["plots"] = {"fisher_task": {k: v for k, v in fisher_figures.items() if k != "fisher"}}
    results["models"] = {k: str(v) for k, v in paths.items()}
    results["section_seconds"] = section_seconds
    results["wall_seconds"] = time.time() - started
    if previous:  # the saved run's other sections, in report order
        merged = {**previous["sections"], **results["sections"]}
        results["sections"] = {name: merged[name] for name in SECTIONS if name in merged}
        results["section_seconds"] = {**previous["section_seconds"], **section_seconds}
        results["wall_seconds"] += previous["wall_seconds"]
        if "timing" not in config.sections:  # the machine state the kept timings were measured in
            results["environment"] = previous["environment"]
    if "plots" in results["sections"]:
        results["sections"]["plots"]["files"] = _write_plots(config, results, out)
    (out / "results.json").write_text(json.dumps(results, indent=1, default=_json_default) + "\n")
    report = out / "BENCHMARKS.md"
    report.write_text(render_report(config, results))
    LOG.info("wrote %s in %.0f s", report, results["wall_seconds"])
    return report


def _split(items: list, sizes: list[int]) -> list[list]:
    """``items`` cut into consecutive pieces of ``sizes``."""
    bounds = np.cumsum([0, *sizes])
    return [items[a:b] for a, b in zip(bounds[:-1], bounds[1:])]


def _json_default(value):
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    if isinstance(value, float) and math.isinf(value):
        return None
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def render_saved(out_dir: str | pathlib.Path) -> pathlib.Path:
    """Re-renders ``BENCHMARKS.md`` and the PNGs from the ``config.json`` and ``results.json`` of a finished run."""
    out = pathlib.Path(out_dir)
    try:
        data = json.loads((out / "config.json").read_text())
        results = json.loads((out / "results.json").read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise ValueError(f"{out} holds no finished benchmark run (config.json + results.json): {err}") from err
    config = BenchConfig(**data)
    if "plots" in results["sections"]:
        results["sections"]["plots"]["files"] = _write_plots(config, results, out)
    report = out / "BENCHMARKS.md"
    report.write_text(render_report(config, results))
    return report
