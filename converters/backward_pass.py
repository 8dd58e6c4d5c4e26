"""Backward pass of the trainable module: Fisher potentials and the channel-masked train step.

The walk goes over the gradient region (``converters.graph.region``) in reverse topological order,
summing the gradients of tensors read by several nodes, with each op family's builtin-op backward
(``converters.ops``), so the converted graph holds TFLite builtins only (TF's own gradients of
Conv2D, DepthwiseConv2D and ReLU6 lower to Flex ops).

* Fisher (TinyTrain Eq. 1): Delta_o = 1/(2N) sum_n (sum_d a_nd g_nd)^2 with a = y, the layer's
  output after its activation, g the per-sample gradient dL_n/dy, d over the spatial positions.
* Update: the weight gradient and optimizer step of a candidate layer sit in one flat ``tf.cond``
  (TFLite IF, no outputs) taken only when the layer has a selected channel; inside, the gradient
  of every output channel is computed in the kernel's own layout and the optimizer step
  (``converters.optimizer_update``) is written with the mask in its coefficients, so unselected
  channels keep their values. Every shape is static (no WHERE/GATHER/SCATTER_ND of a data-dependent
  count), so the branches take the delegate like the rest of the graph. This computes the weight
  gradient of the unselected channels of a selected layer too (the cost model counts the selected
  ones only): measured on MCUNet@128 (LiteRT, batch 1), the gather -> update -> SCATTER_ND + SELECT
  merge it replaces cost 0.3-0.7 ms per layer of fixed overhead, more than the whole layer's dense
  weight gradient.

Depth: the general ``train_step`` walks down to the lowest candidate with each layer's input
gradient in an IF gated by "a selected layer lies below" (not taken: x is passed through as a
same-shaped placeholder). The depth-specific ``train_step_<layer>`` signatures (metadata
``train_variants``) walk only the region of the layers from the cut upward, without IFs; the
runtime runs the shallowest one that reaches the deepest selected layer.

Episode steps and accumulation (``episode_step_from_<layer>``, ``accumulate_from_<layer>``): the same walk
from another gradient at the embedding (the episode loss with in-graph prototypes of
``converters.cosine_head``, or the gradient of the rows' summed losses), and, in "accumulate" mode, the
weight gradient added into the accumulators of ``converters.gradient_accumulation`` instead of an
optimizer step.

Design notes (measured, MCUNet@128, tflite-runtime 2.14, 1 thread): a TFLite IF copies its inputs
into the branch and re-plans the branch's buffers at every call, so IF bodies are flat (no nesting)
and hold few full-size intermediates.
"""

from __future__ import annotations

import tensorflow as tf

from tflite_train import contract as C
from tflite_train.converters.cached_cut import CachedCut
from tflite_train.converters.cosine_head import episode_loss_and_embedding_grad, loss_and_embedding_grad
from tflite_train.converters.graph.ir import Node
from tflite_train.converters.ops import dispatch
from tflite_train.converters.ops.activations import activation_backward
from tflite_train.converters.optimizer_update import masked_optimizer_step

__all__ = ["BackwardPass"]


