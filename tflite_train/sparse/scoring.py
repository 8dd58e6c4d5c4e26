"""Layer scores for the dynamic layer selection: TinyTrain's multi-objective metric (Eq. 3), its
Table 3 ablations, and the L2-norm layer ranking.

With P_i the Fisher potential of layer i (Eq. 2), |W_i| its parameter count (conv weights
k^2 * C_in / g * C_out, biases excluded, as ``LayerCost.weights``) and M_i its forward MACs:

    tinytrain       s_i = P_i / ( (|W_i| / max_l |W_l|) * (M_i / max_l M_l) )      (Eq. 3)
    fisher          s_i = P_i                                      (Table 3, "Fisher only")
    fisher_memory   s_i = P_i / (|W_i| / max_l |W_l|)             (Table 3, "Fisher / Memory")
    fisher_compute  s_i = P_i / (M_i / max_l M_l)                 (Table 3, "Fisher / Compute")
    l2              s_i = ||W_i||_2 (Frobenius norm of the weights) (Table 3, "L2 Norm")

**Normalisation set.** The maxima run over *all layers of the layer table* (the paper's L, "all
layers of the model"), not only over the candidate layers that have a Fisher vector. The maxima
are one common positive factor for every layer, so the *ranking* does not depend on this choice;
only the absolute score values do (and they are then comparable across candidate sets).

**Ranking.** :func:`rank_layers` sorts by score, highest first; equal scores (exact float
equality) are broken by the *deeper* layer first (larger table index), because a deeper layer
needs back-propagation through fewer layers and so costs less compute and memory.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from tflite_train.sparse.cost_model import layer_cost
from tflite_train.sparse.fisher import fisher_potentials
from tflite_train.sparse.layer_table import LayerTable

FISHER_CRITERIA = ("tinytrain", "fisher", "fisher_memory", "fisher_compute")
"""Criteria computed from Fisher potentials (Eq. 3 and its Table 3 ablations)."""
CRITERIA = FISHER_CRITERIA + ("l2",)
"""All layer-ranking criteria; ``"l2"`` needs the layers' weights instead of Fisher vectors."""


def check_criterion(criterion: str) -> str:
    """Returns ``criterion`` if it is one of ``CRITERIA``; else ValueError naming the choices."""
    if criterion not in CRITERIA:
        raise ValueError(f"criterion must be one of {CRITERIA}; got {criterion!r}")
    return criterion


def multi_objective_scores(
    table: LayerTable,
    potentials: Mapping[str, float],
    *,
    criterion: str = "tinytrain",
) -> dict[str, float]:
    """Scores s_i of the layers in ``potentials`` (Eq. 3, or a Table 3 ablation).

    Args:
      table: The model's layer table; |W| and M come from the cost model, and their maxima are
        taken over all of its layers.
      potentials: Layer name -> Fisher potential P_i (finite, >= 0), e.g. from ``fisher_potentials``.
      criterion: One of ``FISHER_CRITERIA``.

    Returns:
      Layer name -> score, in the order of ``potentials``.

    Raises:
      ValueError: unknown criterion or layer, or a negative / non-finite potential.
    """
    if criterion not in FISHER_CRITERIA:
        raise ValueError(f"criterion must be one of {FISHER_CRITERIA}; got {criterion!r}")
    costs = [layer_cost(layer) for layer in table]
    max_weights = max(c.weights for c in costs)
    max_macs = max(c.forward_macs for c in costs)
    scores = {}
    for name, potential in potentials.items():
        if isinstance(potential, bool) or not isinstance(potential, (int, float, np.floating, np.integer)):
            raise ValueError(f"potentials[{name!r}] must be a number; got {potential!r}")
        potential = float(potential)
        if not math.isfinite(potential) or potential < 0:
            raise ValueError(f"potentials[{name!r}] must be finite and >= 0; got {potential!r}")
        cost = costs[table.index_of(name)]
        memory = cost.weights / max_weights
        compute = cost.forward_macs / max_macs
        divisor = {
            "tinytrain": memory * compute,
            "fisher": 1.0,
            "fisher_memory": memory,
            "fisher_compute": compute,
        }[criterion]
        scores[name] = potential / divisor
    return scores


def fisher_scores(
    table: LayerTable,
    fisher: Mapping[str, np.ndarray],
    *,
    criterion: str = "tinytrain",
) -> dict[str, float]:
    """Scores from per-layer Fisher vectors: ``multi_objective_scores(table, fisher_potentials(fisher))``.

    Also checks that each Delta vector has the layer's C_out entries.
    """
    check_fisher_shapes(table, fisher)
    return multi_objective_scores(table, fisher_potentials(fisher), criterion=criterion)


def l2_layer_scores(table: LayerTable, weights: Mapping[str, np.ndarray]) -> dict[str, float]:
    """L2-norm layer ranking (Table 3): s_i = ||W_i||_2 = sqrt(sum of squared weights of layer i).

    Args:
      table: The layer table (validates names and weight counts).
      weights: Layer name -> weight array of that layer (any layout; biases excluded). Its size
        must equal the layer's |W| = fan_in * C_out.
    """
    scores = {}
    for name, array in weights.items():
        w = check_layer_weights(table, name, array)
        scores[name] = float(np.sqrt(np.sum(w * w)))
    return scores


def rank_layers(table: LayerTable, scores: Mapping[str, float]) -> tuple[str, ...]:
    """Layer names by score, highest first; ties -> deeper layer (larger index) first."""
    for name, score in scores.items():
        if not isinstance(score, (int, float, np.floating, np.integer)) or not math.isfinite(float(score)):
            raise ValueError(f"scores[{name!r}] must be a finite number; got {score!r}")
    return tuple(sorted(scores, key=lambda name: (-float(scores[name]), -table.index_of(name))))


def check_fisher_shapes(table: LayerTable, fisher: Mapping[str, np.ndarray]) -> None:
    """Each Fisher vector must name a layer of ``table`` and have C_out entries."""
    if not isinstance(fisher, Mapping):
        raise TypeError(f"fisher must be a mapping of layer name -> Delta vector; got {type(fisher).__name__}")
    for name, delta in fisher.items():
        expected = table[name].out_channels
        shape = np.shape(delta)
        if shape != (expected,):
            raise ValueError(f"fisher[{name!r}] must have shape ({expected},) (C_out); got {shape}")


def check_layer_weights(table: LayerTable, name: str, array: np.ndarray) -> np.ndarray:
    """Validates one layer's weight array (size fan_in * C_out, finite) and returns it as float64."""
    layer = table[name]
    w = np.asarray(array, dtype=np.float64)
    expected = layer.fan_in * layer.out_channels
    if w.size != expected:
        raise ValueError(
            f"weights[{name!r}] must hold fan_in * C_out = {expected} values; got shape {w.shape}"
        )
    if not np.all(np.isfinite(w)):
        raise ValueError(f"weights[{name!r}] must be finite; got NaN or inf")
    return w
