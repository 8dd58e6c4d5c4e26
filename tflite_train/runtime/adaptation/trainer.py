"""On-device adaptation on a TFLite interpreter (TinyTrain, paper Algorithm 1).

``adapt`` runs, on an exported model (``TrainableModel``) and a labelled support set:

1. reset to the exported state; head: prototypes c_k = 1/|S_k| sum_{x in S_k} f(x), the class means
   of the ``infer`` embeddings (cosine-prototype head, logits = s cos(f(x), c_k));
2. Fisher: one ``fisher`` pass over the support set, chunked; chunk results are combined as
   Delta_o = sum_j N_j Delta_o^(j) / N (Eq. 1 is a mean over samples);
3. selection (Algorithm 1 lines 1-4) with ``tflite_train.sparse.select`` under the budget
   (B_mem, B_compute), priced by the analytic cost model;
4. ``set_selection``; the fine-tuning (``tflite_train.runtime.adaptation.fine_tuning``, P>M>F's procedure of the
   paper's appendix C): ``augment_views`` augmented views of every support image are drawn before the first
   step (flips, shifts, brightness/contrast; ``tflite_train.runtime.adaptation.augmentation``); when the model has
   cached-cut signatures and the cache fits (``tflite_train.runtime.adaptation.cache_plan``), the activation at the cut
   below the deepest selected layer is computed once per view (and per support image, when the prototypes
   or the rate choice need it), the views drawn chunk by chunk as they are (``pseudo_queries.ViewDraw``:
   the same pixels, never all held), and every update runs from it (only the layers above the cut), else
   from the images. Each update takes ``batch_size`` pseudo-queries from a seeded epoch-wise permutation
   (``tflite_train.runtime.adaptation.pseudo_queries``), with prototypes fixed, refreshed or inside the step
   (``prototype_mode``), as one batch or accumulated (``batch_mode``);
   with ``rate_choice``, the learning rate is first chosen for this task on held-out support images
   (``tflite_train.runtime.adaptation.rate_choice``; rate 0 = no update);
5. the prototypes are recomputed from the adapted backbone's support embeddings (``refresh_head``; always
   for non-fixed prototypes), so that the head matches the features it classifies.

With ``reopen`` (the command, ``adapt_job``), steps 1-3 run on a model opened for the selection only, and the
model is reopened between steps 3 and 4 on what the rest calls (``tflite_train.runtime.adaptation.phases``): each
phase's interpreter holds only its own arenas and state (issue 43, ``bench/results/MEMORY.md``), with the same results.

A continued run (``start``, ``tflite_train.runtime.adaptation.continual``) restores a checkpoint in step 1 instead of
resetting, keeps the stored prototypes of its classes without new images, selects among the layers at or above
its replay memory's cut in step 3 and draws the updates of step 4 from the new images' views and the memory's
stored views. The views' activations at the cut are kept in the result (``AdaptResult.views``) for the replay
memory of the checkpoint written after the run (``continual.checkpoint_after``).

Everything is driven by ``AdaptConfig`` (frozen) and one ``numpy.random.Generator(seed)``: the same
model, data and config give the same selection and the same losses.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from tflite_train import contract as C
from tflite_train.runtime.adaptation.adapt_config import AdaptConfig
from tflite_train.runtime.adaptation.augmentation import with_value_range
from tflite_train.runtime.adaptation.augmentation import augment as augment_images
from tflite_train.runtime.adaptation.cache_plan import CachePlan, plan_cache
from tflite_train.runtime.adaptation.continual import AdaptStart
from tflite_train.runtime.adaptation.fine_tuning import (RowSource, UpdatePlan, class_prototypes, embed, plan_updates,
                                                         run_updates)
from tflite_train.runtime.adaptation.free_memory import release_free_memory
from tflite_train.runtime.adaptation.progress import Progress, no_progress
from tflite_train.runtime.adaptation.pseudo_queries import Augment, ViewDraw
from tflite_train.runtime.adaptation.rate_choice import RateChoice, choose_rate, held_out_score, held_out_split
from tflite_train.runtime.adaptation.phases import training_model
from tflite_train.runtime.adaptation.replay_memory import ViewActivations
from tflite_train.runtime.adaptation.timing import PhaseTimer
from tflite_train.runtime.errors import UserError
from tflite_train.runtime.model.interpreter import TrainableModel
from tflite_train.runtime.model.model_contract import check_metadata, input_range, layer_table
from tflite_train.sparse.budget import Budget
from tflite_train.sparse.cost_model import BackwardCost, full_backward_macs, total_forward_macs
from tflite_train.sparse.fisher import fisher_potentials
from tflite_train.sparse.policies import policy_spec, select
from tflite_train.sparse.selection import Selection

LOG = logging.getLogger(__name__)

@dataclasses.dataclass(frozen=True)
class AdaptResult:
    """What ``adapt`` did.

    Attributes:
      selection: The selected layers/channels (forward order).
      cost: Its backward-pass memory and compute (cost model, the config's batch size and the model's optimizer).
      budget: The budget it was selected under; ``compute_limit_macs`` its B_compute in MACs (inf = none).
      forward_macs: The model's forward MACs per sample.
      full_backward_macs: FullTrain's backward MACs per sample (the base of a compute fraction).
      num_classes: K of the support set.
      losses, accuracies: ``train_step`` outputs per step (empty when the selection is empty).
      seconds: Wall-clock seconds per phase: "head", "fisher_selection", "cache" (the frozen prefix of
        every view, when cached), "training".
      cache: Whether the steps ran from the cached cut, its bytes and the step's forward MACs.
      potentials: Fisher potential P_l = sum_o Delta_o (paper Eq. 2) per candidate layer, for the
        policies that compute this task's Fisher (tinytrain); empty otherwise.
      updates: How the updates ran (prototypes, batch or accumulation, rows per call; None without training).
      rate_choice: The per-task learning-rate choice (None when the config fixes the rate).
      views: The support images' pseudo-query views at the cut the steps ran from (``fine_tuning.RowSource``), for
        the replay memory (``continual.checkpoint_after``); None when the steps did not run from a cut. Not part
        of the report.
    """

    selection: Selection
    cost: BackwardCost
    budget: Budget
    compute_limit_macs: float
    forward_macs: int
    full_backward_macs: int
    num_classes: int
    losses: tuple[float, ...]
    accuracies: tuple[float, ...]
    seconds: Mapping[str, float]
    potentials: Mapping[str, float] = dataclasses.field(default_factory=dict)
    cache: CachePlan | None = None
    updates: UpdatePlan | None = None
    rate_choice: RateChoice | None = None
    views: ViewActivations | None = dataclasses.field(default=None, repr=False, compare=False)

    @property
    def within_budget(self) -> bool:
        """True when the selection's cost fits the budget (baselines may exceed it)."""
        return self.cost.total_bytes <= self.budget.memory_bytes and self.cost.backward_macs <= self.compute_limit_macs

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready report."""
        return {
            "selection": self.selection.to_dict(),
            "memory_bytes": self.cost.total_bytes,
            "backward_macs": self.cost.backward_macs,
            "cost": {f.name: getattr(self.cost, f.name) for f in dataclasses.fields(self.cost)},
            "budget": self.budget.to_dict(),
            "compute_limit_macs": None if math.isinf(self.compute_limit_macs) else self.compute_limit_macs,
            "forward_macs": self.forward_macs,
            "full_backward_macs": self.full_backward_macs,
            "within_budget": self.within_budget,
            "num_classes": self.num_classes,
            "losses": list(self.losses),
            "accuracies": list(self.accuracies),
            "seconds": dict(self.seconds),
            "fisher_potentials": dict(self.potentials),
            "cache": None if self.cache is None else self.cache.to_dict(),
            "updates": None if self.updates is None else self.updates.to_dict(),
            "rate_choice": None if self.rate_choice is None else self.rate_choice.to_dict(),
        }


def check_labelled_set(
    model: TrainableModel, images: Any, labels: Any, *, name: str = "support", min_classes: int = 2,
    all_classes: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """Validates a labelled image set for ``model``; returns (f32 [N, H, W, C], i32 [N]).

    Raises:
      ValueError: empty set, wrong shape, NaN/inf or out-of-range pixels, labels not ints of shape
        [N], negative labels, classes not 0..K-1 each present (when ``all_classes``), fewer than ``min_classes`` or more than the capacity.
    """
    images = np.asarray(images)
    if images.ndim != 4 or images.shape[0] == 0:
        raise ValueError(f"{name} set is empty or not [N, H, W, C]; got shape {images.shape}")
    if tuple(images.shape[1:]) != model.input_shape:
        raise ValueError(f"{name} images must be [N, {', '.join(map(str, model.input_shape))}]; got {images.shape}")
    if not np.issubdtype(images.dtype, np.floating):
        raise ValueError(f"{name} images must be floats in the model's input range; got dtype {images.dtype}")
    images = images.astype(np.float32)
    bad = ~np.isfinite(images).reshape(images.shape[0], -1).all(axis=1)
    if bad.any():
        raise ValueError(f"{name} images {np.flatnonzero(bad)[:10].tolist()} have NaN or infinite pixels")
    low, high = input_range(model.metadata)
    if images.min() < low or images.max() > high:
        raise ValueError(f"{name} pixels must lie in [{low}, {high}]; got {images.min()}..{images.max()}")
    labels = np.asarray(labels)
    if labels.shape != (images.shape[0],) or not np.issubdtype(labels.dtype, np.integer):
        raise ValueError(f"{name} labels must be ints of shape ({images.shape[0]},); got {labels.dtype} {labels.shape}")
    classes = np.unique(labels)
    if classes[0] < 0 or all_classes and not np.array_equal(classes, np.arange(classes[-1] + 1)):
        raise ValueError(f"{name} labels must be 0..K-1 with every class present; got classes {classes.tolist()}")
    if classes.size < min_classes:
        raise ValueError(f"{name} set has {classes.size} class(es); at least {min_classes} are needed")
    if classes.size > model.capacity:
        raise ValueError(f"{name} set has {classes.size} classes; the model's class capacity is {model.capacity}")
    return images, labels.astype(np.int32)


def support_fisher(
    model: TrainableModel, images: np.ndarray, labels: np.ndarray, chunk_size: int = 32,
    progress: Progress = no_progress,
) -> dict[str, np.ndarray]:
    """Delta_o per candidate layer over the whole set: chunk means weighted by chunk size (Eq. 1).

    ``progress("fisher", N)`` is advanced by the images of each chunk.
    """
    total: dict[str, np.ndarray] = {}
    n = images.shape[0]
    with progress("fisher", n) as bar:
        for i in range(0, n, chunk_size):
            out = model.fisher(images[i:i + chunk_size], labels[i:i + chunk_size])
            weight = min(chunk_size, n - i) / n
            for name in model.candidates:
                total[name] = total.get(name, 0.0) + weight * out[name].astype(np.float64)
            bar.update(min(chunk_size, n - i))
    return {name: value.astype(np.float32) for name, value in total.items()}


def candidate_weights(model: TrainableModel, state: Mapping[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
    """Candidate kernels with the output channel last (depthwise [k, k, C, 1] -> [k, k, C])."""
    state = model.get_state([n + C.KERNEL_SUFFIX for n in model.candidates]) if state is None else state
    out = {}
    for name in model.candidates:
        kernel = state[name + C.KERNEL_SUFFIX]
        out[name] = kernel[..., 0] if kernel.shape[-1] == 1 and kernel.shape[-2] == model.candidate_channels[name] else kernel
    return out


def default_augment() -> Augment:
    """The default pseudo-query augmentation: ``tflite_train.runtime.adaptation.augmentation.augment`` (numpy only)."""
    return augment_images


def adapt(
    model: TrainableModel,
    support_images: Any,
    support_labels: Any,
    config: AdaptConfig = AdaptConfig(),
    *,
    augment: Augment | None = None,
    fisher_tasks: Sequence[Mapping[str, np.ndarray]] | None = None,
    progress: Progress = no_progress,
    start: AdaptStart | None = None,
    reopen: bool = False,
    on_head: Callable[[TrainableModel], object] | None = None,
) -> AdaptResult:
    """Adapts ``model`` in place to the support set (see the module docstring); returns the report.

    Args:
      model: The exported model (its state is reset first, or set to ``start``'s checkpoint).
      support_images: f32 [N, H, W, C] in the model's input range.
      support_labels: ints [N] in 0..K-1, K >= 2, every class present; with ``start``, classes of its head
        (``continual.continue_from``'s relabelling), any of them, at least one image.
      config: The adaptation config.
      augment: ``augment(images, rng, augment_config) -> images``; default ``tflite_train.runtime.adaptation.augmentation.augment``.
      fisher_tasks: Meta-training Fisher dicts for the static ``sparse_update`` policy.
      progress: Progress-bar factory (``tflite_train.runtime.adaptation.progress``): bars "fisher" (images)
        and "training" (optimizer steps, with the epoch and the loss).
      start: Continue from a checkpoint (``tflite_train.runtime.adaptation.continual.AdaptStart``), or None.
      reopen: For a run from the export (``start`` None): once the selection is made, reopen the model on
        only the signatures the rest of the run, its evaluation and its checkpoint call
        (``phases.training_model``), its ``get_state`` reading only what a checkpoint of the selection reads
        (``checkpoint.checkpoint_state_names`` with the optimizer; all for a rate choice) and the other layers'
        optimizer slots unset, so that the arenas of the head and Fisher phases, the other signatures' preparation and a
        copy of the whole state are not held while it trains and saves, then bring the fresh state to
        where the selection left it: ``reset_state``, the same head, learning rate and selection (set next; the
        optimizer slots and the step are still the exported zeros then, and neither the head, the Fisher pass
        nor the weights' read changes a variable: the same adapted state and losses, bit for bit). The model
        may then be opened on ``SELECTION_SIGNATURES`` only. Ignored for a continued run.
      on_head: Called with the model once its starting head is set (step 1), before the Fisher pass: e.g. the
        support accuracy of the prototype head (``adapt_job``), scored on the state the run starts from.

    Raises:
      ValueError: bad metadata or support set (nothing on disk is touched).
      BudgetError: the budget fits no layer and ``config.on_empty == "raise"``.
    """
    if not isinstance(model, TrainableModel):
        raise TypeError(f"model must be a TrainableModel; got {type(model).__name__}")
    if not isinstance(config, AdaptConfig):
        raise TypeError(f"config must be an AdaptConfig; got {type(config).__name__}")
    check_metadata(model.metadata)
    if start is None:
        images, labels = check_labelled_set(model, support_images, support_labels)
    else:
        images, labels = check_labelled_set(model, support_images, support_labels, min_classes=1, all_classes=False)
        start.check_fits(model, labels)
    replay = None if start is None else start.replay
    kept = None if start is None else start.kept_prototypes
    row_labels = labels if replay is None else np.concatenate([labels, replay.image_labels])  # new, then replayed
    num_rows = row_labels.shape[0]
    table = layer_table(model.metadata)
    optimizer = model.metadata[C.F_OPTIMIZER][C.F_NAME]
    selection_config = config.selection_config(optimizer, num_rows)
    augment = default_augment() if augment is None else augment
    augment_config = with_value_range(config.augment, input_range(model.metadata))
    timer = PhaseTimer()

    with timer.phase("head"):
        if start is None:
            model.reset_state()
            initial_embeddings = embed(model, images, config.chunk_size)
            head = class_prototypes(initial_embeddings, labels)
            model.set_head(head)
        else:  # the embeddings of the new images, then of the replayed rows
            initial_embeddings = start.begin(model, images, labels, config.chunk_size)
        if config.learning_rate is not None:
            model.set_learning_rate(float(config.learning_rate))
    if on_head is not None:  # untimed: the caller's
        on_head(model)
    with timer.phase("fisher_selection"):
        fisher = None
        policy = policy_spec(config.policy)
        if policy.needs_fisher:
            subset = fisher_subset(labels, config.fisher_samples, config.seed)
            fisher = support_fisher(model, images[subset], labels[subset], config.fisher_chunk_size, progress)
        needs_weights = policy.needs_weights(config.criterion, config.channel_method)
        weights = candidate_weights(model) if needs_weights else None
        selection = select(table, selection_config, candidates=model.candidates if start is None else
                           start.candidates(model), fisher=fisher,
                           fisher_tasks=fisher_tasks, weights=weights).ordered(table)
    LOG.debug("selection (%s): %s", config.policy,
              {n: len(c) for n, c in selection.channels.items()} or "no update")

    losses: list[float] = []
    accuracies: list[float] = []
    updates = config.num_steps(num_rows)
    plan = update_plan = choice = None
    rows_priced = config.rows_per_call(num_rows)
    training = not selection.is_empty and updates > 0
    mask = selection.channel_mask(table, model.candidates)
    if reopen and start is None:
        with timer.phase("reopen"):
            training_model(model, selection, mask, config, training)
            model.set_head(head)
            if config.learning_rate is not None:
                model.set_learning_rate(float(config.learning_rate))
    if training:
        model.set_selection(mask)
        rng = np.random.default_rng(config.seed)
        views = ViewDraw(rng, images, config.augment_views, augment, augment_config)  # drawn by RowSource
        cut = model.cache_cut() if replay is None else start.cut(model)  # a memory fixes the cut
        needs_support = config.prototype_mode != "fixed" or config.rate_choice is not None or replay is not None
        plan = plan_cache(cut, has_cuts=bool(model.cached_cuts), enabled=config.cache, unsafe=model.cache_unsafe,
                          num_views=views.rows + images.shape[0] * needs_support + (0 if replay is None else len(replay)),
                          image_shape=model.input_shape, limit_bytes=config.cache_memory_bytes,
                          forward_macs=total_forward_macs(table))
        if not plan.used and replay is not None:
            raise UserError(f"the replay memory trains from its cut {cut.layer}, but the steps cannot run from it "
                            f"({plan.reason}); give a replay budget of 0 to train without it")
        if not plan.used:
            LOG.info("training without the cached cut: %s", plan.reason)
        with timer.phase("cache"):
            source = RowSource(model, cut if plan.used else None, images if needs_support else None, views,
                               config.chunk_size, replay)
            release_free_memory()  # the views' temporaries, before the step's arena is allocated
        used_cut = source.cut
        budget_bytes = config.memory_bytes

        def fits(rows: int) -> bool:
            return selection.cost(table, optimizer=optimizer, batch_size=rows).total_bytes <= budget_bytes

        update_plan = plan_updates(
            config.prototype_mode, config.batch_mode, config.batch_size, num_rows, cached=used_cut is not None,
            episode=config.prototype_mode == "episode" and used_cut is not None and used_cut.episode_signature is not None,
            accumulate=(config.batch_mode == "accumulate" and used_cut is not None
                        and used_cut.accumulate_signature is not None and model.can_accumulate), fits=fits)
        if update_plan.note:
            LOG.warning("%s", update_plan.note)
        rows_priced = update_plan.rows
        initial = model.get_state() if config.rate_choice else None
        runs = updates + config.choice_steps(num_rows) * sum(r != 0 for r in config.rate_choice or ())
        with timer.phase("training"), progress("training", runs) as bar:
            final_updates = 0  # the final run's updates so far (the choice's runs say "rate choice")
            per_epoch = -(-num_rows // update_plan.batch)

            def on_update(out: Mapping[str, float], final: bool = True) -> None:
                nonlocal final_updates
                bar.update(1)
                final_updates += final
                where = f"epoch {(final_updates - 1) // per_epoch + 1}" if final else "rate choice"
                bar.set_postfix_str(f"{where} loss {out[C.LOSS]:.3f}")

            rate = config.learning_rate
            if config.rate_choice:
                choice = choose_task_rate(model, source, update_plan, config, row_labels, initial_embeddings, initial,
                                          rng, lambda out: on_update(out, final=False), kept)
                rate = choice.rate
                LOG.info("learning rate %g for this task: %s", rate, choice.reason)
            if rate != 0.0:
                if config.rate_choice:
                    model.set_state(initial)
                if rate is not None:
                    model.set_learning_rate(float(rate))
                losses, accuracies = run_updates(model, source, update_plan, subset=np.arange(num_rows),
                                                 labels=row_labels, updates=updates, views=config.augment_views,
                                                 rng=rng, on_update=on_update, kept=kept)
            else:
                model.set_state(initial)
        if losses and (config.refresh_head or config.prototype_mode != "fixed"):
            with timer.phase("head"):
                final = embed(model, images, config.chunk_size) if source.support is None else source.embed(source.support)
                model.set_head(class_prototypes(final, row_labels, kept))
    cost = selection.cost(table, optimizer=optimizer, batch_size=rows_priced)
    return AdaptResult(
        selection=selection, cost=cost, budget=config.budget, compute_limit_macs=config.budget.compute_limit(table),
        forward_macs=total_forward_macs(table), full_backward_macs=full_backward_macs(table),
        num_classes=int(labels.max()) + 1 if start is None else start.num_classes, losses=tuple(losses),
        accuracies=tuple(accuracies), seconds=dict(timer.seconds),
        potentials=fisher_potentials(fisher) if fisher is not None else {}, cache=plan, updates=update_plan,
        rate_choice=choice, views=None if plan is None or not plan.used else source.view_activations(),
    )


def choose_task_rate(model: TrainableModel, source: RowSource, plan: UpdatePlan, config: AdaptConfig,
                     labels: np.ndarray, initial_embeddings: np.ndarray, initial: Mapping[str, np.ndarray],
                     rng: np.random.Generator, on_update: Callable[[Mapping[str, float]], None],
                     kept: np.ndarray | None = None) -> RateChoice:
    """P>M>F's per-task rate (``tflite_train.runtime.adaptation.rate_choice``): each candidate rate fine-tunes on the
    prototype set (one support image per class; each update one view of each of them, as in P>M>F, so at
    most K pseudo-queries) for ``config.choice_updates`` updates and is scored on the held-out support
    images (``config.choice_score``); rate 0 is scored on the untrained embeddings.
    Every run starts from ``initial`` (the state after the selection); the model is left in some run's end
    state (the caller restores ``initial``). ``kept``: a continued run's stored prototypes (``class_prototypes``)."""
    proto, held = held_out_split(labels, config.seed)
    rates = config.rate_choice
    scale = float(model.metadata[C.F_HEAD][C.F_SCALE])
    plan = dataclasses.replace(plan, batch=min(plan.batch, int(proto.size)))
    if held.size == 0:
        return choose_rate(rates, (), 0)
    scores = []
    for rate in rates:
        if rate == 0.0:
            embeddings = initial_embeddings
        else:
            model.set_state(initial)
            model.set_head(class_prototypes(initial_embeddings[proto], labels[proto], kept))
            model.set_learning_rate(float(rate))
            run_updates(model, source, plan, subset=proto, labels=labels, updates=config.choice_steps(labels.shape[0]),
                        views=config.augment_views, rng=rng, on_update=on_update, kept=kept)
            embeddings = source.embed(source.support)
        scores.append(held_out_score(embeddings[held], labels[held],
                                     class_prototypes(embeddings[proto], labels[proto], kept), scale))
    return choose_rate(rates, scores, int(held.size), config.choice_score)


def fisher_subset(labels: np.ndarray, samples: int | None, seed: int) -> np.ndarray:
    """Indices of the support images the Fisher pass uses: all (``samples`` None or >= N), else
    ``samples`` images taken round-robin over the classes (each class's images in a seeded random
    order, from ``numpy.random.default_rng(seed + 1)``, apart from the pseudo-query generator)."""
    n = labels.shape[0]
    if samples is None or samples >= n:
        return np.arange(n)
    rng = np.random.default_rng(seed + 1)
    queues = [list(rng.permutation(np.flatnonzero(labels == k))) for k in range(int(labels.max()) + 1)]
    chosen: list[int] = []
    while len(chosen) < samples:
        for queue in queues:
            if queue and len(chosen) < samples:
                chosen.append(int(queue.pop(0)))
    return np.sort(np.asarray(chosen, np.int64))