class BackwardPass:
    """The backward walk, mixed into ``converters.trainable_module.TrainableModule``.

    Reads the module's ``config``, ``graph``, ``candidates``, ``candidate_names``, ``_regions``
    (cut -> gradient region), ``_upstream`` (node -> candidates upstream of its input), ``_shapes``,
    ``_slots``, ``_vars`` and ``_dirty``; uses the forward of ``converters.copy_on_write``.
    """

    def _selected(self, name: str):
        return tf.reduce_max(self._vars[name + C.MASK_SUFFIX]) > 0.5

    def _backward(self, images, labels, mode: str, cut: int | None = None, start: CachedCut | None = None,
                  support=None):
        """The backward walk. mode "fisher": returns (loss, accuracy, {layer: Delta}); "train": updates;
        "accumulate": adds the gradient of the rows' summed losses into the selected layers' accumulators
        (``converters.gradient_accumulation``).

        ``cut`` (train only): table index of the lowest layer of a depth-specific variant (input
        gradients unconditional, valid only when no layer below ``cut`` is selected); None = the
        general ``train_step`` (down to the lowest candidate, input gradients gated).
        ``start`` (with ``cut = start.index``): ``images`` is the cached activation at that cut's
        frontier (``converters.cached_cut``); the walk is the same, over nodes the suffix holds.
        ``support`` (train only): f32 [N] support-row flags: the loss is the episode loss with prototypes
        computed from the support rows (``converters.cosine_head.episode_loss_and_embedding_grad``) instead
        of the ``prototypes`` state.
        """
        emb, saved = self._forward(images, start=start)
        if support is not None:
            loss, accuracy, g_emb = episode_loss_and_embedding_grad(self.config, emb, labels, support,
                                                                    self._vars[C.NUM_CLASSES])
        else:
            loss, accuracy, g_emb = loss_and_embedding_grad(self.config, emb, self._vars[C.PROTOTYPES],
                                                            self._vars[C.NUM_CLASSES], labels,
                                                            per_sample=(mode != "train"))
        region = self._regions[self.candidates[0] if cut is None else cut]
        grads = {self.graph.output: g_emb}
        fisher = {}
        n = tf.cast(tf.shape(labels)[0], tf.float32)
        for node in reversed(self.graph.nodes[1:]):
            if node.name not in region or node.name not in grads:
                continue
            g_y = grads.pop(node.name)
            xs, z, y = saved[node.name]
            needs = [i in region for i in node.inputs]
            in_shapes = [self._shapes[i] for i in node.inputs]
            if node.is_weighted:
                g_x = self._weighted_backward(node, xs[0], z, y, g_y, needs[0], mode, cut, fisher, n)
                gs = [g_x]
            elif any(needs):
                gs = dispatch.backward(node, xs, z, y, g_y, in_shapes)
            else:
                gs = [None] * len(node.inputs)
            for name, g, need in zip(node.inputs, gs, needs):
                if need and g is not None:
                    grads[name] = grads[name] + g if name in grads else g
        return loss, accuracy, fisher

    def _weighted_backward(self, node: Node, x, z, y, g_y, needs_input_grad: bool, mode: str, cut, fisher, n):
        """Fisher / update of a weighted node; returns g_x (or None when nothing below needs it)."""
        a = node.attrs
        in_shape = self._shapes[node.inputs[0]]
        kernel, _ = self._params(node.name)
        is_candidate = node.name in self.candidate_names

        def g_z():
            return activation_backward(z, y, g_y, a.get("activation", "linear"), a.get("alpha", 0.0))

        def input_grad():
            return dispatch.weighted_input_grad(node, g_z(), kernel, in_shape, kernel_is_variable=is_candidate)

        if mode == "fisher":
            if is_candidate:
                axes = list(range(1, len(y.shape) - 1))
                per_sample = tf.reduce_sum(y * g_y, axis=axes) if axes else y * g_y
                fisher[node.name] = tf.reduce_sum(per_sample * per_sample, axis=0) / (2.0 * n)
            return input_grad() if needs_input_grad else None
        # Flat, un-nested IFs. The input gradient reads the weights BEFORE this layer's update
        # (automatic control dependencies keep program order).
        g_x = None
        if needs_input_grad and cut is not None:  # unconditional: g_z once, shared with the update IFs
            g_z_value = g_z()
            g_z = lambda: g_z_value  # noqa: E731
            g_x = input_grad()
        elif needs_input_grad:
            upstream = self._upstream[node.name]
            below = self._selected(upstream[0])
            for name in upstream[1:]:
                below = tf.logical_or(below, self._selected(name))
            g_x = tf.cond(below, input_grad, lambda: tf.identity(x))
        if is_candidate:
            update = self._accumulate_gradient if mode == "accumulate" else self._apply_update
            with tf.control_dependencies([g_x] if g_x is not None else []):
                # One flat IF without outputs (module docstring).
                tf.cond(self._selected(node.name), lambda: update(node, x, g_z()), lambda: None)
        return g_x

    def _apply_update(self, node: Node, x, g_z):
        """Optimizer step on the selected channels: the gradient of every channel in the kernel's own
        layout, then the masked step (``_optimizer_step``)."""
        self._optimizer_step(node, dispatch.weighted_weight_grad(node, x, g_z, self._shapes[node.inputs[0]]))

    def _optimizer_step(self, node: Node, grads) -> None:
        """The masked step (``converters.optimizer_update``) with ``grads`` = (dW, db) on the kernel, bias and
        slots, so unselected channels of the variable and its slots keep their values; marks the layer
        changed (``converters.copy_on_write``)."""
        name = node.name
        mask = tf.cast(self._vars[name + C.MASK_SUFFIX] > 0.5, tf.float32)
        kernel_mask = dispatch.kernel_mask(node, mask)  # depthwise [kh, kw, C, 1]: [C, 1]
        writes = []
        for param, grad, where in zip(("kernel", "bias"), grads, (kernel_mask, mask)):
            variables = [self._vars[nm] for nm in [f"{name}_{param}"] + [f"{name}_{param}_{s}" for s in self._slots]]
            cur = [var.read_value() for var in variables]
            new = masked_optimizer_step(self.config, cur, grad, where, self._vars[C.LEARNING_RATE], self._vars[C.STEP])
            writes += list(zip(variables, new))
        for var, value in writes:
            var.assign(value)
        self._dirty[name].assign([1.0])
