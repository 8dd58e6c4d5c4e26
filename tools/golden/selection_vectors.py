"""Golden vectors that pin the Java selection port (``org.tflitetrain.core.select``) to the Python one.

TensorFlow-free (numpy + the pure-Python sparse package). One file ``selection_<backbone>_128.json``
per backbone holds:

* ``fisher``: seeded synthetic Fisher dicts {layer: Delta vector} over the layers of the last
  ``max(CANDIDATE_BLOCKS)`` blocks, written out explicitly as float64 (``json`` writes ``repr``, the
  shortest text that round-trips, so Java's ``Double.parseDouble`` reads back the same doubles).
  Two are continuous (log-uniform magnitudes), one holds small integers so that equal Fisher values
  and equal layer potentials (ties) occur. Two more (``LIVE_FIRST_TASKS``, see ``_dead_fisher_dicts``)
  are the source tasks of the live-first SparseUpdate cases: per layer a seeded share of the channels
  is 0 on both (dead: no gradient), and other channels are 0 on one of them only (still live).
* ``weights``: not stored; every layer's weights follow :func:`synthetic_weights` (an integer formula
  that Java reproduces bit-for-bit; all values are multiples of 1/1024, so L2 sums are exact).
* ``potentials``: P_l of every dict (Eq. 2) and the mean over the dicts.
* ``top_k``: top-K channel cases (ties -> lower index first).
* ``live_channels``: the channels dead (Delta = 0) on every one of ``LIVE_FIRST_TASKS``, per layer;
  ``l2_live``: ``l2_channels(weights, k, live)`` cases (live channels first, then by norm, ties ->
  lower index; some with fewer live channels than K) next to the plain norm order.
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
ratio cycles through ``CHANNEL_RATIOS``; one loose case per dict uses L2-norm channels. SparseUpdate
runs with every budget on the mean over ``FISHER_DICTS`` (no channel is 0 on all three: the plain norm
order) and on ``LIVE_FIRST_TASKS`` (dead channels: the live ones first), plus fixed layer lists.

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
from tflite_train.sparse.budget import (PAPER_MEMORY_BYTES, REFERENCE_LAST_LAYER_BYTES, Budget, BudgetError,
                                        admitting_budget, last_layer_memory, scaled_memory_budget)
from tflite_train.sparse.channel_selection import l2_channels, live_channels, top_k_channels
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
LIVE_FIRST_TASKS = ("dead0", "dead1")
"""Source tasks of the live-first SparseUpdate cases (``_dead_fisher_dicts``)."""
DEAD_FRACTIONS = (0.0, 0.25, 0.5, 0.75, 0.9, 1.0)
"""Per layer, the share of channels dead on every one of ``LIVE_FIRST_TASKS`` is drawn from these."""
ONE_TASK_ZERO = 0.3
"""Probability that a live channel is 0 on one of ``LIVE_FIRST_TASKS`` (live on one task is live)."""
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


def _dead_fisher_dicts(table: LayerTable, names: list[str], seed: int) -> dict[str, dict[str, list[float]]]:
    """``LIVE_FIRST_TASKS`` -> Fisher dict: per layer a seeded set of channels (a share drawn from
    ``DEAD_FRACTIONS``) is 0 on every task; every other channel is continuous on at least one task and 0
    on the other with probability ``ONE_TASK_ZERO`` each."""
    rng = random.Random(seed)
    out: dict[str, dict[str, list[float]]] = {kind: {} for kind in LIVE_FIRST_TASKS}
    for name in names:
        width = table[name].out_channels
        fraction = rng.choice(DEAD_FRACTIONS)
        dead = set(rng.sample(range(width), round(fraction * width)))
        scale = 10.0 ** rng.uniform(-6.0, -1.0)
        values = {kind: [0.0] * width for kind in LIVE_FIRST_TASKS}
        for o in range(width):
            if o in dead:
                continue
            zero_on = rng.randrange(len(LIVE_FIRST_TASKS)) if rng.random() < ONE_TASK_ZERO else None
            for t, kind in enumerate(LIVE_FIRST_TASKS):
                if t != zero_on:
                    values[kind][o] = scale * (1.0 - rng.random()) ** 3  # in (0, scale]: never 0
        for kind in LIVE_FIRST_TASKS:
            out[kind][name] = values[kind]
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


DEFAULT_BUDGET_SETTINGS = ((0.25, "adam", 1), (1.0, "adam", 1), (0.25, "sgd_momentum", 4), (1 / 8, "sgd", 2))
"""(channel ratio, optimizer, batch size) of the default-budget cases, per candidate set."""


def _default_budget_cases(table: LayerTable) -> list[dict[str, Any]]:
    """``admitting_budget`` of the paper's budget (both bounds raised: ``default_budget``; or one of them given, not
    raised) per candidate set (the last k blocks; every layer) and ``DEFAULT_BUDGET_SETTINGS``: the budget and
    the layer admitted (None: the paper's budget already admits a candidate, or no raise allowed would)."""
    out = []
    sets = [(f"blocks:{k}", tuple(table.last_blocks(k))) for k in CANDIDATE_BLOCKS] + [("all", tuple(range(len(table))))]
    paper = Budget(memory_bytes=scaled_memory_budget(table), compute_fraction=PAPER_COMPUTE_FRACTION)
    for label, indices in sets:
        names = [table.layers[i].name for i in indices]
        for ratio, optimizer, batch in DEFAULT_BUDGET_SETTINGS:
            for raise_memory, raise_compute in ((True, True), (True, False), (False, True)):
                settings = dict(channel_ratio=ratio, optimizer=optimizer, batch_size=batch)
                admission = admitting_budget(paper, table, names, **settings, raise_memory=raise_memory,
                                             raise_compute=raise_compute)
                out.append({C.F_CANDIDATES: names, "set": label, **settings, "raise_memory": raise_memory,
                            "raise_compute": raise_compute, "paper": paper.to_dict(), "budget": admission.budget.to_dict(),
                            "admitted": None if admission.layer is None else table.layers[admission.layer].name})
    return out


def selection_vectors(backbone: str, input_size: int = SELECTION_INPUT_SIZE) -> dict[str, Any]:
    """Selection inputs and the Python outputs for one backbone, as a JSON-ready dict."""
    table = build_layer_table(backbone, input_size)
    seed = int.from_bytes(hashlib.sha256(f"selection/{backbone}".encode()).digest()[:4], "little")
    pool = [table.layers[i].name for i in table.last_blocks(max(CANDIDATE_BLOCKS))]
    fisher_lists = {kind: _fisher_dict(table, pool, "ties" if kind == "ties" else "uniform", seed + i)
                    for i, kind in enumerate(FISHER_DICTS)}
    fisher_lists.update(_dead_fisher_dicts(table, pool, seed + len(FISHER_DICTS)))
    fisher = {kind: {n: np.asarray(v, dtype=np.float64) for n, v in d.items()} for kind, d in fisher_lists.items()}
    weights = {layer.name: synthetic_weights(layer.index, layer.fan_in, layer.out_channels) for layer in table}
    all_tasks = [fisher[k] for k in FISHER_DICTS]
    live_tasks = [fisher[k] for k in LIVE_FIRST_TASKS]
    live = {n: live_channels(live_tasks, n) for n in pool}

    potentials = {kind: fisher_potentials(fisher[kind]) for kind in FISHER_DICTS}
    top_k = []
    rng = random.Random(seed ^ 0x5EED)
    for kind in FISHER_DICTS:
        for name in pool[:: max(1, len(pool) // 4)]:
            values = fisher_lists[kind][name]
            for k in sorted({1, max(1, len(values) // 3), len(values), rng.randint(1, len(values))}):
                top_k.append({"fisher": kind, "layer": name, "k": k, "expected": list(top_k_channels(values, k))})
    l2_live = []
    for name in pool:
        width = table[name].out_channels
        live_count = int(live[name].sum())
        for k in sorted({1, max(1, live_count), min(width, live_count + 1), max(1, width // 2), width,
                         rng.randint(1, width)}):
            l2_live.append({"layer": name, "k": k, "expected": list(l2_channels(weights[name], k, live=live[name])),
                            "plain": list(l2_channels(weights[name], k))})

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
        # SparseUpdate: mean Fisher over the source tasks (fisher_memory, tinytrain and l2 criteria) or a
        # fixed list; source tasks FISHER_DICTS (every channel live) and LIVE_FIRST_TASKS (dead channels:
        # the live channels first, whichever ranking).
        fixed = tuple(reversed(candidates[::2]))
        for task_kinds, tasks, criteria, ratio in (
                (FISHER_DICTS, all_tasks, ("tinytrain", "fisher_memory"), CHANNEL_RATIOS[k_blocks % len(CHANNEL_RATIOS)]),
                (LIVE_FIRST_TASKS, live_tasks, ("tinytrain", "l2"), CHANNEL_RATIOS[0])):
            means = mean_fisher_potentials(tasks)
            for criterion in criteria:
                if criterion == "l2":
                    scores = l2_layer_scores(table, {n: weights[n] for n in candidates})
                else:
                    scores = multi_objective_scores(table, {n: means[n] for n in candidates}, criterion=criterion)
                ranking = rank_layers(table, scores)
                for label, budget, on_empty in _budgets(table, candidates, ranking, ratio):
                    config = SelectionConfig(policy="sparse_update", budget=budget, channel_ratio=ratio,
                                             criterion=criterion, on_empty=on_empty)
                    cases.append({
                        "policy": "sparse_update", "blocks": k_blocks, C.F_CANDIDATES: list(candidates),
                        "fisher_tasks": list(task_kinds), "criterion": criterion, "channel_ratio": ratio,
                        "budget_label": label, "budget": budget.to_dict(), "on_empty": on_empty,
                        "ranking": list(ranking), "scores": {n: scores[n] for n in ranking},
                        **_run(table, config, candidates, fisher["seed0"], tasks, weights),
                    })
            config = SelectionConfig(policy="sparse_update", budget=Budget(memory_bytes=2**20, compute_fraction=0.5),
                                     channel_ratio=ratio, layers=fixed, on_empty="empty")
            cases.append({
                "policy": "sparse_update", "blocks": k_blocks, C.F_CANDIDATES: list(candidates),
                "fixed_layers": list(fixed), "fisher_tasks": list(task_kinds), "criterion": "tinytrain",
                "channel_ratio": ratio, "budget_label": "fixed", "budget": config.budget.to_dict(), "on_empty": "empty",
                "ranking": list(fixed), **_run(table, config, candidates, fisher["seed0"], tasks, weights),
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
        "default_budget": _default_budget_cases(table),
        "weights": {"seed": WEIGHT_SEED, "multiplier": WEIGHT_MULTIPLIER, "layer_multiplier": WEIGHT_LAYER_MULTIPLIER,
                    "modulus": WEIGHT_MODULUS, "scale": WEIGHT_SCALE,
                    "check": {n: float(np.sum(w * w)) for n, w in weights.items() if n in pool}},
        "fisher": fisher_lists,
        "potentials": {**potentials, "mean": mean_fisher_potentials(all_tasks)},
        "channel_count": [{"out_channels": table[n].out_channels, "ratio": r,
                           "count": channel_count(table[n].out_channels, r)} for n in pool for r in CHANNEL_RATIOS],
        "top_k": top_k,
        "live_channels": {"fisher_tasks": list(LIVE_FIRST_TASKS),
                          "dead": {n: np.flatnonzero(~live[n]).tolist() for n in pool}},
        "l2_live": l2_live,
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
    "LIVE_FIRST_TASKS",
    "SELECTION_BACKBONES",
    "mask_string",
    "render_selection_vectors",
    "selection_vectors",
    "synthetic_weights",
]
