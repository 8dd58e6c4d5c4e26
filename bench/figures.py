"""The figures of a run: the Fisher potential / score / selection of one task, and the PNGs written from
the results (accuracy vs cost and accuracy vs backward compute per paired backbone, Fisher per layer)."""

from __future__ import annotations

import pathlib
from collections.abc import Mapping

import numpy as np

from bench import plots
from bench.config import BenchConfig
from bench.paired_accuracy import AVERAGE
from bench.policy_runs import for_model
from bench.procedure_section import MAIN
from bench.tasks import Task
from tflite_train import contract as C
from tflite_train.runtime import AdaptConfig, TrainableModel, class_prototypes, embed, layer_table, support_fisher

__all__ = ["cost_panels", "fisher_task_figures", "procedure_points", "write_accuracy_figures", "write_plots",
           "write_procedure_figures"]


def fisher_task_figures(config: BenchConfig, model_path: pathlib.Path, task: Task, tinytrain: AdaptConfig) -> dict:
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


def _summary_targets(run: dict) -> list[str]:
    """The targets of a run's summary (every target in runs saved before partial runs existed)."""
    return run.get("summary_targets") or list(run["per_target"])


def _tasks(cell: dict) -> int:
    """Tasks of a cell (cells saved before the count existed: their accuracies)."""
    return cell.get("tasks", len(cell["accuracies"]))


def cost_panels(run: dict) -> list[tuple[str, list[dict]]]:
    """(panel title, rows) per target of a backbone run's summary and its average, for ``plots.accuracy_vs_cost``:
    each policy's mean accuracy and 95 % CI (over the tasks every policy has done), its seconds per
    adaptation (mean over those targets' tasks) and its backward MACs per optimizer step (per-sample MACs x
    batch)."""
    summary = run["summary"]
    targets = _summary_targets(run)
    panels = []
    for name in [*targets, AVERAGE]:
        rows = []
        for label, method in run["methods"].items():
            cells = [run["per_target"][t][label] for t in (targets if name == AVERAGE else [name])]
            tasks = sum(_tasks(c) for c in cells)
            batch = int(method["adapt"]["batch_size"])
            mean = summary["means"][label][name]
            rows.append({"label": label, "accuracy": mean["mean"], "ci95": mean["ci95"],
                         "seconds": sum(c["seconds"] for c in cells) / tasks,
                         "macs_per_step": float(np.mean([c["backward_macs"] for c in cells])) * batch})
        panels.append((f"average over {len(targets)} targets" if name == AVERAGE else name, rows))
    return panels


def write_accuracy_figures(results: dict, out: pathlib.Path) -> dict[str, str]:
    """``accuracy_vs_cost_<run>.png`` per backbone run of the accuracy section that has a summary; returns
    run key -> file name."""
    figures = {}
    for key, run in results["sections"]["accuracy"]["runs"].items():
        if not run.get("summary"):
            continue
        targets = _summary_targets(run)
        tasks = min(run["paired_tasks"][t] for t in targets) if "paired_tasks" in run else min(
            _tasks(run["per_target"][t][label]) for t in targets for label in run["methods"])
        figures[key] = plots.accuracy_vs_cost(
            cost_panels(run), out / f"accuracy_vs_cost_{key}.png",
            f"{run['label']} px: accuracy (mean, 95 % CI, N = {tasks} tasks per target) vs adaptation cost").name
    return figures


def procedure_points(run: Mapping) -> dict[str, list[dict]]:
    """Weights -> {"label": procedure, "delta", "ci95", "seconds"} of every trained row of one backbone run of the
    procedure section (its average paired delta over None, for ``plots.delta_vs_seconds``)."""
    groups: dict[str, list[dict]] = {}
    for row in run["rows"].values():
        if row["delta_none"] and row["trained_tasks"]:
            delta = row["delta_none"][AVERAGE]
            name = "the run's main weights" if row["weights"] == MAIN else "weights before meta-training"
            groups.setdefault(name, []).append({"label": row["procedure"], "delta": delta["mean"],
                                                          "ci95": delta["ci95"], "seconds": row["seconds"]})
    return groups


def write_procedure_figures(results: Mapping, out: pathlib.Path) -> dict[str, str]:
    """``procedures_<run>.png`` per backbone run of the procedure section; returns run key -> file name."""
    section = results["sections"]["procedure"]
    figures = {}
    for key, run in section["runs"].items():
        groups = procedure_points(run)
        if groups:
            figures[key] = plots.delta_vs_seconds(
                groups, out / f"procedures_{key}.png",
                f"{run['label']} px: TinyTrain − None per procedure, {section['tasks']} validation tasks per target"
                ).name
    return figures


def write_plots(config: BenchConfig, results: dict, out: pathlib.Path) -> dict[str, str]:
    """Writes the PNGs from the run's results; returns plot name -> file name."""
    figures = {}
    targets = results["targets"]
    for key, run in (results["sections"].get("accuracy") or {}).get("runs", {}).items():
        if not run.get("summary"):
            continue  # an unfinished run with no paired tasks yet
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
