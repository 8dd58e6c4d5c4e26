"""Golden vectors that pin the Java selection port (``org.tflitetrain.core.select``) to the Python one.

TensorFlow-free (numpy + the pure-Python sparse package). One file ``selection_<backbone>_128.json``
per backbone holds:

* ``fisher``: seeded synthetic Fisher dicts {layer: Delta vector} over the layers of the last
  ``max(CANDIDATE_BLOCKS)`` blocks, written out explicitly as float64 (``json`` writes ``repr``, the
  shortest text that round-trips, so Java's ``Double.parseDouble`` reads back the same doubles).
  Two are continuous (log-uniform magnitudes), one holds small integers so that equal Fisher values
  and equal layer potentials (ties) occur.
* ``weights``: not stored; every layer's weights follow :func:`synthetic_weights` (an integer formula
  that Java reproduces bit-for-bit; all values are multiples of 1/1024, so L2 sums are exact).
* ``potentials``: P_l of every dict (Eq. 2) and the mean over the dicts.
* ``top_k``: top-K channel cases (ties -> lower index first).
* ``cases``: policy runs with their inputs (policy, candidates = layers of the last k blocks,
  budget, criterion, channel ratio, channel method, on_empty, fixed layers / Fisher tasks) and the
  Python outputs: layer ranking and scores (budgeted policies), selected layers (forward order),
  channels, the ``set_selection`` mask (as a '0'/'1' string's sha256 plus its count of ones) and the
  :class:`~tflite_train.sparse.cost_model.BackwardCost`; or ``error: "BudgetError"``.

Budgets per (Fisher dict, k, ratio): loose (2x the FullTrain memory, 100 % of the forward
MACs); tight (1.5x the cheapest single layer's memory, 2x its MACs); paper (1 MiB, 15 % of the
forward MACs); exact (memory and MACs exactly the cost of a known selection, the first two layers of
the ranking, so the inclusive bounds are exercised) and exact_minus_one (one byte less); nothing
(1 byte) with ``on_empty`` raise and empty. Per Fisher dict the criteria are ``DICT_CRITERIA``; the
ratio cycles through ``CHANNEL_RATIOS``; one loose case per dict uses L2-norm channels.

Random channels (numpy PCG64) are deliberately not covered: the Java port has no random ablation.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Mapping
from typing import Any

import numpy as np

from tflite_train import contract as C
from tflite_train.architectures import build_layer_table
from tflite_train.sparse.budget import (PAPER_MEMORY_BYTES, REFERENCE_LAST_LAYER_BYTES, Budget, BudgetError, last_layer_memory,
                                        scaled_memory_budget)
from tflite_train.sparse.channel_selection import top_k_channels
from tflite_train.sparse.cost_model import (
    BackwardCost,
    backward_cost,
    channel_count,
    full_backward_macs,
    total_forward_macs,
)
from tflite_train.sparse.fisher import fisher_potentials, mean_fisher_potentials
from tflite_train.sparse.layer_selection import layer_channel_counts
from tflite_train.sparse.layer_table import LayerTable
from tflite_train.sparse.policies import SelectionConfig, select
from tflite_train.sparse.scoring import (
    FISHER_CRITERIA,
    l2_layer_scores,
    multi_objective_scores,
    rank_layers,
)

SELECTION_BACKBONES = ("mcunet", "mbv2", "proxyless", "tiny")
SELECTION_INPUT_SIZE = 128
CANDIDATE_BLOCKS = (1, 2, 4)
"""Candidates = layers of the last k blocks (``LayerTable.last_blocks``) for each k."""
PAPER_COMPUTE_FRACTION = 0.15
"""The paper's example B_compute: 15 % of the full backward pass (pinned in both languages)."""
CHANNEL_RATIOS = (1 / 2, 1 / 4, 1 / 8)
FISHER_DICTS = ("seed0", "seed1", "ties")
DICT_CRITERIA = {"seed0": FISHER_CRITERIA + ("l2",), "seed1": ("tinytrain",), "ties": ("tinytrain", "fisher")}
"""Criteria run per Fisher dict (all five on ``seed0``; ties of equal potentials need ``fisher``)."""
WEIGHT_SEED = 7
WEIGHT_MULTIPLIER = 2654435761
WEIGHT_LAYER_MULTIPLIER = 40503
WEIGHT_MODULUS = 2001
WEIGHT_SCALE = 1024.0


