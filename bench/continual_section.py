"""The class-incremental section (issue 42, item 4): a device that learned some classes is taught more later.

Each task is one fixed 5-way episode of a target's *test* pool (``continual_tasks``; per class ``shots +
more_shots`` support images and ``queries`` query images, the target's ``Design``: 5 + 3 and 5 where its classes
have the images, less for line icons), cut into three steps on the same images (``split_task``):

1. **N-way K-shot** (``OLD_WAYS`` old classes, ``shots`` shots): adapted from the export -> checkpoint C1
   (with a replay memory at the default budget, ``DEFAULT_REPLAY_BUDGET_BYTES``);
2. **+M ways** (``NEW_WAYS`` new classes, ``shots`` shots each) from C1;
3. **more shots of known classes** (``more_shots`` further images of every class) from step 2's checkpoint.

Steps 2 and 3 run four arms, each continuing its own lineage, all paired on the same images:

* ``with_replay``: ``adapt --from`` with the replay memory (trains on the new images and the stored activations);
* ``from_scratch`` (a): adapting from the export on every image seen so far (the upper bound);
* ``prototypes_only`` (b): the new rows' prototypes added to the checkpoint's, no update (``AdaptStart.begin`` on the
  restored checkpoint; a class with rows in the step gets the mean of those rows, as ``--from`` computes it);
* ``without_replay`` (c): ``adapt --from`` with a replay budget of 0 (old classes keep their stored prototypes).

Every run uses the library (``tflite_train.runtime.adapt``, ``continue_from``, ``checkpoint_after``) at the
default protocol (``DEFAULT_PROTOCOL``; its passes can be overridden by ``BenchConfig.continual_epochs``) and the
CLI's default budget rule (``adapt_job.default_run_budget``; a run from a memory selects above its cut). Scores
are on the task's query images: all classes, the old ones, the new ones (percent); the old-class change is
against step 1's old-class accuracy (on its 3-way head). Cost: the checkpoint's bytes (encoded), its replay
memory's bytes, and the wall seconds of ``adapt`` + ``checkpoint_after`` (evaluation excluded).

Every finished task is stored as one line of its cell file (``bench.task_store``), so the section resumes where
it stopped. Summaries, paired deltas against (a) and the issue's goals are pure functions of the stored lines
(``summarize_continual``, ``continual_goals``).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from bench.config import BenchConfig
from bench.models import BASELINE, SPARSE, ensure_models, model_key
from bench.paired_accuracy import AVERAGE, paired_deltas, target_means
from bench.policy_runs import for_model
from bench.procedure_section import BEFORE_META, shipped_weights
from bench.task_store import append_record, model_identity, open_cell, read_records, task_fingerprint
from bench.tasks import Task, fixed_task, target_pools
from bench.validation_split import TEST
from tflite_train import contract as C
from tflite_train.runtime import (DEFAULT_PROTOCOL, DEFAULT_REPLAY_BUDGET_BYTES, AdaptConfig, TrainableModel, adapt,
                                  checkpoint_after, continue_from, predict)
from tflite_train.runtime.adapt_job import default_run_budget
from tflite_train.runtime.checkpoint.checkpoint import Checkpoint, encode_checkpoint

__all__ = ["ARMS", "DESIGNS", "ContinualRecord", "Design", "Scenario", "base_config", "class_accuracy",
           "continual_goals", "continual_model", "continual_records", "continual_section", "continual_tasks",
           "cost_bound_seconds", "design_for", "run_scenario", "split_task", "step_scores", "summarize_continual"]

LOG = logging.getLogger(__name__)
OLD_WAYS, NEW_WAYS = 3, 2
"""Step 1 adapts to ``OLD_WAYS`` classes; step 2 adds ``NEW_WAYS``."""


@dataclasses.dataclass(frozen=True)
class Design:
    """Images per class of a target's tasks: ``shots`` in step 1 (old classes) or 2 (new ones), ``more_shots`` in
    step 3, ``queries`` query images (the same in every step)."""

    shots: int
    more_shots: int
    queries: int

    @property
    def per_class(self) -> int:
        return self.shots + self.more_shots + self.queries


DESIGNS = (Design(5, 3, 5), Design(3, 2, 3), Design(2, 1, 2))
"""The designs, largest first; a target gets the first one that ``MIN_CLASSES`` of its test-pool classes can fill
(``design_for``): line icons have 3-8 images per class, the other visible targets 6-70."""
MIN_CLASSES = 10
"""Classes a target's test pool must have at a design's size (so that its 5-way tasks vary their classes)."""
ARMS = ("with_replay", "from_scratch", "prototypes_only", "without_replay")
"""The arms of steps 2 and 3 (module docstring), in report order."""
ARM_LABELS = {"with_replay": "--from with replay", "from_scratch": "(a) from scratch on all images",
              "prototypes_only": "(b) prototypes only, no update", "without_replay": "(c) --from, replay budget 0"}
REFERENCE = "from_scratch"
"""The arm every paired delta is taken against (the upper bound)."""
STEPS = ("2", "3")
SEED_OFFSET = 4241
"""Added to the episode seed of the section's tasks (a prime; its tasks are not the paired section's)."""
GOAL_PP = 2.0
"""Issue 42: all-class accuracy >= from-scratch - 2 pp; old-class accuracy drops by at most 2 pp."""
GOAL_REPLAY_BYTES = 2**20
"""Issue 42: ... with a replay memory of at most 1 MiB (on Lite0 @128)."""


@dataclasses.dataclass(frozen=True)
class Scenario:
    """One task cut into its steps (``split_task``): images as given (uint8 or model input), labels i32 in the
    5-way task's classes (0..OLD_WAYS-1 old, the rest new)."""

    step1: tuple[np.ndarray, np.ndarray]
    step2: tuple[np.ndarray, np.ndarray]
    step3: tuple[np.ndarray, np.ndarray]
    query: tuple[np.ndarray, np.ndarray]
    old_ways: int

    @property
    def ways(self) -> int:
        return int(self.query[1].max()) + 1


