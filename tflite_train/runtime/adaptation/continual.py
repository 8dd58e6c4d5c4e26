"""Continued adaptation (issue 42): a run that starts from a checkpoint's state and classes instead of the export's.

A device that learned K classes is given a support folder holding new classes and/or new images of known
ones. ``continue_from(checkpoint, support_names, ...)`` makes the run's ``AdaptStart``, which
``trainer.adapt(..., start=...)`` takes:

* **Classes by name.** The head's classes are the checkpoint's, in their order, then the support folder's
  classes the checkpoint does not name, in the folder's order (``merged_class_names``): an old class keeps
  its index, so the new checkpoint's ``class_names`` begin with the old ones. An old class without new
  images is kept.
* **State.** The run restores the checkpoint (``restore_checkpoint``: its weights, head, learning rate and
  selection mask) instead of ``reset_state``, and saves the union of the checkpoint's selection and its own
  (``saved_selection``): every channel that differs from the export.
* **Prototypes** (``fine_tuning.class_prototypes`` with ``kept``): c_k = the mean embedding of class k's rows of
  this run, its new support images and its replayed images' plain views (``replay_memory``), through the current
  backbone, at the start and again after the updates; a class with no row keeps its stored prototype.
* **Replay.** With a memory (``AdaptStart.replay``), the updates draw from the new images' views and the
  stored images' stored views (``fine_tuning.RowSource``), ``config.num_steps(N + I)`` updates of N new images
  and I stored images, all from the memory's cut; the selection is made among the layers at or above that cut
  only (``replay_memory.layers_above``), since the stored activations are those of the layers below it.

**Without replay (budget 0) the old classes drift.** A class with no row keeps the prototype c_k its own run
computed, the mean of f_old(x) over its images, while this run moves the backbone to f_new (the selected
layers train on the new images only). Its test images then embed as f_new(x), whose cosine to c_k is no
longer what the head was built on, and nothing in the loss keeps f_new near f_old on those classes: the
updates, whose rows are all of the new classes, pull every embedding towards the new prototypes. Measured on the
tiny test fixture (``tests/runtime/adaptation/test_continual.py::test_drift_without_replay_and_the_memory_that_prevents_it``,
printed with ``-s``; 3-way 5-shot Fashion-MNIST, then +1 way, 4 epochs; one task, 45 old-class queries): old-class
query accuracy 75.6 % before (3-way head), then on the 4-way head 0.0 % without replay, 68.9 % with a memory of the
plain views only (replay section version 1's content) and 73.3 % with the plain views and the 4 views each image
trained on (the memory ``checkpoint_after`` keeps with ``views``); the stored prototypes' cosine to their classes'
means through the moved backbone falls to 0.558 without replay. A memory both re-centres c_k on f_new (the
prototypes of the replayed images) and keeps old-class rows in every epoch's loss.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from tflite_train import contract as C
from tflite_train.runtime.adaptation.fine_tuning import class_prototypes, embed, embed_from
from tflite_train.runtime.adaptation.replay_memory import (ReplayMemory, ViewActivations, layers_above, lineage_cut,
                                                           remember)
from tflite_train.runtime.checkpoint.checkpoint import Checkpoint, checkpoint_arrays, checkpoint_writes, restore_checkpoint
from tflite_train.runtime.checkpoint.checkpoint_schema import check_replay_fits
from tflite_train.runtime.errors import UserError
from tflite_train.runtime.model.cached_cut import CachedCut
from tflite_train.runtime.model.interpreter import TrainableModel
from tflite_train.runtime.model.model_contract import layer_table
from tflite_train.runtime.text import printable
from tflite_train.sparse.layer_table import LayerTable
from tflite_train.sparse.selection import Selection

__all__ = ["AdaptStart", "checkpoint_after", "continue_from", "describe_start", "memory_after", "merged_class_names",
           "saved_selection"]


@dataclasses.dataclass(frozen=True)
class AdaptStart:
    """Where a continued run starts (module docstring).

    Attributes:
      checkpoint: The checkpoint restored first.
      class_names: The run's classes: the checkpoint's, then the support folder's new ones.
      replay: The memory the run trains on (the checkpoint's, its labels those of ``class_names``), or None
        (budget 0, or the checkpoint has none).
    """

    checkpoint: Checkpoint
    class_names: tuple[str, ...]
    replay: ReplayMemory | None = None

    @property
    def num_classes(self) -> int:
        """K of the run's head."""
        return len(self.class_names)

    @property
    def kept_prototypes(self) -> np.ndarray:
        """f32 [K_old, D]: the checkpoint's prototypes, kept for a class this run has no row of."""
        return self.checkpoint.arrays[C.PROTOTYPES]

    def begin(self, model: TrainableModel, images: np.ndarray, labels: np.ndarray, chunk_size: int = 32) -> np.ndarray:
        """Restores the checkpoint and sets the run's starting head (module docstring, "Prototypes").

        Args:
          model: The model (``check_fits`` passed).
          images: f32 [N, H, W, C] the new support images; labels: i32 [N] their head classes.
          chunk_size: Rows per ``infer`` / ``infer_from`` call.

        Returns:
          f32 [N + I, D]: the embeddings of the new images, then of the replayed images' plain views, through the
          restored model.
        """
        restore_checkpoint(model, self.checkpoint)
        embeddings = embed(model, images, chunk_size)
        rows = labels
        if self.replay is not None:
            embeddings = np.concatenate([embeddings, embed_from(model, self.cut(model), self.replay.plain,
                                                                chunk_size)])
            rows = np.concatenate([labels, self.replay.image_labels])
        model.set_head(class_prototypes(embeddings, rows, self.kept_prototypes))
        return embeddings

    def cut(self, model: TrainableModel) -> CachedCut | None:
        """The memory's cut among the model's cuts (None without a memory)."""
        if self.replay is None:
            return None
        return next(cut for cut in model.cached_cuts if cut.layer == self.replay.cut_layer)

    def candidates(self, model: TrainableModel) -> list[str]:
        """The layers the run may select: the model's candidates, at or above the memory's cut when it has one."""
        if self.replay is None:
            return list(model.candidates)
        index = {layer.name: layer.index for layer in layer_table(model.metadata)}
        return layers_above(self.replay.cut_index, model.candidates, index)

    def check_fits(self, model: TrainableModel, labels: np.ndarray) -> None:
        """Refuses a start that does not fit ``model`` or the run's labels (before any interpreter call).

        Raises:
          CheckpointError: another model, arrays that do not fit it, or a memory whose cut is not the model's
            (``checkpoint.checkpoint_writes``).
          UserError: more classes than the model's capacity, labels outside the classes, a memory the
            interpreter cannot train from (explicit XNNPACK: ``TrainableModel.cache_unsafe``).
        """
        checkpoint_writes(model, self.checkpoint)  # model_id, layers, shapes, values, the memory's cut
        if self.num_classes > model.capacity:
            raise UserError(f"the checkpoint's {self.checkpoint.arrays[C.PROTOTYPES].shape[0]} classes and the support "
                            f"set's new ones make {self.num_classes}; the model's class capacity is {model.capacity}")
        if labels.size and int(labels.max()) >= self.num_classes:
            raise UserError(f"support labels must be classes 0..{self.num_classes - 1} of the continued head; got "
                            f"{int(labels.max())}")
        if self.replay is not None:
            check_replay_fits(self.replay.section(), model.cached_cuts)  # also when the memory is not the checkpoint's
            if model.cache_unsafe:
                raise UserError(f"the replay memory needs steps from its cut {self.replay.cut_layer}, which this "
                                f"interpreter must not run ({model.cache_unsafe}); give a replay budget of 0")


def merged_class_names(old: Sequence[str], support: Sequence[str]) -> tuple[str, ...]:
    """The continued head's classes: ``old`` in order, then the names of ``support`` not in ``old``, in order."""
    known = set(old)
    return (*old, *(name for name in support if name not in known))


def continue_from(checkpoint: Checkpoint, support_names: Sequence[str], *, use_replay: bool = True,
                  source: str = "checkpoint") -> tuple[AdaptStart, np.ndarray]:
    """The start of a run from ``checkpoint`` on a support set of the classes ``support_names``.

    Args:
      checkpoint: The checkpoint (``load_checkpoint``; checked against the model by ``AdaptStart.check_fits``).
      support_names: The support set's class names (its label k names ``support_names[k]``).
      use_replay: Train on the checkpoint's memory when it has one (False: a replay budget of 0).
      source: The checkpoint's name in messages.

    Returns:
      (start, index) where ``index[k]`` is the head class of the support set's class k: relabel the support
      labels as ``index[labels]``.

    Raises:
      UserError: the checkpoint names no classes (it cannot be matched by name), or a support name repeats.
    """
    if not checkpoint.class_names:
        raise UserError(f"{source} names no classes (written without class names): a run from it matches the "
                        "support set's classes by name")
    if len(set(support_names)) != len(support_names):
        raise UserError("support class names repeat: classes are matched by name")
    names = merged_class_names(checkpoint.class_names, support_names)
    position = {name: i for i, name in enumerate(names)}
    index = np.asarray([position[name] for name in support_names], np.int32)
    replay = checkpoint.replay if use_replay else None
    return AdaptStart(checkpoint, names, replay), index


def saved_selection(start: Selection, run: Selection, table: LayerTable) -> Selection:
    """What the continued checkpoint stores: every channel the checkpoint changed or the run selected, per
    layer (forward order), under the run's policy name."""
    layers = [name for name in table.names if name in start.channels or name in run.channels]
    channels = {name: tuple(sorted(set(start.channels.get(name, ())) | set(run.channels.get(name, ()))))
                for name in layers}
    return Selection(tuple(layers), channels, run.policy).ordered(table)


def describe_start(start: AdaptStart) -> str:
    """"k classes from the checkpoint + m new (names)" for a log line."""
    old = start.checkpoint.arrays[C.PROTOTYPES].shape[0]
    added = [printable(n) for n in start.class_names[old:]]
    return f"{old} classes from the checkpoint + {len(added)} new ({', '.join(added) or 'none'})"


def memory_after(model: TrainableModel, start: AdaptStart | None, selection: Selection, images: np.ndarray,
                 labels: np.ndarray, budget_bytes: int, seed: int, chunk_size: int = 32,
                 views: ViewActivations | None = None) -> ReplayMemory | None:
    """The memory a run's checkpoint stores (``replay_memory.remember``): the start's memory and the run's
    support images at the cut (plain views with the adapted weights, and ``views``' augmented views when they
    are at that cut), kept under ``budget_bytes``.

    The cut: the start's memory's (the lineage's), else ``replay_memory.lineage_cut`` of the run's
    ``selection``. No memory (None) with a budget of 0, without cached cuts, or when the interpreter must not
    run them (``TrainableModel.cache_unsafe``). ``views`` at another cut (or None) add no views: the run's
    images keep their plain views only.
    """
    if budget_bytes <= 0 or model.cache_unsafe:
        return None
    memory = None if start is None else start.replay
    if memory is not None:
        cut = start.cut(model)
    else:
        index = {layer.name: layer.index for layer in layer_table(model.metadata)}
        cut = lineage_cut(model.cached_cuts, min((index[n] for n in selection.layers), default=None))
    if cut is None:
        return None
    activations = np.concatenate([model.features(cut, images[i:i + chunk_size])
                                  for i in range(0, images.shape[0], chunk_size)])
    per_image = views.per_image() if views is not None and views.cut_layer == cut.layer else None
    return remember(memory, cut, activations, labels, budget_bytes, seed, per_image)


def checkpoint_after(model: TrainableModel, selection: Selection, start: AdaptStart | None, images: np.ndarray,
                     labels: np.ndarray, class_names: Sequence[str], *, replay_budget: int, seed: int,
                     include_optimizer: bool = False, chunk_size: int = 32,
                     views: ViewActivations | None = None) -> Checkpoint:
    """The checkpoint of ``model``'s state after a run (in memory; ``checkpoint.save_checkpoint`` or
    ``encode_checkpoint`` write it, ``adapt(..., start=continue_from(it, ...))`` continues from it).

    Args:
      model: The model after ``adapt``.
      selection: The run's selection (``AdaptResult.selection``); with ``start``, stored as ``saved_selection``.
      start: The run's start, or None for a run from the export.
      images, labels: The run's support images and their head classes (for the replay memory).
      class_names: The head's classes (``start.class_names`` for a continued run).
      replay_budget, seed: The memory's budget and seed (``memory_after``).
      include_optimizer: Store the optimizer slots too.
      chunk_size: Images per ``features`` call.
      views: The run's views at its cut (``AdaptResult.views``), stored beside the plain views (``memory_after``).
    """
    table = layer_table(model.metadata)
    saved = (selection if start is None else saved_selection(start.checkpoint.selection, selection, table)).ordered(table)
    memory = memory_after(model, start, selection, images, labels, replay_budget, seed, chunk_size, views)
    return Checkpoint(str(model.metadata[C.F_MODEL_ID]), saved, include_optimizer,
                      checkpoint_arrays(model, saved, include_optimizer), tuple(class_names), replay=memory)
