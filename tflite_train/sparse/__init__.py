"""The on-device method: layer table, cost model, selection. Imports no TensorFlow."""

from tflite_train.sparse.cost_model import (
    BYTES_PER_FLOAT,
    OPTIMIZER_SLOTS,
    BackwardCost,
    LayerCost,
    backward_cost,
    channel_count,
    layer_cost,
    total_forward_macs,
    total_weights,
    unfused_activation_bytes,
    weight_grad_macs,
)
from tflite_train.sparse.layer_table import LayerSpec, LayerTable, resolve_layers

__all__ = [
    "BYTES_PER_FLOAT",
    "OPTIMIZER_SLOTS",
    "BackwardCost",
    "LayerCost",
    "LayerSpec",
    "LayerTable",
    "backward_cost",
    "channel_count",
    "layer_cost",
    "resolve_layers",
    "total_forward_macs",
    "total_weights",
    "unfused_activation_bytes",
    "weight_grad_macs",
]
