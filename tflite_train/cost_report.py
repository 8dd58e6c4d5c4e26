"""Text reports over the layer table and the cost model (no TensorFlow needed).

``backbone_summary`` prints a backbone's layer table with per-layer costs and totals;
``backward_report`` puts the cost model's backward-pass figures for FullTrain, LastLayer and two
sparse selections beside the paper's Tables 2 and 6.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np

from tflite_train import paper_figures
from tflite_train.architectures import build_layer_table, get_config
from tflite_train.sparse.cost_model import (
    BackwardCost,
    backward_cost,
    channel_count,
    layer_cost,
    total_forward_macs,
    total_weights,
    unfused_activation_bytes,
)
from tflite_train.sparse.layer_table import LayerTable
from tflite_train.sparse.policies import MIT_SPARSE_UPDATE_LAYERS

MIB = 2**20

# A TinyTrain-like selection: a few layers of the last three blocks, 1/4 of their channels.
MCUNET_TINYTRAIN_LIKE_LAYERS = ("b11_expand", "b12_expand", "b13_expand", "b13_depthwise")


@dataclasses.dataclass(frozen=True)
class ReportRow:
    """One method's cost-model figures beside the paper's."""

    method: str
    description: str
    optimizer: str
    batch_size: int
    cost: BackwardCost
    paper: paper_figures.BackwardFigures | None


def reference_selections(table: LayerTable) -> dict[str, tuple[str, Mapping[str, int], int]]:
    """Method -> (description, channels per layer, batch size) for MCUNet's report rows."""
    full = {layer.name: layer.out_channels for layer in table}
    last = table.layers[-1]
    sparse = {n: channel_count(table[n].out_channels, 0.5) for n in MIT_SPARSE_UPDATE_LAYERS["mcunet"]}
    tiny = {n: channel_count(table[n].out_channels, 0.25) for n in MCUNET_TINYTRAIN_LIKE_LAYERS}
    return {
        "FullTrain": ("all 42 convs, all channels", full, 100),
        "LastLayer": (f"{last.name}, all channels", {last.name: last.out_channels}, 1),
        "SparseUpdate": ("MIT's 6 expand convs, 1/2 of channels", sparse, 1),
        "TinyTrain": ("b11-b13 expand + b13 depthwise, 1/4", tiny, 1),
    }


def backward_report(input_size: int = 128) -> list[ReportRow]:
    """MCUNet backward-pass rows for Adam (Table 2 / 6) and SGD (Table 6)."""
    table = build_layer_table("mcunet", input_size)
    rows = []
    for optimizer, paper in (("adam", paper_figures.MCUNET_BACKWARD_ADAM), ("sgd", paper_figures.MCUNET_BACKWARD_SGD)):
        for method, (description, channels, batch) in reference_selections(table).items():
            if optimizer == "sgd" and method not in paper:
                continue
            cost = backward_cost(table, channels, optimizer=optimizer, batch_size=batch)
            rows.append(ReportRow(method, description, optimizer, batch, cost, paper.get(method)))
    return rows


def format_backward_report(rows: list[ReportRow], input_size: int = 128) -> str:
    """Renders ``backward_report`` rows as a fixed-width table (MiB as in the paper)."""

    def mib(value: float | None) -> str:
        return "-" if value is None else f"{value:.2f}"

    header = (
        f"MCUNet @ {input_size}x{input_size}: backward pass, cost model vs paper (MB = MiB; ours / paper)\n"
        f"{'method':<13}{'opt':<5}{'batch':>5}  {'weights':>11}  {'optimizer':>11}  {'activation':>13}  "
        f"{'total':>15}  {'MACs (M)':>13}  selection"
    )
    lines = [header]
    for row in rows:
        c, p = row.cost, row.paper
        lines.append(
            f"{row.method:<13}{row.optimizer:<5}{row.batch_size:>5}  "
            f"{c.updated_weight_bytes / MIB:>5.2f}/{mib(p.weights_mib if p else None):>5}  "
            f"{c.optimizer_bytes / MIB:>5.2f}/{mib(p.optimizer_mib if p else None):>5}  "
            f"{c.activation_bytes / MIB:>6.2f}/{mib(p.activation_mib if p else None):>6}  "
            f"{c.total_bytes / MIB:>7.2f}/{mib(p.total_mib if p else None):>7}  "
            f"{c.backward_macs / 1e6:>6.2f}/{(p.macs / 1e6 if p else float('nan')):>6.2f}  {row.description}"
        )
    table = build_layer_table("mcunet", input_size)
    full = next(r for r in rows if r.method == "FullTrain")
    unfused = unfused_activation_bytes(table, full.batch_size)
    lines.append(
        f"FullTrain with an unfused-graph activation accounting (conv inputs, BN inputs and ReLU6 "
        f"outputs kept as floats): {(unfused + full.cost.updated_weight_bytes + full.cost.optimizer_bytes) / MIB:.1f} MB"
    )
    return "\n".join(lines)


