"""TinyTrain design variants on the default backbone, scored on validation tasks only (issue 28, item 5).

The powered benchmark tunes each policy's (learning rate, passes) on the validation pool; this module
asks the other design questions of TinyTrain on the same pool, before any reported task is run: the
channel ratio, the compute and memory budgets, the pseudo-query augmentation and the learning rate
around the chosen one. Each variant changes one field of TinyTrain's paired-benchmark config (the
protocol: ``tflite_train.runtime.protocol.DEFAULT_PROTOCOL``'s passes and rate, B_compute 15 %, B_mem
the scaled default, ratio 0.25, augmentation on) and runs on the first ``--tasks`` tasks of every
target's validation pool (``bench.validation_split``; the tuning's 5 tasks are their prefix, the test
pool is never read), with None and LastLayer (at the protocol's passes, its own tuned rate when the
committed run has one) as references.

Score = the mean over targets of each target's mean accuracy (the tuning's score); each variant's
paired delta to the protocol is the mean over targets of the per-target mean differences on the same
tasks, with the Welch-Satterthwaite interval of ``bench.confidence.mean_over_groups_ci95``.

Every adaptation is stored as it finishes (``bench.task_store`` cells under ``<out>/tasks``), so a
rerun resumes; the report is ``<out>/TINYTRAIN_VARIANTS.md`` and ``variants.json``::

    .venv/bin/python -m bench.tinytrain_variants --workers 2          # about 1 h on 2 idle cores
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import json
import logging
import math
import multiprocessing
import os
import pathlib
import sys
import time
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from bench.config import LITE0_128, preset_config
from bench.confidence import mean_over_groups_ci95
from bench.environment import environment
from bench.learning_rates import with_setting
from bench.methods import paired_methods
from bench.models import SPARSE, ensure_models, model_key
from bench.paired_section import Request, Runs
from bench.policy_runs import Method, model_memory_budget
from bench.tasks import cache_targets, target_tasks
from bench.validation_split import VALIDATION
from tflite_train.data.augment import AugmentConfig
from tflite_train.runtime import DEFAULT_PROTOCOL, AdaptConfig, TrainableModel

LOG = logging.getLogger(__name__)

NO_AUGMENT = AugmentConfig(flip_prob=0.0, translate=0.0, brightness=0.0, saturation=0.0, contrast=0.0, cutout=0.0)


@dataclasses.dataclass(frozen=True)
class Variant:
    """One change to TinyTrain's config: a name, what it tests, and the change."""

    name: str
    question: str
    change: Callable[[AdaptConfig], AdaptConfig]


def _set(**fields) -> Callable[[AdaptConfig], AdaptConfig]:
    return lambda adapt: dataclasses.replace(adapt, **fields)


VARIANTS: tuple[Variant, ...] = (
    Variant("protocol", "the default protocol (reference)", _set()),
    Variant("lr x3.3", "learning rate 1e-2: is the grid's top rate an edge optimum?", _set(learning_rate=1e-2)),
    Variant("lr /3", "learning rate 1e-3", _set(learning_rate=1e-3)),
    Variant("20 passes", "half the passes", _set(epochs=20)),
    Variant("ratio 0.5", "channel ratio 0.5 instead of 0.25", _set(channel_ratio=0.5)),
    Variant("ratio 1", "every channel of the selected layers", _set(channel_ratio=1.0)),
    Variant("B_compute 30 %", "twice the compute budget", _set(compute_fraction=0.30)),
    Variant("B_mem unbounded", "no memory budget (is B_mem binding?)", _set(memory_bytes=math.inf)),
    Variant("no augmentation", "one plain view per support image", _set(augment=NO_AUGMENT, augment_views=1)),
    Variant("no cutout", "augmentation without cutout", _set(augment=AugmentConfig(cutout=0.0))),
)
"""The variants, each one field away from the protocol."""


def _chosen(results_path: pathlib.Path, label: str) -> tuple[float, int] | None:
    """The committed powered run's tuned (rate, passes) of ``label`` on Lite0@128, or None."""
    if not results_path.exists():
        return None
    run = json.loads(results_path.read_text())["sections"].get("accuracy", {}).get("runs", {}).get(LITE0_128.key, {})
    choice = run.get("tuning", {}).get(label)
    return None if choice is None else (float(choice["learning_rate"]), int(choice["epochs"]))


def _worker_logging() -> None:
    """Spawned workers log their per-task progress lines too."""
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s [worker %(process)d]: %(message)s")


def variant_methods(tinytrain: Method, references: Sequence[Method],
                    variants: Sequence[Variant] = VARIANTS) -> list[tuple[str, str, Method]]:
    """(name, question, method) of the references and of every variant of ``tinytrain``."""
    rows = [(m.label, "reference", m) for m in references]
    for v in variants:
        rows.append((v.name, v.question, dataclasses.replace(tinytrain, label=f"TinyTrain {v.name}",
                                                             adapt=v.change(tinytrain.adapt))))
    return rows


def summarise(accuracies: Mapping[str, Mapping[str, Sequence[float]]], reference: str) -> dict:
    """Per row: score (mean of target means), per-target means, and the paired delta to ``reference``.

    Args:
      accuracies: row name -> target -> per-task accuracies (percent; the same tasks for every row).
      reference: The row the deltas are taken against.
    """
    out = {}
    base = accuracies[reference]
    for name, per_target in accuracies.items():
        targets = sorted(per_target)
        row = {"score": float(np.mean([np.mean(per_target[t]) for t in targets])),
               "targets": {t: float(np.mean(per_target[t])) for t in targets}}
        if name != reference:
            delta = mean_over_groups_ci95([np.subtract(per_target[t], base[t]) for t in targets])
            row["delta"] = delta.to_dict()
        out[name] = row
    return out


