"""The procedure section (issue 39): which fine-tuning procedure, and which weights, TinyTrain should run,
decided on validation tasks only.

For each backbone run, TinyTrain runs under every procedure of ``BenchConfig.procedures``
(``bench.procedures``: the previous one, P>M>F's, and P>M>F with one part switched off at a time) on the
first ``BenchConfig.procedure_tasks`` tasks of every target's *validation* pool, beside None on the same
tasks; a run with weights before meta-training does the same on those weights (with their own None). Every
task is stored as it finishes (``bench.task_store`` through ``bench.paired_section.Runs``), so the section
resumes where it stopped.

Reported per row: the mean accuracy per target and on average (95 % CI), the paired delta to None on the
same weights (95 % CI), and the measured seconds per adaptation. Decisions (``decide``): the procedure
with the best average validation accuracy on the run's main weights (ties go to the cheaper one), then
the weights (main or before meta-training) on which that procedure scores best.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

import numpy as np

from bench.config import BenchConfig
from bench.methods import NONE_NO_META
from bench.models import BASELINE, SPARSE, ensure_models, model_key
from bench.paired_accuracy import AVERAGE, paired_deltas, target_means
from bench.paired_section import Request, Runs, split_sizes
from bench.policy_runs import Method, model_memory_budget
from bench.procedures import procedure
from bench.tasks import target_tasks
from bench.validation_split import VALIDATION
from tflite_train.runtime import AdaptConfig, TrainableModel

__all__ = ["decide", "procedure_methods", "procedure_section", "row_label"]

LOG = logging.getLogger(__name__)
MAIN, BEFORE_META = "main", "before meta-training"


def row_label(name: str, weights: str = MAIN) -> str:
    """The row of TinyTrain under procedure ``name`` on ``weights``."""
    return f"TinyTrain [{name}]" + ("" if weights == MAIN else " without meta-training")


def procedure_methods(config: BenchConfig, run, memory_bytes: float) -> list[tuple[str, str | None, Method]]:
    """(weights, procedure name or None for the None row, Method) of one backbone run's rows."""
    base = AdaptConfig(policy="tinytrain", memory_bytes=memory_bytes, compute_fraction=config.compute_fraction,
                       channel_ratio=config.channel_ratio, seed=config.seed, on_empty="empty")
    none = AdaptConfig(policy="none", compute_fraction=None, seed=config.seed)
    variants = [(MAIN, SPARSE, "None")] + ([(BEFORE_META, BASELINE, NONE_NO_META)] if run.meta_trained else [])
    rows = []
    for weights, model, none_label in variants:
        rows.append((weights, None, Method(none_label, model_key(run, model), none)))
        rows += [(weights, name, Method(row_label(name, weights), model_key(run, model), procedure(name).apply(base)))
                 for name in config.procedures]
    return rows


def decide(rows: Mapping[str, Mapping], procedures: Sequence[str]) -> dict:
    """The procedure and weights decisions from the summarised rows (pure).

    Args:
      rows: label -> {"weights", "procedure", "accuracy": {AVERAGE: {"mean"}}, "seconds"}.
      procedures: The procedure names, in config order.

    Returns:
      {"procedure": name, "weights": MAIN or BEFORE_META, "scores": {name: mean}, "weights_scores": {...}}:
      the best average accuracy on the main weights (ties to fewer seconds per task, then config order),
      then the weights with the better average under that procedure (a tie keeps the main weights).
    """
    main = {r["procedure"]: r for r in rows.values() if r["weights"] == MAIN and r["procedure"] is not None}
    order = {name: i for i, name in enumerate(procedures)}
    best = min(main, key=lambda n: (-main[n]["accuracy"][AVERAGE]["mean"], main[n]["seconds"], order[n]))
    by_weights = {r["weights"]: r["accuracy"][AVERAGE]["mean"] for r in rows.values() if r["procedure"] == best}
    weights = max(by_weights, key=lambda w: (by_weights[w], w == MAIN))
    return {"procedure": best, "weights": weights,
            "scores": {n: main[n]["accuracy"][AVERAGE]["mean"] for n in procedures if n in main},
            "weights_scores": by_weights}


def procedure_section(config: BenchConfig, targets: tuple[str, ...], paths: dict, runs: Runs) -> dict:
    """Runs the section (module docstring); returns its results (per backbone run: rows and decisions)."""
    out = {"tasks": config.procedure_tasks, "procedures": {n: procedure(n).to_dict() for n in config.procedures},
           "runs": {}}
    for run in config.backbones:
        keys = (model_key(run, SPARSE),) + ((model_key(run, BASELINE),) if run.meta_trained else ())
        paths.update(ensure_models(config, keys))
        probe = TrainableModel(str(paths[model_key(run, SPARSE)]), num_threads=config.threads)
        memory = model_memory_budget(config, probe)
        tasks = {t: target_tasks(config, t, config.procedure_tasks, VALIDATION, run.input_size) for t in targets}
        rows = procedure_methods(config, run, memory)
        requests = [Request(m, t, VALIDATION, tasks[t], f"{run.key} procedure/{t}") for _, _, m in rows for t in targets]
        cells = split_sizes(runs.run_many(requests), [len(targets)] * len(rows))
        accuracies = {m.label: {t: [r.accuracy for r in cell] for t, cell in zip(targets, per_target)}
                      for (_, _, m), per_target in zip(rows, cells)}
        none_of = {weights: m.label for weights, name, m in rows if name is None}
        summary = {}
        for (weights, name, m), per_target in zip(rows, cells):
            records = [r for cell in per_target for r in cell]
            summary[m.label] = {
                "weights": weights, "procedure": name, "model": m.model, "adapt": m.adapt.to_dict(),
                "accuracy": target_means(accuracies[m.label], targets),
                "delta_none": None if name is None else paired_deltas(accuracies[m.label],
                                                                      accuracies[none_of[weights]], targets),
                "seconds": float(np.mean([r.seconds for r in records])),
                "trained_tasks": sum(bool(r.layers) for r in records),
            }
        entry = out["runs"][run.key] = {"label": run.label, "memory_budget_bytes": memory, "rows": summary,
                                        "decision": decide(summary, config.procedures)}
        LOG.info("%s procedure decision: %s", run.key, entry["decision"])
    return out

