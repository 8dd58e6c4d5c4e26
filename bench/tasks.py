"""The benchmark's tasks: seeded few-shot episodes of a cached target's validation or test pool.

A ``Task`` holds the cache's raw uint8 pixels; ``Task.for_model`` maps them to a model's input
(size and value range, ``tflite_train.runtime.to_model_input``). Each backbone reads the cache at its
own input size or the next larger one (``cache_for_size``: never upscaled), prepared by the device's
preprocessing; every policy of a backbone gets the same list of tasks. Episodes are drawn from the
labels alone, so caches of the same data sets at two sizes give the same episodes of the same images.
"""

from __future__ import annotations

import dataclasses
import functools
import pathlib
import zlib
from collections.abc import Sequence

import numpy as np

from bench.config import BenchConfig
from bench.validation_split import TEST, VALIDATION, PoolSplit, split_pools
from tflite_train.data import (Episode, EpisodeConfig, LabeledImages, load_split, read_manifest, sample_episode,
                               sample_episodes)
from tflite_train.data.cache import MANIFEST

VALIDATION_SEED_OFFSET = 7919
"""Added to the episode seed for validation-pool episodes (a prime, far from any task index)."""


@dataclasses.dataclass(frozen=True, eq=False)
class Task:
    """One episode: support images [S, H, W, C] and labels i32 [S]; the same for the query.

    Images are uint8 cache pixels (``for_model`` gives the float input of a model).
    """

    support: np.ndarray
    support_labels: np.ndarray
    query: np.ndarray
    query_labels: np.ndarray

    @property
    def ways(self) -> int:
        return int(self.support_labels.max()) + 1

    def for_model(self, shape: Sequence[int], value_range: Sequence[float]) -> Task:
        """This task's images as the float32 input of a model with input ``shape`` (h, w, c) and
        ``value_range`` (metadata ``input.range``): centre crop, bilinear resize, range mapping."""
        return Task(model_images(self.support, shape, value_range), self.support_labels,
                    model_images(self.query, shape, value_range), self.query_labels)


def model_images(images: np.ndarray, shape: Sequence[int], value_range: Sequence[float]) -> np.ndarray:
    """uint8 (or [0, 1] float) images [N, H, W, C] -> float32 [N, h, w, c] in ``value_range``.

    Same size and channels: the affine map low + x / 255 (high - low) (what ``to_model_input`` gives
    there, without the per-image resampling); otherwise ``to_model_input`` per image.
    """
    from tflite_train.runtime import to_model_input

    images = np.asarray(images)
    low, high = (float(v) for v in value_range)
    if images.dtype == np.uint8 and tuple(images.shape[1:]) == tuple(int(s) for s in shape):
        return (low + images.astype(np.float32) * ((high - low) / 255.0)).astype(np.float32)
    return np.stack([to_model_input(im, shape, (low, high)) for im in images]).astype(np.float32)


def episode_config(config: BenchConfig) -> EpisodeConfig:
    """The various-way various-shot sampler bounds of ``config``."""
    return EpisodeConfig(min_ways=config.min_ways, max_ways=config.max_ways, max_query=config.max_query,
                         max_support_per_class=config.max_support_per_class,
                         max_support_total=config.max_support_total)


def cache_for_size(config: BenchConfig, input_size: int | None) -> str:
    """The cache a model of ``input_size`` reads: the smallest of ``config.cache_dir`` and the existing
    ``config.size_caches`` whose image size is >= ``input_size`` (None: ``config.cache_dir``).

    Raises:
      ValueError: no cache is large enough (names the sizes found and the command that makes one).
    """
    if input_size is None:
        return config.cache_dir
    sizes = {config.cache_dir: _image_size(config.cache_dir)}
    for folder in config.size_caches:
        if pathlib.Path(folder, MANIFEST).exists() and folder not in sizes:
            sizes[folder] = _image_size(folder)
    fitting = sorted((size, folder) for folder, size in sizes.items() if size >= input_size)
    if not fitting:
        found = ", ".join(f"{folder} ({size} px)" for folder, size in sizes.items())
        raise ValueError(f"no data cache at >= {input_size} px for a {input_size} px model (found {found}); make one "
                         f"with `tflite-train data prepare --image-size {input_size} --out DIR` (`make data` makes "
                         "build/data_cache_128) and name it in size_caches")
    return fitting[0][1]


@functools.lru_cache(maxsize=16)
def _image_size(cache_dir: str) -> int:
    return int(read_manifest(cache_dir)["image_size"])


