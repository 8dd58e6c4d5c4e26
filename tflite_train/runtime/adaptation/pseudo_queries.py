"""The pseudo-query set of an adaptation: augmented views drawn once up front, and the batches of each step.

The paper's fine-tuning (appendix C, after P>M>F) trains on pseudo-queries, augmented copies of the
support set. Here every support image gets ``V`` augmented views, drawn once before the first step
(``draw_views``); the steps then cycle through them (``pseudo_query_batches``): pass p over the support
set (one seeded random permutation) reads view p mod V of each image. Drawing the views up front is what
lets the runtime cache the frozen prefix of every view exactly (``tflite_train.runtime.adaptation.cache_plan``):
a step from the cache and a full step see the same pixels.

One ``numpy.random.Generator`` drives both, views first, so the on-device trainer and its TensorFlow
simulation (``tflite_train.meta.simulate``) that call them in this order see the same pseudo-queries.

A ``ViewDraw`` is that draw not yet made: its ``chunks`` are the rows of ``draw_views``' output in
consecutive chunks, each view drawn (the same ``augment`` call on the same generator, in the same order)
only when a chunk first reaches it, so a caller that keeps only something computed from each chunk (the
cached cut) never holds all V * N views (on EfficientNet-Lite0@128, 4 x 25 views are 18.75 MiB).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

__all__ = ["ViewDraw", "draw_views", "pseudo_query_batches"]

Augment = Callable[[np.ndarray, np.random.Generator, Any], np.ndarray]


def _check_views(views: Any) -> None:
    if isinstance(views, bool) or not isinstance(views, int) or views < 1:
        raise ValueError(f"views must be an int >= 1; got {views!r}")


def _each_view(rng: np.random.Generator, images: np.ndarray, views: int, augment: Augment,
               augment_config: Any) -> Iterator[np.ndarray]:
    for _ in range(views):
        yield np.asarray(augment(images, rng, augment_config), np.float32)


def draw_views(rng: np.random.Generator, images: np.ndarray, views: int, augment: Augment,
               augment_config: Any) -> np.ndarray:
    """``views`` augmented copies of ``images`` [N, ...], view-major: f32 [views * N, ...] with view v of
    image i at row v * N + i (each view one ``augment(images, rng, augment_config)`` call, in order)."""
    _check_views(views)
    return np.concatenate(list(_each_view(rng, images, views, augment, augment_config)))


@dataclasses.dataclass(frozen=True)
class ViewDraw:
    """``draw_views(rng, images, views, augment, augment_config)`` not yet drawn (module docstring).

    Raises:
      ValueError: ``views`` is not an int >= 1 (at construction).
    """

    rng: np.random.Generator
    images: np.ndarray
    views: int
    augment: Augment
    augment_config: Any

    def __post_init__(self) -> None:
        _check_views(self.views)

    @property
    def rows(self) -> int:
        """V * N, the rows of the drawn views."""
        return self.views * int(self.images.shape[0])

    def all(self) -> np.ndarray:
        """Draws every view: ``draw_views``' array."""
        return draw_views(self.rng, self.images, self.views, self.augment, self.augment_config)

    def chunks(self, size: int) -> Iterator[np.ndarray]:
        """Rows [i, i + size) of ``all()`` for i = 0, size, 2 size, ... (the last chunk may be shorter), drawing
        each view when the first chunk that holds one of its rows is made: at most the views one chunk spans
        are held at a time. Draw with one of ``all`` or ``chunks``, once: each consumes the generator."""
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"chunk size must be an int >= 1; got {size!r}")
        tail: np.ndarray | None = None  # the last drawn rows not yet handed out (fewer than ``size``)
        for view in _each_view(self.rng, self.images, self.views, self.augment, self.augment_config):
            start = 0
            if tail is not None:  # a chunk across views: the only rows copied
                start = min(size - tail.shape[0], view.shape[0])
                tail = np.concatenate([tail, view[:start]])
                if tail.shape[0] < size:
                    continue
                yield tail
                tail = None
            while view.shape[0] - start >= size:  # chunks within one view are slices of it
                yield view[start:start + size]
                start += size
            if start < view.shape[0]:
                tail = view[start:]
        if tail is not None:
            yield tail


def pseudo_query_batches(rng: np.random.Generator, n: int, batch_size: int, steps: int,
                         views: int = 1) -> list[np.ndarray]:
    """``steps`` batches of rows of ``draw_views``' output: image indices drawn without replacement from
    successive random permutations of 0..n-1; the p-th permutation (from 0) reads view p mod ``views``,
    i.e. row (p mod views) * n + i. With one view the rows are the image indices."""
    order: list[int] = []
    passes = -1
    batches = []
    for _ in range(steps):
        batch = []
        while len(batch) < batch_size:
            if not order:
                order = rng.permutation(n).tolist()
                passes += 1
            batch.append((passes % views) * n + order.pop())
        batches.append(np.asarray(batch, np.int64))
    return batches
