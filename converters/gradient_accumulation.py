"""Gradient accumulation: optimizer steps over a batch fed in chunks (``accumulate_from_<layer>``, ``apply_accumulated``).

For rows r_1..r_B fed in any chunks, ``accumulate_from_<layer>`` adds, for every selected candidate layer,
G = sum_n dL_n/dW (the gradient of the rows' summed losses, the same L_n as ``train_step_from_<layer>``:
cosine logits against the ``prototypes`` state) into an accumulator of the parameter's full shape, and
adds the chunk's rows to a counter B. ``apply_accumulated`` then runs, when B > 0, exactly the update of
``train_step_from_<layer>`` on the whole batch: step += 1 and the masked optimizer step
(``converters.optimizer_update``) with the gradient G / B = d/dW (1/B) sum_n L_n, the batch's mean loss;
then it zeroes the accumulators it used and the counter. With B = 0 it changes nothing (no step).

The accumulators are internal variables (like ``converters.copy_on_write``'s ``<layer>_dirty`` flags),
not contract state: ``get_state``/``set_state`` and checkpoints do not hold them. They are zeroed by
``reset_state``, ``set_state`` and ``set_selection`` (a change of selection or state discards a pending
accumulation), and a layer's by ``apply_accumulated`` when it steps it; since ``accumulate_from_<layer>``
adds only into selected layers, the accumulators of unselected layers stay zero and ``apply_accumulated``
touches only the selected layers' (no whole-tensor work per call for the others). Each update sits in
one flat IF per layer, as the train step's (``converters.backward_pass``).
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from tflite_train import contract as C
from tflite_train.converters.ops import dispatch

__all__ = ["GRADIENT_SUM_SUFFIX", "ROWS_NAME", "GradientAccumulation"]

GRADIENT_SUM_SUFFIX = "_grad_sum"
"""Name suffix of an accumulator variable ``<layer>_kernel_grad_sum`` / ``<layer>_bias_grad_sum`` (not contract state)."""
ROWS_NAME = "accumulated_rows"
"""Name of the accumulated-row counter variable (f32 [1]; not contract state)."""


class GradientAccumulation:
    """Accumulators and their step, mixed into ``converters.trainable_module.TrainableModule``.

    Reads the module's ``candidate_names``, ``graph``, ``_vars`` and ``_selected``/``_optimizer_step`` of
    ``converters.backward_pass``.
    """

    _grad_sums: dict[str, tuple[tf.Variable, tf.Variable]]
    _rows: tf.Variable | None = None

    def _add_accumulators(self, shapes: dict[str, tuple[tuple[int, ...], tuple[int, ...]]]) -> None:
        """Zero accumulators of the given kernel and bias shapes per candidate, and the row counter."""
        self._grad_sums = {
            name: tuple(tf.Variable(np.zeros(shape, np.float32), name=f"{name}{suffix}{GRADIENT_SUM_SUFFIX}",
                                    trainable=False)
                        for shape, suffix in zip(pair, (C.KERNEL_SUFFIX, C.BIAS_SUFFIX)))
            for name, pair in shapes.items()}
        self._rows = tf.Variable(np.zeros([1], np.float32), name=ROWS_NAME, trainable=False)

    @property
    def accumulates(self) -> bool:
        """True when the module has accumulators (``_add_accumulators`` ran)."""
        return self._rows is not None

    def _accumulate_gradient(self, node, x, g_z) -> None:
        """Adds (dW, db) of every channel of ``node`` (the rows' summed gradient) into its accumulators."""
        grads = dispatch.weighted_weight_grad(node, x, g_z, self._shapes[node.inputs[0]])
        for var, grad in zip(self._grad_sums[node.name], grads):
            var.assign_add(grad)

    def _count_rows(self, labels) -> None:
        """Adds the chunk's rows to the counter."""
        self._rows.assign_add(tf.reshape(tf.cast(tf.shape(labels)[0], tf.float32), [1]))

    def _apply_accumulated(self) -> None:
        """step += 1 and the masked step with the mean gradient, when rows were accumulated (module docstring)."""
        rows = self._rows[0]
        has_rows = rows > 0.5
        self._vars[C.STEP].assign_add(tf.reshape(tf.cast(has_rows, tf.float32), [1]))
        scale = 1.0 / tf.maximum(rows, 1.0)
        for name in self.candidate_names:
            node = self.graph.by_name[name]

            def step(node=node, sums=self._grad_sums[name]):
                self._optimizer_step(node, [var.read_value() * scale for var in sums])
                for var in sums:
                    var.assign(tf.zeros_like(var))

            # One flat IF without outputs per layer (converters.backward_pass).
            tf.cond(tf.logical_and(self._selected(name), has_rows), step, lambda: None)
        self._rows.assign(tf.zeros([1], tf.float32))

    def _clear_accumulators(self) -> None:
        """Zeroes every accumulator and the counter (``reset_state``, ``set_state``, ``set_selection``)."""
        if not self.accumulates:
            return
        for sums in self._grad_sums.values():
            for var in sums:
                var.assign(tf.zeros_like(var))
        self._rows.assign(tf.zeros([1], tf.float32))
