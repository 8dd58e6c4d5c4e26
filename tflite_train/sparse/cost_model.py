"""Analytic memory and compute cost of a (sparse) backward pass.

Pure Python over a :class:`~tflite_train.sparse.layer_table.LayerTable`; no TensorFlow, no numpy.
Every formula is written out so that the Java port (``android_demo``) can reproduce it exactly;
golden vectors generated from this module keep the two in step.

Notation for a conv layer with kernel k, groups g, C_in input and C_out output channels, input
H x W and output H' x W' (``same`` padding, H' = ceil(H / s)):

* weights            |W| = k^2 * (C_in / g) * C_out          (the paper's parameter count)
* biases                   C_out                              (the folded-BatchNorm bias)
* forward MACs         M = H' * W' * k^2 * (C_in / g) * C_out
* input-gradient MACs      M   (a transposed convolution with the same kernel)
* weight-gradient MACs     H' * W' * k^2 * (C_in / g) * K      for K updated output channels
* activations              H * W * C_in in, H' * W' * C_out out (elements per sample)

Backward-pass memory follows the paper's appendix A.4 and the TinyTL profiler it adopts:

* (B1) updated weights: K * (k^2 * C_in / g + 1) floats per updated layer (weights + bias);
* (B2) optimizer memory: ``OPTIMIZER_SLOTS[optimizer]`` x B1, plus one gradient buffer (1 x B1)
  when ``gradient_buffer`` (the paper's Table 6 counts Adam as 3 x B1 and SGD as 1 x B1);
* (B3) 1-bit masks of every ReLU-family activation (relu, relu6, leaky_relu) from the deepest
  updated layer to the top; any other non-linear activation (sigmoid, swish, hard-swish, ...) keeps
  its float32 output instead (32 bits per element; ``activation_bits``);
* (B4) saved inputs of the updated layers (all of H x W x C_in for a dense conv, since each
  output channel reads every input channel; only the K selected input channels for a depthwise
  conv, whose output channel o reads input channel o alone);
* (F2) the inference activation buffer: max over layers of (input + output) elements.

B3 and B4 reuse the inference buffer F2, so activation memory = max(F2, B3 + B4), all times the
batch size. Frozen weights are not counted (they can stay in flash). Backward compute = the
input-gradient MACs of every layer above the deepest updated one + the weight-gradient MACs of
the updated channels. Bytes assume float32 (4 bytes).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

from tflite_train.sparse.layer_table import MASK_ACTIVATIONS, LayerSpec, LayerTable

BYTES_PER_FLOAT = 4
OPTIMIZER_SLOTS: Mapping[str, int] = {"adam": 2, "sgd_momentum": 1, "sgd": 0}
"""Optimizer state tensors per updated weight: Adam keeps m and v, SGD with momentum keeps one."""


@dataclasses.dataclass(frozen=True)
class LayerCost:
    """Static costs of one layer (per sample where it matters)."""

    name: str
    weights: int
    biases: int
    forward_macs: int
    input_grad_macs: int
    weight_grad_macs: int
    in_activation: int
    out_activation: int

    @property
    def params(self) -> int:
        """Weights plus biases."""
        return self.weights + self.biases


def layer_cost(layer: LayerSpec) -> LayerCost:
    """Costs of one layer; see the module docstring for the formulas."""
    out_pixels = layer.out_hw[0] * layer.out_hw[1]
    weights = layer.fan_in * layer.out_channels
    forward = out_pixels * weights
    return LayerCost(
        name=layer.name,
        weights=weights,
        biases=layer.out_channels,
        forward_macs=forward,
        input_grad_macs=forward,
        weight_grad_macs=forward,
        in_activation=layer.in_hw[0] * layer.in_hw[1] * layer.in_channels,
        out_activation=out_pixels * layer.out_channels,
    )


def activation_bits(activation: str) -> int:
    """Bits per output element a layer's activation keeps for the backward pass (B3): 1 for the
    ReLU family (a mask), 0 for linear, 32 for any other activation (its float output)."""
    if activation == "linear":
        return 0
    return 1 if activation in MASK_ACTIVATIONS else 32


def weight_grad_macs(layer: LayerSpec, channels: int) -> int:
    """MACs of the weight gradient restricted to ``channels`` output channels.

    dL/dW[:, :, :, o] = sum over the H' x W' output positions of input patch x dL/dy[o], i.e.
    H' * W' * k^2 * C_in / g MACs per updated output channel.
    """
    _check_channels(layer, channels)
    return layer.out_hw[0] * layer.out_hw[1] * layer.fan_in * channels


def channel_count(out_channels: int, ratio: float) -> int:
    """Number of channels K for a channel ratio: K = max(1, ceil(ratio * C_out - 1e-9)).

    Args:
      out_channels: C_out of the layer.
      ratio: Fraction in (0, 1].
    """
    if not isinstance(ratio, (int, float)) or isinstance(ratio, bool) or not 0.0 < ratio <= 1.0:
        raise ValueError(f"ratio must be a number in (0, 1]; got {ratio!r}")
    return max(1, math.ceil(ratio * out_channels - 1e-9))


@dataclasses.dataclass(frozen=True)
class BackwardCost:
    """Memory (bytes) and compute (MACs) of one backward pass for a selection.

    ``activation_bytes = max(inference_activation_bytes, relu_mask_bytes + saved_input_bytes)``;
    ``optimizer_bytes`` includes the gradient buffer when the cost was computed with one.
    """

    updated_params: int
    updated_weight_bytes: int
    optimizer_bytes: int
    saved_input_bytes: int
    relu_mask_bytes: int
    inference_activation_bytes: int
    activation_bytes: int
    input_grad_macs: int
    weight_grad_macs: int
    deepest_layer: int | None

    @property
    def total_bytes(self) -> int:
        """B1 + B2 + activations: the paper's backward-pass memory."""
        return self.updated_weight_bytes + self.optimizer_bytes + self.activation_bytes

    @property
    def backward_macs(self) -> int:
        """Input-gradient plus weight-gradient MACs."""
        return self.input_grad_macs + self.weight_grad_macs


