"""Each target cut into a validation pool (tuning only) and a test pool (the reported tasks), by a seeded hash.

The cross-domain targets have no validation classes of their own, so the bench makes them: every
learning rate and epoch count is chosen on episodes drawn from the validation pool only, and the
reported episodes come from the test pool only, so no reported query or support image was ever seen
while tuning.

The cut is a keyed hash, so it depends only on (seed, target name, item key), not on the order or
number of other items, and is the same in every run and process:

    u(key) = int(sha256("{seed}/{target}/{key}")[:8 bytes], big-endian) / 2^64  in [0, 1).

* **By class** when the target has at least ``class_split_min_classes`` classes (e.g. 109 glyph
  classes): class c (key ``class/{name}``) is a validation class iff u < ``fraction``. Validation and
  test tasks then share no class at all.
* **By image** otherwise (e.g. Fashion-MNIST's 10 classes): within each class of n images, the images
  are ordered by u(``image/{index}``), index = the image's position in the cached data set, and the
  first k = min(max(2, round(fraction · n)), n − 2) go to validation (k = 0 when n < 4: the class is
  test-only). Every class with n ≥ 4 keeps ≥ 2 images in both pools (an episode needs 2: one support,
  one query).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Sequence

import numpy as np

VALIDATION = "validation"
TEST = "test"
POOLS = (VALIDATION, TEST)


def unit_hash(seed: int, target: str, key: str) -> float:
    """u = int(sha256(f"{seed}/{target}/{key}")[:8], big-endian) / 2^64, uniform in [0, 1)."""
    digest = hashlib.sha256(f"{seed}/{target}/{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


@dataclasses.dataclass(frozen=True, eq=False)
class PoolSplit:
    """Indices (into the target's images, ascending) of the two pools, and how it was cut."""

    by: str
    """"class" or "image"."""
    validation: np.ndarray
    test: np.ndarray

    def indices(self, pool: str) -> np.ndarray:
        if pool not in POOLS:
            raise ValueError(f"pool must be one of {POOLS}; got {pool!r}")
        return self.validation if pool == VALIDATION else self.test

    def summary(self, labels: np.ndarray) -> dict:
        """Images and classes per pool (for the report)."""
        labels = np.asarray(labels)
        return {"by": self.by, **{pool: {"images": int(self.indices(pool).size),
                                         "classes": int(np.unique(labels[self.indices(pool)]).size)}
                                  for pool in POOLS}}


def split_pools(labels: Sequence[int], class_names: Sequence[str], target: str, seed: int, fraction: float,
                class_split_min_classes: int) -> PoolSplit:
    """Cuts one target's images into validation and test pools (module docstring).

    Args:
      labels: Class id of every image (N,), ids index ``class_names``.
      class_names: Name of each class (the class key of the hash).
      target: Target name (part of the hash key: targets are cut independently).
      seed: Seed of the cut.
      fraction: Share of classes (by class) or of each class's images (by image) for validation, in (0, 1).
      class_split_min_classes: Cut by class when the target has at least this many classes.

    Raises:
      ValueError: a fraction outside (0, 1), labels outside ``class_names``, or an empty pool.
    """
    labels = np.asarray(labels)
    if not 0 < fraction < 1:
        raise ValueError(f"validation fraction must be in (0, 1); got {fraction!r}")
    if labels.ndim != 1 or labels.size == 0 or labels.min() < 0 or labels.max() >= len(class_names):
        raise ValueError(f"labels of {target!r} must be a non-empty 1-D array of ids into its {len(class_names)} classes")
    present = np.unique(labels)
    validation = np.zeros(labels.size, bool)
    if present.size >= class_split_min_classes:
        by = "class"
        for c in present:
            if unit_hash(seed, target, f"class/{class_names[c]}") < fraction:
                validation[labels == c] = True
    else:
        by = "image"
        for c in present:
            members = np.flatnonzero(labels == c)
            n = members.size
            k = 0 if n < 4 else min(max(2, round(fraction * n)), n - 2)
            order = sorted(members, key=lambda i: unit_hash(seed, target, f"image/{i}"))
            validation[order[:k]] = True
    split = PoolSplit(by, np.flatnonzero(validation), np.flatnonzero(~validation))
    for pool in POOLS:
        if split.indices(pool).size == 0:
            raise ValueError(f"target {target!r}: the {pool} pool is empty (validation fraction {fraction}, "
                             f"{present.size} classes, cut by {by})")
    return split
