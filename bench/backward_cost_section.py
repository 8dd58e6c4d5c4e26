"""The backward-cost section (Table 2 shape): memory and MACs of each policy's backward pass from the
cost model, beside the paper's figures, for MCUNet, MobileNetV2 and ProxylessNAS."""

from __future__ import annotations

import numpy as np

from bench.config import BenchConfig
from bench.policy_runs import compute_budget_macs

__all__ = ["backward_cost_section"]


def backward_cost_section(config: BenchConfig, measured_fisher: dict | None) -> dict:
    from tflite_train.architectures import build_layer_table
    from tflite_train.cost_report import selection_report
    from tflite_train.sparse import unfused_activation_bytes

    out = {}
    for backbone in ("mcunet", "mbv2", "proxyless"):
        fisher = None
        if measured_fisher and backbone == config.backbone:
            table = build_layer_table(backbone, config.cost_input_size)
            if all(n in table.names for n in measured_fisher):
                fisher = {n: np.asarray(v, np.float32) for n, v in measured_fisher.items()}
        for optimizer in ("adam", "sgd"):
            rows = selection_report(backbone, config.cost_input_size, optimizer=optimizer,
                                    memory_bytes=config.memory_budget_mib * 2**20,
                                    compute_macs=compute_budget_macs(backbone, config.cost_input_size,
                                                                     config.compute_fraction),
                                    tinytrain_ratio=config.channel_ratio,
                                    sparse_update_ratio=config.sparse_update_channel_ratio,
                                    full_train_batch=config.cost_full_train_batch, fisher=fisher, seed=config.seed)
            out[f"{backbone}/{optimizer}"] = [{
                "method": r.method, "description": r.description, "batch_size": r.batch_size,
                "weights_bytes": r.cost.updated_weight_bytes, "optimizer_bytes": r.cost.optimizer_bytes,
                "activation_bytes": r.cost.activation_bytes, "total_bytes": r.cost.total_bytes,
                "backward_macs": r.cost.backward_macs,
                "paper": None if r.paper is None else {"total_mib": r.paper.total_mib, "macs": r.paper.macs,
                                                        "weights_mib": r.paper.weights_mib,
                                                        "optimizer_mib": r.paper.optimizer_mib,
                                                        "activation_mib": r.paper.activation_mib},
            } for r in rows]
        table = build_layer_table(backbone, config.cost_input_size)
        full = out[f"{backbone}/adam"][0]
        out[f"{backbone}/unfused_full_train_bytes"] = (
            unfused_activation_bytes(table, config.cost_full_train_batch) + full["weights_bytes"] + full["optimizer_bytes"])
    return out
