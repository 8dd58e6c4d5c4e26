"""The benchmark's tasks: seeded few-shot episodes of a cached target, as float images in [0, 1]."""

from __future__ import annotations

import dataclasses
import zlib

import numpy as np

from bench.config import BenchConfig
from tflite_train.data import EpisodeConfig, load_split, read_manifest, sample_episodes


@dataclasses.dataclass(frozen=True, eq=False)
class Task:
    """One episode's arrays: support f32 [S, H, W, C] in [0, 1], labels i32 [S]; the same for the query."""

    support: np.ndarray
    support_labels: np.ndarray
    query: np.ndarray
    query_labels: np.ndarray

    @property
    def ways(self) -> int:
        return int(self.support_labels.max()) + 1


def episode_config(config: BenchConfig) -> EpisodeConfig:
    """The various-way various-shot sampler bounds of ``config``."""
    return EpisodeConfig(min_ways=config.min_ways, max_ways=config.max_ways, max_query=config.max_query,
                         max_support_per_class=config.max_support_per_class,
                         max_support_total=config.max_support_total)


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


def target_tasks(config: BenchConfig, target: str, num: int, split: str = "test") -> list[Task]:
    """``num`` episodes of ``target`` from a generator seeded by (config.seed, target name).

    The same config gives the same tasks in every section and for every policy; a smaller ``num``
    gives a prefix of a larger one's list.
    """
    data = load_split(config.cache_dir, target, split)
    seed = config.seed + zlib.crc32(target.encode())
    images = data.images
    tasks = []
    for episode in sample_episodes(data.labels, num, seed, episode_config(config)):
        s, sl, q, ql = episode.gather(images)
        tasks.append(Task((s / 255.0).astype(np.float32), sl.astype(np.int32),
                          (q / 255.0).astype(np.float32), ql.astype(np.int32)))
    return tasks


def timing_task(config: BenchConfig, target: str) -> Task:
    """A fixed 5-way task of ``target`` with ``timing_support`` support images (at least 1 shot) for timing."""
    from tflite_train.data import sample_episode

    data = load_split(config.cache_dir, target, "test")
    ways = min(5, data.num_classes)
    shots = max(1, config.timing_support // ways)
    episode = sample_episode(data.labels, np.random.default_rng(config.seed),
                             EpisodeConfig(ways=ways, shots=shots, queries=1))
    s, sl, q, ql = episode.gather(data.images)
    return Task((s / 255.0).astype(np.float32), sl.astype(np.int32), (q / 255.0).astype(np.float32), ql.astype(np.int32))
