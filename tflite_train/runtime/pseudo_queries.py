"""The pseudo-query set of an adaptation: augmented views drawn once up front, and the batches of each step.

The paper's fine-tuning (appendix C, after P>M>F) trains on pseudo-queries, augmented copies of the
support set. Here every support image gets ``V`` augmented views, drawn once before the first step
(``draw_views``); the steps then cycle through them (``pseudo_query_batches``): pass p over the support
set (one seeded random permutation) reads view p mod V of each image. Drawing the views up front is what
lets the runtime cache the frozen prefix of every view exactly (``tflite_train.runtime.activation_cache``):
a step from the cache and a full step see the same pixels.

One ``numpy.random.Generator`` drives both, views first, so the on-device trainer and its TensorFlow
simulation (``tflite_train.meta.simulate``) that call them in this order see the same pseudo-queries.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["draw_views", "pseudo_query_batches"]

Augment = Callable[[np.ndarray, np.random.Generator, Any], np.ndarray]


def draw_views(rng: np.random.Generator, images: np.ndarray, views: int, augment: Augment,
               augment_config: Any) -> np.ndarray:
    """``views`` augmented copies of ``images`` [N, ...], view-major: f32 [views * N, ...] with view v of
    image i at row v * N + i (each view one ``augment(images, rng, augment_config)`` call, in order)."""
    if isinstance(views, bool) or not isinstance(views, int) or views < 1:
        raise ValueError(f"views must be an int >= 1; got {views!r}")
    return np.concatenate([np.asarray(augment(images, rng, augment_config), np.float32) for _ in range(views)])


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
