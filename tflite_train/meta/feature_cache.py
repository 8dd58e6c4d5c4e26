"""Feature maps of a frozen backbone prefix, computed once and stored as float16 ``.npy`` files.

Meta-training only the upper blocks of a backbone needs the frozen prefix's output for every
training image; on 2 CPU cores the prefix is most of the cost, so it runs once per image and view
(``views`` per image: view 0 as is, the others augmented with ``augment`` and a seed derived from
(config seed, data set, split, view)). Each (data set, split) is one entry: ``<name>_<split>.npy``
(float16, (N * views, h, w, c), view-major within each image) and ``<name>_<split>_labels.npy``
(int32 class ids of the split, relabelled 0..C-1 as ``load_split`` does).

``features.json`` records the resolved ``FeatureCacheConfig``, the data cache's sha256 of each used
``.npz``, the ImageNet weights' sha256 and the sha256 of every ``.npy``; an existing cache is reused
only when all of them agree and the files pass their checksums, else it is rebuilt.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import pathlib
from collections.abc import Callable

import numpy as np

from tflite_train.data.cache import load_split, read_manifest, sha256_file
from tflite_train.runtime.adaptation.augmentation import AugmentConfig, augment

log = logging.getLogger(__name__)

FEATURES_JSON = "features.json"


@dataclasses.dataclass(frozen=True)
class FeatureCacheConfig:
    """What the feature cache holds.

    Attributes:
      input_size: Backbone input H = W (cache images are resized to it with the device's bilinear
        rule, ``tflite_train.runtime.images.model_input.to_model_input``).
      first_block: The prefix ends at the input of this block.
      entries: (data set, split, views, max_classes) per entry; max_classes 0 = all classes of the
        split, else the first ``max_classes`` of the split (the split's order is a seeded permutation).
      augment: Augmentation of views 1.. (on [0, 1] images; no flips: emoji arrows and letters
        have a handedness).
      seed: Seed of the augmentation.
      batch_size: Images per prefix call.
    """

    input_size: int = 128
    first_block: int = 10
    entries: tuple[tuple[str, str, int, int], ...] = (
        ("emoji", "train", 3, 0), ("emoji", "val", 3, 0),
        ("glyphs_multiscript", "train", 1, 500), ("glyphs_multiscript", "val", 1, 100),
    )
    augment: AugmentConfig = AugmentConfig(flip_prob=0.0, translate=0.08, brightness=0.1, saturation=0.3,
                                           contrast=0.2, cutout=0.0, value_range=(0.0, 1.0))
    seed: int = 0
    batch_size: int = 64


@dataclasses.dataclass(frozen=True, eq=False)
class FeatureSet:
    """Prefix features of one (data set, split): ``features`` float16 (N, h, w, c), ``labels`` int32 (N,),
    ``image_index`` (N,) the source image of each row (rows of one image share it: its views)."""

    name: str
    features: np.ndarray
    labels: np.ndarray
    image_index: np.ndarray

    @property
    def num_classes(self) -> int:
        return int(self.labels.max()) + 1


def _seed(*parts) -> int:
    return int.from_bytes(hashlib.sha256("|".join(map(str, parts)).encode()).digest()[:8], "little")


def model_inputs(images: np.ndarray, input_size: int) -> np.ndarray:
    """uint8 (N, S, S, 3) cache images -> float32 (N, input_size, input_size, 3) in [0, 255]: bilinear
    with aligned pixel centres and no antialiasing (``tf.image.resize``), the device's rule
    (``tflite_train.runtime.images.model_input.to_model_input``; tests/meta/test_feature_cache.py checks they agree)."""
    import tensorflow as tf

    x = np.asarray(images, np.float32)
    if x.shape[1:3] == (input_size, input_size):
        return x
    return tf.image.resize(x, (input_size, input_size), method="bilinear", antialias=False).numpy()


def _subset(cache_dir: pathlib.Path, name: str, split: str, max_classes: int):
    data = load_split(cache_dir, name, split)
    if max_classes and data.num_classes > max_classes:
        data = data.subset_classes(range(max_classes))
    return data


def _compute(prefix: Callable[[np.ndarray], np.ndarray], images: np.ndarray, views: int, config: FeatureCacheConfig,
             tag: str) -> np.ndarray:
    from tqdm import tqdm

    out = None

    for start in tqdm(range(0, len(images), config.batch_size), desc=f"features {tag}", mininterval=10):
        batch = images[start:start + config.batch_size].astype(np.float32) / 255.0
        for view in range(views):
            x = batch if view == 0 else augment(batch, np.random.default_rng(_seed(config.seed, tag, view, start)),
                                                config.augment)
            x = model_inputs(np.clip(np.rint(x * 255.0), 0, 255).astype(np.uint8), config.input_size)
            f = np.asarray(prefix(x), np.float16)
            if out is None:
                out = np.empty((len(images) * views,) + f.shape[1:], np.float16)
            # row of (image i, view v) = i * views + v
            idx = (np.arange(start, start + len(batch)) * views + view)
            out[idx] = f
    return out


def build_feature_cache(
    cache_dir: str | pathlib.Path,
    out_dir: str | pathlib.Path,
    config: FeatureCacheConfig,
    prefix: Callable[[np.ndarray], np.ndarray],
    *,
    weights_sha256: str,
) -> dict[str, FeatureSet]:
    """Builds (or reuses, see the module docstring) the feature cache; returns the sets by ``name/split``.

    Args:
      prefix: Maps float32 (N, S, S, 3) [0, 255] images to the prefix feature maps.
      weights_sha256: Digest of the weights the prefix computes with (part of the cache key).
    """
    cache_dir, out_dir = pathlib.Path(cache_dir), pathlib.Path(out_dir)
    manifest = read_manifest(cache_dir)
    used = sorted({name for name, _, _, _ in config.entries})
    for name in used:
        if name not in manifest["datasets"]:
            load_split(cache_dir, name, "all")  # raises the cache's message (with how to add it)
    key = {"config": json.loads(json.dumps(dataclasses.asdict(config))), "weights_sha256": weights_sha256,
           "data": {n: manifest["datasets"][n]["sha256"] for n in used}, "image_size": manifest["image_size"]}
    record_path = out_dir / FEATURES_JSON
    if record_path.exists():
        try:
            record = json.loads(record_path.read_text())
            if record.get("key") == key and all(sha256_file(out_dir / f) == h for f, h in record["files"].items()):
                log.info("feature cache in %s is up to date", out_dir)
                return _load(out_dir, config)
        except (OSError, ValueError, KeyError) as err:
            log.warning("feature cache in %s not usable (%s); rebuilding", out_dir, err)
    out_dir.mkdir(parents=True, exist_ok=True)
    files = {}
    for name, split, views, max_classes in config.entries:
        data = _subset(cache_dir, name, split, max_classes)
        tag = f"{name}_{split}"
        features = _compute(prefix, data.images, views, config, tag)
        labels = np.repeat(data.labels, views).astype(np.int32)
        for suffix, array in (("", features), ("_labels", labels)):
            path = out_dir / f"{tag}{suffix}.npy"
            tmp = path.with_name(path.name + ".tmp.npy")
            np.save(tmp, array, allow_pickle=False)
            tmp.replace(path)
            files[path.name] = sha256_file(path)
        log.info("features %s: %s float16 (%d classes, %d views)", tag, features.shape, data.num_classes, views)
    (out_dir / FEATURES_JSON).write_text(json.dumps({"key": key, "files": files}, indent=2) + "\n")
    return _load(out_dir, config)


def _load(out_dir: pathlib.Path, config: FeatureCacheConfig) -> dict[str, FeatureSet]:
    sets = {}
    for name, split, views, _ in config.entries:
        tag = f"{name}_{split}"
        features = np.load(out_dir / f"{tag}.npy", allow_pickle=False)
        labels = np.load(out_dir / f"{tag}_labels.npy", allow_pickle=False)
        sets[f"{name}/{split}"] = FeatureSet(f"{name}/{split}", features, labels, np.arange(len(labels)) // views)
    return sets
