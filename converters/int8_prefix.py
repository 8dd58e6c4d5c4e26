"""Runs the frozen prefix as int8 kernels (``export --quantize int8``): calibration and fake-quant annotation.

The frozen prefix is every node below the lowest candidate layer (the complement of its suffix,
``converters.cached_cut.suffix_nodes``): nothing there ever trains. Post-training quantization of the
whole converted module does not work for this graph (``docs/int8.md``: the converter quantizes whole
signatures, head included, and keeps the float weights for the others). What works is the converter's
quantization-aware path: the module's forward wraps

* the normalised input and every prefix node's output in ``fake_quant_with_min_max_args`` with the
  [min, max] observed on representative images (``calibrate``; 0 is always inside the range), and
* every prefix kernel in ``fake_quant_with_min_max_vars_per_channel`` (symmetric, narrow range, per
  output channel; a depthwise kernel is viewed as [kh, kw, 1, C] so its channels are the last axis),

and the converter, given ``optimizations=[DEFAULT]`` and no representative dataset, turns each such
region into ``QUANTIZE`` -> int8 ``CONV_2D`` / ``DEPTHWISE_CONV_2D`` / ``ADD`` ... -> ``DEQUANTIZE`` in every
signature that runs it (``infer``, ``fisher``, ``train_step``, ``features_*``, train variants), the int8
weights stored once, and leaves every other op float32 (its QAT mode disables dynamic-range quantization).
TensorFlow computes the same fake-quantized forward, so the self-test's goldens describe the int8 prefix
up to the kernels' integer rounding.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import tensorflow as tf

from tflite_train.converters.cached_cut import suffix_nodes
from tflite_train.converters.graph.ir import Graph, Node
from tflite_train.converters.ops import registry
from tflite_train.sparse.layer_table import LayerTable

__all__ = ["PRE_ACTIVATION", "PrefixQuantization", "calibrate", "fake_quant_kernel", "fake_quant_value", "saved_input",
           "needs_pre_activation_range", "prefix_nodes"]

NUM_BITS = 8
FUSED_ACTIVATIONS = ("linear", "relu", "relu6")
"""Activations the converter fuses into an int8 convolution; any other (e.g. leaky_relu, hard_swish) runs as
its own int8 op and needs the range of the convolution's output too (``needs_pre_activation_range``)."""
PRE_ACTIVATION = "/pre_activation"
"""Key suffix, in ``PrefixQuantization.ranges``, of a weighted node's pre-activation range."""


def needs_pre_activation_range(node: Node) -> bool:
    """True for a weighted node whose activation is not fused into the int8 kernel (``FUSED_ACTIVATIONS``)."""
    return node.is_weighted and node.attrs.get("activation", "linear") not in FUSED_ACTIVATIONS


@dataclasses.dataclass(frozen=True)
class PrefixQuantization:
    """What the int8 prefix needs: its nodes and their calibrated ranges.

    Attributes:
      nodes: Names of the prefix nodes (the graph's input node included).
      ranges: Node name -> (min, max) of its output over the calibration images (the input node: of the
        normalised images); ``<name>/pre_activation``: of a weighted node's convolution output when its
        activation is not fused (``needs_pre_activation_range``).
      images: Number of calibration images.
    """

    nodes: frozenset[str]
    ranges: dict[str, tuple[float, float]]
    images: int

    def to_dict(self) -> dict:
        """JSON-ready summary for the metadata (the scales themselves live in the graph)."""
        return {"prefix_nodes": len(self.nodes), "calibration_images": self.images}


def prefix_nodes(graph: Graph, table: LayerTable, lowest_candidate: int) -> frozenset[str]:
    """The frozen prefix below table index ``lowest_candidate`` (module docstring)."""
    suffix = suffix_nodes(graph, table, lowest_candidate)
    return frozenset(n.name for n in graph.nodes if n.name not in suffix)


def _range(values: np.ndarray) -> tuple[float, float]:
    return min(0.0, float(np.min(values))), max(0.0, float(np.max(values)))


def calibrate(forward, graph: Graph, nodes: frozenset[str], images: np.ndarray, reverse_channels: bool = False,
              batch: int = 16) -> PrefixQuantization:
    """Ranges of the prefix nodes' outputs on ``images``.

    Args:
      forward: The module's float forward, ``images -> (embedding, {node: (inputs, z, y)})``.
      graph: The module's graph.
      nodes: ``prefix_nodes``.
      images: float32 [N, H, W, C] in the model's input range.
      reverse_channels: The graph reverses the fed channels first (a BGR network).
      batch: Images per forward call.

    Raises:
      ValueError: no images, or images of another shape than the graph's input.
    """
    images = np.asarray(images, np.float32)
    if images.ndim != 4 or images.shape[0] == 0 or tuple(images.shape[1:]) != tuple(graph.input_spec.shape):
        raise ValueError(f"calibration images must be a non-empty [N, {', '.join(map(str, graph.input_spec.shape))}] "
                         f"array; got shape {images.shape}")
    spec = graph.input_spec
    lows: dict[str, float] = {}
    highs: dict[str, float] = {}
    first = graph.nodes[0].name
    for start in range(0, len(images), batch):
        chunk = images[start:start + batch]
        _, saved = forward(tf.constant(chunk))
        found = {name: np.asarray(y) for name, (_, _, y) in saved.items() if name in nodes}
        found.update({name + PRE_ACTIVATION: np.asarray(z) for name, (_, z, _) in saved.items()
                      if name in nodes and needs_pre_activation_range(graph.by_name[name])})
        normalised = saved_input(chunk[..., ::-1] if reverse_channels else chunk, spec)
        for name, value in [(first, normalised), *found.items()]:
            low, high = _range(value)
            lows[name] = min(lows.get(name, 0.0), low)
            highs[name] = max(highs.get(name, 0.0), high)
    missing = sorted(nodes - lows.keys())
    if missing:
        raise ValueError(f"calibration saw no value of prefix nodes {missing[:5]}")
    return PrefixQuantization(nodes, {n: (lows[n], highs[n]) for n in lows}, int(len(images)))


def saved_input(images: np.ndarray, spec) -> np.ndarray:
    """The normalised input the graph's first node holds (the forward's (x - mean) / std, channels as read)."""
    return (images - np.array(spec.mean, np.float32)) * (1.0 / np.array(spec.std, np.float32))


def fake_quant_value(x, value_range: tuple[float, float]):
    """``x`` through int8 fake quantization over ``value_range`` (per tensor, asymmetric)."""
    low, high = value_range
    if high - low < 1e-12:
        high = low + 1e-6
    return tf.quantization.fake_quant_with_min_max_args(x, min=low, max=high, num_bits=NUM_BITS)


def fake_quant_kernel(node: Node, kernel):
    """A prefix kernel through per-output-channel symmetric int8 fake quantization (module docstring)."""
    kernel = np.asarray(kernel, np.float32)
    view = kernel.reshape(*kernel.shape[:2], 1, -1) if registry.weighted_kind(node.op).channelwise else kernel
    peak = np.abs(view.reshape(-1, view.shape[-1])).max(axis=0)
    peak = np.where(peak > 0, peak, 1e-6).astype(np.float32)
    q = tf.quantization.fake_quant_with_min_max_vars_per_channel(tf.constant(view), -peak, peak, num_bits=NUM_BITS,
                                                                 narrow_range=True)
    return tf.reshape(q, kernel.shape)
