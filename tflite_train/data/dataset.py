"""The in-memory form of a labelled image data set: plain numpy arrays plus class names."""

from __future__ import annotations

import dataclasses

import numpy as np


class SourceUnavailable(RuntimeError):
    """A data source cannot be read here; ``hint`` says what to install (e.g. an apt package)."""

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(f"{message} ({hint})")
        self.hint = hint


@dataclasses.dataclass(frozen=True, eq=False)
class LabeledImages:
    """Images of one data set.

    Attributes:
      images: uint8 array (N, H, W, 3), RGB.
      labels: int32 array (N,), values in ``0..num_classes-1``.
      class_names: name of each class id.
    """

    images: np.ndarray
    labels: np.ndarray
    class_names: tuple[str, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.images, np.ndarray) or self.images.dtype != np.uint8 or self.images.ndim != 4:
            raise TypeError(f"images must be a uint8 (N, H, W, C) array, got {getattr(self.images, 'dtype', type(self.images))} {getattr(self.images, 'shape', '')}")
        if self.images.shape[-1] != 3:
            raise ValueError(f"images must be RGB (last dim 3), got shape {self.images.shape}")
        if not isinstance(self.labels, np.ndarray) or self.labels.shape != (self.images.shape[0],):
            raise ValueError(f"labels must have shape ({self.images.shape[0]},), got {getattr(self.labels, 'shape', type(self.labels))}")
        if self.labels.size and (self.labels.min() < 0 or self.labels.max() >= len(self.class_names)):
            raise ValueError(f"labels must lie in 0..{len(self.class_names) - 1}, got {self.labels.min()}..{self.labels.max()}")

    @property
    def num_classes(self) -> int:
        return len(self.class_names)

    def __len__(self) -> int:
        return int(self.images.shape[0])

    def class_counts(self) -> np.ndarray:
        """Number of images of each class id, shape (num_classes,)."""
        return np.bincount(self.labels, minlength=self.num_classes)

    def subset_classes(self, class_ids) -> "LabeledImages":
        """The images of the given classes, relabelled 0..len(class_ids)-1 in the given order."""
        class_ids = [int(c) for c in class_ids]
        if any(c < 0 or c >= self.num_classes for c in class_ids) or len(set(class_ids)) != len(class_ids):
            raise ValueError(f"class_ids must be distinct ids in 0..{self.num_classes - 1}, got {class_ids}")
        remap = np.full(self.num_classes, -1, np.int64)
        remap[class_ids] = np.arange(len(class_ids))
        keep = remap[self.labels] >= 0
        return LabeledImages(
            images=self.images[keep],
            labels=remap[self.labels[keep]].astype(np.int32),
            class_names=tuple(self.class_names[c] for c in class_ids),
        )


def to_rgb_uint8(image, size: int):
    """A PIL image -> uint8 (size, size, 3), prepared exactly as the device prepares a photo.

    ``tflite_train.runtime.to_model_input`` (the one preprocessing Python and Java share): transparency
    composited on white, a centre crop to a square, bilinear sampling without antialiasing, then rounded to
    uint8. So the data cache, meta-training, the benchmark and ``adapt`` see an image the same way (a
    non-square image loses the ends of its long side, as on the device).
    """
    from tflite_train.runtime.images.model_input import to_model_input

    if image.mode not in ("L", "LA", "RGB", "RGBA"):
        image = image.convert("RGBA")
    pixels = np.asarray(image, dtype=np.uint8)
    rgb = to_model_input(pixels, (size, size, 3), (0.0, 255.0))
    return np.clip(np.rint(rgb), 0, 255).astype(np.uint8)
