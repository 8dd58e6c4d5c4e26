"""Runs one adaptation method over a list of tasks on the TFLite runtime path (``adapt`` + ``evaluate``).

A ``Method`` names an exported model (``"sparse"``, ``"full"``, ``"pretrained"``) and an
``AdaptConfig``; ``run_method`` adapts the model to every task's support set and scores the query
set, returning per-task accuracies (percent) and the selections' cost-model figures.
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
from bench.tasks import Task
from tflite_train.architectures import build_layer_table
from tflite_train.runtime import AdaptConfig, TrainableModel, adapt, evaluate
from tflite_train.sparse import MIT_SPARSE_UPDATE_LAYERS, backward_cost

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
    """Per-task accuracies (percent) and mean cost-model figures of the selections."""

    label: str
    accuracies: tuple[float, ...]
    memory_bytes: float
    backward_macs: float
    seconds: float
    layers: tuple[str, ...]

    @property
    def summary(self) -> MeanCI:
        return mean_ci95(self.accuracies)

    def to_dict(self) -> dict:
        summary = self.summary.to_dict() if len(self.accuracies) > 1 else None  # a CI needs two tasks
        return {"label": self.label, "accuracies": list(self.accuracies), "summary": summary,
                "memory_bytes": self.memory_bytes, "backward_macs": self.backward_macs, "seconds": self.seconds,
                "layers": list(self.layers)}


def scaled_memory_budget(config: BenchConfig) -> float:
    """B_mem in bytes at ``config.input_size``: the paper's budget (at 128x128) scaled by how the
    LastLayer update's backward memory (Adam, batch 1) scales from 128 to ``input_size``:

      B = B_paper * M_LastLayer(input_size) / M_LastLayer(128).

    (Updated weights and optimizer slots do not depend on the resolution, activations scale with H*W,
    so this keeps the budget's tightness relative to a fixed selection.)
    """
    def last_layer_memory(size: int) -> int:
        table = build_layer_table(config.backbone, size)
        last = table.layers[-1]
        return backward_cost(table, {last.name: last.out_channels}, optimizer="adam").total_bytes

    ratio = last_layer_memory(config.input_size) / last_layer_memory(128)
    return config.memory_budget_mib * MIB * ratio


@functools.lru_cache(maxsize=None)
def compute_budget_macs(backbone: str, input_size: int, fraction: float) -> float:
    """B_compute in MACs: ``fraction`` of FullTrain's backward MACs (batch 1) at ``input_size``.

      B_compute = fraction * C_backward(all layers, all channels)

    This is the reading of the paper's "15 % of total MACs" under which its own MCUNet rows fit the
    budget: TinyTrain's 6.51M backward MACs (Table 2) exceed 15 % of the 22.5M forward MACs
    (3.4M) but not 15 % of the 44.9M full backward MACs (6.7M; ours 43.1M -> 6.5M).
    """
    table = build_layer_table(backbone, input_size)
    full = backward_cost(table, {layer.name: layer.out_channels for layer in table}, optimizer="adam")
    return fraction * full.backward_macs


def sparse_update_layers(config: BenchConfig, candidates: Sequence[str]) -> tuple[str, ...] | None:
    """MIT's static SparseUpdate layers for the backbone when all are candidates, else None (then the
    static ranking comes from the mean Fisher potentials of source meta-training tasks)."""
    layers = MIT_SPARSE_UPDATE_LAYERS.get(config.backbone)
    if layers and all(name in candidates for name in layers):
        return tuple(layers)
    return None


def _run_tasks(method: Method, model_path: str, tasks: Sequence[Task], threads: int,
               fisher_tasks: Sequence[Mapping[str, np.ndarray]] | None, progress: str, first: int,
               total: int) -> list[tuple[float, float, float, float, tuple[str, ...]]]:
    """(accuracy %, memory bytes, backward MACs, seconds, layers) per task, in order.

    Every ``adapt`` resets the model and seeds its own generator from the config, so a task's result
    does not depend on which process runs it or on the tasks before it.
    """
    model = TrainableModel(model_path, num_threads=threads)
    out = []
    for i, task in enumerate(tasks):
        result = adapt(model, task.support, task.support_labels, method.adapt, fisher_tasks=fisher_tasks)
        accuracy = 100.0 * evaluate(model, task.query, task.query_labels)
        empty = result.selection.is_empty
        out.append((accuracy, 0.0 if empty else float(result.cost.total_bytes),
                    0.0 if empty else float(result.cost.backward_macs), float(sum(result.seconds.values())),
                    tuple(result.selection.layers)))
        LOG.info("%s %s task %d/%d (%d-way, %d support): %.1f %% in %.1f s", progress, method.label, first + i + 1,
                 total, task.ways, task.support.shape[0], accuracy, out[-1][3])
    return out


def run_method(
    method: Method,
    model_path: str | pathlib.Path,
    tasks: Sequence[Task],
    *,
    threads: int = 1,
    fisher_tasks: Sequence[Mapping[str, np.ndarray]] | None = None,
    progress: str = "",
    executor: concurrent.futures.Executor | None = None,
    workers: int = 1,
) -> MethodResult:
    """Adapts ``method``'s model to each task and evaluates on the task's query set.

    Args:
      method: The row to run.
      model_path: Its exported model.
      tasks: The tasks (adapted in turn; the model is reset by every ``adapt``).
      threads: Interpreter threads per process.
      fisher_tasks: Meta-training Fisher of the static SparseUpdate ranking.
      progress: Prefix of the per-task log lines.
      executor: A process pool to spread the tasks over (``workers`` contiguous chunks, one
        interpreter each); None = this process. The results are the same either way.
      workers: Chunks submitted to ``executor``.

    Raises:
      ValueError: ``method.adapt`` is None (nothing to run), no tasks, or ``workers`` < 1.
    """
    if method.adapt is None:
        raise ValueError(f"method {method.label!r} has no adaptation config (not built)")
    if not tasks:
        raise ValueError(f"tasks must be non-empty for method {method.label!r}")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be an int >= 1; got {workers!r}")
    if executor is None or workers == 1 or len(tasks) == 1:
        rows = _run_tasks(method, str(model_path), tasks, threads, fisher_tasks, progress, 0, len(tasks))
    else:
        bounds = np.linspace(0, len(tasks), min(workers, len(tasks)) + 1).astype(int)
        futures = [executor.submit(_run_tasks, method, str(model_path), tasks[a:b], threads, fisher_tasks, progress,
                                   int(a), len(tasks)) for a, b in zip(bounds[:-1], bounds[1:])]
        rows = [row for future in futures for row in future.result()]
    accuracies, memory, macs, seconds, layers = zip(*rows)
    return MethodResult(method.label, tuple(accuracies), float(np.mean(memory)), float(np.mean(macs)),
                        float(np.sum(seconds)), layers[0])


def source_fisher_tasks(model_path: str | pathlib.Path, tasks: Sequence[Task], threads: int = 1) -> list[dict]:
    """Fisher vectors of meta-training (source) tasks for the static SparseUpdate ranking."""
    from tflite_train.runtime import class_prototypes, embed, support_fisher

    model = TrainableModel(str(model_path), num_threads=threads)
    out = []
    for task in tasks:
        model.reset_state()
        model.set_head(class_prototypes(embed(model, task.support), task.support_labels))
        out.append(support_fisher(model, task.support, task.support_labels))
    return out
