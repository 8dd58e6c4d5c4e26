"""Runs one adaptation method over a list of tasks on the TFLite runtime path (``adapt`` + ``evaluate``).

A ``Method`` names an exported model (``"sparse"``, ``"full"``, ``"pretrained"``) and an
``AdaptConfig``; ``run_method`` adapts the model to every task's support set and scores the query
set, returning per-task accuracies (percent) and the selections' cost-model figures.
"""

from __future__ import annotations

import dataclasses
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
        return {"label": self.label, "accuracies": list(self.accuracies), "summary": self.summary.to_dict(),
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


def sparse_update_layers(config: BenchConfig, candidates: Sequence[str]) -> tuple[str, ...] | None:
    """MIT's static SparseUpdate layers for the backbone when all are candidates, else None (then the
    static ranking comes from the mean Fisher potentials of source meta-training tasks)."""
    layers = MIT_SPARSE_UPDATE_LAYERS.get(config.backbone)
    if layers and all(name in candidates for name in layers):
        return tuple(layers)
    return None


def run_method(
    method: Method,
    model_path: str | pathlib.Path,
    tasks: Sequence[Task],
    *,
    threads: int = 1,
    fisher_tasks: Sequence[Mapping[str, np.ndarray]] | None = None,
    progress: str = "",
) -> MethodResult:
    """Adapts ``method``'s model to each task and evaluates on the task's query set.

    Raises:
      ValueError: ``method.adapt`` is None (nothing to run) or bad tasks.
    """
    if method.adapt is None:
        raise ValueError(f"method {method.label!r} has no adaptation config (not built)")
    model = TrainableModel(str(model_path), num_threads=threads)
    accuracies, memory, macs, seconds = [], [], [], []
    layers: tuple[str, ...] = ()
    for i, task in enumerate(tasks):
        result = adapt(model, task.support, task.support_labels, method.adapt, fisher_tasks=fisher_tasks)
        accuracy = 100.0 * evaluate(model, task.query, task.query_labels)
        accuracies.append(accuracy)
        memory.append(0.0 if result.selection.is_empty else result.cost.total_bytes)
        macs.append(0.0 if result.selection.is_empty else result.cost.backward_macs)
        seconds.append(sum(result.seconds.values()))
        layers = tuple(result.selection.layers) if i == 0 else layers
        LOG.info("%s %s task %d/%d (%d-way, %d support): %.1f %% in %.1f s", progress, method.label, i + 1,
                 len(tasks), task.ways, task.support.shape[0], accuracy, seconds[-1])
    return MethodResult(method.label, tuple(accuracies), float(np.mean(memory)), float(np.mean(macs)),
                        float(np.sum(seconds)), layers)


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
