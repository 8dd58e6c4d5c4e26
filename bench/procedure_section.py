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
the weights (main or before meta-training) on which that procedure scores best. And the default
(``choose_default``): on the weights the default export ships, the most accurate affordable procedure
(issue 39's cost goal, ``Procedure.affordable``) when it scores within ``DEFAULT_TOLERANCE_PP`` of the most
accurate procedure, else the most accurate one; that default is then measured beside None on the test pool's
tasks (``default_on_test``), which no decision here reads.
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
from bench.procedures import PROCEDURES, procedure
from bench.tasks import target_tasks
from bench.validation_split import TEST, VALIDATION
from tflite_train.default_weights import DEFAULT_LITE0_WEIGHTS, default_lite0_meta_trained
from tflite_train.runtime import AdaptConfig, TrainableModel

__all__ = ["DEFAULT_TOLERANCE_PP", "choose_default", "decide", "default_on_test", "procedure_methods", "procedure_section", "row_label",
           "shipped_weights"]

LOG = logging.getLogger(__name__)
MAIN, BEFORE_META = "main", "before meta-training"
DEFAULT_TOLERANCE_PP = 1.0
"""How much validation accuracy (average over targets, pp) the default may give up for an adaptation that fits the
cost goal, stated before the affordable procedures were measured: about the half-width of the paired CIs that
N = 20 tasks per target gives (±0.9-2.5 pp), i.e. a loss this section could not tell from none."""


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


def shipped_weights(run) -> str:
    """Which of a run's weights the default export ships: ``BEFORE_META`` when the run's baseline weights are the
    default Lite0 export's ImageNet-only ones (``tflite_train.default_weights``), else ``MAIN``."""
    if run.meta_trained and not default_lite0_meta_trained() and run.baseline_weights == DEFAULT_LITE0_WEIGHTS:
        return BEFORE_META
    return MAIN


def choose_default(rows: Mapping[str, Mapping], procedures: Sequence[str], weights: str,
                   affordable: Mapping[str, bool]) -> dict:
    """The procedure ``adapt`` should run by default, on the shipped ``weights`` (pure).

    Args:
      rows: As ``decide``'s.
      procedures: The procedure names, in config order (ties go to the earlier one).
      weights: ``MAIN`` or ``BEFORE_META``: the rows considered.
      affordable: procedure name -> whether it fits the cost goal (``Procedure.affordable``).

    Returns:
      {"procedure", "weights", "best", "best_affordable" (None without one), "scores", "tolerance_pp"}: the best
      affordable procedure when its average is at least the best average - ``DEFAULT_TOLERANCE_PP``, else the best.
    """
    scores = {r["procedure"]: r["accuracy"][AVERAGE]["mean"] for r in rows.values()
              if r["weights"] == weights and r["procedure"] is not None}
    order = {name: i for i, name in enumerate(procedures)}
    ranked = sorted(scores, key=lambda n: (-scores[n], order[n]))
    best = ranked[0]
    cheap = next((n for n in ranked if affordable.get(n)), None)
    chosen = cheap if cheap is not None and scores[cheap] >= scores[best] - DEFAULT_TOLERANCE_PP else best
    return {"procedure": chosen, "weights": weights, "best": best, "best_affordable": cheap,
            "scores": {n: scores[n] for n in procedures if n in scores}, "tolerance_pp": DEFAULT_TOLERANCE_PP}


def default_on_test(config: BenchConfig, run, targets: tuple[str, ...], rows, default: Mapping, runs: Runs) -> dict:
    """The chosen default and None on its weights, on the first ``config.tasks`` tasks of every target's *test*
    pool (the paired section's tasks): what a user of ``adapt`` without flags gets, measured on tasks no decision
    saw. Returns {"tasks", "accuracy", "none", "delta_none"} (``target_means``/``paired_deltas`` records)."""
    on_weights = {name: m for weights, name, m in rows if weights == default["weights"]}
    none, chosen = on_weights[None], on_weights[default["procedure"]]
    tasks = {t: target_tasks(config, t, config.tasks, TEST, run.input_size) for t in targets}
    requests = [Request(m, t, TEST, tasks[t], f"{run.key} procedure default on test/{t}")
                for m in (none, chosen) for t in targets]
    base, trained = split_sizes(runs.run_many(requests), [len(targets)] * 2)
    accuracy = [{t: [r.accuracy for r in cell] for t, cell in zip(targets, cells)} for cells in (base, trained)]
    return {"tasks": config.tasks, "accuracy": target_means(accuracy[1], targets),
            "none": target_means(accuracy[0], targets), "delta_none": paired_deltas(accuracy[1], accuracy[0], targets)}


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
        entry = out["runs"][run.key] = {
            "label": run.label, "memory_budget_bytes": memory, "rows": summary,
            "decision": decide(summary, config.procedures),
            "default": choose_default(summary, config.procedures, shipped_weights(run),
                                      {n: PROCEDURES[n].affordable() for n in config.procedures})}
        entry["default"]["test"] = default_on_test(config, run, targets, rows, entry["default"], runs)
        LOG.info("%s procedure decision: %s", run.key, entry["decision"])
    return out

