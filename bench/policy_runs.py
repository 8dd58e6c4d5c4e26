"""Runs one adaptation method over a list of tasks on the TFLite runtime path (``adapt`` + ``predict``).

A ``Method`` names an exported model (``"sparse"``, ``"full"``, ``"<run>/baseline"``, ...) and an
``AdaptConfig``; ``run_records`` adapts the model to every task's support set and scores the query
set, returning one ``bench.task_store.TaskRecord`` per task (accuracy in percent, the selection's
cost-model figures, seconds, whether the cached cut was used) and appending each to its cell
file as it finishes; ``run_methods`` returns their aggregates (``MethodResult``).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import logging
import pathlib
from collections.abc import Mapping, Sequence

import numpy as np

from bench.config import BenchConfig
from bench.confidence import MeanCI, mean_ci95
from bench.task_store import TaskRecord, append_record, task_fingerprint
from bench.tasks import Task
from tflite_train import contract as C
from tflite_train.architectures import build_layer_table
from tflite_train.runtime import AdaptConfig, TrainableModel, adapt, input_range, layer_table, predict
from tflite_train.sparse import MIT_SPARSE_UPDATE_LAYERS, Budget, admitting_budget
from tflite_train.sparse import scaled_memory_budget as library_memory_budget

LOG = logging.getLogger(__name__)
MIB = 2**20


@dataclasses.dataclass(frozen=True)
class Method:
    """One row of an accuracy table: a label, the model key and the adaptation config."""

    label: str
    model: str
    adapt: AdaptConfig | None
    """None = not built (the row says so)."""


@dataclasses.dataclass(frozen=True)
class MethodResult:
    """Per-task accuracies (percent) and the mean cost-model figures of the selections of one method."""

    label: str
    accuracies: tuple[float, ...]
    memory_bytes: float
    backward_macs: float
    seconds: float
    layers: tuple[str, ...]
    cache_used: int = 0
    """Tasks whose steps ran from the cached cut."""

    @classmethod
    def from_records(cls, label: str, records: Sequence[TaskRecord]) -> MethodResult:
        """The aggregate of ``records`` (task order): mean memory and MACs, total seconds, the first
        task's layers.

        Raises:
          ValueError: no record.
        """
        if not records:
            raise ValueError(f"{label}: no task results")
        return cls(label, tuple(r.accuracy for r in records), float(np.mean([r.memory_bytes for r in records])),
                   float(np.mean([r.backward_macs for r in records])), float(np.sum([r.seconds for r in records])),
                   records[0].layers, sum(r.cache for r in records))

    @property
    def summary(self) -> MeanCI:
        return mean_ci95(self.accuracies)

    def to_dict(self) -> dict:
        summary = self.summary.to_dict() if len(self.accuracies) > 1 else None  # a CI needs two tasks
        return {"label": self.label, "accuracies": list(self.accuracies), "summary": summary,
                "memory_bytes": self.memory_bytes, "backward_macs": self.backward_macs, "seconds": self.seconds,
                "layers": list(self.layers), "tasks": len(self.accuracies), "cache_used": self.cache_used}


def scaled_memory_budget(config: BenchConfig) -> float:
    """``memory_budget_bytes`` of ``config.backbone`` at ``config.input_size``."""
    return memory_budget_bytes(build_layer_table(config.backbone, config.input_size), config.memory_budget_mib)


def memory_budget_bytes(table, budget_mib: float, candidates: Sequence[str] = (), *, channel_ratio: float = 0.25,
                        compute_fraction: float | None = 0.15, optimizer: str = "adam") -> float:
    """B_mem in bytes for the model of layer ``table``: the library's one definition of the default B_mem
    (``tflite_train.sparse.default_budget``, the CLI's and the demo's), with the MCUNet@128 budget
    ``budget_mib`` (the paper's 1 MiB) scaled to the model,

      B = budget_mib * M_LastLayer(model) / M_LastLayer(MCUNet@128)   (LastLayer update, Adam, batch 1),

    raised, when it admits none of ``candidates`` alone at TinyTrain's ``channel_ratio`` under the bench's
    B_compute (``compute_fraction``, never raised: the bench's compute budget is the experiment's), just
    enough to admit one (``sparse.admitting_budget``). MCUNet@64: 0.770 MiB; EfficientNet-Lite0@128:
    4.005 MiB (the 1 MiB of MCUNet fits no single layer of Lite0, whose inference buffer alone exceeds
    it); both as scaled, since candidates of theirs fit.
    """
    scaled = Budget(library_memory_budget(table, budget_mib * MIB), compute_fraction=compute_fraction)
    return admitting_budget(scaled, table, candidates, channel_ratio=channel_ratio, optimizer=optimizer,
                            raise_compute=False).budget.memory_bytes


def model_memory_budget(config: BenchConfig, model: TrainableModel) -> float:
    """``memory_budget_bytes`` of an exported model: its layer table and candidates, the config's
    ``memory_budget_mib``, TinyTrain channel ratio and B_compute, the model's optimizer."""
    return memory_budget_bytes(layer_table(model.metadata), config.memory_budget_mib, model.candidates,
                               channel_ratio=config.channel_ratio, compute_fraction=config.compute_fraction,
                               optimizer=model.metadata[C.F_OPTIMIZER][C.F_NAME])


@functools.lru_cache(maxsize=None)
def compute_budget_macs(backbone: str, input_size: int, fraction: float) -> float:
    """B_compute in MACs: ``fraction`` of FullTrain's backward MACs (batch 1) at ``input_size``.

      B_compute = fraction * C_backward(all layers, all channels)

    The library's one definition (``tflite_train.sparse.budget.Budget.compute_fraction``). This is
    the reading of the paper's "15 % of total MACs" under which its own MCUNet rows fit the
    budget: TinyTrain's 6.51M backward MACs (Table 2) exceed 15 % of the 22.5M forward MACs
    (3.4M) but not 15 % of the 44.9M full backward MACs (6.7M; ours 43.1M -> 6.5M).
    """
    return Budget(compute_fraction=fraction).compute_limit(build_layer_table(backbone, input_size))


def sparse_update_layers(backbone: str, candidates: Sequence[str]) -> tuple[str, ...] | None:
    """MIT's static SparseUpdate layers for the backbone when all are candidates, else None (then the
    static ranking comes from the mean Fisher potentials of source meta-training tasks)."""
    layers = MIT_SPARSE_UPDATE_LAYERS.get(backbone)
    if layers and all(name in candidates for name in layers):
        return tuple(layers)
    return None


def for_model(task: Task, model: TrainableModel) -> Task:
    """``task`` as the float input of ``model`` (its input shape and metadata ``input.range``)."""
    return task.for_model(model.input_shape, input_range(model.metadata))


def _run_tasks(method: Method, model_path: str, tasks: Sequence[Task], indices: Sequence[int], threads: int,
               fisher_tasks: Sequence[Mapping[str, np.ndarray]] | None, progress: str, total: int,
               store: str | None) -> list[TaskRecord]:
    """One ``TaskRecord`` per task, in order; each appended to the cell file ``store`` as it finishes.

    Every ``adapt`` resets the model and seeds its own generator from the config, so a task's result
    does not depend on which process runs it or on the tasks before it.
    """
    model = TrainableModel(model_path, num_threads=threads)
    out = []
    for index, raw in zip(indices, tasks):
        task = for_model(raw, model)
        result = adapt(model, task.support, task.support_labels, method.adapt, fisher_tasks=fisher_tasks)
        predictions = predict(model, task.query)
        accuracy = 100.0 * float(np.mean(predictions == task.query_labels))  # = evaluate's, without a second pass
        empty = result.selection.is_empty
        record = TaskRecord(int(index), task_fingerprint(raw), accuracy,
                            0.0 if empty else float(result.cost.total_bytes),
                            0.0 if empty else float(result.cost.backward_macs), float(sum(result.seconds.values())),
                            tuple(result.selection.layers), bool(result.cache is not None and result.cache.used),
                            tuple(int(c) for c in predictions))
        if store is not None:
            append_record(store, record)
        out.append(record)
        LOG.info("%s %s task %d/%d (%d-way, %d support): %.1f %% in %.1f s%s", progress, method.label, index + 1,
                 total, task.ways, task.support.shape[0], accuracy, record.seconds, " (cached prefix)" * record.cache)
    return out


@dataclasses.dataclass(frozen=True, eq=False)
class Job:
    """One method on one list of tasks (``run_methods``' unit of work)."""

    method: Method
    model_path: str | pathlib.Path
    tasks: Sequence[Task]
    fisher_tasks: Sequence[Mapping[str, np.ndarray]] | None = None
    """Meta-training Fisher of the static SparseUpdate ranking (None otherwise)."""
    progress: str = ""
    """Prefix of the per-task log lines."""
    indices: Sequence[int] | None = None
    """Each task's index in its pool's episode list (None = 0, 1, ...)."""
    total: int | None = None
    """Tasks of the whole cell, for the log lines (None = ``len(tasks)``)."""
    store: str | pathlib.Path | None = None
    """Cell file (``bench.task_store``) each finished task is appended to; None = not stored."""


def run_methods(
    jobs: Sequence[Job],
    *,
    threads: int = 1,
    executor: concurrent.futures.Executor | None = None,
    chunk_tasks: int = 4,
) -> list[MethodResult]:
    """Adapts each job's model to each of its tasks and evaluates on the task's query set.

    Args:
      jobs: What to run.
      threads: Interpreter threads per process.
      executor: A process pool; None = this process, job after job. With a pool, every job's tasks
        are cut into chunks of ``chunk_tasks`` (one interpreter per chunk) and the chunks of all jobs
        are submitted at once, so the workers stay busy across jobs. The results are the same
        either way: every ``adapt`` resets the model and seeds its own generator.
      chunk_tasks: Tasks per submitted chunk.

    Returns:
      One ``MethodResult`` per job, in order (``run_records``: the per-task records).

    Raises:
      ValueError: a job's ``method.adapt`` is None (nothing to run) or it has no tasks (or another
        number of indices), or ``chunk_tasks`` < 1.
    """
    records = run_records(jobs, threads=threads, executor=executor, chunk_tasks=chunk_tasks)
    return [MethodResult.from_records(job.method.label, rows) for job, rows in zip(jobs, records)]


def run_records(
    jobs: Sequence[Job],
    *,
    threads: int = 1,
    executor: concurrent.futures.Executor | None = None,
    chunk_tasks: int = 4,
) -> list[list[TaskRecord]]:
    """``run_methods``' per-task records (each job's tasks in order); the same arguments and checks."""
    for job in jobs:
        if job.method.adapt is None:
            raise ValueError(f"method {job.method.label!r} has no adaptation config (not built)")
        if not job.tasks:
            raise ValueError(f"tasks must be non-empty for method {job.method.label!r}")
        if job.indices is not None and len(job.indices) != len(job.tasks):
            raise ValueError(f"method {job.method.label!r}: {len(job.indices)} indices for {len(job.tasks)} tasks")
    if isinstance(chunk_tasks, bool) or not isinstance(chunk_tasks, int) or chunk_tasks < 1:
        raise ValueError(f"chunk_tasks must be an int >= 1; got {chunk_tasks!r}")

    def chunks(job: Job):
        n = len(job.tasks)
        indices = list(range(n)) if job.indices is None else [int(i) for i in job.indices]
        store = None if job.store is None else str(job.store)
        return [(job.method, str(job.model_path), job.tasks[a:a + chunk_tasks], indices[a:a + chunk_tasks], threads,
                 job.fisher_tasks, job.progress, job.total or n, store) for a in range(0, n, chunk_tasks)]

    if executor is None:
        return [[row for args in chunks(job) for row in _run_tasks(*args)] for job in jobs]
    futures = [[executor.submit(_run_tasks, *args) for args in chunks(job)] for job in jobs]
    return [[row for future in job_futures for row in future.result()] for job_futures in futures]


def source_fisher_tasks(model_path: str | pathlib.Path, tasks: Sequence[Task], threads: int = 1) -> list[dict]:
    """Fisher vectors of meta-training (source) tasks for the static SparseUpdate ranking."""
    from tflite_train.runtime import class_prototypes, embed, support_fisher

    model = TrainableModel(str(model_path), num_threads=threads)
    out = []
    for task in tasks:
        task = for_model(task, model)
        model.reset_state()
        model.set_head(class_prototypes(embed(model, task.support), task.support_labels))
        out.append(support_fisher(model, task.support, task.support_labels))
    return out
