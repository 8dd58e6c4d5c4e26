"""The updates of one fine-tuning run: P>M>F's procedure (TinyTrain appendix C) on a TFLite interpreter.

One run takes a support subset S' (the whole support set, or the prototype set of the per-task rate choice,
``tflite_train.runtime.adaptation.rate_choice``) and ``updates`` optimizer updates. Update u draws a batch Q_u of B
pseudo-queries (augmented views of S'; ``tflite_train.runtime.adaptation.pseudo_queries``) and minimises the
cross-entropy of their cosine logits against class prototypes (TinyTrain Eq. 5's ProtoNet loss),

    L_u = 1/B sum_{(x, y) in Q_u} -log softmax_k( s cos(f(x), c_k) )[y],

where the prototypes c_k come, by ``prototype_mode``:

* "fixed": c_k = mean of f_0(x) over S'_k, the untrained backbone's, set once (the previous procedure);
* "refresh": c_k = mean of f_u(x) over S'_k through the current backbone, recomputed before every update
  (from the cached cut of S': only the layers above the cut run), no gradient through c_k;
* "episode": as "refresh", computed inside the step with the gradient of L_u through c_k as well
  (P>M>F; the ``episode_step_from_<layer>`` signature, support rows and pseudo-queries in one batch).

Each update is one optimizer step with the batch's mean gradient, by ``mode``:

* "batch": one train step on the B pseudo-queries (the selection was priced at B rows: paper
  appendix A.4 scales the saved activations with the batch);
* "accumulate": B batch-1 passes add their gradients into the export's accumulators
  (``accumulate_from_<layer>``) and one ``apply_accumulated`` applies their mean: the same update as a
  batch of B (CONTRACT.md), with the backward memory of one image and the optimizer's whole-tensor work
  paid once per update.

Rows come from a ``RowSource``: activations at a cached cut (computed once per image) or, without a
usable cut, the images themselves (full steps; no episode or accumulation signatures then).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import Any

import numpy as np

from tflite_train import contract as C
from tflite_train.runtime.adaptation.free_memory import release_free_memory
from tflite_train.runtime.adaptation.pseudo_queries import ViewDraw, pseudo_query_batches
from tflite_train.runtime.adaptation.replay_memory import ReplayMemory, ViewActivations
from tflite_train.runtime.model.cached_cut import CachedCut
from tflite_train.runtime.model.interpreter import TrainableModel

__all__ = ["BATCH_MODES", "PROTOTYPE_MODES", "RowSource", "UpdatePlan", "class_prototypes", "embed", "embed_from",
           "plan_updates", "run_updates"]

LOG = logging.getLogger(__name__)

PROTOTYPE_MODES = ("fixed", "refresh", "episode")
"""Where each update's prototypes come from (module docstring)."""
BATCH_MODES = ("batch", "accumulate")
"""How an update's B pseudo-queries become one optimizer step (module docstring)."""
TRIM_FIRST, TRIM_EVERY = 8, 50
"""The free heap pages are handed back (``free_memory``) after each of the first ``TRIM_FIRST`` updates, then
after every ``TRIM_EVERY``-th: LiteRT's first runs of a train step each leave about 9.5 MiB of freed heap
resident that the next run does not reuse (measured on EfficientNet-Lite0@128, batch-1 steps from the cut:
+67 MiB over the first 8 steps without a trim; with a trim after the first step and every 50th, +5 to +15 MiB
at the third and fourth step in 3 of 14 ``adapt`` runs). A trim costs the next run the page faults of what it
handed back (a trim after every step: LiteRT's step 8.3 -> 17.8 ms), hence only while the heap settles."""


def embed(model: TrainableModel, images: np.ndarray, chunk_size: int = 32) -> np.ndarray:
    """``infer`` embeddings f32[N, D] in chunks of ``chunk_size``."""
    return np.concatenate([model.infer(images[i:i + chunk_size])[C.EMBEDDINGS]
                           for i in range(0, images.shape[0], chunk_size)])


