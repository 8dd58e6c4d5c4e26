"""The int8 section's timing column (issue 27): ``infer`` at batch 1 and whole adaptations on the float
and the int8 export of one backbone run, measured side by side in one process.

Float and int8 alternate within every repetition (float, int8, float, int8, ...), so a change of the
machine's load during the measurement falls on both columns alike; each figure is the median over the
repetitions and the speed-up is float / int8 of those medians:

* ``infer``: ``bench.adaptation_time.infer_seconds`` (a fresh model with a prototype head, the median of
  ``INFER_CALLS`` batch-1 calls) per repetition;
* each adaptation row (None and TinyTrain at the accuracy section's chosen settings): a fresh model
  (load) + ``adapt`` on the timing task (``bench.tasks.timing_task``: a fixed 5-way task of the first
  target's test pool at the run's input size), ``bench.adaptation_time.time_method``'s phases; the
  step time is the training phase over its optimizer steps.
"""

from __future__ import annotations

import pathlib
import statistics
from collections.abc import Sequence

from bench.adaptation_time import infer_seconds, time_method
from bench.policy_runs import Method
from bench.tasks import Task

__all__ = ["int8_timing"]


def int8_timing(pairs: Sequence[tuple[Method, Method]], paths: dict[str, pathlib.Path], task: Task, runs: int,
                threads: int) -> dict:
    """Float and int8 timings side by side (module docstring).

    Args:
      pairs: (float method, its int8 twin) per adaptation row; the first pair's models also time ``infer``.
      paths: Model key -> file.
      task: The timing task.
      runs: Repetitions (>= 1); each figure is the median over them.
      threads: Interpreter threads.

    Returns:
      ``{"task": {"ways", "support"}, "runs", "threads", "infer": {"float", "int8"} (s), "rows": {float label:
      {"float": {"end_to_end", "step", "steps"}, "int8": {...}}}}``.

    Raises:
      ValueError: ``runs`` < 1 or no pairs.
    """
    if runs < 1 or not pairs:
        raise ValueError(f"int8 timing needs runs >= 1 and at least one pair; got runs={runs}, {len(pairs)} pairs")
    float_model, int8_model = paths[pairs[0][0].model], paths[pairs[0][1].model]
    infer: dict[str, list[float]] = {"float": [], "int8": []}
    rows: dict[str, dict[str, list]] = {f.label: {"float": [], "int8": []} for f, _ in pairs}
    for _ in range(runs):
        infer["float"].append(infer_seconds(float_model, task, threads))
        infer["int8"].append(infer_seconds(int8_model, task, threads))
        for f, q in pairs:
            rows[f.label]["float"].append(time_method(f, paths[f.model], task, 1, threads))
            rows[f.label]["int8"].append(time_method(q, paths[q.model], task, 1, threads))

    def medians(results: list) -> dict:
        return {"end_to_end": statistics.median(r.end_to_end for r in results),
                "step": statistics.median(r.step for r in results), "steps": results[0].steps}

    return {"task": {"ways": task.ways, "support": int(task.support.shape[0])}, "runs": runs, "threads": threads,
            "infer": {k: statistics.median(v) for k, v in infer.items()},
            "rows": {label: {k: medians(v) for k, v in r.items()} for label, r in rows.items()}}
