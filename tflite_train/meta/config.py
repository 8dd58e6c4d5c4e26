"""Frozen configurations of offline pre-training and meta-training."""

from __future__ import annotations

import dataclasses

from tflite_train.data.episodes import EpisodeConfig
from tflite_train.runtime.adaptation.augmentation import AugmentConfig


@dataclasses.dataclass(frozen=True)
class ScheduleConfig:
    """Warm-up then cosine learning rate (paper appendix A.3 shape: 1e-6 -> peak over warm-up, cosine back).

    Attributes:
      peak_lr: Learning rate at the end of warm-up.
      min_lr: Learning rate at step 0 and at the last step.
      warmup_fraction: Fraction of the steps spent warming up linearly (A.3: 5 of 100 epochs).
    """

    peak_lr: float = 0.05
    min_lr: float = 1e-6
    warmup_fraction: float = 0.05

    def __post_init__(self) -> None:
        if not 0 < self.min_lr <= self.peak_lr:
            raise ValueError(f"need 0 < min_lr <= peak_lr, got min_lr={self.min_lr}, peak_lr={self.peak_lr}")
        if not 0 <= self.warmup_fraction < 1:
            raise ValueError(f"warmup_fraction must lie in [0, 1), got {self.warmup_fraction}")


@dataclasses.dataclass(frozen=True)
class PretrainConfig:
    """Supervised pre-training: linear head on the embedding, cross-entropy, SGD with momentum."""

    backbone: str = "mcunet"
    image_size: int = 64
    dataset: str = "glyphs"
    steps: int = 1000
    batch_size: int = 64
    momentum: float = 0.9
    weight_decay: float = 5e-4
    schedule: ScheduleConfig = ScheduleConfig(peak_lr=0.05)
    augment: AugmentConfig = AugmentConfig(flip_prob=0.0, cutout=0.0, translate=0.0625, saturation=0.0,
                                           value_range=(0.0, 1.0))
    seed: int = 0
    checkpoint_every: int = 200
    log_every: int = 50


@dataclasses.dataclass(frozen=True)
class MetaTrainConfig:
    """Episodic ProtoNet meta-training with a cosine classifier s * (cos + b) (P>M>F), SGD with momentum.

    Attributes:
      episodes: Training steps (optimizer steps; the name predates ``episodes_per_step``).
      episodes_per_step: Episodes averaged into one step (E): the global batch, split evenly over
        the replicas of a ``tf.distribute`` strategy (so it must be a multiple of their number).
      episode: Sampler for training episodes (default: fixed 10-way 5-shot 10-query, one static shape).
      val_episode: Sampler for validation episodes (Meta-Dataset various-way various-shot).
      val_every, val_episodes: Validation cadence and size (on the source's val classes).
      init_scale, init_bias: Initial cosine scale s and bias b (learnable).
    """

    backbone: str = "mcunet"
    image_size: int = 64
    dataset: str = "glyphs"
    episodes: int = 500
    episodes_per_step: int = 1
    episode: EpisodeConfig = EpisodeConfig(ways=10, shots=5, queries=10)
    val_episode: EpisodeConfig = EpisodeConfig()
    val_every: int = 100
    val_episodes: int = 50
    momentum: float = 0.9
    weight_decay: float = 5e-4
    schedule: ScheduleConfig = ScheduleConfig(peak_lr=0.01)
    augment: AugmentConfig = AugmentConfig(flip_prob=0.0, cutout=0.0, translate=0.0625, saturation=0.0,
                                           value_range=(0.0, 1.0))
    init_scale: float = 10.0
    init_bias: float = 0.0
    seed: int = 0
    checkpoint_every: int = 100
    log_every: int = 20

    def __post_init__(self) -> None:
        e = self.episodes_per_step
        if isinstance(e, bool) or not isinstance(e, int) or e < 1:
            raise ValueError(f"episodes_per_step must be an int >= 1; got {e!r}")
