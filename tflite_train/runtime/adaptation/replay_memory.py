"""Latent replay (issue 42): activations of earlier support images at a fixed cut, kept in a checkpoint under a
byte budget, so that a later ``adapt --from`` trains on the old classes too, without their images.

**What is stored.** At a cached cut ``<layer>`` (metadata ``cached_cuts``; ``cache_plan``) a
support image x has the activation a(x) = f_<cut(x) that every layer from ``<layer>`` up reads; a step from
it (``train_step_from_<layer>``) computes exactly what ``train_step`` computes from x, as long as no layer
below the cut has changed (CONTRACT.md). The memory holds a(x) of the un-augmented image (float32) and x's
class for some earlier support images: R rows of ``4 * prod(shape)`` bytes each (``ReplayMemory``). A later
run trains on them beside its new images' views (no augmentation exists for a stored activation) and
recomputes the old classes' prototypes from them through the moved backbone.

**The lineage's cut.** a(x) stays valid only while the layers below the cut keep the weights they had when
a(x) was computed. So the cut is fixed for a checkpoint's lineage: a run from a checkpoint with a memory
selects only layers at or above its cut (``layers_above``; the others are not offered to the selection
policy, and the report says so) and stores its new activations at the same cut. A lineage's first memory
takes the cut its run's own selection trained from, the highest cut at or below its deepest selected layer
(``TrainableModel.cache_cut``), or the lowest cut when nothing was selected (``lineage_cut``): later runs
may update at least the layers this one did.

**Which examples** (``contract.REPLAY_RULE``, "class_balanced_recent"; ``keep_rows``): the capacity is
M = floor(budget / bytes per activation). The pool is the stored rows (oldest first) followed by the run's
support images in a seeded random order (``numpy.random.default_rng(seed)``: one run's images are equally
recent, the seed breaks the tie). The classes take turns in head order, each taking its most recent row not
yet taken, until M rows are taken or the pool is exhausted: each class keeps min(its rows, about M / K),
newest first, so when classes are added the oldest rows of the largest classes leave first and no class is
crowded out by a newer one. The same pool and seed keep the same rows; the kept rows stay in pool order,
which is the next run's recency.

**The default budget**, ``DEFAULT_REPLAY_BUDGET_BYTES`` = 1 MiB: the issue's ceiling for Lite0 @128, and the
order of the paper's backward-pass budget B_mem (1 MiB for MCUNet @128), so replay never weighs more than the
training it serves. On the default Lite0 @128 export it holds 85 activations at the b12..b15 cuts
(4 x 4 x 192 float32, 12 KiB each) and 36 at b10 (8 x 8 x 112, 28 KiB): every image of a 5-way 5-shot task
and of later additions until about 17 (resp. 7) per class. Budget 0 keeps no memory.

Pure functions over numpy arrays; the interpreter calls (the activations of the new images) are the caller's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tflite_train import contract as C
from tflite_train.runtime.model.cached_cut import CachedCut

__all__ = ["DEFAULT_REPLAY_BUDGET_BYTES", "ReplayMemory", "keep_rows", "layers_above", "lineage_cut", "remember",
           "replay_capacity"]

DEFAULT_REPLAY_BUDGET_BYTES = 2**20
"""The default replay budget of ``adapt`` (module docstring: why 1 MiB)."""


@dataclasses.dataclass(frozen=True)
class ReplayMemory:
    """Stored activations at a cut, and their classes (module docstring).

    Attributes:
      cut_layer: The cut's lowest layer (a metadata ``cached_cuts`` entry's ``lowest_layer``).
      cut_index: That layer's index.
      shape: One activation's shape, without the batch.
      budget_bytes: The budget the rows were chosen under (``nbytes <= budget_bytes``).
      activations: f32 [R, *shape], oldest first.
      labels: i32 [R], each row's class: an index into the checkpoint's class names.
    """

    cut_layer: str
    cut_index: int
    shape: tuple[int, ...]
    budget_bytes: int
    activations: np.ndarray
    labels: np.ndarray

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))
        activations = np.asarray(self.activations)
        labels = np.asarray(self.labels)
        if activations.dtype != np.float32 or activations.shape[1:] != self.shape or activations.shape[0] < 1:
            raise ValueError(f"replay activations must be float32 [R >= 1, {', '.join(map(str, self.shape))}]; "
                             f"got {activations.dtype} {list(activations.shape)}")
        if labels.dtype != np.int32 or labels.shape != (activations.shape[0],):
            raise ValueError(f"replay labels must be int32 [{activations.shape[0]}]; got {labels.dtype} "
                             f"{list(labels.shape)}")
        if activations.nbytes > self.budget_bytes:
            raise ValueError(f"replay activations take {activations.nbytes} bytes, over their budget of "
                             f"{self.budget_bytes}")

    @property
    def row_bytes(self) -> int:
        """Bytes of one stored activation."""
        return 4 * int(np.prod(self.shape))

    @property
    def nbytes(self) -> int:
        """Bytes of the stored activations."""
        return int(self.activations.nbytes)

    def __len__(self) -> int:
        return int(self.labels.shape[0])

    def section(self) -> dict[str, Any]:
        """The checkpoint header's replay section (``contract.CK_REPLAY``)."""
        return {C.F_FORMAT: C.REPLAY_FORMAT, C.F_FORMAT_VERSION: C.REPLAY_FORMAT_VERSION, C.RP_CUT_LAYER: self.cut_layer,
                C.RP_CUT_INDEX: int(self.cut_index), C.RP_ACTIVATION_SHAPE: list(self.shape),
                C.RP_BUDGET_BYTES: int(self.budget_bytes), C.F_RULE: C.REPLAY_RULE}

    def arrays(self) -> dict[str, np.ndarray]:
        """The checkpoint payload arrays of the memory."""
        return {C.REPLAY_ACTIVATIONS: self.activations, C.REPLAY_LABELS: self.labels}

    def class_counts(self, num_classes: int) -> list[int]:
        """Rows per class 0..num_classes-1."""
        return np.bincount(self.labels, minlength=num_classes).tolist()

    def report(self, class_names: Sequence[str]) -> dict[str, Any]:
        """JSON-ready summary for a run report: cut, budget, bytes, rows (and rows per class name), the rule."""
        counts = self.class_counts(len(class_names))
        return {"cut": self.cut_layer, "budget": int(self.budget_bytes), "bytes": self.nbytes, "examples": len(self),
                "per_class": dict(zip(class_names, counts)), "kept_by": C.REPLAY_RULE}

    @classmethod
    def from_checkpoint(cls, section: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> ReplayMemory:
        """The memory of a checkpoint's (schema-checked) replay section and its two payload arrays."""
        return cls(section[C.RP_CUT_LAYER], int(section[C.RP_CUT_INDEX]), tuple(section[C.RP_ACTIVATION_SHAPE]),
                   int(section[C.RP_BUDGET_BYTES]), arrays[C.REPLAY_ACTIVATIONS], arrays[C.REPLAY_LABELS])


def replay_capacity(budget_bytes: int, row_bytes: int) -> int:
    """M = floor(budget / bytes per activation): the most rows the budget holds."""
    if row_bytes < 1:
        raise ValueError(f"row_bytes must be >= 1; got {row_bytes}")
    return max(0, int(budget_bytes) // int(row_bytes))


def keep_rows(labels: np.ndarray, capacity: int) -> np.ndarray:
    """The rows the class-balanced, most-recent-first rule keeps (module docstring).

    Args:
      labels: i32 [P], the class of each pool row, the pool oldest first.
      capacity: M, the most rows kept.

    Returns:
      Indices into the pool, ascending (oldest first), at most ``capacity`` of them: the classes, in
      ascending order, take turns taking their most recent row not yet taken.
    """
    labels = np.asarray(labels)
    queues = {int(k): list(np.flatnonzero(labels == k)[::-1]) for k in np.unique(labels)}  # newest first
    kept: list[int] = []
    while len(kept) < capacity and any(queues.values()):
        for k in sorted(queues):
            if queues[k] and len(kept) < capacity:
                kept.append(int(queues[k].pop(0)))
    return np.sort(np.asarray(kept, np.int64))


def remember(memory: ReplayMemory | None, cut: CachedCut, activations: np.ndarray, labels: np.ndarray,
             budget_bytes: int, seed: int) -> ReplayMemory | None:
    """The next memory: ``memory``'s rows, then this run's (in a seeded order), kept under ``budget_bytes``.

    Args:
      memory: The memory the run started from (its labels already in the run's class indices), or None.
      cut: The cut of the activations (the memory's own, when there is one).
      activations: f32 [N, *cut.shape], the run's support images at the cut, with the final weights.
      labels: i32 [N], their classes.
      budget_bytes: The byte budget.
      seed: The seed that orders the run's rows (``numpy.random.default_rng(seed)``).

    Returns:
      The kept memory, or None when the budget holds no activation.

    Raises:
      ValueError: ``memory`` is at another cut than ``cut``.
    """
    if memory is not None and (memory.cut_layer != cut.layer or memory.shape != tuple(cut.shape)):
        raise ValueError(f"the replay memory is at cut {memory.cut_layer} {list(memory.shape)}; the run's "
                         f"activations at {cut.layer} {list(cut.shape)}")
    order = np.random.default_rng(seed).permutation(len(labels))
    pool_x = [np.asarray(activations, np.float32)[order]]
    pool_y = [np.asarray(labels, np.int32)[order]]
    if memory is not None:
        pool_x.insert(0, memory.activations)
        pool_y.insert(0, memory.labels)
    pool_labels = np.concatenate(pool_y)
    kept = keep_rows(pool_labels, replay_capacity(budget_bytes, cut.bytes_per_image))
    if kept.size == 0:
        return None
    return ReplayMemory(cut.layer, cut.index, tuple(cut.shape), int(budget_bytes),
                        np.ascontiguousarray(np.concatenate(pool_x)[kept]), pool_labels[kept].astype(np.int32))


def lineage_cut(cuts: Sequence[CachedCut], deepest_selected: int | None) -> CachedCut | None:
    """The cut a lineage's first memory takes: the highest cut at or below the deepest selected layer's index,
    else the lowest cut (nothing selected, or every selected layer below every cut); None without cuts."""
    if not cuts:
        return None
    ordered = sorted(cuts, key=lambda cut: cut.index)
    if deepest_selected is not None:
        usable = [cut for cut in ordered if cut.index <= deepest_selected]
        if usable:
            return usable[-1]
    return ordered[0]


def layers_above(cut_index: int, candidates: Sequence[str], layer_index: Mapping[str, int]) -> list[str]:
    """The candidates a run from a memory at the cut ``cut_index`` may select: those at or above the cut
    (index >= ``cut_index``); the layers below it feed the stored activations and stay frozen."""
    return [name for name in candidates if layer_index[name] >= cut_index]