def backbone_summary(backbone: str, input_size: int = 128, in_channels: int = 3, *, layers: bool = True) -> str:
    """Layer table with per-layer costs, then totals beside the paper's Table 5 where it has them."""
    table = build_layer_table(backbone, input_size, in_channels)
    config = get_config(backbone)
    lines = [f"{backbone} @ {input_size}x{input_size}x{in_channels}: feature dim {config.feature_dim}"]
    if layers:
        lines.append(
            f"{'idx':>4} {'name':<15}{'role':<10}{'k':>2}{'s':>2} {'in->out':>10} {'in hw':>8} "
            f"{'params':>8} {'MACs':>10} {'act in':>8} {'act out':>8}"
        )
        for layer in table:
            c = layer_cost(layer)
            lines.append(
                f"{layer.index:>4} {layer.name:<15}{layer.role:<10}{layer.kernel:>2}{layer.stride:>2} "
                f"{f'{layer.in_channels}->{layer.out_channels}':>10} {f'{layer.in_hw[0]}x{layer.in_hw[1]}':>8} "
                f"{c.params:>8} {c.forward_macs:>10} {c.in_activation:>8} {c.out_activation:>8}"
            )
    weights, macs = total_weights(table), total_forward_macs(table)
    total = f"totals: {len(table)} layers, {table.num_blocks} blocks, {weights / 1e6:.3f}M conv weights, {macs / 1e6:.2f}M MACs"
    paper = paper_figures.ARCHITECTURES.get(backbone)
    if paper and input_size == 128 and in_channels == 3:
        total += (
            f"  (paper: {paper.layers} layers, {paper.blocks} blocks, {paper.params / 1e6:.3f}M, "
            f"{paper.macs / 1e6:.2f}M)"
        )
    lines.append(total)
    full = backward_cost(table, {layer.name: layer.out_channels for layer in table})
    last = table.layers[-1]
    lastlayer = backward_cost(table, {last.name: last.out_channels})
    lines.append(
        f"backward (Adam, batch 1): full {full.total_bytes / MIB:.2f} MB / {full.backward_macs / 1e6:.2f}M MACs; "
        f"last layer {lastlayer.total_bytes / MIB:.2f} MB / {lastlayer.backward_macs / 1e6:.2f}M MACs"
    )
    return "\n".join(lines)


def synthetic_fisher(table: LayerTable, seed: int = 0) -> dict[str, np.ndarray]:
    """A seeded stand-in for a task's Fisher vectors: Delta_{l,o} ~ Exp(1) i.i.d. for every layer.

    Used where no measured Fisher exists for a backbone (no trained weights); with i.i.d. channels
    the potential P_l = sum_o Delta_{l,o} (Eq. 2) is about C_out, so Eq. 3's ranking is driven by the
    layer's size and its memory/compute costs.
    """
    rng = np.random.default_rng(seed)
    return {layer.name: rng.exponential(1.0, layer.out_channels).astype(np.float32) for layer in table}


