"""End-to-end adaptation time on the installed interpreter (the paper's Table 8 shape).

For each timed method: ``load`` (``TrainableModel`` construction: read + interpreter + allocation),
then ``adapt``'s phases: ``head`` (prototypes), ``fisher_selection`` (Fisher pass + Algorithm 1
lines 1-4), ``cache`` (the frozen prefix of every augmented view, when the steps run from the
cached cut; 0 otherwise), ``training`` (``AdaptConfig.num_steps`` steps); end-to-end = their sum. Selection
overhead = fisher_selection / end-to-end. Step time = training / steps. The median over ``timing_runs``
runs (fresh model each) is reported per phase.
"""

from __future__ import annotations

import dataclasses
import logging
import pathlib
import statistics
import time
from collections.abc import Mapping, Sequence

import numpy as np

from bench.call_timing import median_seconds
from bench.policy_runs import Method, for_model
from bench.tasks import Task
from tflite_train.runtime import TrainableModel, adapt, class_prototypes, embed
from tflite_train.sparse.policies import policy_spec

LOG = logging.getLogger(__name__)
PHASES = ("load", "head", "fisher_selection", "cache", "training")
INFER_CALLS = 20
"""Timed batch-1 ``infer`` calls of ``infer_seconds``."""


@dataclasses.dataclass(frozen=True)
class TimingResult:
    """Median seconds per phase of one method, and derived figures."""

    label: str
    batch_size: int
    steps: int
    seconds: dict[str, float]
    runs: int

    @property
    def end_to_end(self) -> float:
        return sum(self.seconds[p] for p in PHASES)

    @property
    def step(self) -> float:
        return self.seconds["training"] / max(1, self.steps)

    @property
    def selection_share(self) -> float:
        return self.seconds["fisher_selection"] / self.end_to_end

    def to_dict(self) -> dict:
        return {"label": self.label, "batch_size": self.batch_size, "steps": self.steps,
                "seconds": dict(self.seconds), "runs": self.runs, "end_to_end": self.end_to_end,
                "step": self.step, "selection_share": self.selection_share}


def time_method(method: Method, model_path: str | pathlib.Path, task: Task, runs: int, threads: int = 1,
                fisher_tasks: Sequence[Mapping[str, np.ndarray]] | None = None) -> TimingResult:
    """Times ``runs`` fresh load + ``adapt`` runs of ``method`` on ``task``; medians per phase.

    ``fisher_tasks`` (offline meta-training Fisher of the static SparseUpdate) is not timed.
    """
    if method.adapt is None:
        raise ValueError(f"method {method.label!r} has no adaptation config")
    per_phase: dict[str, list[float]] = {p: [] for p in PHASES}
    for run in range(runs):
        t0 = time.perf_counter()
        model = TrainableModel(str(model_path), num_threads=threads)
        per_phase["load"].append(time.perf_counter() - t0)
        if run == 0:
            task = for_model(task, model)  # the float input, converted once, outside the timed phases
        static = fisher_tasks if policy_spec(method.adapt.policy).static_ranking else None
        result = adapt(model, task.support, task.support_labels, method.adapt, fisher_tasks=static)
        for phase in PHASES[1:]:
            per_phase[phase].append(float(result.seconds.get(phase, 0.0)))
        LOG.info("timing %s run %d/%d: %s", method.label, run + 1, runs,
                 {p: round(v[-1], 3) for p, v in per_phase.items()})
    return TimingResult(method.label, method.adapt.batch_size, method.adapt.num_steps(int(task.support.shape[0])),
                        {p: statistics.median(v) for p, v in per_phase.items()}, runs)


def infer_seconds(model_path: str | pathlib.Path, task: Task, threads: int = 1) -> float:
    """Median seconds of one batch-1 ``infer`` call (``INFER_CALLS`` calls after one warm-up call) on a
    fresh model with the prototype head of ``task``'s support set: what a classification costs after
    the adaptation."""
    model = TrainableModel(str(model_path), num_threads=threads)
    task = for_model(task, model)
    model.set_head(class_prototypes(embed(model, task.support), task.support_labels))
    one = task.support[:1]
    seconds, _ = median_seconds(lambda: model.infer(one), INFER_CALLS, float("inf"), warm_up=1,
                                min_calls=INFER_CALLS)
    return seconds
