"""On-device adaptation on a TFLite interpreter (TinyTrain, paper Algorithm 1) and evaluation.

``adapt`` runs, on an exported model (``TrainableModel``) and a labelled support set:

1. reset to the exported state; head: prototypes c_k = 1/|S_k| sum_{x in S_k} f(x), the class means
   of the ``infer`` embeddings (cosine-prototype head, logits = s cos(f(x), c_k));
2. Fisher: one ``fisher`` pass over the support set, chunked; chunk results are combined as
   Delta_o = sum_j N_j Delta_o^(j) / N (Eq. 1 is a mean over samples);
3. selection (Algorithm 1 lines 1-4) with ``tflite_train.sparse.select`` under the budget
   (B_mem, B_compute), priced by the analytic cost model;
4. ``set_selection``; ``iterations`` optimizer steps (``train_step``) on pseudo-queries: each step
   takes ``batch_size`` support images from a seeded epoch-wise permutation and augments them in
   numpy (flips, shifts, brightness/contrast; ``tflite_train.data.augment``);
5. (``refresh_head``) the prototypes are recomputed from the adapted backbone's support embeddings,
   so that the head matches the features it classifies (the prototypes are frozen during the steps).

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
from tflite_train.data.augment import with_value_range
from tflite_train.data.augment import augment as augment_images
from tflite_train.runtime.interpreter import TrainableModel
from tflite_train.runtime.model_contract import check_metadata, input_range, layer_table
from tflite_train.runtime.progress import Progress, no_progress
from tflite_train.runtime.timing import PhaseTimer
from tflite_train.sparse.budget import Budget
from tflite_train.sparse.cost_model import BackwardCost, full_backward_macs, total_forward_macs
from tflite_train.sparse.fisher import fisher_potentials
from tflite_train.sparse.policies import SelectionConfig, canonical_policy_name, select
from tflite_train.sparse.selection import Selection

LOG = logging.getLogger(__name__)
Augment = Callable[[np.ndarray, np.random.Generator, Any], np.ndarray]


@dataclasses.dataclass(frozen=True)
class AdaptConfig:
    """How to adapt; written beside every run's outputs (``to_dict``).

    Attributes:
      policy: "none", "last_layer", "full_train", "sparse_update" or "tinytrain" (aliases accepted).
      memory_bytes: B_mem in bytes (inf = unlimited).
      compute_fraction: B_compute as a fraction of the full backward pass (FullTrain's backward MACs
        per sample at the model's input size; ``sparse.budget``), e.g. 0.15, or None.
      compute_macs: B_compute in MACs, or None (at most one of the two compute bounds).
      channel_ratio: Fraction of output channels updated per selected layer (sparse policies).
      criterion, channel_method: Layer score and channel choice (``SelectionConfig``).
      sparse_update_layers: Fixed priority list for ``sparse_update`` when no meta-training Fisher
        tasks are given to ``adapt``.
      iterations: Optimizer steps (when ``epochs`` is None).
      epochs: None, or passes over the support set: then the run takes
        epochs * ceil(N_support / batch_size) steps. The paper's protocol is 40 such passes at batch 1
        ("training using all the samples (e.g. 25) for ... 40 iterations", appendix A.2), i.e. 1,000
        steps for 25 support images.
      batch_size: Pseudo-query images per step (paper: 1 for the sparse methods).
      learning_rate: None = the model's default (metadata ``optimizer.learning_rate``).
      seed: Seed of batch sampling, augmentation and the random-channel ablation.
      augment: An ``AugmentConfig`` of ``tflite_train.data.augment``, or None for its defaults; its
        ``value_range`` None (the default) means the model's input range (metadata ``input.range``).
      on_empty: "raise" (BudgetError) or "empty" (no update) when the budget fits no layer.
      refresh_head: Recompute the prototypes after the steps (step 5 of the module docstring).
      chunk_size: Images per ``infer`` call when processing whole sets.
      fisher_chunk_size: Images per ``fisher`` call. The interpreter keeps the activations and
        gradients of a whole call, so this sets the peak memory of the Fisher pass (measured on
        MCUNet@64: 32 -> 1.26x, 4 -> 1.16x the inference-only peak RSS).
      fisher_samples: None = Fisher over the whole support set; k = over a class-balanced subset of
        k support images (``fisher_subset``), which bounds the Fisher time for large support sets.
    """

    policy: str = "tinytrain"
    memory_bytes: float = math.inf
    compute_fraction: float | None = None
    compute_macs: float | None = None
    channel_ratio: float = 0.25
    criterion: str = "tinytrain"
    channel_method: str = "fisher"
    sparse_update_layers: tuple[str, ...] | None = None
    iterations: int = 40
    epochs: int | None = None
    batch_size: int = 1
    learning_rate: float | None = None
    seed: int = 0
    augment: Any = None
    on_empty: str = "raise"
    refresh_head: bool = True
    chunk_size: int = 32
    fisher_chunk_size: int = 4
    fisher_samples: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "policy", canonical_policy_name(self.policy))
        if self.fisher_samples is not None and (isinstance(self.fisher_samples, bool)
                                                or not isinstance(self.fisher_samples, int) or self.fisher_samples < 1):
            raise ValueError(f"fisher_samples must be None or an int >= 1; got {self.fisher_samples!r}")
        if self.epochs is not None and (isinstance(self.epochs, bool) or not isinstance(self.epochs, int)
                                        or self.epochs < 1):
            raise ValueError(f"epochs must be None or an int >= 1; got {self.epochs!r}")
        for name in ("iterations", "batch_size", "chunk_size", "fisher_chunk_size", "seed"):
            value, low = getattr(self, name), 0 if name in ("iterations", "seed") else 1
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"{name} must be an int >= {low}; got {value!r}")
        if self.learning_rate is not None and (
            isinstance(self.learning_rate, bool) or not isinstance(self.learning_rate, (int, float))
            or not math.isfinite(self.learning_rate) or self.learning_rate <= 0
        ):
            raise ValueError(f"learning_rate must be a positive number or None; got {self.learning_rate!r}")
        if not isinstance(self.refresh_head, bool):
            raise ValueError(f"refresh_head must be a bool; got {self.refresh_head!r}")
        if self.sparse_update_layers is not None:
            object.__setattr__(self, "sparse_update_layers", tuple(self.sparse_update_layers))
        self.selection_config("adam")  # validates budget, ratio, criterion, channel method, on_empty

    def num_steps(self, num_support: int) -> int:
        """Optimizer steps for ``num_support`` support images: ``iterations``, or
        ``epochs * ceil(num_support / batch_size)`` when ``epochs`` is set."""
        if self.epochs is None:
            return self.iterations
        return self.epochs * -(-num_support // self.batch_size)

    @property
    def budget(self) -> Budget:
        """The (B_mem, B_compute) budget."""
        return Budget(memory_bytes=self.memory_bytes, compute_macs=self.compute_macs,
                      compute_fraction=self.compute_fraction)

    def selection_config(self, optimizer: str) -> SelectionConfig:
        """The ``SelectionConfig`` for a model trained with ``optimizer`` (cost model)."""
        return SelectionConfig(
            policy=self.policy, budget=self.budget, channel_ratio=self.channel_ratio, criterion=self.criterion,
            channel_method=self.channel_method, optimizer=optimizer, batch_size=self.batch_size,
            on_empty=self.on_empty, seed=self.seed, layers=self.sparse_update_layers,
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready resolved config (inf memory written as None)."""
        out = dataclasses.asdict(self)
        out["memory_bytes"] = None if math.isinf(self.memory_bytes) else self.memory_bytes
        out["sparse_update_layers"] = None if self.sparse_update_layers is None else list(self.sparse_update_layers)
        out["augment"] = _augment_config_dict(self.augment)
        return out


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
      seconds: Wall-clock seconds per phase: "head", "fisher_selection", "training".
      potentials: Fisher potential P_l = sum_o Delta_o (paper Eq. 2) per candidate layer, for the
        policies that compute this task's Fisher (tinytrain); empty otherwise.
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
    low, high = model.metadata[C.F_INPUT].get(C.F_RANGE, [0.0, 1.0])
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


def embed(model: TrainableModel, images: np.ndarray, chunk_size: int = 32) -> np.ndarray:
    """``infer`` embeddings f32[N, D] in chunks of ``chunk_size``."""
    return np.concatenate([model.infer(images[i:i + chunk_size])[C.EMBEDDINGS]
                           for i in range(0, images.shape[0], chunk_size)])


def class_prototypes(embeddings: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """c_k = mean of the embeddings of class k, for k = 0..max(labels): f32[K, D]."""
    return np.stack([embeddings[labels == k].mean(axis=0)
                     for k in range(int(labels.max()) + 1)]).astype(np.float32)


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
    state = model.get_state() if state is None else state
    out = {}
    for name in model.candidates:
        kernel = state[name + C.KERNEL_SUFFIX]
        out[name] = kernel[..., 0] if kernel.shape[-1] == 1 and kernel.shape[-2] == model.candidate_channels[name] else kernel
    return out


def default_augment() -> Augment:
    """The default pseudo-query augmentation: ``tflite_train.data.augment.augment`` (numpy only)."""
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
) -> AdaptResult:
    """Adapts ``model`` in place to the support set (see the module docstring); returns the report.

    Args:
      model: The exported model (its state is reset first).
      support_images: f32 [N, H, W, C] in the model's input range.
      support_labels: ints [N] in 0..K-1, K >= 2, every class present.
      config: The adaptation config.
      augment: ``augment(images, rng, augment_config) -> images``; default ``tflite_train.data.augment.augment``.
      fisher_tasks: Meta-training Fisher dicts for the static ``sparse_update`` policy.
      progress: Progress-bar factory (``tflite_train.runtime.progress``): bars "fisher" (images)
        and "training" (optimizer steps, with the epoch and the loss).

    Raises:
      ValueError: bad metadata or support set (nothing on disk is touched).
      BudgetError: the budget fits no layer and ``config.on_empty == "raise"``.
    """
    if not isinstance(model, TrainableModel):
        raise TypeError(f"model must be a TrainableModel; got {type(model).__name__}")
    if not isinstance(config, AdaptConfig):
        raise TypeError(f"config must be an AdaptConfig; got {type(config).__name__}")
    check_metadata(model.metadata)
    images, labels = check_labelled_set(model, support_images, support_labels)
    table = layer_table(model.metadata)
    optimizer = model.metadata[C.F_OPTIMIZER][C.F_NAME]
    selection_config = config.selection_config(optimizer)
    augment = default_augment() if augment is None else augment
    augment_config = with_value_range(config.augment, input_range(model.metadata))
    timer = PhaseTimer()

    with timer.phase("head"):
        model.reset_state()
        model.set_head(class_prototypes(embed(model, images, config.chunk_size), labels))
        if config.learning_rate is not None:
            model.set_learning_rate(float(config.learning_rate))
    with timer.phase("fisher_selection"):
        fisher = None
        if config.policy == "tinytrain":
            subset = fisher_subset(labels, config.fisher_samples, config.seed)
            fisher = support_fisher(model, images[subset], labels[subset], config.fisher_chunk_size, progress)
        needs_weights = config.policy == "sparse_update" or (
            config.policy == "tinytrain" and "l2" in (config.criterion, config.channel_method))
        weights = candidate_weights(model) if needs_weights else None
        selection = select(table, selection_config, candidates=model.candidates, fisher=fisher,
                           fisher_tasks=fisher_tasks, weights=weights).ordered(table)
    LOG.debug("selection (%s): %s", config.policy,
             {n: len(c) for n, c in selection.channels.items()} or "no update")
    cost = selection.cost(table, optimizer=optimizer, batch_size=config.batch_size)

    losses: list[float] = []
    accuracies: list[float] = []
    with timer.phase("training"):
        steps = config.num_steps(images.shape[0])
        if not selection.is_empty and steps > 0:
            model.set_selection(selection.channel_mask(table, model.candidates))
            rng = np.random.default_rng(config.seed)
            per_epoch = -(-images.shape[0] // config.batch_size)
            with progress("training", steps) as bar:
                for step, batch in enumerate(pseudo_query_batches(rng, images.shape[0], config.batch_size, steps)):
                    queries = np.asarray(augment(images[batch], rng, augment_config), dtype=np.float32)
                    out = model.train_step(queries, labels[batch])
                    losses.append(out[C.LOSS])
                    accuracies.append(out[C.ACCURACY])
                    LOG.debug("step %d/%d loss %.4f accuracy %.3f", step + 1, steps, out[C.LOSS], out[C.ACCURACY])
                    bar.update(1)
                    bar.set_postfix_str(f"epoch {step // per_epoch + 1} loss {out[C.LOSS]:.3f}")
    if losses and config.refresh_head:
        with timer.phase("head"):
            model.set_head(class_prototypes(embed(model, images, config.chunk_size), labels))
    return AdaptResult(
        selection=selection, cost=cost, budget=config.budget, compute_limit_macs=config.budget.compute_limit(table),
        forward_macs=total_forward_macs(table), full_backward_macs=full_backward_macs(table),
        num_classes=int(labels.max()) + 1, losses=tuple(losses), accuracies=tuple(accuracies), seconds=dict(timer.seconds),
        potentials=fisher_potentials(fisher) if fisher is not None else {},
    )


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


def pseudo_query_batches(rng: np.random.Generator, n: int, batch_size: int, steps: int) -> list[np.ndarray]:
    """``steps`` index batches drawn without replacement from successive random permutations of 0..n-1.

    ``adapt`` draws all batches from its generator first, then one augmentation per step from the
    same generator; a simulation that repeats both calls in that order sees the same pseudo-queries.
    """
    order: list[int] = []
    batches = []
    for _ in range(steps):
        batch = []
        while len(batch) < batch_size:
            if not order:
                order = rng.permutation(n).tolist()
            batch.append(order.pop())
        batches.append(np.asarray(batch, np.int64))
    return batches


def predict(model: TrainableModel, images: np.ndarray, chunk_size: int = 64) -> np.ndarray:
    """Predicted class ids i32[N]: argmax over the first ``num_classes`` logits."""
    return np.argmax(class_logits(model, images, chunk_size), axis=1).astype(np.int32)


def class_logits(model: TrainableModel, images: np.ndarray, chunk_size: int = 64,
                 progress: Progress = no_progress) -> np.ndarray:
    """The head's logits f32[N, K] over the K = ``num_classes`` classes (``progress("predicting", N)``)."""
    if model.num_classes < 1:
        raise ValueError("the model has no head (num_classes is 0): adapt it or load a checkpoint first")
    parts = []
    with progress("predicting", images.shape[0]) as bar:
        for i in range(0, images.shape[0], chunk_size):
            parts.append(model.infer(images[i:i + chunk_size])[C.LOGITS][:, :model.num_classes])
            bar.update(parts[-1].shape[0])
    return np.concatenate(parts)


def evaluate(model: TrainableModel, query_images: Any, query_labels: Any, chunk_size: int = 64) -> float:
    """Query accuracy in [0, 1] of the adapted model (labels must lie in 0..num_classes-1)."""
    images, labels = check_labelled_set(model, query_images, query_labels, name="query", min_classes=1,
                                        all_classes=False)
    if labels.max() >= model.num_classes:
        raise ValueError(f"query labels reach {labels.max()}, the head has {model.num_classes} classes")
    return float(np.mean(predict(model, images, chunk_size) == labels))


def _augment_config_dict(value: Any) -> Any:
    if value is None:
        return None
    if dataclasses.is_dataclass(value):
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in dataclasses.asdict(value).items()}
    raise ValueError(f"augment must be an AugmentConfig dataclass or None; got {type(value).__name__}")