def cache_targets(config: BenchConfig) -> tuple[str, ...]:
    """``config.targets`` or every ``target`` data set of the cache (manifest order).

    Raises:
      ValueError: a named target is not in the cache, or the cache has none.
    """
    datasets = read_manifest(config.cache_dir)["datasets"]
    available = tuple(name for name, entry in datasets.items() if entry["role"] == "target")
    if config.targets is None:
        if not available:
            raise ValueError(f"the cache {config.cache_dir} has no target data set")
        return available
    missing = [t for t in config.targets if t not in available]
    if missing:
        raise ValueError(f"targets {missing} are not target data sets of {config.cache_dir}; it has {list(available)}")
    return config.targets


@functools.lru_cache(maxsize=16)
def _target_data(cache_dir: str, target: str) -> LabeledImages:
    return load_split(cache_dir, target, "test")  # a target's classes are all "test" in the cache


def target_pools(config: BenchConfig, target: str, input_size: int | None = None) -> tuple[LabeledImages, PoolSplit]:
    """A target's images (from ``cache_for_size(config, input_size)``) and their validation/test pools
    (``bench.validation_split``)."""
    data = _target_data(cache_for_size(config, input_size), target)
    split = split_pools(data.labels, data.class_names, target, config.seed, config.validation_fraction,
                        config.class_split_min_classes)
    return data, split


def target_tasks(config: BenchConfig, target: str, num: int, pool: str = TEST,
                 input_size: int | None = None) -> list[Task]:
    """``num`` episodes of ``target``'s ``pool`` ("test": reported; "validation": tuning only), with the
    images of the cache for ``input_size`` (``cache_for_size``).

    Seeded by (config.seed, target name, pool): the same config gives the same tasks in every section
    and for every policy; a smaller ``num`` gives a prefix of a larger one's list.
    """
    data, split = target_pools(config, target, input_size)
    index = split.indices(pool)
    seed = config.seed + zlib.crc32(target.encode()) + (VALIDATION_SEED_OFFSET if pool == VALIDATION else 0)
    return _episodes(data.images[index], data.labels[index], num, seed, episode_config(config))


def source_tasks(config: BenchConfig, source: str, num: int, input_size: int | None = None) -> list[Task]:
    """``num`` episodes of a source data set's meta-training ("train") classes (SparseUpdate's static ranking)."""
    data = load_split(cache_for_size(config, input_size), source, "train")
    return _episodes(data.images, data.labels, num, config.seed + zlib.crc32(source.encode()), episode_config(config))


def _episodes(images: np.ndarray, labels: np.ndarray, num: int, seed: int, episodes: EpisodeConfig) -> list[Task]:
    return [_gathered(episode, images) for episode in sample_episodes(labels, num, seed, episodes)]


def _gathered(episode: Episode, images: np.ndarray) -> Task:
    s, sl, q, ql = episode.gather(images)
    return Task(np.asarray(s, np.uint8), sl.astype(np.int32), np.asarray(q, np.uint8), ql.astype(np.int32))


def fixed_task(images: np.ndarray, labels: np.ndarray, ways: int, shots: int, queries: int, seed: int) -> Task:
    """One seeded ``ways``-way ``shots``-shot episode of (images, labels) with ``queries`` queries per class."""
    config = EpisodeConfig(ways=ways, shots=shots, queries=queries)
    return _gathered(sample_episode(labels, np.random.default_rng(seed), config), images)


def dataset_task(cache_dir: str, dataset: str, ways: int = 5, shots: int = 5, queries: int = 10, seed: int = 0) -> Task:
    """``fixed_task`` of a cached data set's "test" split (all of it; no validation/test pools): the one
    support set of the peer bench and of the diagnostics in ``tools/diagnostics``."""
    data = load_split(cache_dir, dataset, "test")
    return fixed_task(data.images, data.labels, ways, shots, queries, seed)


def timing_task(config: BenchConfig, target: str, input_size: int | None = None) -> Task:
    """A fixed 5-way task of ``target``'s test pool with ``timing_support`` support images (at least 1 shot),
    from the cache for ``input_size`` (None: ``config.input_size``)."""
    data, split = target_pools(config, target, config.input_size if input_size is None else input_size)
    images, labels = data.images[split.test], data.labels[split.test]
    ways = min(5, np.unique(labels).size)
    return fixed_task(images, labels, ways, max(1, config.timing_support // ways), 1, config.seed)