def synthetic_weights(layer_index: int, fan_in: int, out_channels: int, seed: int = WEIGHT_SEED) -> np.ndarray:
    """Deterministic weights of one layer, shape (fan_in, C_out) (output channel last).

    With j the flat (row-major) position:
    w_j = (((j * 2654435761 + layer_index * 40503 + seed * 97) mod 2001) - 1000) / 1024.
    """
    j = np.arange(fan_in * out_channels, dtype=np.int64)
    raw = (j * WEIGHT_MULTIPLIER + layer_index * WEIGHT_LAYER_MULTIPLIER + seed * 97) % WEIGHT_MODULUS
    return ((raw - 1000).astype(np.float64) / WEIGHT_SCALE).reshape(fan_in, out_channels)


def _fisher_dict(table: LayerTable, names: list[str], kind: str, seed: int) -> dict[str, list[float]]:
    rng = random.Random(seed)
    out = {}
    for name in names:
        width = table[name].out_channels
        if kind == "ties":
            out[name] = [float(rng.randint(0, 3)) for _ in range(width)]
        else:
            scale = 10.0 ** rng.uniform(-6.0, -1.0)
            out[name] = [scale * rng.random() ** 3 for _ in range(width)]
    return out


def _cost_dict(cost: BackwardCost) -> dict[str, Any]:
    return {
        "updated_weight_bytes": cost.updated_weight_bytes, "optimizer_bytes": cost.optimizer_bytes,
        "activation_bytes": cost.activation_bytes, "total_bytes": cost.total_bytes,
        "input_grad_macs": cost.input_grad_macs, "weight_grad_macs": cost.weight_grad_macs,
        "backward_macs": cost.backward_macs, "deepest_layer": cost.deepest_layer,
    }


def mask_string(mask: np.ndarray) -> str:
    """The ``set_selection`` mask as a string of '0'/'1' characters (hashed into the vectors)."""
    return "".join("1" if v == 1.0 else "0" for v in mask)


def _run(table: LayerTable, config: SelectionConfig, candidates: tuple[str, ...], fisher: Mapping[str, np.ndarray],
         tasks: list[Mapping[str, np.ndarray]], weights: Mapping[str, np.ndarray]) -> dict[str, Any]:
    try:
        selection = select(table, config, candidates=candidates, fisher=fisher, fisher_tasks=tasks, weights=weights)
    except BudgetError:
        return {"error": "BudgetError"}
    mask = mask_string(selection.channel_mask(table, candidates))
    return {
        "layers": list(selection.layers),
        "channels": {n: list(selection.channels[n]) for n in selection.layers},
        "mask_sha256": hashlib.sha256(mask.encode()).hexdigest(),
        "mask_ones": mask.count("1"),
        "cost": _cost_dict(selection.cost(table, optimizer=config.optimizer, batch_size=config.batch_size,
                                          gradient_buffer=config.gradient_buffer)),
    }


def _budgets(table: LayerTable, candidates: tuple[str, ...], ranking: tuple[str, ...], ratio: float
             ) -> list[tuple[str, Budget, str]]:
    counts = layer_channel_counts(table, candidates, ratio)
    full = backward_cost(table, counts)
    singles = [backward_cost(table, {n: counts[n]}) for n in candidates]
    cheapest_bytes = min(c.total_bytes for c in singles)
    cheapest_macs = min(c.backward_macs for c in singles)
    tight = Budget(memory_bytes=int(cheapest_bytes * 1.5), compute_macs=cheapest_macs * 2)
    # A known selection: the first two layers of the ranking (when there are two).
    known = {n: counts[n] for n in ranking[:2]}
    exact = backward_cost(table, known)
    return [
        ("loose", Budget(memory_bytes=full.total_bytes * 2, compute_fraction=1.0), "raise"),
        ("tight", tight, "empty"),
        ("paper", Budget(memory_bytes=2**20, compute_fraction=PAPER_COMPUTE_FRACTION), "empty"),
        ("exact", Budget(memory_bytes=exact.total_bytes, compute_macs=exact.backward_macs), "raise"),
        ("exact_minus_one", Budget(memory_bytes=exact.total_bytes - 1, compute_macs=exact.backward_macs), "empty"),
        ("nothing_raise", Budget(memory_bytes=1), "raise"),
        ("nothing_empty", Budget(memory_bytes=1, compute_macs=0), "empty"),
    ]


