"""Weight-space interpolation between a start and a fine-tuned model (WiSE-FT, Wortsman et al. 2022, Eq. 1).

theta(alpha) = (1 - alpha) * theta_start + alpha * theta_tuned, tensor by tensor; alpha = 0 gives the
start (here: the ImageNet weights), alpha = 1 the fine-tuned (meta-trained) weights, values in between
trade the fine-tuned gains on the training distribution against the start's robustness elsewhere.
Written as (1 - alpha) a + alpha b (not a + alpha (b - a)) so that both ends are exact in floating point.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def interpolate_weights(start: Sequence[np.ndarray], tuned: Sequence[np.ndarray], alpha: float) -> list[np.ndarray]:
    """theta(alpha) = (1 - alpha) theta_start + alpha theta_tuned per tensor (module docstring).

    Args:
      start, tuned: The same tensors (matching shapes, in the same order) of both models.
      alpha: Interpolation weight in [0, 1].

    Returns:
      New arrays in the dtype of ``start``.

    Raises:
      ValueError: alpha outside [0, 1], or the tensor lists do not match.
    """
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1]; got {alpha!r}")
    if len(start) != len(tuned):
        raise ValueError(f"start has {len(start)} tensors, tuned {len(tuned)}")
    out = []
    for i, (a, b) in enumerate(zip(start, tuned)):
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape:
            raise ValueError(f"tensor {i}: shape {a.shape} in start, {b.shape} in tuned")
        out.append(((1.0 - alpha) * a + alpha * b).astype(a.dtype, copy=False))
    return out
