"""Representative images that calibrate the int8 frozen prefix (``ExportConfig.calibration``).

* "" (default): the data cache's meta-training sources (role "source", their train classes), an equal
  share from each, seeded; the cache is ``DEFAULT_CACHE`` unless ``cache_dir`` is given.
* "synthetic:N": N seeded uniform random images (tests; no data needed).
* anything else: an image folder (``root/class/*.png|jpg``, ``tflite_train.data.folder_datasets``).

Images are resized to the model's input by the cache/folder loaders, converted to the model's channel
count and scaled from [0, 255] to the model's input range.
"""

from __future__ import annotations

import pathlib

import numpy as np

__all__ = ["DEFAULT_CACHE", "DEFAULT_COUNT", "calibration_images"]

DEFAULT_CACHE = pathlib.Path("build/data_cache_128")
DEFAULT_COUNT = 512
"""Calibration images taken from the cache or a folder: on Lite0 @128 the embedding cosine to float over 50 real images was mean 0.9904 / min 0.929 with 128 (min/max ranges), 0.9925 / 0.974 with 512 (docs/int8.md)."""
SYNTHETIC = "synthetic:"


def _scaled(images: np.ndarray, channels: int, value_range: tuple[float, float]) -> np.ndarray:
    """uint8 RGB [N, H, W, 3] -> float32 in ``value_range`` with ``channels`` channels."""
    x = images.astype(np.float32) / 255.0
    if channels == 1:
        x = x.mean(axis=-1, keepdims=True)
    elif channels != x.shape[-1]:
        raise ValueError(f"calibration images have {x.shape[-1]} channels; the model reads {channels}")
    low, high = value_range
    return low + (high - low) * x


def _pick(count: int, available: int, rng: np.random.Generator) -> np.ndarray:
    return np.sort(rng.choice(available, size=min(count, available), replace=False))


def calibration_images(source: str, shape: tuple[int, int, int], value_range: tuple[float, float], seed: int = 0,
                       count: int = DEFAULT_COUNT, cache_dir: str | pathlib.Path | None = None) -> np.ndarray:
    """float32 [N, H, W, C] images for ``source`` (module docstring).

    Raises:
      ValueError: an unreadable source, a malformed "synthetic:N", or no images found.
    """
    height, width, channels = shape
    rng = np.random.default_rng(seed)
    if source.startswith(SYNTHETIC):
        try:
            n = int(source[len(SYNTHETIC):])
        except ValueError:
            n = 0
        if n < 1:
            raise ValueError(f"calibration {source!r}: expected synthetic:N with N >= 1")
        low, high = value_range
        return rng.uniform(low, high, size=(n, height, width, channels)).astype(np.float32)
    if height != width:
        raise ValueError(f"calibration from images needs a square input; the model takes {height}x{width}")
    if source:
        from tflite_train.data.folder_datasets import load_image_folder

        data = load_image_folder(source, height)
        return _scaled(data.images[_pick(count, len(data.images), rng)], channels, value_range)
    from tflite_train.data import load_split, read_manifest

    cache = pathlib.Path(cache_dir) if cache_dir is not None else DEFAULT_CACHE
    if not (cache / "manifest.json").exists():
        raise ValueError(f"no data cache at {cache} for the int8 calibration: run `make data`, or give "
                         "--calibration FOLDER")
    sources = [name for name, entry in read_manifest(cache)["datasets"].items()
               if entry.get("role") == "source" and entry["splits"].get("train")]
    if not sources:
        raise ValueError(f"the data cache at {cache} has no meta-training source to calibrate with")
    parts = []
    for name in sources:
        data = load_split(cache, name, "train")
        parts.append(data.images[_pick(max(1, count // len(sources)), len(data.images), rng)])
    images = np.concatenate(parts)
    if images.shape[1:3] != (height, width):
        import tensorflow as tf

        images = np.clip(np.rint(tf.image.resize(images, (height, width)).numpy()), 0, 255).astype(np.uint8)
    return _scaled(images, channels, value_range)