def embed_from(model: TrainableModel, cut: CachedCut, activations: np.ndarray, chunk_size: int = 32) -> np.ndarray:
    """``infer_from_<layer>`` embeddings f32[N, D] of activations at ``cut``, in chunks of ``chunk_size``."""
    return np.concatenate([model.infer_from(cut, activations[i:i + chunk_size])[C.EMBEDDINGS]
                           for i in range(0, activations.shape[0], chunk_size)])


def class_prototypes(embeddings: np.ndarray, labels: np.ndarray, kept: np.ndarray | None = None) -> np.ndarray:
    """c_k = mean of the embeddings of class k, for k = 0..K-1: f32[K, D].

    K = max(labels) + 1, or at least the rows of ``kept`` (a continued run's stored prototypes,
    ``tflite_train.runtime.adaptation.continual``): a class with no embedding keeps its ``kept`` row.

    Raises:
      ValueError: a class below K has neither an embedding nor a ``kept`` row.
    """
    kept_rows = 0 if kept is None else kept.shape[0]
    out = []
    for k in range(max(int(labels.max()) + 1 if labels.size else 0, kept_rows)):
        rows = labels == k
        if rows.any():
            out.append(embeddings[rows].mean(axis=0))
        elif k < kept_rows:
            out.append(kept[k])
        else:
            raise ValueError(f"class {k} has no embedding and no kept prototype")
    return np.stack(out).astype(np.float32)


