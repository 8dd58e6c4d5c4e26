"""Warm-up then cosine-annealing learning rate (paper appendix A.3)."""

from __future__ import annotations

import math

import keras

from tflite_train.meta.config import ScheduleConfig


def warmup_cosine(step: int, total_steps: int, config: ScheduleConfig) -> float:
    """lr(t): linear min_lr -> peak_lr over W = round(warmup_fraction * T) steps, then
    min_lr + (peak_lr - min_lr) * (1 + cos(pi * (t - W) / (T - W))) / 2 down to min_lr at t = T."""
    if total_steps < 1:
        raise ValueError(f"total_steps must be >= 1, got {total_steps}")
    warm = int(round(config.warmup_fraction * total_steps))
    t = min(max(step, 0), total_steps)
    if t < warm:
        return config.min_lr + (config.peak_lr - config.min_lr) * t / warm
    progress = (t - warm) / max(1, total_steps - warm)
    return config.min_lr + (config.peak_lr - config.min_lr) * 0.5 * (1.0 + math.cos(math.pi * progress))


class WarmupCosine(keras.optimizers.schedules.LearningRateSchedule):
    """Keras schedule form of :func:`warmup_cosine` (graph-safe)."""

    def __init__(self, total_steps: int, config: ScheduleConfig) -> None:
        self.total_steps = int(total_steps)
        self.config = config

    def __call__(self, step):
        c = self.config
        warm = float(round(c.warmup_fraction * self.total_steps))
        t = keras.ops.clip(keras.ops.cast(step, "float32"), 0.0, float(self.total_steps))
        warm_lr = c.min_lr + (c.peak_lr - c.min_lr) * t / max(warm, 1.0)
        progress = (t - warm) / max(1.0, self.total_steps - warm)
        cos_lr = c.min_lr + (c.peak_lr - c.min_lr) * 0.5 * (1.0 + keras.ops.cos(math.pi * progress))
        return keras.ops.where(t < warm, warm_lr, cos_lr)

    def get_config(self) -> dict:
        return {"total_steps": self.total_steps, "peak_lr": self.config.peak_lr, "min_lr": self.config.min_lr,
                "warmup_fraction": self.config.warmup_fraction}
