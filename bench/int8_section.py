"""The int8 section (issue 27): None and TinyTrain on the int8 export, paired against the float export
on the paired accuracy section's own test tasks.

For every finished backbone run of the accuracy section, the ``int8`` model (``bench.models``: the
run's ``sparse`` export with ``BenchConfig.int8_mode``) runs None and TinyTrain at the settings the
accuracy section chose (its tuning; nothing is re-tuned on the int8 file: the question is what
quantization alone changes) on the same test tasks of every target. The float rows are the accuracy
section's cells, read from the task store (``bench.task_store``; a cell the accuracy section has not
finished runs here). Reported per row and target: the means, and the paired delta int8 − float with its
95 % CI; on the average over targets, the Welch–Satterthwaite interval of the per-target differences
(``bench.paired_accuracy.paired_deltas``, as the paired table). The issue's accuracy goal: both
average deltas within ±``INT8_TOLERANCE_PP``. Beside them, the timing column: ``infer`` and the
adaptations of both rows on the float and the int8 file, measured alternately in one process
(``bench.int8_timing``).
"""

from __future__ import annotations

import dataclasses
import logging
import pathlib
from collections.abc import Mapping, Sequence

from bench.config import BenchConfig
from bench.int8_timing import int8_timing
from bench.learning_rates import with_settings
from bench.methods import paired_methods
from bench.models import INT8, SPARSE, ensure_models, model_key
from bench.paired_accuracy import AVERAGE, paired_deltas, target_means
from bench.paired_section import Request, Runs
from bench.tasks import target_tasks, timing_task
from bench.validation_split import TEST
from tflite_train import contract as C

__all__ = ["INT8_ROWS", "INT8_TOLERANCE_PP", "int8_label", "int8_section", "int8_summary"]

LOG = logging.getLogger(__name__)
INT8_ROWS = ("None", "TinyTrain")
"""The accuracy section's rows repeated on the int8 file."""
INT8_TOLERANCE_PP = 1.0
"""Issue 27's accuracy goal: |int8 − float| of the average paired delta at most this (points)."""


def int8_label(label: str) -> str:
    """The int8 row of float row ``label``: ``"TinyTrain (int8)"``."""
    return f"{label} (int8)"


def int8_summary(accuracies: Mapping[str, Mapping[str, Sequence[float]]], targets: Sequence[str],
                 rows: Sequence[str] = INT8_ROWS) -> dict:
    """Means and paired int8 − float deltas (pure).

    Args:
      accuracies: label -> target -> per-task accuracies (%), float row ``r`` and ``int8_label(r)`` on the
        same tasks in the same order.
      targets: The targets (each with >= 2 tasks).
      rows: The float rows.

    Returns:
      ``{"means": {label: {target|"average": MeanCI dict}}, "deltas": {row: {target|"average": MeanCI
      dict}}, "met": bool}``: delta = int8 − float; ``met``: every row's average delta within
      ±``INT8_TOLERANCE_PP``.

    Raises:
      ValueError: a row without its int8 partner, or partners of different task counts.
    """
    means, deltas = {}, {}
    for row in rows:
        partner = int8_label(row)
        if row not in accuracies or partner not in accuracies:
            raise ValueError(f"int8 summary: row {row!r} needs both {row!r} and {partner!r}")
        for t in targets:
            if len(accuracies[partner][t]) != len(accuracies[row][t]):
                raise ValueError(f"int8 summary: {row!r} on {t} has {len(accuracies[row][t])} tasks, its int8 row "
                                 f"{len(accuracies[partner][t])}")
        for label in (row, partner):
            means[label] = target_means(accuracies[label], targets)
        deltas[row] = paired_deltas(accuracies[partner], accuracies[row], targets)
    met = all(abs(d[AVERAGE]["mean"]) <= INT8_TOLERANCE_PP for d in deltas.values())
    return {"means": means, "deltas": deltas, "met": met}


def int8_section(config: BenchConfig, accuracy: Mapping, targets: Sequence[str], paths: dict[str, pathlib.Path],
                 runs: Runs) -> dict:
    """The int8 section (module docstring) of every finished run of the ``accuracy`` section.

    Args:
      config: The run (``int8_mode``, tasks, backbones).
      accuracy: The accuracy section (its runs' tuning, budgets and candidates).
      targets, paths, runs: The run's targets, model paths (the int8 models are added) and task runner.

    Returns:
      ``{"mode", "runs": {key: {"model_bytes": {"float", "int8"}, "methods": {label: adapt dict},
      "accuracies": {label: {target: [%]}}, "summary": int8_summary(...), "timing": float and int8 side by
      side (``bench.int8_timing.int8_timing``) on the timing task of the first target}}, "skipped": {key: why}}``.
    """
    out: dict = {"mode": config.int8_mode, "runs": {}, "skipped": {}}
    for run in config.backbones:
        entry = accuracy.get("runs", {}).get(run.key)
        if entry is None or entry.get("stage") != "done":
            out["skipped"][run.key] = "its paired accuracy run is not finished"
            LOG.warning("int8 section: %s skipped (its paired accuracy run is not finished)", run.key)
            continue
        key, sparse = model_key(run, INT8), model_key(run, SPARSE)
        paths.update(ensure_models(config, (sparse, key)))
        chosen = with_settings(paired_methods(config, run, entry["memory_budget_bytes"], entry[C.F_CANDIDATES]),
                               entry["tuning"])
        floats = [m for m in chosen if m.label in INT8_ROWS]
        for m in floats:  # the same adaptation as the accuracy section's cell, so its stored tasks are read
            if m.adapt.to_dict() != entry["methods"][m.label]["adapt"]:
                raise ValueError(f"int8 section: {run.key} {m.label}'s adaptation differs from the accuracy "
                                 "section's; rerun the accuracy section first")
        quantized = [dataclasses.replace(m, label=int8_label(m.label), model=key) for m in floats]
        tests = {t: target_tasks(config, t, config.tasks, TEST, run.input_size) for t in targets}
        rows = [*floats, *quantized]
        done = iter(runs.run_many([Request(m, t, TEST, tests[t], f"{run.key} int8/{t}") for m in rows
                                   for t in targets]))
        accuracies = {m.label: {t: [r.accuracy for r in next(done)] for t in targets} for m in rows}
        LOG.info("int8 section: %s timing float against int8 side by side (%d runs)", run.key, config.timing_runs)
        timing = int8_timing(list(zip(floats, quantized)), paths, timing_task(config, targets[0], run.input_size),
                             config.timing_runs, config.threads)
        out["runs"][run.key] = {
            "label": run.label, "model_bytes": {"float": paths[sparse].stat().st_size,
                                                "int8": paths[key].stat().st_size},
            "methods": {m.label: {"model": m.model, "adapt": m.adapt.to_dict()} for m in rows},
            "accuracies": accuracies, "summary": int8_summary(accuracies, targets), "timing": timing}
    return out