@dataclasses.dataclass(frozen=True)
class UpdatePlan:
    """How every update of an adaptation runs, resolved against the model and the budget.

    Attributes:
      prototype_mode: One of ``PROTOTYPE_MODES``.
      mode: One of ``BATCH_MODES``.
      batch: Pseudo-queries per update (B).
      rows: Rows one train-step call holds (what B_mem was checked against): B for "batch" (plus the
        support rows for "episode"), 1 for "accumulate".
      note: One line on what was reduced from the config, and why (empty when nothing was).
    """

    prototype_mode: str
    mode: str
    batch: int
    rows: int
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready record."""
        return dataclasses.asdict(self)


def plan_updates(prototype_mode: str, mode: str, batch: int, num_support: int, *, cached: bool, episode: bool,
                 accumulate: bool, fits: Callable[[int], bool]) -> UpdatePlan:
    """The plan for ``prototype_mode``/``mode``/``batch`` on this model (pure; what is reduced says so in ``note``).

    Args:
      prototype_mode, mode, batch: The config's choice.
      num_support: Support images that form the prototypes of an "episode" step.
      cached: The steps run from a cached cut (episode and accumulation signatures exist per cut only).
      episode: The cut has an episode step. accumulate: the cut has an accumulation step and the file
        ``apply_accumulated``.
      fits: Whether a train-step call of that many rows fits B_mem (the selection's cost at that batch).

    Rules: "episode" needs a cut with its signature and N + B rows within B_mem, else "refresh";
    "accumulate" needs the accumulation signatures, else "batch"; a "batch" whose rows do not fit B_mem is
    reduced to the most rows that do (at least 1).
    """
    notes = []
    if prototype_mode == "episode":
        if not (cached and episode):
            notes.append("episode prototypes need a cached cut with an episode step: prototypes refreshed without "
                         "gradient instead")
            prototype_mode = "refresh"
        elif not fits(num_support + batch):
            notes.append(f"an episode step of {num_support} support + {batch} pseudo-query rows exceeds B_mem: "
                         "prototypes refreshed without gradient instead")
            prototype_mode = "refresh"
        else:
            return UpdatePlan(prototype_mode, "batch", batch, num_support + batch, "")
    if mode == "accumulate":
        if cached and accumulate:
            return UpdatePlan(prototype_mode, mode, batch, 1, "; ".join(notes))
        notes.append("the model has no gradient accumulation at this cut: real batches instead")
        mode = "batch"
    rows = batch
    while rows > 1 and not fits(rows):
        rows -= 1
    if rows < batch:
        notes.append(f"a batch of {batch} pseudo-queries exceeds B_mem: reduced to {rows}")
    return UpdatePlan(prototype_mode, "batch", rows, rows, "; ".join(notes))


class RowSource:
    """The support images and their pseudo-query views as the steps read them.

    With a cut, both are activations at the cut (``features_<layer>``, computed once: nothing below the cut
    changes while only layers above it are selected); without one, the images themselves. Views given as a
    ``ViewDraw`` are drawn chunk by chunk as their activations are computed (``ViewDraw.chunks``: the same
    pixels and the same ``features`` calls as from the drawn array, without holding every view), or all
    at once without a cut.

    A continued run's replay memory (``tflite_train.runtime.adaptation.replay_memory``) adds its I stored images at
    the cut after the N support images: their plain views are rows N..N+I-1 of ``support``, and view v of
    pseudo-query row v * (N + I) + N + j is stored image j's row ``replay.view_rows(V)[j, v]`` (one of its
    stored augmented views, or its plain view when it has none).

    Args:
      model: The model (its selection already set, so the features are those of the frozen prefix).
      cut: The cached cut, or None for full steps.
      support: f32 [N, H, W, C] support images, or None when no update reads them ("fixed" prototypes and
        no rate choice).
      views: f32 [V * N, H, W, C] pseudo-query views, view-major (``draw_views``), or their ``ViewDraw``.
      chunk_size: Images per ``features``/``infer`` call.
      replay: The replay memory at ``cut`` (needs ``cut`` and ``support``), or None.
    """

    def __init__(self, model: TrainableModel, cut: CachedCut | None, support: np.ndarray | None,
                 views: np.ndarray | ViewDraw, chunk_size: int, replay: ReplayMemory | None = None) -> None:
        if replay is not None and (cut is None or support is None):
            raise ValueError("replayed activations need a cut and the support rows")
        self.model, self.cut, self.chunk_size = model, cut, chunk_size
        self.new_rows = 0 if support is None else support.shape[0]
        self.num_views = views.views if isinstance(views, ViewDraw) else (
            None if support is None else views.shape[0] // max(support.shape[0], 1))  # V, when known
        self.support = None if support is None else self._rows(support)
        if not isinstance(views, ViewDraw):
            self.views = self._rows(views)
        elif self.cut is None:
            self.views = views.all()
        else:
            self.views = np.concatenate([self._view_features(x) for x in views.chunks(self.chunk_size)])
        self.replay = replay
        if replay is not None:
            self.support = np.concatenate([self.support, replay.plain])
            self._replay_rows = replay.view_rows(self.num_views)

    def pseudo_queries(self, rows: np.ndarray) -> np.ndarray:
        """The pseudo-query rows ``rows`` of ``pseudo_query_batches`` over the N (+ I replayed) images."""
        if self.replay is None:
            return self.views[rows]
        total = self.new_rows + self.replay.num_images
        view, item = np.divmod(rows, total)
        new = item < self.new_rows
        out = np.empty((rows.shape[0], *self.views.shape[1:]), self.views.dtype)
        out[new] = self.views[view[new] * self.new_rows + item[new]]
        out[~new] = self.replay.activations[self._replay_rows[item[~new] - self.new_rows, view[~new]]]
        return out

    def view_activations(self) -> ViewActivations | None:
        """The support images' views at the cut (for the replay memory), or None without a cut."""
        if self.cut is None or self.num_views is None:
            return None
        return ViewActivations(self.cut.layer, self.num_views, self.views)

    def _view_features(self, views: np.ndarray) -> np.ndarray:
        """``features`` of a chunk of views, then the free heap pages handed back (``free_memory``): the
        augmentation's temporaries of the next view then reuse pages instead of growing the resident set."""
        out = self.model.features(self.cut, views)
        release_free_memory()
        return out

    def _chunked(self, call: Callable[[np.ndarray], np.ndarray], rows: np.ndarray) -> np.ndarray:
        return np.concatenate([call(rows[i:i + self.chunk_size]) for i in range(0, rows.shape[0], self.chunk_size)])

    def _rows(self, images: np.ndarray) -> np.ndarray:
        if self.cut is None:
            return images
        return self._chunked(lambda x: self.model.features(self.cut, x), images)

    def embed(self, rows: np.ndarray) -> np.ndarray:
        """Embeddings f32 [n, D] of ``rows`` (support rows, in the source's form) with the current state."""
        if self.cut is None:
            return embed(self.model, rows, self.chunk_size)
        return embed_from(self.model, self.cut, rows, self.chunk_size)

    def step(self, x: np.ndarray, y: np.ndarray) -> dict[str, float]:
        """One optimizer step on the rows ``x``."""
        return self.model.train_step(x, y) if self.cut is None else self.model.train_step_from(self.cut, x, y)


