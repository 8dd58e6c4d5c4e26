"""Numpy image augmentation for pseudo-queries (P>M>F / DiffAugment-style), TF-free.

The on-device trainer builds a pseudo-query set by augmenting the support set (paper appendix C).
Each transform acts on float32 NHWC images with values in ``[lo, hi]`` (``AugmentConfig.value_range``,
the range the model takes: [0, 1] for the built-in MCUNet-style backbones, [0, 255] for Lite0 and
most Keras applications; ``None`` until ``with_value_range`` resolves it from the model's metadata)
and draws one random parameter set per image from the given generator:

- horizontal flip with probability ``flip_prob``;
- translation by integers (dy, dx) ~ U{-t, ..., t}, t = round(translate * H), vacated pixels filled with
  ``fill`` (the background);
- brightness: x + b (hi - lo), b ~ U(-brightness, brightness);
- saturation: m + s (x - m), m the per-pixel channel mean, s ~ U(1 - saturation, 1 + saturation);
- contrast: mu + c (x - mu), mu the per-image mean, c ~ U(1 - contrast, 1 + contrast);
- cutout: one square of side round(cutout * H) at a uniform centre set to ``fill``;
then clipping to ``[lo, hi]``.
"""

from __future__ import annotations

import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True)
class AugmentConfig:
    """Strengths of each transform (0 disables it). See the module docstring for the maths."""

    flip_prob: float = 0.5
    translate: float = 0.125
    brightness: float = 0.2
    saturation: float = 0.3
    contrast: float = 0.3
    cutout: float = 0.25
    value_range: tuple[float, float] | None = None
    fill: float | None = None  # None: the top-left pixel of each image after its flip (the background for our data)

    def __post_init__(self) -> None:
        for name in ("flip_prob", "translate", "brightness", "saturation", "contrast", "cutout"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must lie in [0, 1], got {value!r}")
        if self.value_range is not None:
            lo, hi = (float(v) for v in self.value_range)
            if not lo < hi:
                raise ValueError(f"value_range must be (lo, hi) with lo < hi, got {self.value_range!r}")
            object.__setattr__(self, "value_range", (lo, hi))


def with_value_range(config: AugmentConfig | None, value_range: tuple[float, float]) -> AugmentConfig:
    """``config`` (None: the defaults) for images in ``value_range``, the model's input range.

    A config without a range takes ``value_range``; one whose explicit range differs is refused, since
    clipping images to another range destroys them (e.g. [0, 255] pixels clipped to [0, 1]).

    Raises:
      ValueError: ``config.value_range`` is set and differs from ``value_range``.
    """
    lo, hi = (float(v) for v in value_range)
    config = AugmentConfig() if config is None else config
    if config.value_range is None:
        return dataclasses.replace(config, value_range=(lo, hi))
    if config.value_range != (lo, hi):
        raise ValueError(f"AugmentConfig.value_range {config.value_range} differs from the model's input range "
                         f"{(lo, hi)} (metadata input.range); leave it None to use the model's")
    return config


def translate(images: np.ndarray, shifts: np.ndarray, fill: np.ndarray) -> np.ndarray:
    """Shifts image n by integer ``shifts[n] = (dy, dx)`` (content moves down/right for positive), filling with ``fill[n]``."""
    n, h, w, _ = images.shape
    out = np.empty_like(images)
    for i in range(n):
        dy, dx = int(shifts[i, 0]), int(shifts[i, 1])
        out[i] = fill[i]
        ys, yd = (slice(0, h - dy), slice(dy, h)) if dy >= 0 else (slice(-dy, h), slice(0, h + dy))
        xs, xd = (slice(0, w - dx), slice(dx, w)) if dx >= 0 else (slice(-dx, w), slice(0, w + dx))
        out[i, yd, xd] = images[i, ys, xs]
    return out


def augment(images: np.ndarray, rng: np.random.Generator, config: AugmentConfig = AugmentConfig()) -> np.ndarray:
    """Returns augmented copies of ``images`` (float32 NHWC); see the module docstring.

    Raises:
      ValueError: images not 4-D, or ``config.value_range`` is None (see ``with_value_range``).
      TypeError: rng not a ``numpy.random.Generator``.
    """
    images = np.asarray(images, dtype=np.float32)
    if images.ndim != 4:
        raise ValueError(f"images must be NHWC, got shape {images.shape}")
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    if config.value_range is None:
        raise ValueError("AugmentConfig.value_range is None: give the images' range (with_value_range)")
    n, h, w, c = images.shape
    lo, hi = config.value_range
    x = images.copy()
    if config.flip_prob > 0:
        flip = rng.uniform(size=n) < config.flip_prob
        x[flip] = x[flip, :, ::-1]
    # each image's top-left pixel after the flip (a copy: x changes in place below)
    fill = x[:, 0, 0, :].copy() if config.fill is None else np.full((n, c), config.fill, np.float32)
    if config.translate > 0:
        t = int(round(config.translate * h))
        x = translate(x, rng.integers(-t, t + 1, size=(n, 2)), fill)
    # in place from here on (x is this call's own array): the same float32 operations in the same order as the
    # expressions they replace, so the same pixels, without a temporary the size of the batch per step
    if config.brightness > 0:
        x += (rng.uniform(-config.brightness, config.brightness, size=(n, 1, 1, 1)) * (hi - lo)).astype(np.float32)
    if config.saturation > 0:
        _scale_about(x, x.mean(axis=3, keepdims=True),
                     rng.uniform(1 - config.saturation, 1 + config.saturation, size=(n, 1, 1, 1)).astype(np.float32))
    if config.contrast > 0:
        _scale_about(x, x.mean(axis=(1, 2, 3), keepdims=True),
                     rng.uniform(1 - config.contrast, 1 + config.contrast, size=(n, 1, 1, 1)).astype(np.float32))
    if config.cutout > 0:
        side = max(1, int(round(config.cutout * h)))
        cy = rng.integers(0, h, size=n)
        cx = rng.integers(0, w, size=n)
        for i in range(n):
            y0, x0 = max(0, cy[i] - side // 2), max(0, cx[i] - side // 2)
            x[i, y0:y0 + side, x0:x0 + side] = fill[i]
    return np.clip(x, np.float32(lo), np.float32(hi), out=x)


def _scale_about(x: np.ndarray, mean: np.ndarray, factor: np.ndarray) -> None:
    """x = mean + factor * (x - mean), in place (float32 throughout)."""
    x -= mean
    x *= factor
    x += mean
