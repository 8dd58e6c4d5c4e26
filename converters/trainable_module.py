"""Assembles the signatures of the trainable ``.tflite`` contract (CONTRACT.md) from a graph IR.

The forward pass runs every node of the graph (``converters.ops.dispatch``); the backward pass
walks the gradient region (``converters.graph.region``) in reverse topological order, summing the
gradients of tensors read by several nodes, with each op family's builtin-op backward
(``converters.ops``), so the converted graph holds TFLite builtins only (TF's own gradients of
Conv2D, DepthwiseConv2D and ReLU6 lower to Flex ops).

* cosine head:  e_hat = e r, r = (|e|^2 + eps)^-1/2, logits = s cos(e, p_c) for c < num_classes,
                -1e9 otherwise; g_e = r (g_ehat - e_hat <e_hat, g_ehat>).
* CE:           L_n = -log softmax(logits_n)[y_n];  dL_n/dlogits_n = softmax - onehot.
* Fisher (TinyTrain Eq. 1): Delta_o = 1/(2N) sum_n (sum_d a_nd g_nd)^2 with a = y, the layer's
  output after its activation, g the per-sample gradient dL_n/dy, d over the spatial positions.

Selection (``set_selection``): one f32 mask variable per candidate layer. The weight gradient and
optimizer step of a candidate layer sit in one flat ``tf.cond`` (TFLite IF, no outputs) taken only
when the layer has a selected channel; inside, the gradient of every output channel is computed in
the kernel's own layout, the optimizer arithmetic runs on the whole kernel, bias and slots, and
SELECT by the mask writes the selected channels only, so unselected channels stay bit-identical.
Every shape is static (no WHERE/GATHER/SCATTER_ND of a data-dependent count), so the branches take
the delegate like the rest of the graph. This computes the weight gradient of the unselected
channels of a selected layer too (the cost model counts the selected ones only): measured on
MCUNet@128 (LiteRT, batch 1), the gather -> update -> SCATTER_ND + SELECT merge it replaces cost
0.3-0.7 ms per layer of fixed overhead, more than the whole layer's dense weight gradient.

Forward of a candidate layer (copy-on-write weights): the layer's weights are constants in the
layer's forward (the delegate's fast path: XNNPACK packs a static filter once and runs the conv on
it; a filter read from a variable leaves the delegate and is re-laid-out by the builtin kernel at
every call) until the layer is first changed. A per-layer flag variable ``<layer>_dirty`` (shape
[1], not part of the contract's state: derived from it) selects, in one flat IF per layer, the
constant path (0) or the variable path (1): a train step that updates the layer sets it, ``reset_state``
clears it, ``set_state`` sets it iff the written kernel or bias differs from the exported one. The
constants hold the initial values in the forward op's own layout; the file stores them once, and
the variable's initial value (init and ``reset_state``) is derived from them at run time
(``converters.transposed_initial_values``). The variable path of a 1x1 stride-1 conv is one
BATCH_MATMUL on the kernel as stored (no per-call transpose of the filter). Measured (single-op
models, 1 thread, batch 1, ``bench/results/VARIABLE_WEIGHT_FORWARD.md``): the IF adds a few us per
layer and the constant path runs at the speed of a frozen layer (EfficientNet-Lite0@128 TinyTrain
export, ai-edge-litert: ``infer`` 2.1x faster). The cost is memory: XNNPACK packs the constants of
every signature's forward separately (peak RSS of an ``infer`` process on that export 150 -> 234 MiB
on ai-edge-litert; tflite-runtime's explicit delegate shares one weights cache,
``tflite_train.runtime.xnnpack``).

Depth: the general ``train_step`` walks down to the lowest candidate with each layer's input
gradient in an IF gated by "a selected layer lies below" (not taken: x is passed through as a
same-shaped placeholder). The depth-specific ``train_step_<layer>`` signatures (metadata
``train_variants``) walk only the region of the layers from the cut upward, without IFs; the
runtime runs the shallowest one that reaches the deepest selected layer.

Design notes (measured, MCUNet@128, tflite-runtime 2.14, 1 thread): a TFLite IF copies its inputs
into the branch and re-plans the branch's buffers at every call, so IF bodies are flat (no nesting)
and hold few full-size intermediates. The contract's scalar state (``num_classes``, ``step``,
``learning_rate``) is held in shape-[1] variables and reshaped at the signature boundary: tflite-runtime
2.14's XNNPACK delegate refuses a whole model (``ModifyGraphWithDelegate`` fails) when any rank-0
resource variable is assigned (``bench/results/TFLITE_RUNTIME_FASTPATH.md``).
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from converters.export_config import ExportConfig
from converters.graph.ir import Graph, Node
from converters.graph.region import gradient_region
from converters.ops import dispatch
from converters.ops.activations import activation_backward
from tflite_train import contract as C
from tflite_train.contract import state_names
from tflite_train.sparse.layer_table import LayerTable

NO_INPUT = np.array(0, np.int32)
"""The contract's dummy input of ``get_state`` / ``reset_state`` (CONTRACT.md)."""
NORM_EPS = 1e-12
DIRTY_SUFFIX = "_dirty"
"""Name suffix of a candidate layer's copy-on-write flag variable (module docstring; not contract state)."""
MASKED_LOGIT = -1e9