def view_rows(local: np.ndarray, subset: np.ndarray, num_support: int) -> np.ndarray:
    """Rows of the whole view array for ``pseudo_query_batches`` rows over ``subset``: view v of the subset's
    i-th image is view v of support image subset[i], row v * N + subset[i]."""
    n = subset.shape[0]
    return (local // n) * num_support + subset[local % n]


def run_updates(model: TrainableModel, source: RowSource, plan: UpdatePlan, *, subset: np.ndarray,
                labels: np.ndarray, updates: int, views: int, rng: np.random.Generator,
                on_update: Callable[[dict[str, float]], None] = lambda out: None,
                kept: np.ndarray | None = None) -> tuple[list[float], list[float]]:
    """``updates`` optimizer updates on the support ``subset`` by ``plan`` (module docstring).

    The model's state must hold the run's start: selection, learning rate and the prototypes of the
    untrained backbone over ``subset`` (used as they are by "fixed").

    Args:
      model: The model.
      source: The rows (``RowSource``).
      plan: ``plan_updates``' plan.
      subset: Indices of the support rows this run trains on (sorted).
      labels: i32 [N] labels of the whole support set (and of the replayed images after it).
      updates: Optimizer updates.
      views: V, views per support image in ``source.views``.
      rng: The generator that draws the pseudo-query batches.
      on_update: Called with each update's loss and accuracy.
      kept: A continued run's stored prototypes, for "refresh" classes without a row (``class_prototypes``).

    Returns:
      (losses, accuracies), one per update: the batch's mean before the update.
    """
    losses, accuracies = [], []
    n = labels.shape[0]
    view_labels = np.tile(labels, views)
    support_labels = labels[subset]
    for batch in pseudo_query_batches(rng, subset.shape[0], plan.batch, updates, views):
        rows = view_rows(batch, subset, n)
        x, y = source.pseudo_queries(rows), view_labels[rows]
        if plan.prototype_mode == "refresh":
            model.set_head(class_prototypes(source.embed(source.support[subset]), support_labels, kept))
        if plan.prototype_mode == "episode":
            roles = np.concatenate([np.ones(subset.shape[0], np.float32), np.zeros(rows.shape[0], np.float32)])
            out = model.episode_step_from(source.cut, np.concatenate([source.support[subset], x]),
                                          np.concatenate([support_labels, y]), roles)
        elif plan.mode == "accumulate":
            parts = [model.accumulate_from(source.cut, x[i:i + 1], y[i:i + 1]) for i in range(x.shape[0])]
            model.apply_accumulated()
            out = {k: float(np.mean([p[k] for p in parts])) for k in parts[0]}
        else:
            out = source.step(x, y)
        losses.append(out[C.LOSS])
        accuracies.append(out[C.ACCURACY])
        on_update(out)
        if len(losses) <= TRIM_FIRST or len(losses) % TRIM_EVERY == 0:
            release_free_memory()
    return losses, accuracies
