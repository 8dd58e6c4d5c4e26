"""``run_benchmarks``: runs the configured sections and writes results.json, the PNGs and BENCHMARKS.md.

The sections live in their own modules (``bench.paired_section``, ``bench.backward_cost_section``,
``bench.timing_section``, ``bench.figures``); this module orders them, merges an update into the
saved run, and writes the outputs.

Outputs in ``config.out_dir``: ``config.json`` (resolved ``BenchConfig``), ``results.json`` (every
number of the run; rewritten with ``"partial": true`` at each stage of the accuracy section, so that
``render_saved`` can report an unfinished run), ``tasks/`` (every finished adaptation, ``bench.task_store``:
a rerun of the same config skips them), ``BENCHMARKS.md`` (rendered by ``bench.report``),
``accuracy_vs_cost_<run>.png`` (accuracy against seconds and backward MACs per step),
``accuracy_vs_compute_<run>.png`` (Figure 1) and ``fisher_layers.png`` (per-layer potential/score of one task).
"""

from __future__ import annotations

import concurrent.futures
import json
import logging
import math
import multiprocessing
import os
import pathlib
import time

import numpy as np

from bench.backward_cost_section import backward_cost_section
from bench.config import SECTIONS, BenchConfig
from bench.continual_section import continual_section
from bench.environment import environment
from bench.figures import fisher_task_figures, write_accuracy_figures, write_plots, write_procedure_figures
from bench.int8_section import int8_section
from bench.learning_rates import with_settings
from bench.methods import TINYTL_NOTE, ablation_methods, accuracy_methods
from bench.models import FULL, SPARSE, ensure_models, export_configs
from bench.paired_section import Request, Runs, paired_section, refresh_partial
from bench.policy_runs import MethodResult, model_memory_budget
from bench.procedure_section import procedure_section
from bench.report import render_report
from bench.tasks import cache_targets, target_tasks
from bench.timing_section import timing_section
from bench.validation_split import TEST
from tflite_train import contract as C
from tflite_train.runtime import TrainableModel