__all__ = ["TrainableModule", "state_names", "train_cuts", "train_variant_name"]


def train_variant_name(table: LayerTable, cut: int) -> str:
    """Signature name of the depth-specific train step whose backward stops at layer ``cut``."""
    return C.train_variant_name(table.layers[cut].name)


def train_cuts(table: LayerTable, candidates: tuple[int, ...], variants: int) -> tuple[int, ...]:
    """Lowest layers of the depth-specific train steps, ascending: the first candidate of each of
    the last ``variants`` blocks holding candidates (each candidate layer when the candidates span
    fewer than two blocks), the lowest candidate excluded (the general ``train_step`` stops there)."""
    firsts: dict[int, int] = {}
    for i in candidates:
        firsts.setdefault(table.layers[i].block, i)
    groups = list(firsts.values()) if len(firsts) > 1 else list(candidates)
    cuts = sorted(i for i in groups if i != candidates[0])
    return tuple(cuts[len(cuts) - variants:]) if variants > 0 else ()


class TrainableModule(tf.Module):
    """The exported model as TF code; signatures are listed in ``signatures()``.

    Args:
      config: The export configuration.
      graph: The prepared graph (``converters.graph.passes.prepare_graph``).
      table: Its layer table (``converters.graph.layer_table.graph_layer_table``).
      candidates: Table indices of the candidate layers (``converters.graph.region``), ascending.
    """

    def __init__(self, config: ExportConfig, graph: Graph, table: LayerTable, candidates: tuple[int, ...]) -> None:
        super().__init__(name="tflite_train")
        self.config = config
        self.graph = graph
        self.table = table
        self.candidates = tuple(candidates)
        self.candidate_names = [table.layers[i].name for i in self.candidates]
        by_name = graph.by_name
        self.feature_dim = int(by_name[graph.output].shape[-1])
        self.mask_sizes = [table.layers[i].out_channels for i in self.candidates]
        self._slots = C.optimizer_slots(config.optimizer)
        self._shapes = {n.name: n.shape for n in graph.nodes}
        self._frozen: dict[str, tuple[tf.Tensor, tf.Tensor]] = {}
        self._vars: dict[str, tf.Variable] = {}
        self._initial: dict[str, np.ndarray] = {}
        self._exported: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # candidate -> initial (kernel, bias)
        self._dirty: dict[str, tf.Variable] = {}
        for node in graph.weighted():
            kernel, bias = node.weights
            if node.name in self.candidate_names:
                self._add_var(node.name + C.KERNEL_SUFFIX, kernel)
                self._add_var(node.name + C.BIAS_SUFFIX, bias)
                for slot in self._slots:
                    self._add_var(f"{node.name}{C.KERNEL_SUFFIX}_{slot}", np.zeros_like(kernel))
                    self._add_var(f"{node.name}{C.BIAS_SUFFIX}_{slot}", np.zeros_like(bias))
                self._add_var(node.name + C.MASK_SUFFIX, np.zeros([node.shape[-1]], np.float32))
                self._exported[node.name] = (np.asarray(kernel, np.float32), np.asarray(bias, np.float32))
                self._dirty[node.name] = tf.Variable(np.zeros([1], np.float32), name=node.name + DIRTY_SUFFIX,
                                                     trainable=False)
            else:
                self._frozen[node.name] = (tf.constant(kernel), tf.constant(bias))
        k = config.class_capacity
        self._add_var(C.PROTOTYPES, np.zeros([k, self.feature_dim], np.float32))
        self._add_var(C.NUM_CLASSES, np.array(0, np.int32))
        self._add_var(C.STEP, np.array(0.0, np.float32))
        self._add_var(C.LEARNING_RATE, np.array(config.learning_rate, np.float32))
        self.names = state_names(self.candidate_names, config.optimizer)
        self.train_cuts = train_cuts(table, self.candidates, config.train_variants)
        self._regions = {cut: gradient_region(graph, [l.name for l in table.layers[cut:] if l.name in self.candidate_names])
                         for cut in (self.candidates[0], *self.train_cuts)}
        # Candidates upstream of each node's first input: its input gradient is needed iff one is selected.
        self._upstream = {n.name: [c for c in self.candidate_names if c in graph.ancestors(n.inputs[0])]
                          for n in graph.weighted() if n.inputs}
        self.variables_list = [self._vars[n] for n in self.names]
        self._build_functions()

    def _add_var(self, name: str, value: np.ndarray) -> None:
        """A state variable; a scalar is held with shape [1] (module docstring)."""
        self._initial[name] = np.array(value)
        self._vars[name] = tf.Variable(np.reshape(value, [1]) if np.ndim(value) == 0 else value, name=name,
                                       trainable=False)

    def _is_scalar(self, name: str) -> bool:
        """A scalar of the contract, held with shape [1] (``_add_var``)."""
        return self._initial[name].ndim == 0

    def _read_state(self, name: str):
        """A state variable's value in its contract shape (scalars as rank 0)."""
        value = tf.identity(self._vars[name])
        return tf.reshape(value, []) if self._is_scalar(name) else value

    def _write_state(self, name: str, value) -> None:
        """Assigns a state variable from a value in its contract shape."""
        var = self._vars[name]
        var.assign(tf.reshape(tf.cast(value, var.dtype), [1]) if self._is_scalar(name) else value)

    @property
    def initial_state(self) -> dict[str, np.ndarray]:
        """The exported initial state (what ``reset_state`` restores)."""
        return {n: v.copy() for n, v in self._initial.items()}

    # ------------------------------------------------------------------ forward
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

    def _forward(self, images, from_variables: bool = False):
        """(embedding [N, D], {node: (inputs, z, y)}).

        ``from_variables``: candidate layers read their variables unconditionally (TF's own gradient
        with respect to them, ``converters.reference``); otherwise the copy-on-write IF decides."""
        spec = self.graph.input_spec
        mean = tf.constant(np.array(spec.mean, np.float32))
        inv_std = tf.constant(1.0 / np.array(spec.std, np.float32))
        values = {self.graph.nodes[0].name: (images - mean) * inv_std}
        saved = {}
        for node in self.graph.nodes[1:]:
            xs = [values[i] for i in node.inputs]
            if node.is_weighted:
                z = self._pre_activation(node, xs[0], from_variables)
                y = dispatch.weighted_activation(node, z)
            else:
                z, y = dispatch.forward(node, xs)
            values[node.name] = y
            saved[node.name] = (xs, z, y)
        return values[self.graph.output], saved

    def _head(self, emb):
        """Returns logits and the pieces the backward needs."""
        r = tf.math.rsqrt(tf.reduce_sum(emb * emb, axis=1, keepdims=True) + NORM_EPS)
        e_hat = emb * r
        proto = self._vars[C.PROTOTYPES]
        p_hat = proto * tf.math.rsqrt(tf.reduce_sum(proto * proto, axis=1, keepdims=True) + NORM_EPS)
        cos = tf.matmul(e_hat, p_hat, transpose_b=True)
        k = self.config.class_capacity
        valid = tf.cast(tf.range(k) < self._vars[C.NUM_CLASSES], tf.float32)
        scale = float(self.config.cosine_scale)
        logits = cos * (scale * valid) + (1.0 - valid) * MASKED_LOGIT
        return logits, (r, e_hat, p_hat, valid)

    def _loss_grad(self, emb, labels, per_sample: bool):
        """Loss, accuracy and g_e = dL/de (mean loss, or per-sample losses when ``per_sample``)."""
        logits, (r, e_hat, p_hat, valid) = self._head(emb)
        log_p = tf.nn.log_softmax(logits)
        onehot = tf.one_hot(labels, self.config.class_capacity, dtype=tf.float32)
        loss = tf.reduce_mean(-tf.reduce_sum(onehot * log_p, axis=1))
        pred = tf.cast(tf.argmax(logits, axis=1, output_type=tf.int32), tf.int32)
        accuracy = tf.reduce_mean(tf.cast(tf.equal(pred, labels), tf.float32))
        g_logits = tf.exp(log_p) - onehot
        if not per_sample:
            g_logits = g_logits / tf.cast(tf.shape(labels)[0], tf.float32)
        g_cos = g_logits * (float(self.config.cosine_scale) * valid)
        g_ehat = tf.matmul(g_cos, p_hat)
        g_emb = r * (g_ehat - e_hat * tf.reduce_sum(e_hat * g_ehat, axis=1, keepdims=True))
        return loss, accuracy, g_emb

    # ----------------------------------------------------------------- backward
    def _selected(self, name: str):
        return tf.reduce_max(self._vars[name + C.MASK_SUFFIX]) > 0.5

    def _backward(self, images, labels, mode: str, cut: int | None = None):
        """The backward walk. mode "fisher": returns (loss, accuracy, {layer: Delta}); "train": updates.

        ``cut`` (train only): table index of the lowest layer of a depth-specific variant (input
        gradients unconditional, valid only when no layer below ``cut`` is selected); None = the
        general ``train_step`` (down to the lowest candidate, input gradients gated).
        """
        emb, saved = self._forward(images)
        loss, accuracy, g_emb = self._loss_grad(emb, labels, per_sample=(mode == "fisher"))
        region = self._regions[self.candidates[0] if cut is None else cut]
        grads = {self.graph.output: g_emb}
        fisher = {}
        n = tf.cast(tf.shape(images)[0], tf.float32)
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

        def g_z():
            return activation_backward(z, y, g_y, a.get("activation", "linear"), a.get("alpha", 0.0))

        def input_grad():
            return dispatch.weighted_input_grad(node, g_z(), kernel, in_shape)

        is_candidate = node.name in self.candidate_names
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
            with tf.control_dependencies([g_x] if g_x is not None else []):
                # One flat IF without outputs (module docstring).
                tf.cond(self._selected(node.name), lambda: self._apply_update(node, x, g_z()), lambda: None)
        return g_x

    def _optimizer_step(self, cur: list, grad) -> list:
        """New values of [param, *slots] from their current values and the gradient (elementwise).

        Adam: m' = b1 m + (1 - b1) g, v' = b2 v + (1 - b2) g^2, w' = w - lr m'/(1 - b1^t) /
        (sqrt(v'/(1 - b2^t)) + eps); SGD with momentum: u' = mu u + g, w' = w - lr u'.
        """
        cfg = self.config
        lr = self._vars[C.LEARNING_RATE]
        if cfg.optimizer == "adam":
            t = self._vars[C.STEP]
            m = cfg.beta1 * cur[1] + (1.0 - cfg.beta1) * grad
            v = cfg.beta2 * cur[2] + (1.0 - cfg.beta2) * grad * grad
            m_hat = m / (1.0 - tf.pow(cfg.beta1, t))
            v_hat = v / (1.0 - tf.pow(cfg.beta2, t))
            return [cur[0] - lr * m_hat / (tf.sqrt(v_hat) + cfg.epsilon), m, v]
        mom = cfg.momentum * cur[1] + grad
        return [cur[0] - lr * mom, mom]

    def _apply_update(self, node: Node, x, g_z):
        """Optimizer step on the selected channels: the gradient of every channel in the kernel's own
        layout, the optimizer arithmetic on whole tensors, then SELECT by the mask (module docstring),
        so unselected channels of the variable and its slots keep their exact bits."""
        name = node.name
        grads = dispatch.weighted_weight_grad(node, x, g_z, self._shapes[node.inputs[0]])
        sel = self._vars[name + C.MASK_SUFFIX] > 0.5
        sel_w = tf.reshape(sel, [1, 1, -1, 1]) if node.op == "depthwise" else sel
        writes = []
        for param, grad, where in zip(("kernel", "bias"), grads, (sel_w, sel)):
            variables = [self._vars[nm] for nm in [f"{name}_{param}"] + [f"{name}_{param}_{s}" for s in self._slots]]
            cur = [var.read_value() for var in variables]
            new = self._optimizer_step(cur, grad)
            writes += [(var, tf.where(where, n, c)) for var, n, c in zip(variables, new, cur)]
        for var, value in writes:
            var.assign(value)
        self._dirty[name].assign([1.0])

    # --------------------------------------------------------------- signatures
    def _build_functions(self) -> None:
        h, w, c = self.graph.input_spec.shape
        images = tf.TensorSpec([None, h, w, c], tf.float32, name=C.IMAGES)
        labels = tf.TensorSpec([None], tf.int32, name=C.LABELS)
        dummy = tf.TensorSpec([], tf.int32, name=C.DUMMY)  # every signature takes an input (CONTRACT.md)
        k, d = self.config.class_capacity, self.feature_dim

        @tf.function(input_signature=[images])
        def infer(images):
            emb, _ = self._forward(images)
            logits, _ = self._head(emb)
            return {C.EMBEDDINGS: emb, C.LOGITS: logits}

        @tf.function(input_signature=[images, labels])
        def fisher(images, labels):
            _, _, deltas = self._backward(images, labels, "fisher")
            return {name: deltas[name] for name in self.candidate_names}

        @tf.function(input_signature=[images, labels])
        def train_step(images, labels):
            self._vars[C.STEP].assign_add([1.0])
            loss, accuracy, _ = self._backward(images, labels, "train")
            return {C.LOSS: loss, C.ACCURACY: accuracy}

        @tf.function(input_signature=[tf.TensorSpec([k, d], tf.float32, name=C.PROTOTYPES),
                                      tf.TensorSpec([], tf.int32, name=C.NUM_CLASSES)])
        def set_head(prototypes, num_classes):
            self._vars[C.PROTOTYPES].assign(prototypes)
            self._write_state(C.NUM_CLASSES, num_classes)
            return {C.OK: tf.constant(1, tf.int32)}

        @tf.function(input_signature=[tf.TensorSpec([sum(self.mask_sizes)], tf.float32, name=C.CHANNEL_MASK)])
        def set_selection(channel_mask):
            parts = tf.split(channel_mask, self.mask_sizes)
            for name, part in zip(self.candidate_names, parts):
                self._vars[name + C.MASK_SUFFIX].assign(part)
            return {C.OK: tf.constant(1, tf.int32)}

        @tf.function(input_signature=[tf.TensorSpec([], tf.float32, name=C.LEARNING_RATE)])
        def set_hparams(learning_rate):
            self._write_state(C.LEARNING_RATE, learning_rate)
            return {C.OK: tf.constant(1, tf.int32)}

        @tf.function(input_signature=[dummy])
        def get_state(dummy):  # noqa: ARG001 - the contract's dummy input
            return {n: self._read_state(n) for n in self.names}

        specs = [tf.TensorSpec(self._initial[n].shape, self._initial[n].dtype, name=n) for n in self.names]

        @tf.function(input_signature=specs)
        def set_state(*values):
            given = dict(zip(self.names, values))
            for n, value in given.items():
                self._write_state(n, value)
            for name in self.candidate_names:
                differs = self._exported_differs(name, given[name + C.KERNEL_SUFFIX], given[name + C.BIAS_SUFFIX])
                self._dirty[name].assign(tf.reshape(tf.cast(differs, tf.float32), [1]))
            return {C.OK: tf.constant(1, tf.int32)}

        @tf.function(input_signature=[dummy])
        def reset_state(dummy):  # noqa: ARG001 - the contract's dummy input
            for n in self.names:
                self._write_state(n, tf.constant(self._initial[n]))
            for name in self.candidate_names:
                self._dirty[name].assign(tf.zeros([1], tf.float32))
            return {C.OK: tf.constant(1, tf.int32)}

        def variant(cut: int):
            @tf.function(input_signature=[images, labels])
            def train_step_cut(images, labels):
                self._vars[C.STEP].assign_add([1.0])
                loss, accuracy, _ = self._backward(images, labels, "train", cut=cut)
                return {C.LOSS: loss, C.ACCURACY: accuracy}
            return train_step_cut

        self.train_variants = {train_variant_name(self.table, cut): variant(cut) for cut in self.train_cuts}
        self.infer, self.fisher, self.train_step = infer, fisher, train_step
        self.set_head, self.set_selection, self.set_hparams = set_head, set_selection, set_hparams
        self.get_state, self.set_state, self.reset_state = get_state, set_state, reset_state

    def signatures(self) -> dict:
        """Signature name -> concrete function, for ``tf.saved_model.save``."""
        out = {
            name: getattr(self, name).get_concrete_function()
            for name in C.SIGNATURE_NAMES
        }
        return {**out, **{name: fn.get_concrete_function() for name, fn in self.train_variants.items()}}
