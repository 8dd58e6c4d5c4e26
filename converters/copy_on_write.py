"""Forward pass of the trainable module, with copy-on-write weights for the candidate layers.

A candidate layer's weights are constants in its forward (the delegate's fast path: XNNPACK packs a
static filter once and runs the conv on it; a filter read from a variable leaves the delegate and is
re-laid-out by the builtin kernel at every call) until the layer is first changed. A per-layer flag
variable ``<layer>_dirty`` (shape [1], not part of the contract's state: derived from it) selects,
in one flat IF per layer, the constant path (0) or the variable path (1): a train step that updates
the layer sets it, ``reset_state`` clears it, ``set_state`` sets it iff the written kernel or bias
differs from the exported one. The constants hold the initial values in the forward op's own
layout; the file stores them once, and the variable's initial value (init and ``reset_state``) is
derived from them at run time (``converters.transposed_initial_values``). The variable path of a
1x1 stride-1 conv is one BATCH_MATMUL on the kernel as stored (no per-call transpose of the
filter). Measured (single-op models, 1 thread, batch 1, ``bench/results/VARIABLE_WEIGHT_FORWARD.md``):
the IF adds a few us per layer and the constant path runs at the speed of a frozen layer
(EfficientNet-Lite0@128 TinyTrain export, ai-edge-litert: ``infer`` 2.1x faster). The cost is
memory: XNNPACK packs the constants of every signature's forward separately (peak RSS of an
``infer`` process on that export 150 -> 234 MiB on ai-edge-litert; tflite-runtime's explicit
delegate shares one weights cache, ``tflite_train.runtime.model.xnnpack``).
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from tflite_train import contract as C
from tflite_train.converters.cached_cut import CachedCut
from tflite_train.converters.graph.ir import Node
from tflite_train.converters.int8_prefix import PRE_ACTIVATION, fake_quant_kernel, fake_quant_value, needs_pre_activation_range
from tflite_train.converters.ops import dispatch

__all__ = ["DIRTY_SUFFIX", "CopyOnWriteForward"]

DIRTY_SUFFIX = "_dirty"
"""Name suffix of a candidate layer's copy-on-write flag variable (module docstring; not contract state)."""


class CopyOnWriteForward:
    """The forward pass, mixed into ``converters.trainable_module.TrainableModule``.

    Reads the module's ``graph``, ``config`` (``channel_order``: a BGR network gets the fed RGB images'
    channels reversed before the normalisation), ``_frozen`` (frozen layer -> constant (kernel, bias)),
    ``_vars`` (state variables by name), ``_exported`` (candidate -> exported (kernel, bias)) and
    ``_dirty`` (candidate -> flag variable) and ``_int8_prefix`` (``converters.int8_prefix.PrefixQuantization``
    or None: with it, the frozen prefix's values and kernels pass through int8 fake quantization).
    """

    _int8_prefix = None

    def _params(self, name: str):
        if name in self._frozen:
            return self._frozen[name]
        return self._vars[name + C.KERNEL_SUFFIX], self._vars[name + C.BIAS_SUFFIX]

    def _is_dirty(self, name: str):
        return self._dirty[name][0] > 0.5

    def _pre_activation(self, node: Node, x, from_variables: bool):
        """z of a weighted node: frozen constants, or a candidate's copy-on-write IF (module docstring)."""
        name = node.name
        if name in self._frozen:
            return dispatch.weighted_pre_activation(node, x, *self._frozen[name])

        def variable_path():
            return dispatch.weighted_pre_activation(node, x, *self._params(name), weights_are_variables=True)

        if from_variables:
            return variable_path()
        kernel, bias = self._exported[name]
        return tf.cond(self._is_dirty(name), variable_path,
                       lambda: dispatch.weighted_pre_activation(node, x, tf.constant(kernel), tf.constant(bias)))

    def _exported_differs(self, name: str, kernel, bias):
        """True when (kernel, bias) differ from the exported weights; the comparison is made in the
        forward op's filter layout (``dispatch.forward_filter_layout``), so its constant is the one the
        constant forward path stores (one copy in the file)."""
        exported_kernel, exported_bias = self._exported[name]
        node = self.graph.by_name[name]
        ref = dispatch.forward_filter_layout(node, tf.constant(exported_kernel))
        return tf.logical_or(tf.reduce_any(tf.not_equal(dispatch.forward_filter_layout(node, kernel), ref)),
                             tf.reduce_any(tf.not_equal(bias, tf.constant(exported_bias))))

    def _forward(self, images, from_variables: bool = False, start: CachedCut | None = None, stop: str | None = None):
        """(embedding [N, D], {node: (inputs, z, y)}).

        ``from_variables``: candidate layers read their variables unconditionally (TF's own gradient
        with respect to them, ``tools.parity_reference``); otherwise the copy-on-write IF decides.
        ``start``: ``images`` is the activation at that cut's frontier, and only the suffix nodes run
        (``converters.cached_cut``). ``stop``: return that node's value instead of the embedding,
        running only the nodes it reads."""
        if start is not None:
            values = {start.frontier: images}
            nodes = [n for n in self.graph.nodes[1:] if n.name in start.suffix]
        else:
            spec = self.graph.input_spec
            mean = tf.constant(np.array(spec.mean, np.float32))
            inv_std = tf.constant(1.0 / np.array(spec.std, np.float32))
            if self.config.channel_order == C.CHANNEL_ORDER_BGR:  # RGB fed, BGR read: REVERSE_V2 on channels
                images = tf.reverse(images, axis=[3])
            x0 = (images - mean) * inv_std
            if self._int8_prefix is not None:
                x0 = fake_quant_value(x0, self._int8_prefix.ranges[self.graph.nodes[0].name])
            values = {self.graph.nodes[0].name: x0}
            needed = self.graph.ancestors(stop) if stop is not None else None
            nodes = [n for n in self.graph.nodes[1:] if needed is None or n.name in needed]
        saved = {}
        quantized = self._int8_prefix.nodes if self._int8_prefix is not None and start is None else frozenset()
        for node in nodes:
            xs = [values[i] for i in node.inputs]
            if node.name in quantized:
                ranges = self._int8_prefix.ranges
                if node.is_weighted:
                    kernel, bias = self._frozen[node.name]
                    z = dispatch.weighted_pre_activation(node, xs[0], fake_quant_kernel(node, kernel), bias)
                    if needs_pre_activation_range(node):
                        z = fake_quant_value(z, ranges[node.name + PRE_ACTIVATION])
                    y = dispatch.weighted_activation(node, z)
                else:
                    z, y = dispatch.forward(node, xs)
                y = fake_quant_value(y, ranges[node.name])
            elif node.is_weighted:
                z = self._pre_activation(node, xs[0], from_variables)
                y = dispatch.weighted_activation(node, z)
            else:
                z, y = dispatch.forward(node, xs)
            values[node.name] = y
            saved[node.name] = (xs, z, y)
        return values[self.graph.output if stop is None else stop], saved