def selection_vectors(backbone: str, input_size: int = SELECTION_INPUT_SIZE) -> dict[str, Any]:
    """Selection inputs and the Python outputs for one backbone, as a JSON-ready dict."""
    table = build_layer_table(backbone, input_size)
    seed = int.from_bytes(hashlib.sha256(f"selection/{backbone}".encode()).digest()[:4], "little")
    pool = [table.layers[i].name for i in table.last_blocks(max(CANDIDATE_BLOCKS))]
    fisher_lists = {kind: _fisher_dict(table, pool, "ties" if kind == "ties" else "uniform", seed + i)
                    for i, kind in enumerate(FISHER_DICTS)}
    fisher = {kind: {n: np.asarray(v, dtype=np.float64) for n, v in d.items()} for kind, d in fisher_lists.items()}
    weights = {layer.name: synthetic_weights(layer.index, layer.fan_in, layer.out_channels) for layer in table}
    all_tasks = [fisher[k] for k in FISHER_DICTS]

    potentials = {kind: fisher_potentials(d) for kind, d in fisher.items()}
    top_k = []
    rng = random.Random(seed ^ 0x5EED)
    for kind in FISHER_DICTS:
        for name in pool[:: max(1, len(pool) // 4)]:
            values = fisher_lists[kind][name]
            for k in sorted({1, max(1, len(values) // 3), len(values), rng.randint(1, len(values))}):
                top_k.append({"fisher": kind, "layer": name, "k": k, "expected": list(top_k_channels(values, k))})

    cases: list[dict[str, Any]] = []
    for k_blocks in CANDIDATE_BLOCKS:
        candidates = tuple(table.layers[i].name for i in table.last_blocks(k_blocks))
        for policy in ("none", "last_layer", "full_train"):
            config = SelectionConfig(policy=policy)
            cases.append({"policy": policy, "blocks": k_blocks, C.F_CANDIDATES: list(candidates),
                          **_run(table, config, candidates, fisher["seed0"], all_tasks, weights)})
        for f_index, kind in enumerate(FISHER_DICTS):
            for c_index, criterion in enumerate(DICT_CRITERIA[kind]):
                ratio = CHANNEL_RATIOS[(f_index + c_index + k_blocks) % len(CHANNEL_RATIOS)]
                sub = {n: fisher[kind][n] for n in candidates}
                if criterion == "l2":
                    scores = l2_layer_scores(table, {n: weights[n] for n in candidates})
                else:
                    scores = multi_objective_scores(table, {n: potentials[kind][n] for n in candidates},
                                                    criterion=criterion)
                ranking = rank_layers(table, scores)
                for label, budget, on_empty in _budgets(table, candidates, ranking, ratio):
                    method = "l2" if (label == "loose" and criterion == "fisher") else "fisher"
                    config = SelectionConfig(policy="tinytrain", budget=budget, channel_ratio=ratio, criterion=criterion,
                                             channel_method=method, on_empty=on_empty)
                    cases.append({
                        "policy": "tinytrain", "blocks": k_blocks, C.F_CANDIDATES: list(candidates), "fisher": kind,
                        "criterion": criterion, "channel_ratio": ratio, "channel_method": method,
                        "budget_label": label, "budget": budget.to_dict(), "on_empty": on_empty,
                        "ranking": list(ranking), "scores": {n: scores[n] for n in ranking},
                        **_run(table, config, candidates, sub, all_tasks, weights),
                    })
        # SparseUpdate: mean Fisher over all dicts (fisher_memory and tinytrain criteria) or a fixed list.
        ratio = CHANNEL_RATIOS[k_blocks % len(CHANNEL_RATIOS)]
        means = mean_fisher_potentials(all_tasks)
        for criterion in ("tinytrain", "fisher_memory"):
            scores = multi_objective_scores(table, {n: means[n] for n in candidates}, criterion=criterion)
            ranking = rank_layers(table, scores)
            for label, budget, on_empty in _budgets(table, candidates, ranking, ratio):
                config = SelectionConfig(policy="sparse_update", budget=budget, channel_ratio=ratio,
                                         criterion=criterion, on_empty=on_empty)
                cases.append({
                    "policy": "sparse_update", "blocks": k_blocks, C.F_CANDIDATES: list(candidates),
                    "fisher_tasks": list(FISHER_DICTS), "criterion": criterion, "channel_ratio": ratio,
                    "budget_label": label, "budget": budget.to_dict(), "on_empty": on_empty,
                    "ranking": list(ranking), "scores": {n: scores[n] for n in ranking},
                    **_run(table, config, candidates, fisher["seed0"], all_tasks, weights),
                })
        fixed = tuple(reversed(candidates[::2]))
        config = SelectionConfig(policy="sparse_update", budget=Budget(memory_bytes=2**20, compute_fraction=0.5),
                                 channel_ratio=ratio, layers=fixed, on_empty="empty")
        cases.append({
            "policy": "sparse_update", "blocks": k_blocks, C.F_CANDIDATES: list(candidates), "fixed_layers": list(fixed),
            "criterion": "tinytrain", "channel_ratio": ratio, "budget_label": "fixed",
            "budget": config.budget.to_dict(), "on_empty": "empty", "ranking": list(fixed),
            **_run(table, config, candidates, fisher["seed0"], all_tasks, weights),
        })

    return {
        "generator": "tflite-train golden",
        "backbone": backbone,
        "input_size": [input_size, input_size],
        "layers": table.to_list(),
        "total_forward_macs": total_forward_macs(table),
        "compute_budget": {"compute_fraction": PAPER_COMPUTE_FRACTION, "full_backward_macs": full_backward_macs(table),
                           "compute_limit_macs": Budget(compute_fraction=PAPER_COMPUTE_FRACTION).compute_limit(table)},
        "memory_budget": {"reference_bytes": PAPER_MEMORY_BYTES, "reference_last_layer_bytes": REFERENCE_LAST_LAYER_BYTES,
                          "last_layer_bytes": last_layer_memory(table), "memory_limit_bytes": scaled_memory_budget(table)},
        "weights": {"seed": WEIGHT_SEED, "multiplier": WEIGHT_MULTIPLIER, "layer_multiplier": WEIGHT_LAYER_MULTIPLIER,
                    "modulus": WEIGHT_MODULUS, "scale": WEIGHT_SCALE,
                    "check": {n: float(np.sum(w * w)) for n, w in weights.items() if n in pool}},
        "fisher": fisher_lists,
        "potentials": {**potentials, "mean": mean_fisher_potentials(all_tasks)},
        "channel_count": [{"out_channels": table[n].out_channels, "ratio": r,
                           "count": channel_count(table[n].out_channels, r)} for n in pool for r in CHANNEL_RATIOS],
        "top_k": top_k,
        "cases": cases,
    }


def render_selection_vectors(backbones: tuple[str, ...] = SELECTION_BACKBONES) -> dict[str, str]:
    """File name -> compact JSON text of every selection golden file (pure; no I/O)."""
    return {
        f"selection_{b}_{SELECTION_INPUT_SIZE}.json":
            json.dumps(selection_vectors(b), sort_keys=True, separators=(",", ":"), allow_nan=False) + "\n"
        for b in backbones
    }


__all__ = [
    "CANDIDATE_BLOCKS",
    "CHANNEL_RATIOS",
    "DICT_CRITERIA",
    "SELECTION_BACKBONES",
    "mask_string",
    "render_selection_vectors",
    "selection_vectors",
    "synthetic_weights",
]