def render(summary: Mapping[str, dict], rows: Sequence[tuple[str, str, Method]], meta: Mapping) -> str:
    """The Markdown report."""
    targets = sorted(next(iter(summary.values()))["targets"])
    lines = [
        "# TinyTrain variants on validation tasks (generated; do not edit)", "",
        f"Command: `{meta['command']}`. Backbone: EfficientNet-Lite0 @ 128 (the shipped meta-trained weights). "
        f"{meta['tasks']} tasks per target from the **validation pool** (the powered benchmark's tuning tasks are "
        "their first 5; the reported test pool is never read). Wall time "
        f"{meta['seconds'] / 60:.1f} min on {meta['workers']} worker(s) (load average at the start "
        f"{meta['load']:.1f}).", "",
        "Score = mean over targets of each target's mean accuracy (%). Delta = paired difference to the protocol "
        "row on the same tasks (mean over targets, 95 % Welch-Satterthwaite CI).", "",
        "| row | question | score | " + " | ".join(targets) + " | delta vs protocol | layers (first task) |",
        "|---|---|---|" + "---|" * len(targets) + "---|---|",
    ]
    for name, question, _ in rows:
        s = summary[name]
        delta = s.get("delta")
        cell = "" if delta is None else f"{delta['mean']:+.1f} ± {delta['ci95']:.1f}"
        per = " | ".join(f"{s['targets'][t]:.1f}" for t in targets)
        lines.append(f"| {name} | {question} | {s['score']:.1f} | {per} | {cell} | {', '.join(s['layers']) or '-'} |")
    best = max((n for n, q, _ in rows if q != "reference"), key=lambda n: summary[n]["score"])
    lines += ["", f"Best TinyTrain row: **{best}** ({summary[best]['score']:.1f} %)."]
    return "\n".join(lines) + "\n"


def run(out: pathlib.Path, tasks: int, workers: int, command: str) -> pathlib.Path:
    """Runs every row on the validation tasks (resuming stored ones) and writes the report; returns its path."""
    started, load = time.time(), os.getloadavg()[0]
    config = preset_config("powered", out_dir=str(out), workers=workers)
    targets = cache_targets(config)
    paths = ensure_models(config, (model_key(LITE0_128, SPARSE),))
    probe = TrainableModel(str(paths[model_key(LITE0_128, SPARSE)]), num_threads=config.threads)
    memory = model_memory_budget(config, probe)
    methods = {m.label: m for m in paired_methods(config, LITE0_128, memory, probe.candidates)}
    protocol = (DEFAULT_PROTOCOL.learning_rate, DEFAULT_PROTOCOL.epochs)
    tinytrain = with_setting(methods["TinyTrain"], protocol)
    last_layer = with_setting(methods["LastLayer"], _chosen(pathlib.Path("bench/results/results.json"), "LastLayer")
                              or protocol)
    rows = variant_methods(tinytrain, [methods["None"], last_layer])
    pools = {t: target_tasks(config, t, tasks, VALIDATION, LITE0_128.input_size) for t in targets}
    env = environment(probe.runtime)
    executor = concurrent.futures.ProcessPoolExecutor(
        workers, mp_context=multiprocessing.get_context("spawn"), initializer=_worker_logging) if workers > 1 else None
    try:
        runs = Runs(config, paths, executor, f"{env['interpreter_module']} {env['interpreter_version']}")
        requests = [Request(m, t, VALIDATION, pools[t], f"variants {name}/{t}") for name, _, m in rows for t in targets]
        cells = iter(runs.run_many(requests))
    finally:
        if executor is not None:
            executor.shutdown()
    accuracies, layers = {}, {}
    for name, _, _ in rows:
        records = {t: next(cells) for t in targets}
        accuracies[name] = {t: [r.accuracy for r in records[t]] for t in targets}
        layers[name] = list(records[targets[0]][0].layers)
    summary = summarise(accuracies, "protocol")
    for name in summary:
        summary[name]["layers"] = layers[name]
    meta = {"command": command, "tasks": tasks, "workers": workers, "seconds": time.time() - started, "load": load,
            "environment": env}
    payload = {"meta": meta, "rows": [{"name": n, "question": q, "adapt": m.adapt.to_dict(), **summary[n]}
                                      for n, q, m in rows]}
    (out / "variants.json").write_text(json.dumps(payload, indent=2) + "\n")
    report = out / "TINYTRAIN_VARIANTS.md"
    report.write_text(render(summary, rows, meta))
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.tinytrain_variants", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=pathlib.Path, default=pathlib.Path("bench/results/variants"),
                        help="output folder (report, JSON, stored adaptations) (default: %(default)s)")
    parser.add_argument("--tasks", type=int, default=10, help="validation tasks per target (default: %(default)s)")
    parser.add_argument("--workers", type=int, default=1, help="worker processes (default: %(default)s)")
    args = parser.parse_args(argv)
    if args.tasks < 2 or args.workers < 1:
        parser.error("--tasks must be >= 2 and --workers >= 1")
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    args.out.mkdir(parents=True, exist_ok=True)
    report = run(args.out, args.tasks, args.workers, " ".join(["python -m bench.tinytrain_variants", *(argv or sys.argv[1:])]))
    print(report.read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
