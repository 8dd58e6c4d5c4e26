"""Text reports over the layer table and the cost model (no TensorFlow needed).

``backbone_summary`` prints a backbone's layer table with per-layer costs and totals;
``backward_report`` puts the cost model's backward-pass figures for FullTrain, LastLayer and two
sparse selections beside the paper's Tables 2 and 6.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

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

MIB = 2**20

# MIT's SparseUpdate scheme for MCUNet updates the weights of the expand convs of blocks
# 7, 8, 9, 10, 12, 13 (conv indices 21, 24, 27, 30, 36, 39); see shared/ARCHITECTURES.md.
MCUNET_SPARSE_UPDATE_LAYERS = ("b07_expand", "b08_expand", "b09_expand", "b10_expand", "b12_expand", "b13_expand")
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
    sparse = {n: channel_count(table[n].out_channels, 0.5) for n in MCUNET_SPARSE_UPDATE_LAYERS}
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
