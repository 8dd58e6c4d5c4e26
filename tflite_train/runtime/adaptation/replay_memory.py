"""Latent replay (issue 42): activations of earlier support images at a fixed cut, kept in a checkpoint under a
byte budget, so that a later ``adapt --from`` trains on the old classes too, without their images.

**What is stored.** At a cached cut ``<layer>`` (metadata ``cached_cuts``; ``cache_plan``) a
support image x has the activation a(x) = f_<cut(x) that every layer from ``<layer>`` up reads; a step from
it (``train_step_from_<layer>``) computes exactly what ``train_step`` computes from x, as long as no layer
below the cut has changed (CONTRACT.md). The memory holds, for some earlier support images, the activation of
the un-augmented image (its *plain view*, float32) and of up to V of its augmented pseudo-query views (the
run's ``augment_views`` draw, ``pseudo_queries``), and the image's class: R rows of ``4 * prod(shape)`` bytes
each (``ReplayMemory``; rows 0..I-1 the I images' plain views, then their further views, ``images`` naming
each row's image). A later run trains on them beside its new images' views as a run from scratch trains on
every image's views: pass p reads view p mod V of a new image and stored view (p mod V) mod e of an old one
with e stored views (its plain view when e = 0; ``ReplayMemory.view_rows``), and it recomputes the old
classes' prototypes from the plain views through the moved backbone.

**The lineage's cut.** a(x) stays valid only while the layers below the cut keep the weights they had when
a(x) was computed. So the cut is fixed for a checkpoint's lineage: a run from a checkpoint with a memory
selects only layers at or above its cut (``layers_above``; the others are not offered to the selection
policy, and the report says so) and stores its new activations at the same cut. A lineage's first memory
takes the cut its run's own selection trained from, the highest cut at or below its deepest selected layer
(``TrainableModel.cache_cut``), or the lowest cut when nothing was selected (``lineage_cut``): later runs
may update at least the layers this one did. The run's views are stored only when its steps ran from that
cut (``ViewActivations``: computed once for training, nothing recomputed); else its images keep their plain
views only.

**Which rows** (``contract.REPLAY_RULE``, "class_balanced_recent"): the capacity is M = floor(budget / bytes
per activation). The pool is the stored images (oldest first, each with its stored views) followed by the run's
support images in a seeded random order (``numpy.random.default_rng(seed)``: one run's images are equally
recent, the seed breaks the tie), each with its V views. First the images (``keep_rows``): the classes take
turns in head order, each taking its most recent image not yet taken, until M images are taken or the pool is
exhausted: each class keeps min(its images, about M / K), newest first, so when classes are added the oldest
images of the largest classes leave first and no class is crowded out by a newer one; each kept image stores
its plain view. Then the E = M - I rows left go to further views (``keep_views``), in passes: pass q offers the
q-th view of every kept image that has one, the classes taking turns in head order, each giving it to its most
recent image not yet served in this pass, until E views are given: every kept image gets one more view before
any gets two, and a partial pass is shared out evenly among the classes. An image keeps its first views in its
own order (the run's draw order). The same pool and seed keep the same rows; the kept images stay in pool
order, which is the next run's recency.

**The default budget**, ``DEFAULT_REPLAY_BUDGET_BYTES`` = 1 MiB: the issue's ceiling for Lite0 @128, and the
order of the paper's backward-pass budget B_mem (1 MiB for MCUNet @128), so replay never weighs more than the
training it serves. On the default Lite0 @128 export it holds 85 activations at the b12..b15 cuts
(4 x 4 x 192 float32, 12 KiB each) and 36 at b10 (8 x 8 x 112, 28 KiB): the plain view and 4 views of each
image of a 3-way 5-shot task (75 rows), or of 17 images with fewer views; later additions share the rows out,
images first. Budget 0 keeps no memory.

Pure functions over numpy arrays; the interpreter calls (the activations of the new images) are the caller's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tflite_train import contract as C
from tflite_train.runtime.model.cached_cut import CachedCut

__all__ = ["DEFAULT_REPLAY_BUDGET_BYTES", "ReplayMemory", "ViewActivations", "keep_rows", "keep_views",
           "layers_above", "lineage_cut", "remember", "replay_capacity", "replay_image_layout"]

DEFAULT_REPLAY_BUDGET_BYTES = 2**20
"""The default replay budget of ``adapt`` (module docstring: why 1 MiB)."""


def replay_image_layout(images: np.ndarray, rows: int) -> str:
    """What is wrong with ``images`` as the row -> image index of a memory of ``rows`` rows (``contract.REPLAY_IMAGES``:
    0..I-1, then ascending within 0..I-1), or "" when nothing."""
    if images.dtype != np.int32 or images.shape != (rows,):
        return f"must be int32 [{rows}]; got {images.dtype} {list(images.shape)}"
    if rows and images.min() < 0:
        return f"holds the negative image index {int(images.min())}"
    count = int(images.max()) + 1 if rows else 0
    if count > rows or not np.array_equal(images[:count], np.arange(count)):
        return "must begin with 0, 1, ..., I-1 (each image's plain view, I = its largest entry + 1)"
    extra = images[count:]
    if extra.size and (extra.min() < 0 or np.any(np.diff(extra) < 0)):
        return "must continue with image indices 0..I-1 in ascending order (the further views, grouped by image)"
    return ""


@dataclasses.dataclass(frozen=True)
class ReplayMemory:
    """Stored activations at a cut, the images they are views of, and their classes (module docstring).

    Attributes:
      cut_layer: The cut's lowest layer (a metadata ``cached_cuts`` entry's ``lowest_layer``).
      cut_index: That layer's index.
      shape: One activation's shape, without the batch.
      budget_bytes: The budget the rows were chosen under (``nbytes <= budget_bytes``).
      activations: f32 [R, *shape]: the I images' plain views, oldest first, then their further views.
      labels: i32 [R], each row's class: an index into the checkpoint's class names (a row's is its image's).
      images: i32 [R], the image each row is a view of: 0..I-1, then ascending (``contract.REPLAY_IMAGES``);
        None: one plain view per image, ``arange(R)`` (a replay section of version 1).
    """

    cut_layer: str
    cut_index: int
    shape: tuple[int, ...]
    budget_bytes: int
    activations: np.ndarray
    labels: np.ndarray
    images: np.ndarray | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))
        activations = np.asarray(self.activations)
        labels = np.asarray(self.labels)
        if activations.dtype != np.float32 or activations.shape[1:] != self.shape or activations.shape[0] < 1:
            raise ValueError(f"replay activations must be float32 [R >= 1, {', '.join(map(str, self.shape))}]; "
                             f"got {activations.dtype} {list(activations.shape)}")
        rows = activations.shape[0]
        if labels.dtype != np.int32 or labels.shape != (rows,):
            raise ValueError(f"replay labels must be int32 [{rows}]; got {labels.dtype} {list(labels.shape)}")
        images = np.arange(rows, dtype=np.int32) if self.images is None else np.asarray(self.images)
        problem = replay_image_layout(images, rows)
        if problem:
            raise ValueError(f"replay images {problem}")
        object.__setattr__(self, "images", images)
        if not np.array_equal(labels, labels[images]):
            raise ValueError("replay labels must be those of each row's image (its plain view's)")
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
        """R, the stored rows (activations)."""
        return int(self.labels.shape[0])

    @property
    def num_images(self) -> int:
        """I, the stored images (each one plain view, rows 0..I-1)."""
        return int(self.images.max()) + 1

    @property
    def plain(self) -> np.ndarray:
        """f32 [I, *shape]: the images' plain views, oldest first."""
        return self.activations[:self.num_images]

    @property
    def image_labels(self) -> np.ndarray:
        """i32 [I]: the images' classes."""
        return self.labels[:self.num_images]

    def further_views(self) -> np.ndarray:
        """i32 [I]: e_i, the further (augmented) views stored of each image."""
        return np.bincount(self.images[self.num_images:], minlength=self.num_images).astype(np.int32)

    def view_rows(self, views: int) -> np.ndarray:
        """i64 [I, V]: the row a pass reading view v (of V) takes for image i: its further view v mod e_i, its
        plain view i when e_i = 0 (module docstring)."""
        count = self.num_images
        extra = self.further_views()
        first = count + np.concatenate([[0], np.cumsum(extra)[:-1]]).astype(np.int64)  # image i's first further row
        v = np.arange(views, dtype=np.int64)
        out = first[:, None] + v[None, :] % np.maximum(extra, 1)[:, None]
        return np.where(extra[:, None] > 0, out, np.arange(count, dtype=np.int64)[:, None])

    def section(self) -> dict[str, Any]:
        """The checkpoint header's replay section (``contract.CK_REPLAY``)."""
        return {C.F_FORMAT: C.REPLAY_FORMAT, C.F_FORMAT_VERSION: C.REPLAY_FORMAT_VERSION, C.RP_CUT_LAYER: self.cut_layer,
                C.RP_CUT_INDEX: int(self.cut_index), C.RP_ACTIVATION_SHAPE: list(self.shape),
                C.RP_BUDGET_BYTES: int(self.budget_bytes), C.F_RULE: C.REPLAY_RULE}

    def arrays(self) -> dict[str, np.ndarray]:
        """The checkpoint payload arrays of the memory."""
        return {C.REPLAY_ACTIVATIONS: self.activations, C.REPLAY_LABELS: self.labels, C.REPLAY_IMAGES: self.images}

    def class_counts(self, num_classes: int) -> list[int]:
        """Stored images per class 0..num_classes-1."""
        return np.bincount(self.image_labels, minlength=num_classes).tolist()

    def report(self, class_names: Sequence[str]) -> dict[str, Any]:
        """JSON-ready summary for a run report: cut, budget, bytes, rows, images (and images per class name), the
        rule."""
        counts = self.class_counts(len(class_names))
        return {"cut": self.cut_layer, "budget": int(self.budget_bytes), "bytes": self.nbytes, "rows": len(self),
                "examples": self.num_images, "per_class": dict(zip(class_names, counts)), "kept_by": C.REPLAY_RULE}

    @classmethod
    def from_checkpoint(cls, section: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> ReplayMemory:
        """The memory of a checkpoint's (schema-checked) replay section and its payload arrays (no
        ``replay_images`` in a version-1 section: one plain view per row)."""
        return cls(section[C.RP_CUT_LAYER], int(section[C.RP_CUT_INDEX]), tuple(section[C.RP_ACTIVATION_SHAPE]),
                   int(section[C.RP_BUDGET_BYTES]), arrays[C.REPLAY_ACTIVATIONS], arrays[C.REPLAY_LABELS],
                   arrays.get(C.REPLAY_IMAGES))


@dataclasses.dataclass(frozen=True)
class ViewActivations:
    """A run's pseudo-query views at the cut its steps ran from, kept for the replay memory (module docstring).

    Attributes:
      cut_layer: The cut (``CachedCut.layer``).
      views: V, views per support image.
      activations: f32 [V * N, *shape], view-major: view v of support image i at row v * N + i.
    """

    cut_layer: str
    views: int
    activations: np.ndarray = dataclasses.field(repr=False)

    def per_image(self) -> np.ndarray:
        """f32 [N, V, *shape]: image i's views in draw order."""
        a = np.asarray(self.activations)
        return np.swapaxes(a.reshape(self.views, a.shape[0] // self.views, *a.shape[1:]), 0, 1)


def replay_capacity(budget_bytes: int, row_bytes: int) -> int:
    """M = floor(budget / bytes per activation): the most rows the budget holds."""
    if row_bytes < 1:
        raise ValueError(f"row_bytes must be >= 1; got {row_bytes}")
    return max(0, int(budget_bytes) // int(row_bytes))


def _class_turns(labels: np.ndarray, queues: dict[int, list[int]], capacity: int) -> list[int]:
    """Classes in ascending order take turns popping the head of their queue until ``capacity`` are taken or every
    queue is empty; the taken entries in turn order."""
    taken: list[int] = []
    while len(taken) < capacity and any(queues.values()):
        for k in sorted(queues):
            if queues[k] and len(taken) < capacity:
                taken.append(int(queues[k].pop(0)))
    return taken


def keep_rows(labels: np.ndarray, capacity: int) -> np.ndarray:
    """The images the class-balanced, most-recent-first rule keeps (module docstring).

    Args:
      labels: i32 [P], the class of each pool image, the pool oldest first.
      capacity: M, the most images kept.

    Returns:
      Indices into the pool, ascending (oldest first), at most ``capacity`` of them: the classes, in
      ascending order, take turns taking their most recent image not yet taken.
    """
    labels = np.asarray(labels)
    queues = {int(k): list(np.flatnonzero(labels == k)[::-1]) for k in np.unique(labels)}  # newest first
    return np.sort(np.asarray(_class_turns(labels, queues, capacity), np.int64))


def keep_views(labels: np.ndarray, available: np.ndarray, capacity: int) -> np.ndarray:
    """How many further views each kept image keeps (module docstring, "Which rows").

    Pass q = 1, 2, ... offers the q-th view of every image with ``available >= q``; in a pass the classes, in
    ascending order, take turns giving it to their most recent image (highest index) not yet served in the pass,
    until ``capacity`` views are given or no image has more.

    Args:
      labels: i32 [I], the class of each kept image, oldest first.
      available: i32 [I], further views each image has.
      capacity: E, the most further views kept in all.

    Returns:
      i32 [I], e_i <= available_i with sum e_i <= capacity: image i keeps its first e_i views.
    """
    labels, available = np.asarray(labels), np.asarray(available)
    counts = np.zeros(labels.shape[0], np.int32)
    left = int(capacity)
    for q in range(1, int(available.max(initial=0)) + 1):
        if left <= 0:
            break
        queues = {int(k): list(np.flatnonzero((labels == k) & (available >= q))[::-1]) for k in np.unique(labels)}
        taken = _class_turns(labels, queues, left)
        counts[taken] += 1
        left -= len(taken)
    return counts


def remember(memory: ReplayMemory | None, cut: CachedCut, activations: np.ndarray, labels: np.ndarray,
             budget_bytes: int, seed: int, views: np.ndarray | None = None) -> ReplayMemory | None:
    """The next memory: ``memory``'s images, then this run's (in a seeded order), kept under ``budget_bytes``.

    Args:
      memory: The memory the run started from (its labels already in the run's class indices), or None.
      cut: The cut of the activations (the memory's own, when there is one).
      activations: f32 [N, *cut.shape], the run's support images at the cut (plain views), with the final weights.
      labels: i32 [N], their classes.
      budget_bytes: The byte budget.
      seed: The seed that orders the run's images (``numpy.random.default_rng(seed)``).
      views: f32 [N, V, *cut.shape], image i's augmented views at the cut (``ViewActivations.per_image``), or
        None (plain views only).

    Returns:
      The kept memory (module docstring, "Which rows"), or None when the budget holds no activation.

    Raises:
      ValueError: ``memory`` is at another cut than ``cut``, or ``views`` are not [N, V, *cut.shape].
    """
    if memory is not None and (memory.cut_layer != cut.layer or memory.shape != tuple(cut.shape)):
        raise ValueError(f"the replay memory is at cut {memory.cut_layer} {list(memory.shape)}; the run's "
                         f"activations at {cut.layer} {list(cut.shape)}")
    n = len(labels)
    if views is not None and (views.shape[0] != n or views.shape[2:] != tuple(cut.shape)):
        raise ValueError(f"run views must be [{n}, V, {', '.join(map(str, cut.shape))}]; got {list(views.shape)}")
    order = np.random.default_rng(seed).permutation(n)
    plain = [np.asarray(activations, np.float32)[order]]
    image_labels = [np.asarray(labels, np.int32)[order]]
    further: list[np.ndarray] = [np.zeros((0, *cut.shape), np.float32)] * n if views is None else \
        list(np.asarray(views, np.float32)[order])
    if memory is not None:
        plain.insert(0, memory.plain)
        image_labels.insert(0, memory.image_labels)
        further = [memory.activations[memory.images == i][1:] for i in range(memory.num_images)] + further
    pool_labels = np.concatenate(image_labels)
    capacity = replay_capacity(budget_bytes, cut.bytes_per_image)
    kept = keep_rows(pool_labels, capacity)
    if kept.size == 0:
        return None
    counts = keep_views(pool_labels[kept], np.asarray([further[i].shape[0] for i in kept]), capacity - kept.size)
    rows = [np.concatenate(plain)[kept]] + [further[i][:e] for i, e in zip(kept, counts) if e]
    images = np.concatenate([np.arange(kept.size), np.repeat(np.arange(kept.size), counts)]).astype(np.int32)
    return ReplayMemory(cut.layer, cut.index, tuple(cut.shape), int(budget_bytes),
                        np.ascontiguousarray(np.concatenate(rows)), pool_labels[kept][images].astype(np.int32), images)


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
