"""Fisher information on activations (TinyTrain, paper Eq. 2) and the Fisher potential.

For one layer with output activations a (after its activation function) and per-sample loss
gradients g = dL_n/da, both shaped (N, D_1, ..., D_m, C) with C output channels last (NHWC, or
NC when there are no spatial axes), the Fisher information of output channel o is

    Delta_o = 1 / (2N) * sum_{n=1..N} ( sum_{d=1..D} a_{n,d,o} * g_{n,d,o} )^2        (Eq. 2)

where d runs over the D = D_1 * ... * D_m feature positions of channel o (D = H x W for a conv).
The Fisher potential of the layer is P = sum_o Delta_o (paper §4, after Eq. 2).

Pure numpy; sums are taken in float64. The exported model's ``fisher`` signature computes the same
Delta in-graph (CONTRACT.md); :func:`fisher_information` is the reference for tests and for the
TensorFlow simulation of a policy.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np


def fisher_information(activations: np.ndarray, gradients: np.ndarray) -> np.ndarray:
    """Per-output-channel Fisher information Delta_o of one layer (Eq. 2).

    Args:
      activations: a, shape (N, ..., C): N samples, any number of feature axes (H, W for NHWC, none
        for NC), C output channels last.
      gradients: g = dL_n/da, same shape as ``activations`` (per-sample gradients).

    Returns:
      float64 array of shape (C,): Delta_o = 1/(2N) sum_n (sum_d a_{n,d,o} g_{n,d,o})^2.

    Raises:
      ValueError: shapes differ, fewer than 2 dimensions, N or C is 0, or non-finite values.
    """
    a = np.asarray(activations, dtype=np.float64)
    g = np.asarray(gradients, dtype=np.float64)
    if a.ndim < 2:
        raise ValueError(f"activations must have shape (N, ..., C) with ndim >= 2; got shape {a.shape}")
    if a.shape != g.shape:
        raise ValueError(f"gradients must have the shape of activations {a.shape}; got {g.shape}")
    if a.shape[0] == 0 or a.shape[-1] == 0:
        raise ValueError(f"activations must have N >= 1 samples and C >= 1 channels; got shape {a.shape}")
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(g))):
        raise ValueError("activations and gradients must be finite (found NaN or inf)")
    n = a.shape[0]
    per_sample = (a * g).reshape(n, -1, a.shape[-1]).sum(axis=1)  # (N, C): sum_d a_nd g_nd
    return (per_sample**2).sum(axis=0) / (2.0 * n)


def fisher_potential(delta: np.ndarray) -> float:
    """Fisher potential of a layer: P = sum_o Delta_o (paper §4).

    Args:
      delta: The layer's Fisher information vector, shape (C,), finite and >= 0.

    Raises:
      ValueError: not a non-empty 1-D vector, or a negative / non-finite entry.
    """
    vector = check_fisher_vector(delta, "delta")
    return float(vector.sum())


def fisher_potentials(fisher: Mapping[str, np.ndarray]) -> dict[str, float]:
    """Fisher potential P_l of every layer in ``fisher`` (layer name -> Delta vector)."""
    if not isinstance(fisher, Mapping):
        raise TypeError(f"fisher must be a mapping of layer name -> Delta vector; got {type(fisher).__name__}")
    return {name: float(check_fisher_vector(delta, f"fisher[{name!r}]").sum()) for name, delta in fisher.items()}


def mean_fisher_potentials(fisher_tasks: Sequence[Mapping[str, np.ndarray]]) -> dict[str, float]:
    """Average Fisher potential over several tasks: P_bar_l = 1/T sum_t P_{t,l}.

    Used by the static SparseUpdate baseline, decided once offline on meta-training tasks.
    Every task must give a Fisher vector for the same set of layers.

    Raises:
      ValueError: no tasks, or tasks that name different layers.
    """
    if isinstance(fisher_tasks, Mapping) or not isinstance(fisher_tasks, (list, tuple)) or not fisher_tasks:
        raise ValueError(f"fisher_tasks must be a non-empty list of Fisher dicts; got {fisher_tasks!r:.80}")
    potentials = [fisher_potentials(task) for task in fisher_tasks]
    names = set(potentials[0])
    for t, task in enumerate(potentials[1:], start=1):
        if set(task) != names:
            raise ValueError(
                f"fisher_tasks[{t}] names layers {sorted(task)} but fisher_tasks[0] names {sorted(names)}"
            )
    return {name: math.fsum(task[name] for task in potentials) / len(potentials) for name in potentials[0]}


def check_fisher_vector(delta: np.ndarray, argument: str = "delta") -> np.ndarray:
    """Validates a Fisher vector (1-D, non-empty, finite, >= 0) and returns it as float64."""
    vector = np.asarray(delta, dtype=np.float64)
    if vector.ndim != 1 or vector.size == 0:
        raise ValueError(f"{argument} must be a non-empty 1-D vector; got shape {vector.shape}")
    if not np.all(np.isfinite(vector)):
        raise ValueError(f"{argument} must be finite; got NaN or inf")
    if np.any(vector < 0):
        raise ValueError(f"{argument} must be >= 0 (a sum of squares); got min {vector.min()!r}")
    return vector