LOG = logging.getLogger(__name__)


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
    if results.get("partial"):
        raise ValueError(f"update needs a finished benchmark run in {out}; it holds an unfinished one: "
                         "rerun its command to finish it first")
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
    memory_bytes = model_memory_budget(config, probe)
    env = environment(probe.runtime)
    results: dict = {
        "commands": [*(previous or {}).get("commands", []), command], "environment": env,
        "targets": list(targets),
        "memory_budget_bytes": memory_bytes, C.F_CANDIDATES: list(probe.candidates),
        "models": {k: str(v) for k, v in paths.items()}, "tinytl_note": TINYTL_NOTE, "sections": {},
    }
    section_seconds = {}
    methods = accuracy_methods(config, memory_bytes, probe.candidates)
    runs = Runs(config, paths, executor, f"{env['interpreter_module']} {env['interpreter_version']}")

    def checkpoint(section: dict | None) -> None:
        """results.json of the run so far (``"partial": true``), for ``render_saved``. Not in an update,
        which keeps the finished run's results.json until it has its own."""
        if previous is None:
            sections = {**results["sections"], **({} if section is None else {"accuracy": section})}
            _write_json(out / "results.json", {**results, "sections": sections, "partial": True,
                                                "section_seconds": {"accuracy": time.time() - started},
                                                "wall_seconds": time.time() - started})

    checkpoint(None)  # a results.json of this config from the start (an older run's is replaced)
    if "procedure" in config.sections:
        t0 = time.time()
        results["sections"]["procedure"] = procedure_section(config, targets, paths, runs)
        section_seconds["procedure"] = time.time() - t0
    if "accuracy" in config.sections:
        t0 = time.time()
        saved = (previous or {}).get("sections", {}).get("accuracy")  # an update keeps its unchanged tuning choices
        results["sections"]["accuracy"] = paired_section(config, targets, paths, runs, saved, checkpoint)
        section_seconds["accuracy"] = time.time() - t0
    accuracy = results["sections"].get("accuracy") or (previous or {}).get("sections", {}).get("accuracy")
    if "int8" in config.sections:
        if not accuracy:
            raise ValueError("the int8 section pairs with the accuracy section's tasks: run it together with "
                             "--section accuracy, or as an --update of a finished run that has one")
        t0 = time.time()
        results["sections"]["int8"] = int8_section(config, accuracy, targets, paths, runs)
        section_seconds["int8"] = time.time() - t0
    if "continual" in config.sections:
        t0 = time.time()
        results["sections"]["continual"] = continual_section(config, targets, paths, runs.interpreter, executor)
        section_seconds["continual"] = time.time() - t0
    # The single-backbone sections (timing, ablations) train at the paired run's chosen settings of the
    # same backbone, resolution and weights, when there is one.
    same = next((r for r in config.backbones if (r.backbone, r.input_size, r.weights)
                 == (config.backbone, config.input_size, config.weights)), None)
    chosen = accuracy["runs"][same.key]["tuning"] if accuracy and same and same.key in accuracy["runs"] else {}
    # their learning rates; their length stays config.epochs (the paper's Table 8 protocol)
    methods = with_settings(methods, {label: {**c, "epochs": config.epochs} for label, c in chosen.items()})

    fisher_figures = None
    if "plots" in config.sections or "backward_cost" in config.sections:
        first = target_tasks(config, targets[0], 1, TEST, config.input_size)[0]
        tinytrain = next(m.adapt for m in methods if m.label == "TinyTrain")
        fisher_figures = fisher_task_figures(config, paths["sparse"], first, tinytrain)
        fisher_figures["target"] = targets[0]

    if "backward_cost" in config.sections:
        t0 = time.time()
        results["sections"]["backward_cost"] = backward_cost_section(
            config, fisher_figures["fisher"] if fisher_figures else None)
        section_seconds["backward_cost"] = time.time() - t0

    if "timing" in config.sections:
        t0 = time.time()
        paths.update(ensure_models(config, (SPARSE, FULL)))
        static = any(m.adapt is not None and Runs.needs_fisher(m) for m in methods)
        fisher_tasks = runs.fisher(SPARSE) if static else None
        results["sections"]["timing"] = timing_section(config, paths, methods, targets[0], fisher_tasks)
        section_seconds["timing"] = time.time() - t0

    if "ablations" in config.sections:
        t0 = time.time()
        target = config.ablation_target or targets[0]
        if target not in targets:
            raise ValueError(f"ablation_target {target!r} is not one of the cache's targets {list(targets)}")
        tasks = target_tasks(config, target, config.ablation_tasks, TEST, config.input_size)
        groups = ablation_methods(config, memory_bytes, chosen.get("TinyTrain", {}).get("learning_rate"))
        done = iter(runs.run_many([Request(m, target, TEST, tasks, "ablation") for g in groups.values() for m in g]))
        results["sections"]["ablations"] = {
            "target": target, "tasks": len(tasks),
            "groups": {name: [MethodResult.from_records(m.label, next(done)).to_dict() for m in g]
                       for name, g in groups.items()},
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
    _write_figures(config, results, out)
    _write_json(out / "results.json", results)
    report = out / "BENCHMARKS.md"
    report.write_text(render_report(config, results))
    LOG.info("wrote %s in %.0f s", report, results["wall_seconds"])
    return report


def _write_json(path: pathlib.Path, data: dict) -> None:
    """``data`` as indented JSON, replacing ``path`` atomically (a reader never sees half a file)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, default=_json_default) + "\n")
    os.replace(tmp, path)


def _write_figures(config: BenchConfig, results: dict, out: pathlib.Path) -> None:
    """The PNGs of ``results`` (their file names recorded in it)."""
    if "accuracy" in results["sections"]:
        results["sections"]["accuracy"]["figures"] = write_accuracy_figures(results, out)
    if "procedure" in results["sections"]:
        results["sections"]["procedure"]["figures"] = write_procedure_figures(results, out)
    if "plots" in results["sections"]:
        results["sections"]["plots"]["files"] = write_plots(config, results, out)


def _json_default(value):
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    if isinstance(value, float) and math.isinf(value):
        return None
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def render_saved(out_dir: str | pathlib.Path) -> pathlib.Path:
    """Re-renders ``BENCHMARKS.md`` and the PNGs from the ``config.json`` and ``results.json`` of a run; an
    unfinished run (``"partial"``) is first brought up to the tasks stored since its last checkpoint
    (``bench.paired_section.refresh_partial``) and reported with N done per cell."""
    out = pathlib.Path(out_dir)
    try:
        data = json.loads((out / "config.json").read_text())
        results = json.loads((out / "results.json").read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise ValueError(f"{out} holds no benchmark run (config.json + results.json): {err}") from err
    config = BenchConfig(**data)
    if results.get("partial") and "accuracy" in results["sections"]:
        refresh_partial(out, config.tasks, results["sections"]["accuracy"])
    _write_figures(config, results, out)
    report = out / "BENCHMARKS.md"
    report.write_text(render_report(config, results))
    return report
