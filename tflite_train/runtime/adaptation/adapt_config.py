"""How one on-device adaptation runs: ``AdaptConfig``, the frozen config ``adapt`` takes and every run
writes beside its outputs (``to_dict``)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from tflite_train.runtime.adaptation.fine_tuning import BATCH_MODES, PROTOTYPE_MODES
from tflite_train.runtime.adaptation.protocol import DEFAULT_PROTOCOL
from tflite_train.runtime.adaptation.rate_choice import SCORES
from tflite_train.sparse.budget import Budget
from tflite_train.sparse.policies import SelectionConfig, canonical_policy_name


@dataclasses.dataclass(frozen=True)
class AdaptConfig:
    """How to adapt; written beside every run's outputs (``to_dict``). The defaults are the adaptation
    protocol (``tflite_train.runtime.adaptation.protocol.DEFAULT_PROTOCOL``): 40 passes at batch 1, B_compute 15 %.

    Attributes:
      policy: "none", "last_layer", "full_train", "sparse_update" or "tinytrain" (aliases accepted).
      memory_bytes: B_mem in bytes (inf = unlimited).
      compute_fraction: B_compute as a fraction of the full backward pass (FullTrain's backward MACs
        per sample at the model's input size; ``sparse.budget``); default the protocol's 0.15; None = no
        compute bound. Budgeted policies only (tinytrain, sparse_update).
      compute_macs: B_compute in MACs, or None. At most one of the two compute bounds: with
        ``compute_macs``, pass ``compute_fraction=None``.
      channel_ratio: Fraction of output channels updated per selected layer (sparse policies).
      criterion, channel_method: Layer score and channel choice (``SelectionConfig``).
      sparse_update_layers: Fixed priority list for ``sparse_update`` when no meta-training Fisher
        tasks are given to ``adapt``.
      iterations: None, or a fixed number of optimizer steps instead of ``epochs`` (given, it sets
        ``epochs`` to None).
      epochs: Passes over the support set (default the protocol's 40); the run takes
        epochs * ceil(N_support / batch_size) steps. The paper's protocol is 40 such passes at batch 1
        ("training using all the samples (e.g. 25) for ... 40 iterations", appendix A.2), i.e. 1,000
        steps for 25 support images.
      batch_size: Pseudo-query images per step (paper: 1 for the sparse methods).
      learning_rate: None = the model's default (metadata ``optimizer.learning_rate``).
      seed: Seed of batch sampling, augmentation and the random-channel ablation.
      augment: An ``AugmentConfig`` of ``tflite_train.runtime.adaptation.augmentation``, or None for its defaults; its
        ``value_range`` None (the default) means the model's input range (metadata ``input.range``).
      on_empty: "raise" (BudgetError) or "empty" (no update) when the budget fits no layer.
      refresh_head: Recompute the prototypes after the steps (step 5 of the module docstring).
      chunk_size: Images per ``infer`` call when processing whole sets.
      fisher_chunk_size: Images per ``fisher`` call. The interpreter keeps the activations and
        gradients of a whole call, so this sets the peak memory of the Fisher pass (measured on
        MCUNet@64: 32 -> 1.26x, 4 -> 1.16x the inference-only peak RSS).
      fisher_samples: None = Fisher over the whole support set; k = over a class-balanced subset of
        k support images (``fisher_subset``), which bounds the Fisher time for large support sets.
      augment_views: V, augmented views of each support image drawn once before the first step; pass p
        over the support set reads view p mod V (``tflite_train.runtime.adaptation.pseudo_queries``).
      cache: Train from the cached cut when the model has it and it fits
        (``tflite_train.runtime.adaptation.cache_plan``); False: full steps.
      cache_memory_bytes: The cache's limit in bytes; None = the bytes of the V * N augmented views as
        float32 images (the cache then never takes more memory than what full steps read).
      prototype_mode: Where each update's class prototypes come from (``tflite_train.runtime.adaptation.fine_tuning``):
        "fixed" (the untrained backbone's, set once), "refresh" (through the current backbone before every
        update, no gradient) or "episode" (computed inside the step, with the gradient through them).
      batch_mode: "batch" (one train step on ``batch_size`` pseudo-queries; the selection is priced at that
        many rows) or "accumulate" (``batch_size`` batch-1 passes accumulated into one update; priced at one
        row). A batch that does not fit B_mem is reduced, with one logged line saying so.
      rate_choice: None (every task uses ``learning_rate``), or the candidate rates of P>M>F's per-task
        choice on held-out support images (``tflite_train.runtime.adaptation.rate_choice``), in priority order; 0 means
        no update and should come first (it then wins ties).
      choice_updates: Updates per candidate rate in the choice; None = as many as the final run.
      choice_score: How the choice ranks the rates (``tflite_train.runtime.adaptation.rate_choice.SCORES``): "accuracy"
        (P>M>F) or "accuracy_loss" (ties broken by the held-out cross-entropy).
    """

    policy: str = "tinytrain"
    memory_bytes: float = math.inf
    compute_fraction: float | None = DEFAULT_PROTOCOL.compute_fraction
    compute_macs: float | None = None
    channel_ratio: float = 0.25
    criterion: str = "tinytrain"
    channel_method: str = "fisher"
    sparse_update_layers: tuple[str, ...] | None = None
    iterations: int | None = None
    epochs: int | None = DEFAULT_PROTOCOL.epochs
    batch_size: int = DEFAULT_PROTOCOL.batch_size
    learning_rate: float | None = DEFAULT_PROTOCOL.learning_rate
    seed: int = 0
    augment: Any = None
    on_empty: str = "raise"
    refresh_head: bool = True
    chunk_size: int = 32
    fisher_chunk_size: int = 4
    fisher_samples: int | None = None
    augment_views: int = 4
    cache: bool = True
    cache_memory_bytes: float | None = None
    prototype_mode: str = "fixed"
    batch_mode: str = "batch"
    rate_choice: tuple[float, ...] | None = None
    choice_updates: int | None = None
    choice_score: str = "accuracy"

    def __post_init__(self) -> None:
        object.__setattr__(self, "policy", canonical_policy_name(self.policy))
        if self.compute_macs is not None and self.compute_fraction is not None:
            raise ValueError(f"compute_macs ({self.compute_macs!r}) and compute_fraction ({self.compute_fraction!r}) are "
                             "two compute bounds: pass compute_fraction=None with compute_macs (compute_fraction "
                             f"defaults to the protocol's {DEFAULT_PROTOCOL.compute_fraction})")
        if self.fisher_samples is not None and (isinstance(self.fisher_samples, bool)
                                                or not isinstance(self.fisher_samples, int) or self.fisher_samples < 1):
            raise ValueError(f"fisher_samples must be None or an int >= 1; got {self.fisher_samples!r}")
        if self.iterations is not None:
            object.__setattr__(self, "epochs", None)  # a fixed number of steps instead of the protocol's passes
        if self.epochs is None and self.iterations is None:
            raise ValueError("give epochs (passes over the support set) or iterations (optimizer steps)")
        if self.epochs is not None and (isinstance(self.epochs, bool) or not isinstance(self.epochs, int)
                                        or self.epochs < 1):
            raise ValueError(f"epochs must be None or an int >= 1; got {self.epochs!r}")
        if not isinstance(self.cache, bool):
            raise ValueError(f"cache must be a bool; got {self.cache!r}")
        if self.cache_memory_bytes is not None and (
            isinstance(self.cache_memory_bytes, bool) or not isinstance(self.cache_memory_bytes, (int, float))
            or math.isnan(self.cache_memory_bytes) or self.cache_memory_bytes < 0
        ):
            raise ValueError(f"cache_memory_bytes must be None or a number >= 0; got {self.cache_memory_bytes!r}")
        for name in ("iterations", "batch_size", "chunk_size", "fisher_chunk_size", "seed", "augment_views"):
            value, low = getattr(self, name), 0 if name in ("iterations", "seed") else 1
            if name == "iterations" and value is None:
                continue
            if name == "augment_views" and isinstance(value, int) and not isinstance(value, bool) and value > 10_000:
                raise ValueError(f"augment_views must be at most 10000; got {value!r}")
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
        if self.prototype_mode not in PROTOTYPE_MODES:
            raise ValueError(f"prototype_mode must be one of {', '.join(PROTOTYPE_MODES)}; got {self.prototype_mode!r}")
        if self.batch_mode not in BATCH_MODES:
            raise ValueError(f"batch_mode must be one of {', '.join(BATCH_MODES)}; got {self.batch_mode!r}")
        if self.rate_choice is not None:
            rates = tuple(self.rate_choice) if isinstance(self.rate_choice, (tuple, list)) else None
            if not rates or any(isinstance(r, bool) or not isinstance(r, (int, float)) or not math.isfinite(r) or r < 0
                                for r in rates):
                raise ValueError(f"rate_choice must be None or a non-empty list of rates >= 0; got {self.rate_choice!r}")
            object.__setattr__(self, "rate_choice", tuple(float(r) for r in rates))
        if self.choice_score not in SCORES:
            raise ValueError(f"choice_score must be one of {', '.join(SCORES)}; got {self.choice_score!r}")
        if self.choice_updates is not None and (isinstance(self.choice_updates, bool)
                                                or not isinstance(self.choice_updates, int) or self.choice_updates < 1):
            raise ValueError(f"choice_updates must be None or an int >= 1; got {self.choice_updates!r}")
        self.selection_config("adam")  # validates budget, ratio, criterion, channel method, on_empty

    def num_steps(self, num_support: int) -> int:
        """Optimizer steps for ``num_support`` support images: ``epochs * ceil(num_support / batch_size)``,
        or ``iterations`` when given."""
        if self.iterations is not None:
            return self.iterations
        return self.epochs * -(-num_support // self.batch_size)

    def choice_steps(self, num_support: int) -> int:
        """Updates per candidate rate of the per-task choice (``choice_updates``, else ``num_steps``)."""
        return self.num_steps(num_support) if self.choice_updates is None else self.choice_updates

    def rows_per_call(self, num_support: int) -> int:
        """Rows one train-step call holds, which the selection's memory is priced at (paper appendix A.4
        scales the saved activations with them): 1 when accumulating, else the batch, plus the support rows
        of an episode step."""
        if self.prototype_mode == "episode":
            return num_support + self.batch_size
        return 1 if self.batch_mode == "accumulate" else self.batch_size

    @property
    def budget(self) -> Budget:
        """The (B_mem, B_compute) budget."""
        return Budget(memory_bytes=self.memory_bytes, compute_macs=self.compute_macs,
                      compute_fraction=self.compute_fraction)

    def selection_config(self, optimizer: str, num_support: int = 1) -> SelectionConfig:
        """The ``SelectionConfig`` for a model trained with ``optimizer`` (cost model) on ``num_support``
        support images (its batch is ``rows_per_call``)."""
        return SelectionConfig(
            policy=self.policy, budget=self.budget, channel_ratio=self.channel_ratio, criterion=self.criterion,
            channel_method=self.channel_method, optimizer=optimizer, batch_size=self.rows_per_call(num_support),
            on_empty=self.on_empty, seed=self.seed, layers=self.sparse_update_layers,
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready resolved config (inf memory written as None)."""
        out = dataclasses.asdict(self)
        out["memory_bytes"] = None if math.isinf(self.memory_bytes) else self.memory_bytes
        if self.cache_memory_bytes is not None and math.isinf(self.cache_memory_bytes):
            out["cache_memory_bytes"] = "inf"
        out["sparse_update_layers"] = None if self.sparse_update_layers is None else list(self.sparse_update_layers)
        out["augment"] = _augment_config_dict(self.augment)
        out["rate_choice"] = None if self.rate_choice is None else list(self.rate_choice)
        return out


def _augment_config_dict(value: Any) -> Any:
    if value is None:
        return None
    if dataclasses.is_dataclass(value):
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in dataclasses.asdict(value).items()}
    raise ValueError(f"augment must be an AugmentConfig dataclass or None; got {type(value).__name__}")
