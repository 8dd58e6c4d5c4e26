"""Few-shot episodes: Meta-Dataset's various-way various-shot sampler (paper appendix B) and fixed K-way N-shot.

Various-way various-shot (Triantafillou et al. 2020, as used by TinyTrain appendix B), given the
labels of one class split:

1. ways ~ U{min_ways, ..., min(max_ways, C)}; that many classes uniformly without replacement.
2. query per class q = min(max_query, floor(min_c n_c / 2)) (class-balanced; half of the smallest
   class stays for the support).
3. support size: beta ~ U(0, 1), remaining r_c = n_c - q,
   S = min(max_support_total, sum_c ceil(beta * min(max_support_per_class, r_c))).
4. shots: w_c = exp(u_c) * r_c with u_c ~ U(log 1/2, log 2), p = w / sum w,
   k_c = min(floor(p_c * (S - ways)) + 1, r_c, max_support_per_class).
   (Every class gets >= 1 shot; shots are imbalanced through u_c and r_c.)
5. k_c support and q query images per class, disjoint, uniformly without replacement.

All randomness comes from one ``numpy.random.Generator``: the same seed gives the same episode.
"""

from __future__ import annotations

import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True)
class EpisodeConfig:
    """Sampler settings (defaults: Meta-Dataset / TinyTrain appendix B).

    Attributes:
      min_ways, max_ways: Range of the number of classes (upper end also capped by the split's classes).
      max_query: Query images per class (at most).
      max_support_per_class: Support images per class (at most).
      max_support_total: Support images in total (at most).
      ways, shots, queries: When all three are set, a fixed ``ways``-way ``shots``-shot episode with
        ``queries`` query images per class is sampled instead.
    """

    min_ways: int = 5
    max_ways: int = 50
    max_query: int = 10
    max_support_per_class: int = 100
    max_support_total: int = 500
    ways: int | None = None
    shots: int | None = None
    queries: int | None = None

    def __post_init__(self) -> None:
        for name in ("min_ways", "max_ways", "max_query", "max_support_per_class", "max_support_total"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if self.min_ways > self.max_ways:
            raise ValueError(f"min_ways must be <= max_ways, got {self.min_ways} > {self.max_ways}")
        fixed = (self.ways, self.shots, self.queries)
        if any(v is not None for v in fixed) and not all(isinstance(v, int) and v >= 1 for v in fixed):
            raise ValueError(f"ways, shots, queries must all be positive ints or all None, got {fixed}")

    @property
    def fixed(self) -> bool:
        return self.ways is not None


@dataclasses.dataclass(frozen=True, eq=False)
class Episode:
    """One task: indices into the data set and episode-local labels ``0..ways-1``.

    Attributes:
      classes: Data-set class id of each episode class, shape (ways,).
      support_indices, support_labels: shape (n_support,).
      query_indices, query_labels: shape (n_query,).
    """

    classes: np.ndarray
    support_indices: np.ndarray
    support_labels: np.ndarray
    query_indices: np.ndarray
    query_labels: np.ndarray

    @property
    def ways(self) -> int:
        return int(self.classes.shape[0])

    def shots(self) -> np.ndarray:
        """Support images per episode class, shape (ways,)."""
        return np.bincount(self.support_labels, minlength=self.ways)

    def gather(self, images: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(support_images, support_labels, query_images, query_labels) taken from ``images``."""
        return images[self.support_indices], self.support_labels, images[self.query_indices], self.query_labels


def _by_class(labels: np.ndarray) -> dict[int, np.ndarray]:
    order = np.argsort(labels, kind="stable")
    classes, starts = np.unique(labels[order], return_index=True)
    return {int(c): idx for c, idx in zip(classes, np.split(order, starts[1:]))}


def _assemble(rng, members: dict[int, np.ndarray], classes, shots, queries) -> Episode:
    s_idx, s_lab, q_idx, q_lab = [], [], [], []
    for local, (c, k, q) in enumerate(zip(classes, shots, queries)):
        chosen = rng.choice(members[int(c)], size=int(k + q), replace=False)
        s_idx.append(chosen[:k])
        q_idx.append(chosen[k:])
        s_lab.append(np.full(k, local, np.int32))
        q_lab.append(np.full(q, local, np.int32))
    return Episode(
        classes=np.asarray(classes, np.int64),
        support_indices=np.concatenate(s_idx).astype(np.int64),
        support_labels=np.concatenate(s_lab),
        query_indices=np.concatenate(q_idx).astype(np.int64),
        query_labels=np.concatenate(q_lab),
    )


def sample_episode(labels: np.ndarray, rng: np.random.Generator, config: EpisodeConfig = EpisodeConfig()) -> Episode:
    """Samples one episode from a class split (see the module docstring for the algorithm).

    Args:
      labels: int array (N,) of class ids of the split's images.
      rng: Source of randomness (``np.random.default_rng(seed)``).
      config: Sampler settings; fixed K-way N-shot when ``config.fixed``.

    Raises:
      ValueError: fewer classes than ``min_ways`` (or ``ways``) with at least 2 images (or
        ``shots + queries`` for fixed episodes).
    """
    labels = np.asarray(labels)
    if labels.ndim != 1 or labels.size == 0 or not np.issubdtype(labels.dtype, np.integer):
        raise ValueError(f"labels must be a non-empty 1-D int array, got {labels.dtype} {labels.shape}")
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    members = _by_class(labels)
    if config.fixed:
        need = config.shots + config.queries
        eligible = sorted(c for c, m in members.items() if m.size >= need)
        if len(eligible) < config.ways:
            raise ValueError(f"{config.ways}-way {config.shots}-shot {config.queries}-query needs {config.ways} classes with >= {need} images, the split has {len(eligible)}")
        classes = rng.choice(eligible, size=config.ways, replace=False)
        return _assemble(rng, members, classes, [config.shots] * config.ways, [config.queries] * config.ways)

    eligible = sorted(c for c, m in members.items() if m.size >= 2)
    if len(eligible) < config.min_ways:
        raise ValueError(f"the split has {len(eligible)} classes with >= 2 images, min_ways is {config.min_ways}")
    ways = int(rng.integers(config.min_ways, min(config.max_ways, len(eligible)) + 1))
    classes = rng.choice(eligible, size=ways, replace=False)
    counts = np.array([members[int(c)].size for c in classes])
    query = min(config.max_query, int(counts.min() // 2))
    remaining = counts - query
    beta = rng.uniform()
    support_size = int(min(config.max_support_total, np.ceil(beta * np.minimum(config.max_support_per_class, remaining)).sum()))
    support_size = max(support_size, ways)
    weights = np.exp(rng.uniform(np.log(0.5), np.log(2.0), size=ways)) * remaining
    proportions = weights / weights.sum()
    shots = np.floor(proportions * (support_size - ways)).astype(np.int64) + 1
    shots = np.minimum(np.minimum(shots, remaining), config.max_support_per_class)
    return _assemble(rng, members, classes, shots, [query] * ways)


def sample_episodes(labels: np.ndarray, num: int, seed: int, config: EpisodeConfig = EpisodeConfig()) -> list[Episode]:
    """``num`` episodes from one seeded generator (reproducible lists)."""
    if not isinstance(num, int) or num < 1:
        raise ValueError(f"num must be a positive int, got {num!r}")
    rng = np.random.default_rng(seed)
    return [sample_episode(labels, rng, config) for _ in range(num)]