def backward_cost(
    table: LayerTable,
    channels: Mapping[int | str, int],
    *,
    optimizer: str = "adam",
    batch_size: int = 1,
    gradient_buffer: bool = True,
) -> BackwardCost:
    """Backward-pass memory and compute for updating ``channels[layer]`` output channels per layer.

    Args:
      table: The backbone's layer table.
      channels: Layer name or index -> number of updated output channels K (1..C_out). Layers not
        named are frozen. An empty mapping means no backward pass (all costs zero).
      optimizer: One of ``OPTIMIZER_SLOTS`` (``"adam"``, ``"sgd_momentum"``, ``"sgd"``).
      batch_size: Samples per step; scales activation memory, not weights or MACs per sample.
      gradient_buffer: Count one gradient buffer the size of the updated weights in B2.

    Returns:
      The cost breakdown; MACs are per sample.

    Raises:
      ValueError: unknown layer, channel count out of range, unknown optimizer, batch_size < 1.
    """
    if optimizer not in OPTIMIZER_SLOTS:
        raise ValueError(f"optimizer must be one of {sorted(OPTIMIZER_SLOTS)}; got {optimizer!r}")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be an int >= 1; got {batch_size!r}")
    resolved: dict[int, int] = {}
    for key, count in channels.items():
        index = table.index_of(key)
        if index in resolved:
            raise ValueError(f"layer {key!r} named twice in channels")
        _check_channels(table.layers[index], count)
        resolved[index] = count
    if not resolved:
        return BackwardCost(0, 0, 0, 0, 0, 0, 0, 0, 0, None)

    costs = [layer_cost(layer) for layer in table]
    deepest = min(resolved)
    updated = sum(count * (table.layers[i].fan_in + 1) for i, count in resolved.items())
    saved_inputs = sum(
        _saved_input_elements(table.layers[i], costs[i], count) for i, count in resolved.items()
    )
    mask_bits = sum(
        activation_bits(table.layers[i].activation) * costs[i].out_activation for i in range(deepest, len(table))
    )
    inference_peak = max(c.in_activation + c.out_activation for c in costs)

    updated_bytes = updated * BYTES_PER_FLOAT
    slots = OPTIMIZER_SLOTS[optimizer] + (1 if gradient_buffer else 0)
    saved_bytes = saved_inputs * BYTES_PER_FLOAT * batch_size
    mask_bytes = math.ceil(mask_bits * batch_size / 8)
    peak_bytes = inference_peak * BYTES_PER_FLOAT * batch_size
    return BackwardCost(
        updated_params=updated,
        updated_weight_bytes=updated_bytes,
        optimizer_bytes=slots * updated_bytes,
        saved_input_bytes=saved_bytes,
        relu_mask_bytes=mask_bytes,
        inference_activation_bytes=peak_bytes,
        activation_bytes=max(peak_bytes, saved_bytes + mask_bytes),
        input_grad_macs=sum(costs[i].input_grad_macs for i in range(deepest + 1, len(table))),
        weight_grad_macs=sum(weight_grad_macs(table.layers[i], count) for i, count in resolved.items()),
        deepest_layer=deepest,
    )


def total_forward_macs(table: LayerTable) -> int:
    """Sum of forward MACs over all layers (per sample)."""
    return sum(layer_cost(layer).forward_macs for layer in table)


def full_backward_macs(table: LayerTable) -> int:
    """Backward MACs per sample of updating every layer and channel (FullTrain): the input gradients of
    every layer above the first plus every weight gradient (``backward_cost`` of the full selection)."""
    return backward_cost(table, {layer.name: layer.out_channels for layer in table}).backward_macs


def total_weights(table: LayerTable) -> int:
    """Sum of conv weights over all layers (the paper's parameter count; biases excluded)."""
    return sum(layer_cost(layer).weights for layer in table)


def _saved_input_elements(layer: LayerSpec, cost: LayerCost, channels: int) -> int:
    if layer.is_depthwise:
        return layer.in_hw[0] * layer.in_hw[1] * channels
    return cost.in_activation


def _check_channels(layer: LayerSpec, channels: int) -> None:
    if isinstance(channels, bool) or not isinstance(channels, int) or not 1 <= channels <= layer.out_channels:
        raise ValueError(
            f"channels for layer {layer.name!r} must be an int in 1..{layer.out_channels}; got {channels!r}"
        )


def unfused_activation_bytes(table: LayerTable, batch_size: int = 1) -> int:
    """Activation memory of a full backward pass through an *unfused* training graph.

    What a framework's autograd keeps when BatchNorm is not folded and nothing is recomputed or
    bit-packed: each conv saves its float input, each BatchNorm its float input (the conv
    output), each ReLU6 its float output. Per sample that is
    sum_l (in_l + out_l + [relu6_l] * out_l) floats. This is the accounting that reproduces the
    paper's FullTrain figure (Table 2); :func:`backward_cost` is the tighter appendix A.4 one.
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be an int >= 1; got {batch_size!r}")
    elements = 0
    for layer in table:
        cost = layer_cost(layer)
        elements += cost.in_activation + cost.out_activation
        if layer.activation != "linear":
            elements += cost.out_activation
    return elements * BYTES_PER_FLOAT * batch_size