def selection_report(
    backbone: str,
    input_size: int = 128,
    *,
    optimizer: str = "adam",
    memory_bytes: float = float(MIB),
    compute_fraction: float = 0.15,
    compute_macs: float | None = None,
    tinytrain_ratio: float = 0.25,
    sparse_update_ratio: float = 0.5,
    full_train_batch: int = 100,
    fisher: Mapping[str, np.ndarray] | None = None,
    seed: int = 0,
) -> list[ReportRow]:
    """Backward-pass rows of any backbone, the sparse selections made by the real policies.

    FullTrain: every conv, all channels, batch ``full_train_batch``. LastLayer: the final conv.
    SparseUpdate (static): MIT's MCUNet layers when ``backbone == "mcunet"``; otherwise
    ``sparse_update_policy`` ranking by the plain Fisher potential averaged over 8 synthetic tasks
    (``SPARSE_UPDATE_CRITERION``),
    under the budget. TinyTrain: ``tinytrain_policy`` (Eq. 3, greedy under B_mem = ``memory_bytes``,
    B_compute = ``compute_fraction`` of the full backward pass (``Budget``), or ``compute_macs`` MACs) on
    ``fisher`` (measured) or
    ``synthetic_fisher``. Sparse methods use batch 1 (paper).
    """
    from tflite_train.sparse.budget import Budget
    from tflite_train.sparse.policies import (
        SPARSE_UPDATE_CRITERION,
        SelectionConfig,
        sparse_update_policy,
        tinytrain_policy,
    )

    table = build_layer_table(backbone, input_size)
    paper = (paper_figures.MCUNET_BACKWARD_SGD if optimizer != "adam" and backbone == "mcunet"
             else paper_figures.BACKWARD_ADAM.get(backbone, {}) if optimizer == "adam" else {})
    budget = (Budget(memory_bytes=memory_bytes, compute_macs=compute_macs) if compute_macs is not None
              else Budget(memory_bytes=memory_bytes, compute_fraction=compute_fraction))
    last = table.layers[-1]
    rows = [
        ("FullTrain", f"all {len(table)} convs, all channels", {l.name: l.out_channels for l in table}, full_train_batch),
        ("LastLayer", f"{last.name}, all channels", {last.name: last.out_channels}, 1),
    ]
    su_config = SelectionConfig(policy="sparse_update", budget=budget, channel_ratio=sparse_update_ratio,
                                criterion=SPARSE_UPDATE_CRITERION, optimizer=optimizer, on_empty="empty")
    rng = np.random.default_rng(seed + 1)
    weights = {l.name: rng.normal(size=(l.fan_in, l.out_channels)).astype(np.float32) for l in table}
    if backbone in MIT_SPARSE_UPDATE_LAYERS:
        layers = MIT_SPARSE_UPDATE_LAYERS[backbone]
        su = {n: channel_count(table[n].out_channels, sparse_update_ratio) for n in layers}
        su_text = f"MIT's {len(layers)} layers, {sparse_update_ratio:g} of channels"
    else:
        tasks = [synthetic_fisher(table, seed + 100 + t) for t in range(8)]
        selection = sparse_update_policy(table, su_config, fisher_tasks=tasks, weights=weights)
        su = selection.channel_counts()
        su_text = f"static Fisher ranking (synthetic tasks), {len(su)} layers, {sparse_update_ratio:g}"
    rows.append(("SparseUpdate", su_text, su, 1))
    tt_config = SelectionConfig(policy="tinytrain", budget=budget, channel_ratio=tinytrain_ratio,
                                optimizer=optimizer, on_empty="empty")
    measured = fisher is not None
    fisher = dict(fisher) if measured else synthetic_fisher(table, seed)
    selection = tinytrain_policy(table, tt_config, candidates=[n for n in table.names if n in fisher], fisher=fisher)
    tt = selection.channel_counts()
    rows.append(("TinyTrain", f"Eq. 3 on {'measured' if measured else 'synthetic'} Fisher: "
                 + (", ".join(tt) or "nothing fits") + f", {tinytrain_ratio:g}", tt, 1))
    out = []
    for method, text, channels, batch in rows:
        cost = backward_cost(table, channels, optimizer=optimizer, batch_size=batch)
        out.append(ReportRow(method, text, optimizer, batch, cost, paper.get(method)))
    return out
