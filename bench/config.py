"""``BenchConfig``: everything one benchmark run depends on (frozen; written beside the outputs)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

SECTIONS = ("accuracy", "backward_cost", "timing", "ablations", "plots")
"""The benchmark's sections, in report order."""


@dataclasses.dataclass(frozen=True)
class BenchConfig:
    """One benchmark run.

    Attributes:
      cache_dir: Data cache (``tflite-train data prepare``); its ``target`` data sets are the
        cross-domain targets.
      out_dir: Where ``BENCHMARKS.md``, the PNGs, ``results.json`` and ``config.json`` go.
      model_dir: Where the exported ``.tflite`` models are cached (reused when their config matches).
      backbone, input_size: The demo backbone and resolution of the accuracy/timing/ablation sections.
      weights: Keras BN-form weights exported for the accuracy runs (None = seeded init).
      pretrained_weights: Pre-trained-only weights for the meta-training on/off ablation (None or a
        missing file: the ablation row says it was not run).
      candidate_blocks: k of the sparse export (LastLayer, SparseUpdate, TinyTrain); FullTrain uses a
        second export with every block a candidate.
      targets: Target data sets (None = every ``target`` of the cache).
      tasks: N tasks (episodes) per target; the same seeded episodes for every policy.
      seed: Seed of episodes and adaptation.
      min_ways, max_ways, max_query, max_support_per_class, max_support_total: Episode sampler bounds
        (Meta-Dataset's are 5/50/10/100/500; smaller here to fit the machine).
      iterations: Optimizer steps per task (paper: 40).
      learning_rate: Adam learning rate (None = the export's default).
      full_train_batch: FullTrain's batch (paper: 100); the sparse methods use batch 1 (paper).
      memory_budget_mib: The paper's B_mem at 128x128 (1 MiB); scaled to ``input_size`` (see
        ``scaled_memory_budget``).
      compute_fraction: B_compute as a fraction of the forward MACs (paper: 0.15).
      channel_ratio: TinyTrain's channel ratio; ``sparse_update_channel_ratio`` SparseUpdate's.
      ablation_target, ablation_tasks: The target and N of the ablation section.
      channel_ratios: Channel ratios of the channel-method ablation (Figure 5).
      timing_runs: Timed adaptations per method (median reported).
      timing_support: Support images of the timed tasks.
      tf_recipe: Run the TF-recipe (Flex) peer in the timing section.
      cost_input_size: Resolution of the backward-cost section (paper: 128).
      cost_full_train_batch: FullTrain's batch in the backward-cost section (paper: 100).
      threads: Interpreter (and TF) threads.
      sections: Sections to run (subset of ``SECTIONS``).
    """

    cache_dir: str = "build/data_cache"
    out_dir: str = "bench/results"
    model_dir: str = "build/bench/models"
    backbone: str = "mcunet"
    input_size: int = 64
    weights: str | None = "weights/mcunet_64_meta.weights.h5"
    pretrained_weights: str | None = "weights/pretrain/backbone.weights.h5"
    candidate_blocks: int = 7
    targets: tuple[str, ...] | None = None
    tasks: int = 50
    seed: int = 1234
    min_ways: int = 5
    max_ways: int = 10
    max_query: int = 10
    max_support_per_class: int = 10
    max_support_total: int = 50
    iterations: int = 40
    learning_rate: float | None = None
    full_train_batch: int = 100
    memory_budget_mib: float = 1.0
    compute_fraction: float = 0.15
    channel_ratio: float = 0.25
    sparse_update_channel_ratio: float = 0.5
    ablation_target: str | None = None
    ablation_tasks: int = 20
    channel_ratios: tuple[float, ...] = (0.5, 0.25, 0.125)
    timing_runs: int = 3
    timing_support: int = 25
    tf_recipe: bool = True
    cost_input_size: int = 128
    cost_full_train_batch: int = 100
    threads: int = 1
    sections: tuple[str, ...] = SECTIONS

    def __post_init__(self) -> None:
        for name in ("input_size", "candidate_blocks", "tasks", "min_ways", "max_ways", "max_query",
                     "max_support_per_class", "max_support_total", "full_train_batch", "ablation_tasks",
                     "timing_runs", "timing_support", "cost_input_size", "cost_full_train_batch", "threads"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int; got {value!r}")
        if isinstance(self.iterations, bool) or not isinstance(self.iterations, int) or self.iterations < 0:
            raise ValueError(f"iterations must be an int >= 0; got {self.iterations!r}")
        if self.tasks < 2:
            raise ValueError(f"tasks must be >= 2 (a confidence interval needs two); got {self.tasks!r}")
        if self.min_ways > self.max_ways:
            raise ValueError(f"min_ways must be <= max_ways; got {self.min_ways} > {self.max_ways}")
        for name in ("memory_budget_mib", "compute_fraction", "channel_ratio", "sparse_update_channel_ratio"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
                raise ValueError(f"{name} must be a positive number; got {value!r}")
        for name in ("channel_ratio", "sparse_update_channel_ratio", "compute_fraction"):
            if getattr(self, name) > 1:
                raise ValueError(f"{name} must be in (0, 1]; got {getattr(self, name)!r}")
        if self.targets is not None:
            object.__setattr__(self, "targets", tuple(self.targets))
            if not self.targets:
                raise ValueError("targets must be None (every cache target) or non-empty")
        ratios = tuple(float(r) for r in self.channel_ratios)
        if not ratios or any(not 0 < r <= 1 for r in ratios):
            raise ValueError(f"channel_ratios must be non-empty, each in (0, 1]; got {self.channel_ratios!r}")
        object.__setattr__(self, "channel_ratios", ratios)
        sections = tuple(self.sections)
        unknown = [s for s in sections if s not in SECTIONS]
        if unknown or not sections:
            raise ValueError(f"sections must be a non-empty subset of {SECTIONS}; got {self.sections!r}")
        object.__setattr__(self, "sections", sections)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready resolved config."""
        out = dataclasses.asdict(self)
        for key, value in out.items():
            if isinstance(value, tuple):
                out[key] = list(value)
        return out
