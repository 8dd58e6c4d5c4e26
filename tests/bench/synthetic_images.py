"""Class-structured synthetic images for the bench tests (no data package needed)."""

import numpy as np

from tflite_train.data import LabeledImages


def patterns(size: int, seed: int, classes: int = 8, per_class: int = 8) -> LabeledImages:
    """Class-structured images (a per-class random template + noise), uint8 RGB."""
    rng = np.random.default_rng(seed)
    templates = rng.integers(0, 256, (classes, size, size, 3))
    noise = rng.normal(0, 30, (classes, per_class, size, size, 3))
    images = np.clip(templates[:, None] + noise, 0, 255).astype(np.uint8).reshape(-1, size, size, 3)
    return LabeledImages(images, np.repeat(np.arange(classes), per_class).astype(np.int32),
                         tuple(f"c{i}" for i in range(classes)))