def design_for(class_sizes: Sequence[int]) -> Design:
    """The first of ``DESIGNS`` that at least ``MIN_CLASSES`` classes of ``class_sizes`` (images per class) fill,
    else the first that ``OLD_WAYS + NEW_WAYS`` classes fill (pure).

    Raises:
      ValueError: not even the smallest design has ``OLD_WAYS + NEW_WAYS`` classes.
    """
    sizes = np.asarray(class_sizes)
    for needed in (MIN_CLASSES, OLD_WAYS + NEW_WAYS):
        for design in DESIGNS:
            if int(np.sum(sizes >= design.per_class)) >= needed:
                return design
    raise ValueError(f"{OLD_WAYS + NEW_WAYS} classes with >= {DESIGNS[-1].per_class} images are needed; class "
                     f"sizes {sorted(int(n) for n in sizes)}")


def split_task(task: Task, old_ways: int, shots: int) -> Scenario:
    """The steps of a fixed-way task (pure): per class, its first ``shots`` support images (support order) go to
    step 1 (classes < ``old_ways``) or step 2 (the others), the rest of its support images to step 3.

    Raises:
      ValueError: ``old_ways`` leaves no old or no new class, or a class has ``shots`` or fewer support images.
    """
    labels = np.asarray(task.support_labels)
    ways = int(labels.max()) + 1
    if not 0 < old_ways < ways:
        raise ValueError(f"old_ways must leave old and new classes of the {ways}-way task; got {old_ways}")
    rank = np.zeros(labels.size, np.int64)  # each image's position among its class's support images
    for k in range(ways):
        rank[labels == k] = np.arange(int(np.sum(labels == k)))
    counts = np.bincount(labels, minlength=ways)
    if counts.min() <= shots:
        raise ValueError(f"every class needs more than {shots} support images; got {counts.tolist()}")
    first, old = rank < shots, labels < old_ways

    def part(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return task.support[mask], labels[mask].astype(np.int32)

    return Scenario(part(first & old), part(first & ~old), part(~first), (task.query, task.query_labels), old_ways)


def class_accuracy(predictions: np.ndarray, labels: np.ndarray, classes: Sequence[int]) -> float:
    """Percent of the queries whose label is one of ``classes`` that are predicted right (NaN without any)."""
    mask = np.isin(labels, classes)
    return float(100.0 * np.mean(predictions[mask] == labels[mask])) if mask.any() else math.nan


def step_scores(predictions: np.ndarray, labels: np.ndarray, old_ways: int) -> dict[str, float]:
    """{"all", "old", "new"}: accuracy (%) over every query, those of classes < ``old_ways``, the others."""
    ways = int(labels.max()) + 1
    return {"all": class_accuracy(predictions, labels, range(ways)),
            "old": class_accuracy(predictions, labels, range(old_ways)),
            "new": class_accuracy(predictions, labels, range(old_ways, ways))}


def continual_tasks(config: BenchConfig, target: str, num: int,
                    input_size: int | None = None) -> tuple[Design, list[Task]]:
    """The target's design (``design_for`` its test pool) and ``num`` fixed 5-way tasks of its test pool
    (``shots + more_shots`` support and ``queries`` query images per class), seeded by (config.seed, target); a
    smaller ``num`` gives a prefix of a larger one's list."""
    data, split = target_pools(config, target, input_size)
    index = split.indices(TEST)
    labels = data.labels[index]
    design = design_for(np.bincount(labels)[np.unique(labels)])
    seed = config.seed + zlib.crc32(target.encode()) + SEED_OFFSET
    return design, [fixed_task(data.images[index], labels, OLD_WAYS + NEW_WAYS, design.shots + design.more_shots,
                               design.queries, seed + i) for i in range(num)]


@dataclasses.dataclass(frozen=True)
class ContinualRecord:
    """One finished task of the section (one line of its cell file).

    Attributes:
      task: The task's index in ``continual_tasks``' list.
      fingerprint: ``task_store.task_fingerprint`` of the task.
      steps: {"1": {"base": run}, "2": {arm: run}, "3": {arm: run}}; a run is {"all", "old", "new" (%),
        "checkpoint_bytes", "replay_bytes", "replay_rows" (stored activations), "replay_image_count" (stored images),
        "seconds", "updates", "rows" (support images + replayed images trained on), "predictions"}.
    """

    task: int
    fingerprint: str
    steps: Mapping[str, Mapping[str, Mapping[str, Any]]]

    def to_dict(self) -> dict[str, Any]:
        return {"task": self.task, "fingerprint": self.fingerprint, "steps": self.steps}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ContinualRecord:
        """The record of a stored line.

        Raises:
          KeyError, TypeError, ValueError: not a line of this section (a missing step or arm).
        """
        steps = data["steps"]
        if "base" not in steps["1"] or any(arm not in steps[s] for s in STEPS for arm in ARMS):
            raise ValueError("a continual task line lacks a step or an arm")
        return cls(int(data["task"]), str(data["fingerprint"]), steps)


def _checkpoint_bytes(checkpoint: Checkpoint) -> int:
    """The size of ``checkpoint``'s file (``encode_checkpoint``)."""
    return len(encode_checkpoint(checkpoint.model_id, checkpoint.selection, checkpoint.arrays,
                                 checkpoint.include_optimizer, checkpoint.class_names, replay=checkpoint.replay))


def run_scenario(model: TrainableModel, scenario: Scenario, base: AdaptConfig,
                 replay_budget: int = DEFAULT_REPLAY_BUDGET_BYTES,
                 checkpoints: dict[tuple[str, str], Checkpoint] | None = None) -> dict[str, dict[str, dict[str, Any]]]:
    """Runs the three steps and four arms of one task (module docstring) on ``model``.

    Args:
      model: The export; ``scenario``'s images its input.
      scenario: The task's steps (``split_task`` of ``for_model(task)``).
      base: The adaptation (budgets unset: each run gets the CLI's default budget for its candidates).
      replay_budget: Bytes of replay memory of C1 and of the replay arm's checkpoints.
      checkpoints: None, or a dict that receives every run's checkpoint as (step, arm) -> Checkpoint (step 1's
        arm is "base").

    Returns:
      ``ContinualRecord.steps``.
    """
    names = tuple(f"class{k}" for k in range(scenario.ways))
    query, query_labels = scenario.query

    def scored(checkpoint: Checkpoint, seconds: float, updates: int, rows: int, step_classes: int) -> dict:
        mask = query_labels < step_classes
        predictions = predict(model, query[mask])
        labels = query_labels[mask]
        scores = step_scores(predictions, labels, scenario.old_ways)  # step 1 has no new class: None, not NaN
        return {**{k: None if math.isnan(v) else v for k, v in scores.items()},
                "checkpoint_bytes": _checkpoint_bytes(checkpoint),
                "replay_bytes": 0 if checkpoint.replay is None else checkpoint.replay.nbytes,
                "replay_rows": 0 if checkpoint.replay is None else len(checkpoint.replay),
                "replay_image_count": 0 if checkpoint.replay is None else checkpoint.replay.num_images,
                "seconds": seconds, "updates": updates, "rows": rows, "predictions": predictions.tolist()}

    def trained(images, labels, previous: Checkpoint | None, use_replay: bool, budget: int, step_classes: int):
        started = time.perf_counter()
        start, present = None, names[:int(labels.max()) + 1]
        if previous is not None:
            start, index = continue_from(previous, names, use_replay=use_replay)
            labels = index[labels]
            start.check_fits(model, labels)
        config, _ = default_run_budget(model, base, True, True, None if start is None else start.candidates(model))
        result = adapt(model, images, labels, config, start=start)
        checkpoint = checkpoint_after(model, result.selection, start, images, labels,
                                      present if start is None else start.class_names, replay_budget=budget,
                                      seed=config.seed, chunk_size=config.chunk_size, views=result.views)
        seconds = time.perf_counter() - started
        rows = images.shape[0] + (0 if start is None or start.replay is None else start.replay.num_images)
        return checkpoint, scored(checkpoint, seconds, len(result.losses), rows, step_classes)

    def prototypes_only(images, labels, previous: Checkpoint, step_classes: int):
        started = time.perf_counter()
        start, index = continue_from(previous, names, use_replay=False)
        labels = index[labels]
        start.check_fits(model, labels)
        start.begin(model, images, labels, base.chunk_size)
        checkpoint = checkpoint_after(model, previous.selection, start, images, labels, start.class_names,
                                      replay_budget=0, seed=base.seed, chunk_size=base.chunk_size)
        return checkpoint, scored(checkpoint, time.perf_counter() - started, 0, images.shape[0], step_classes)

    ways = scenario.ways
    c1, first = trained(*scenario.step1, None, True, replay_budget, scenario.old_ways)
    steps: dict[str, dict[str, dict[str, Any]]] = {"1": {"base": first}}
    lineage = {arm: c1 for arm in ARMS}
    kept = {} if checkpoints is None else checkpoints
    kept["1", "base"] = c1
    seen = scenario.step1
    for step, (images, labels) in zip(STEPS, (scenario.step2, scenario.step3)):
        seen = (np.concatenate([seen[0], images]), np.concatenate([seen[1], labels]))
        runs = {"with_replay": trained(images, labels, lineage["with_replay"], True, replay_budget, ways),
                "from_scratch": trained(*seen, None, True, replay_budget, ways),
                "prototypes_only": prototypes_only(images, labels, lineage["prototypes_only"], ways),
                "without_replay": trained(images, labels, lineage["without_replay"], False, 0, ways)}
        lineage = {arm: runs[arm][0] for arm in ARMS}
        kept.update({(step, arm): runs[arm][0] for arm in ARMS})
        steps[step] = {arm: runs[arm][1] for arm in ARMS}
    return steps


def _per_target(records: Mapping[str, Sequence[Mapping]], value) -> dict[str, list[float]]:
    """target -> [value(steps) for each task's ``ContinualRecord.steps``]."""
    return {t: [float(value(steps)) for steps in rows] for t, rows in records.items()}


def cost_bound_seconds(steps: Mapping) -> float:
    """The cost goal's bound for one task's step-2 replay run: a from-scratch adaptation on the new images plus the
    replayed rows, priced at arm (a)'s measured seconds per image of the same step (its updates, and so its
    seconds, scale with the rows trained on): scratch seconds / scratch rows x replay rows."""
    scratch, replay = steps["2"]["from_scratch"], steps["2"]["with_replay"]
    return float(scratch["seconds"]) / float(scratch["rows"]) * float(replay["rows"])


def summarize_continual(records: Mapping[str, Sequence[Mapping]]) -> dict:
    """Means (95 % CIs) and paired deltas against arm (a) of the stored tasks (pure).

    Args:
      records: target -> each task's ``ContinualRecord.steps``, in task order (>= 2 tasks per target).

    Returns:
      {"tasks": {target: N}, "step1_old": target_means, "steps": {step: {arm: {"all", "old", "new", "old_change"
      (old-class accuracy - step 1's, pp): target_means; "delta_all", "delta_old", "delta_new": paired_deltas
      against ``REFERENCE`` (None for it); "checkpoint_bytes", "replay_bytes", "seconds", "updates", "rows": means
      over every task; "replay_bytes_max"}}}, "cost_bound_seconds": mean ``cost_bound_seconds``}.
    """
    targets = list(records)
    out = {"tasks": {t: len(rows) for t, rows in records.items()},
           "step1_old": target_means(_per_target(records, lambda s: s["1"]["base"]["old"]), targets), "steps": {}}
    every = [steps for rows in records.values() for steps in rows]
    for step in STEPS:
        arms = out["steps"][step] = {}
        for arm in ARMS:
            scores = {k: _per_target(records, lambda s, k=k: s[step][arm][k]) for k in ("all", "old", "new")}
            change = _per_target(records, lambda s: s[step][arm]["old"] - s["1"]["base"]["old"])
            row = {k: target_means(v, targets) for k, v in scores.items()}
            row["old_change"] = target_means(change, targets)
            for k, v in scores.items():
                reference = _per_target(records, lambda s, k=k: s[step][REFERENCE][k])
                row[f"delta_{k}"] = None if arm == REFERENCE else paired_deltas(v, reference, targets)
            for k in ("checkpoint_bytes", "replay_bytes", "seconds", "updates", "rows"):
                row[k] = float(np.mean([s[step][arm][k] for s in every]))
            row["replay_bytes_max"] = int(max(s[step][arm]["replay_bytes"] for s in every))
            arms[arm] = row
    out["cost_bound_seconds"] = float(np.mean([cost_bound_seconds(s) for s in every]))
    return out


def continual_goals(summary: Mapping) -> list[dict]:
    """Issue 42's goals on the replay arm after adding classes (step 2), as verdicts (pure).

    Returns:
      [{"goal", "measured", "threshold", "met", ...}] for: the all-class delta to (a) >= -``GOAL_PP`` with the
      largest replay memory <= ``GOAL_REPLAY_BYTES``; the old-class change from step 1 >= -``GOAL_PP``; the mean
      seconds <= the mean ``cost_bound_seconds``. Measured values are the averages over targets.
    """
    replay = summary["steps"]["2"]["with_replay"]
    delta, change = replay["delta_all"][AVERAGE], replay["old_change"][AVERAGE]
    return [
        {"goal": "all_classes", "measured": delta["mean"], "ci95": delta["ci95"], "threshold": -GOAL_PP,
         "replay_bytes_max": replay["replay_bytes_max"], "replay_limit": GOAL_REPLAY_BYTES,
         "met": delta["mean"] >= -GOAL_PP and replay["replay_bytes_max"] <= GOAL_REPLAY_BYTES},
        {"goal": "old_classes", "measured": change["mean"], "ci95": change["ci95"], "threshold": -GOAL_PP,
         "met": change["mean"] >= -GOAL_PP},
        {"goal": "cost", "measured": replay["seconds"], "threshold": summary["cost_bound_seconds"],
         "met": replay["seconds"] <= summary["cost_bound_seconds"]},
    ]


def continual_model(run) -> str:
    """The model key of a backbone run the section adapts: the one the default export ships
    (``procedure_section.shipped_weights``: the ImageNet-only baseline for the default Lite0 run)."""
    return model_key(run, BASELINE if shipped_weights(run) == BEFORE_META else SPARSE)


def base_config(config: BenchConfig) -> AdaptConfig:
    """The section's adaptation: TinyTrain at the default protocol (``AdaptConfig``'s defaults), its passes
    ``config.continual_epochs`` when given, seeded by ``config.seed``; budgets from the CLI's rule per run."""
    epochs = DEFAULT_PROTOCOL.epochs if config.continual_epochs is None else config.continual_epochs
    return AdaptConfig(policy="tinytrain", epochs=epochs, seed=config.seed, on_empty="empty")


def _run_tasks(model_path: str, base: AdaptConfig, design: Design, tasks: Sequence[Task], indices: Sequence[int],
               threads: int, store: str, progress: str) -> None:
    """Runs ``tasks`` (their ``indices``) and appends each finished one to the cell file ``store``."""
    model = TrainableModel(model_path, num_threads=threads)
    for index, raw in zip(indices, tasks):
        steps = run_scenario(model, split_task(for_model(raw, model), OLD_WAYS, design.shots), base)
        append_record(store, ContinualRecord(int(index), task_fingerprint(raw), steps))
        two = steps["2"]
        LOG.info("%s task %d: step 2 all-class %s", progress, index + 1,
                 ", ".join(f"{arm} {two[arm]['all']:.1f} %" for arm in ARMS))


def continual_records(config: BenchConfig, model_path, targets: Sequence[str], input_size: int | None, label: str,
                      interpreter: str, executor=None) -> tuple[dict[str, list[Mapping]], dict[str, Design]]:
    """target -> each task's ``ContinualRecord.steps`` (task order) of ``config.continual_tasks`` tasks per target,
    running only those the cell files under ``config.out_dir`` lack (with ``executor``: one job per target); and
    target -> its ``Design``."""
    base = base_config(config)
    cells, jobs, designs = {}, [], {}
    for t in targets:
        designs[t], tasks = continual_tasks(config, t, config.continual_tasks, input_size)
        fingerprints = [task_fingerprint(task) for task in tasks]
        cell = {"model": model_identity(model_path), "adapt": base.to_dict(), "target": t, "pool": TEST,
                "section": "continual", "ways": [OLD_WAYS, NEW_WAYS], "design": dataclasses.asdict(designs[t]),
                "replay_budget": DEFAULT_REPLAY_BUDGET_BYTES, "interpreter": interpreter, "threads": config.threads,
                # what the replay memory keeps changed with its format (version 2: views per image): cells of an
                # older memory are never read back as this one's
                "replay_format_version": C.REPLAY_FORMAT_VERSION}
        path = open_cell(config.out_dir, f"{label}/continual", "continual", t, TEST, cell)
        cells[t] = (path, fingerprints)
        done = read_records(path, fingerprints, ContinualRecord.from_dict)
        missing = [i for i in range(len(tasks)) if i not in done]
        if missing:
            jobs.append((str(model_path), base, designs[t], [tasks[i] for i in missing], missing, config.threads,
                         str(path),
                         f"{label} continual/{t}"))
    if executor is None:
        for job in jobs:
            _run_tasks(*job)
    else:
        for future in [executor.submit(_run_tasks, *job) for job in jobs]:
            future.result()
    out = {}
    for t, (path, fingerprints) in cells.items():
        done = read_records(path, fingerprints, ContinualRecord.from_dict)
        missing = [i for i in range(len(fingerprints)) if i not in done]
        if missing:
            raise RuntimeError(f"{path}: continual tasks {missing} are missing after their run")
        out[t] = [done[i].steps for i in range(len(fingerprints))]
    return out, designs


def continual_section(config: BenchConfig, targets: tuple[str, ...], paths: dict, interpreter: str,
                      executor=None) -> dict:
    """Runs the section (module docstring) for every backbone run; returns its results per run."""
    out = {"tasks": config.continual_tasks, "adapt": base_config(config).to_dict(),
           "replay_budget": DEFAULT_REPLAY_BUDGET_BYTES, "old_ways": OLD_WAYS, "new_ways": NEW_WAYS, "runs": {}}
    for run in config.backbones:
        key = continual_model(run)
        paths.update(ensure_models(config, (key,)))
        records, designs = continual_records(config, paths[key], targets, run.input_size, run.key, interpreter,
                                             executor)
        summary = summarize_continual(records)
        out["runs"][run.key] = {"label": run.label, "model": key, "model_path": str(paths[key]),
                                "designs": {t: dataclasses.asdict(d) for t, d in designs.items()}, **summary,
                                "goals": continual_goals(summary)}
        LOG.info("%s continual goals: %s", run.key, out["runs"][run.key]["goals"])
    return out
