"""A ``tf.Module`` whose signatures form the trainable ``.tflite`` contract (CONTRACT.md).

Every op of the forward and backward pass is written by hand over the layer table so that the
converted graph holds TFLite builtin ops only (TF's own gradients of Conv2D, DepthwiseConv2D and
ReLU6 lower to Flex ops). Notation per layer: x its input, z = conv(x, W) + b, y = act(z) its
output; g_y = dL/dy, g_z = dL/dz, g_x = dL/dx.

* ReLU6:        g_z = g_y * [0 < y < 6]
* 1x1 conv:     dW[ci, o] = sum_{n,h,w} x[n,h,w,ci] g_z[n,h,w,o];  g_x = conv1x1(g_z, W^T)
* k x k conv:   dW[dy,dx,ci,o] = sum x_pad[n, s*h+dy, s*w+dx, ci] g_z[n,h,w,o]   (im2col + matmul)
* depthwise:    dW[dy,dx,c] = sum x_pad[n, s*h+dy, s*w+dx, c] g_z[n,h,w,c];
                g_xpad = depthwise_valid(pad_{k-1}(dilate_s(g_z)), flip(W)), cropped to x
* bias:         db[o] = sum_{n,h,w} g_z[n,h,w,o]
* "same" padding as Keras/TF: pad_total = max((H'-1)s + k - H, 0), pad_before = pad_total // 2.
* GAP:          g_h = g_e / (H W) broadcast over space.
* cosine head:  e_hat = e r, r = (|e|^2 + eps)^-1/2, logits = s cos(e, p_c) for c < num_classes,
                -1e9 otherwise; g_e = r (g_ehat - e_hat <e_hat, g_ehat>).
* CE:           L_n = -log softmax(logits_n)[y_n];  dL_n/dlogits_n = softmax - onehot.
* Fisher (TinyTrain Eq. 1): Delta_o = 1/(2N) sum_n (sum_{h,w} a_nhwo g_nhwo)^2 with a = y and g the
  per-sample gradient dL_n/dy.

Selection (``set_selection``): one f32 mask variable per candidate layer. The weight gradient and
optimizer step of a candidate layer sit in one flat ``tf.cond`` (TFLite IF) taken only when the
layer has a selected channel; inside, only the selected channels are gathered (``tf.where`` +
GATHER), differentiated and updated (O(K) optimizer arithmetic), then scattered back and merged
with SELECT so unselected channels stay bit-identical.

Depth: the general ``train_step`` walks down to the lowest candidate with each input gradient in
an IF gated by "a selected layer lies below" (not taken: x is passed through as a same-shaped
placeholder, no zero fill). The depth-specific ``train_step_<layer>`` signatures (metadata
``train_variants``; cut at the first layer of each of the last ``train_variants`` candidate blocks)
stop the walk at that layer and compute the input gradients above it without IFs; the runtime
wrapper runs the shallowest one that reaches the deepest selected layer.

Design notes (measured, MCUNet@128, tflite-runtime 2.14, 1 thread):
* a TFLite IF copies its inputs into the branch and the branch's buffers are freshly allocated at
  every call, so IF bodies must be flat (no nesting) and hold few full-size intermediates: the
  old dense Adam inside an IF cost 8.6 ms (no XNNPACK) / 1.5 ms (XNNPACK) for b13_project vs
  1.0 ms with the gathered update;
* the depthwise input gradient computes only the h x w outputs that map to x (11.8 -> 2.1 ms for
  b10_depthwise, 7x7 stride 2).
"""

from __future__ import annotations

import math

import numpy as np
import tensorflow as tf

from converters.export_config import ExportConfig
from tflite_train.sparse.layer_table import LayerSpec, LayerTable

NORM_EPS = 1e-12
MASKED_LOGIT = -1e9


def same_padding(size: int, kernel: int, stride: int) -> tuple[int, int, int]:
    """(pad_before, pad_after, out_size) of TF/Keras "same" padding along one axis."""
    out = math.ceil(size / stride)
    total = max((out - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2, out


def candidate_indices(table: LayerTable, candidate_blocks: int) -> tuple[int, ...]:
    """Candidate layers: the last k blocks plus the final conv; the stem too when k = num_blocks.

    Raises:
      ValueError: if ``candidate_blocks`` is not in 1..num_blocks.
    """
    if not isinstance(candidate_blocks, int) or not 1 <= candidate_blocks <= table.num_blocks:
        raise ValueError(f"candidate_blocks must be an int in 1..{table.num_blocks}; got {candidate_blocks!r}")
    indices = set(table.last_blocks(candidate_blocks))
    if candidate_blocks == table.num_blocks:
        indices.add(0)
    return tuple(sorted(indices))


def state_names(table: LayerTable, candidates: tuple[int, ...], optimizer: str) -> list[str]:
    """Names of all state variables, in ``get_state`` order (also the ``set_state`` input names)."""
    slots = ("m", "v") if optimizer == "adam" else ("mom",)
    names = []
    for i in candidates:
        layer = table.layers[i].name
        names += [f"{layer}_kernel", f"{layer}_bias"]
        names += [f"{layer}_{p}_{s}" for p in ("kernel", "bias") for s in slots]
        names.append(f"{layer}_mask")
    return names + ["prototypes", "num_classes", "step", "learning_rate"]


def train_variant_name(table: LayerTable, cut: int) -> str:
    """Signature name of the depth-specific train step whose backward stops at layer ``cut``."""
    return f"train_step_{table.layers[cut].name}"


def train_cuts(table: LayerTable, candidates: tuple[int, ...], variants: int) -> tuple[int, ...]:
    """Lowest layers of the depth-specific train steps: the first layer of each of the last
    ``variants`` blocks holding candidates (the lowest candidate itself excluded: the general
    ``train_step`` already stops there), ascending."""
    firsts = {}
    for i in candidates:
        firsts.setdefault(table.layers[i].block, i)
    cuts = sorted(i for i in firsts.values() if i != candidates[0])
    return tuple(cuts[len(cuts) - variants:]) if variants > 0 else ()


class TrainableModule(tf.Module):
    """The exported model as TF code; signatures are listed in ``signatures()``.

    Args:
      config: The export configuration.
      table: The backbone's layer table.
      weights: ``{layer name: (kernel, bias)}`` of the BN-folded backbone (Keras kernel layouts).
      feature_dim: Width D of the embedding.
      residual_blocks: Indices of the blocks with a residual add.
    """

    def __init__(
        self,
        config: ExportConfig,
        table: LayerTable,
        weights: dict[str, tuple[np.ndarray, np.ndarray]],
        feature_dim: int,
        residual_blocks: frozenset[int],
    ) -> None:
        super().__init__(name="tflite_train")
        self.config = config
        self.table = table
        self.candidates = candidate_indices(table, config.candidate_blocks)
        self.feature_dim = feature_dim
        self.residual_blocks = residual_blocks
        self.mask_sizes = [table.layers[i].out_channels for i in self.candidates]
        self._slots = ("m", "v") if config.optimizer == "adam" else ("mom",)
        self._frozen: dict[str, tuple[tf.Tensor, tf.Tensor]] = {}
        self._vars: dict[str, tf.Variable] = {}
        self._initial: dict[str, np.ndarray] = {}
        for spec in table:
            kernel, bias = (np.asarray(w, np.float32) for w in weights[spec.name])
            if spec.index in self.candidates:
                self._add_var(f"{spec.name}_kernel", kernel)
                self._add_var(f"{spec.name}_bias", bias)
                for slot in self._slots:
                    self._add_var(f"{spec.name}_kernel_{slot}", np.zeros_like(kernel))
                    self._add_var(f"{spec.name}_bias_{slot}", np.zeros_like(bias))
                self._add_var(f"{spec.name}_mask", np.zeros([spec.out_channels], np.float32))
            else:
                self._frozen[spec.name] = (tf.constant(kernel), tf.constant(bias))
        k = config.class_capacity
        self._add_var("prototypes", np.zeros([k, feature_dim], np.float32))
        self._add_var("num_classes", np.array(0, np.int32))
        self._add_var("step", np.array(0.0, np.float32))
        self._add_var("learning_rate", np.array(config.learning_rate, np.float32))
        self.names = state_names(table, self.candidates, config.optimizer)
        self.train_cuts = train_cuts(table, self.candidates, config.train_variants)
        self.variables_list = [self._vars[n] for n in self.names]
        self._build_functions()

    def _add_var(self, name: str, value: np.ndarray) -> None:
        self._initial[name] = np.array(value)
        self._vars[name] = tf.Variable(value, name=name, trainable=False)

    @property
    def initial_state(self) -> dict[str, np.ndarray]:
        """The exported initial state (what ``reset_state`` restores)."""
        return {n: v.copy() for n, v in self._initial.items()}

    # ------------------------------------------------------------------ forward
    def _params(self, spec: LayerSpec):
        if spec.name in self._frozen:
            return self._frozen[spec.name]
        return self._vars[f"{spec.name}_kernel"], self._vars[f"{spec.name}_bias"]

    def _conv(self, spec: LayerSpec, x):
        kernel, bias = self._params(spec)
        s = spec.stride
        if spec.is_depthwise:
            z = tf.nn.depthwise_conv2d(x, kernel, [1, s, s, 1], "SAME")
        else:
            z = tf.nn.conv2d(x, kernel, s, "SAME")
        z = z + bias
        return tf.clip_by_value(z, 0.0, 6.0) if spec.activation == "relu6" else z

    def _units(self):
        """The net as units: ("layer", spec) or ("block", b, [specs])."""
        by_block: dict[int, list[LayerSpec]] = {}
        for spec in self.table:
            by_block.setdefault(spec.block, []).append(spec)
        units = [("layer", -1, by_block[-1])]
        for b in range(self.table.num_blocks):
            units.append(("block", b, by_block[b]))
        if self.table.num_blocks in by_block:
            units.append(("layer", self.table.num_blocks, by_block[self.table.num_blocks]))
        return units

    def _forward(self, images):
        mean = tf.constant(np.array(self.config.mean, np.float32))
        inv_std = tf.constant(1.0 / np.array(self.config.std, np.float32))
        h = (images - mean) * inv_std
        acts = {}
        for kind, b, specs in self._units():
            block_in = h
            for spec in specs:
                y = self._conv(spec, h)
                acts[spec.name] = (h, y)
                h = y
            if kind == "block" and b in self.residual_blocks:
                h = h + block_in
        emb = tf.reduce_mean(h, axis=[1, 2])
        return emb, h, acts

    def _head(self, emb):
        """Returns logits and the pieces the backward needs."""
        r = tf.math.rsqrt(tf.reduce_sum(emb * emb, axis=1, keepdims=True) + NORM_EPS)
        e_hat = emb * r
        proto = self._vars["prototypes"]
        p_hat = proto * tf.math.rsqrt(tf.reduce_sum(proto * proto, axis=1, keepdims=True) + NORM_EPS)
        cos = tf.matmul(e_hat, p_hat, transpose_b=True)
        k = self.config.class_capacity
        valid = tf.cast(tf.range(k) < self._vars["num_classes"], tf.float32)
        scale = float(self.config.cosine_scale)
        logits = cos * (scale * valid) + (1.0 - valid) * MASKED_LOGIT
        return logits, (r, e_hat, p_hat, valid)

    def _loss_grad(self, emb, labels, per_sample: bool):
        """Loss, accuracy and g_e = dL/de (mean loss, or per-sample losses when ``per_sample``)."""
        logits, (r, e_hat, p_hat, valid) = self._head(emb)
        log_p = tf.nn.log_softmax(logits)
        onehot = tf.one_hot(labels, self.config.class_capacity, dtype=tf.float32)
        losses = -tf.reduce_sum(onehot * log_p, axis=1)
        loss = tf.reduce_mean(losses)
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
    @staticmethod
    def _pad_same(spec: LayerSpec, x):
        (hb, ha, _), (wb, wa, _) = (same_padding(spec.in_hw[i], spec.kernel, spec.stride) for i in (0, 1))
        return tf.pad(x, [[0, 0], [hb, ha], [wb, wa], [0, 0]])

    @staticmethod
    def _shifted(spec: LayerSpec, x_pad, dy: int, dx: int):
        """x_pad[:, s*h + dy, s*w + dx, :] for all output positions (h, w)."""
        s = spec.stride
        ho, wo = spec.out_hw
        return x_pad[:, dy:dy + s * (ho - 1) + 1:s, dx:dx + s * (wo - 1) + 1:s, :]

    def _weight_grad(self, spec: LayerSpec, x, g_z, idx):
        """Channel-major gradients of the channels ``idx`` only: dW_sel [n, fan] and db_sel [n].

        ``fan`` = k*k (depthwise, tap order dy, dx) or k*k*C_in (dense, Keras order dy, dx, ci).
        """
        n = tf.shape(idx)[0]
        g_sel = tf.gather(g_z, idx, axis=3)
        db_sel = tf.reduce_sum(g_sel, axis=[0, 1, 2])
        if spec.is_depthwise:
            x_sel = tf.gather(self._pad_same(spec, x), idx, axis=3)
            taps = [
                tf.reduce_sum(self._shifted(spec, x_sel, dy, dx) * g_sel, axis=[0, 1, 2])
                for dy in range(spec.kernel) for dx in range(spec.kernel)
            ]
            return tf.stack(taps, axis=1), db_sel  # [n, k*k]
        if spec.kernel == 1 and spec.stride == 1:
            cols = tf.reshape(x, [-1, spec.in_channels])
        else:
            x_pad = self._pad_same(spec, x)
            cols = tf.concat(
                [self._shifted(spec, x_pad, dy, dx) for dy in range(spec.kernel) for dx in range(spec.kernel)],
                axis=3,
            )
            cols = tf.reshape(cols, [-1, spec.kernel * spec.kernel * spec.in_channels])
        g_mat = tf.reshape(g_sel, tf.stack([-1, n]))
        return tf.matmul(g_mat, cols, transpose_a=True), db_sel  # [n, fan]

    def _input_grad(self, spec: LayerSpec, g_z):
        kernel, _ = self._params(spec)
        if not spec.is_depthwise:
            if spec.kernel != 1 or spec.stride != 1:
                raise ValueError(f"input gradient of dense {spec.kernel}x{spec.kernel} conv {spec.name!r} unsupported")
            return tf.nn.conv2d(g_z, tf.transpose(kernel, [0, 1, 3, 2]), 1, "VALID")
        s, k, c = spec.stride, spec.kernel, spec.out_channels
        (h, w), (ho, wo) = spec.in_hw, spec.out_hw
        d = g_z
        if s > 1:  # zero-dilate: d[s*i] = g[i]
            d = tf.reshape(d, [-1, ho, 1, wo * c])
            d = tf.pad(d, [[0, 0], [0, 0], [0, s - 1], [0, 0]])
            d = tf.reshape(d, [-1, wo, 1, c])
            d = tf.pad(d, [[0, 0], [0, 0], [0, s - 1], [0, 0]])
            d = tf.reshape(d, [-1, ho * s, wo * s, c])
            d = d[:, : (ho - 1) * s + 1, : (wo - 1) * s + 1, :]
        hb, _, _ = same_padding(h, k, s)
        wb, _, _ = same_padding(w, k, s)
        # Only the h x w outputs that map to x are computed: g_x[i] = sum_t d_pad[i + t] * Wflip[t],
        # with d_pad = d shifted by k-1-hb (pad before) and cut/padded to h + k - 1 rows (same for w).
        dh, dw_ = (ho - 1) * s + 1, (wo - 1) * s + 1
        top, left = k - 1 - hb, k - 1 - wb
        bottom, right = h + k - 1 - top - dh, w + k - 1 - left - dw_
        d = tf.pad(d, [[0, 0], [top, max(bottom, 0)], [left, max(right, 0)], [0, 0]])
        if bottom < 0 or right < 0:
            d = d[:, : h + k - 1, : w + k - 1, :]
        flipped = tf.reverse(tf.reverse(kernel, [0]), [1])  # one axis per op: tflite-runtime 2.14 REVERSE_V2
        return tf.nn.depthwise_conv2d(d, flipped, [1, 1, 1, 1], "VALID")

    def _backward(self, images, labels, mode: str, cut: int | None = None):
        """Shared backward walk. mode "fisher": returns (loss, {layer: Delta}); "train": updates.

        ``cut`` (train only): index of the lowest layer the walk reaches. None = the lowest candidate,
        with the input gradient of each layer gated by "a selected layer lies below" (general
        ``train_step``); an int = a depth-specific variant whose input gradients above ``cut`` are
        unconditional (valid only for selections with no selected layer below ``cut``).
        """
        emb, h_last, acts = self._forward(images)
        loss, accuracy, g_emb = self._loss_grad(emb, labels, per_sample=(mode == "fisher"))
        hw = float(h_last.shape[1] * h_last.shape[2])
        g = tf.zeros_like(h_last) + tf.reshape(g_emb / hw, [-1, 1, 1, self.feature_dim])
        lowest = self.candidates[0] if cut is None else cut
        cand_pos = {i: p for p, i in enumerate(self.candidates)}
        selected = [tf.reduce_max(self._vars[f"{self.table.layers[i].name}_mask"]) > 0.5 for i in self.candidates]
        below = [tf.constant(False)]
        for p in range(1, len(selected)):
            below.append(tf.logical_or(below[-1], selected[p - 1]))
        fisher = {}
        n = tf.cast(tf.shape(images)[0], tf.float32)

        def grad_z(spec: LayerSpec, y, g_y):
            return g_y * tf.cast((y > 0.0) & (y < 6.0), tf.float32) if spec.activation == "relu6" else g_y

        def layer_back(spec: LayerSpec, g_y):
            x, y = acts[spec.name]
            needs_input_grad = spec.index != lowest
            if mode == "fisher":
                per_sample = tf.reduce_sum(y * g_y, axis=[1, 2])
                fisher[spec.name] = tf.reduce_sum(per_sample * per_sample, axis=0) / (2.0 * n)
                g_z = grad_z(spec, y, g_y)
                return self._input_grad(spec, g_z) if needs_input_grad else None
            p = cand_pos[spec.index]
            # Flat, un-nested IFs (a TFLite IF copies its inputs into the branch and re-plans the
            # branch's memory at every call; nesting multiplies both). The input gradient reads the
            # weights BEFORE this layer's update (automatic control dependencies keep program order).
            g_x = None
            if needs_input_grad and cut is not None:
                g_x = self._input_grad(spec, grad_z(spec, y, g_y))
            elif needs_input_grad:
                # Not taken: nothing below is selected, so g_x is never used; pass x through as a
                # same-shaped placeholder instead of filling zeros.
                g_x = tf.cond(below[p], lambda: self._input_grad(spec, grad_z(spec, y, g_y)), lambda: tf.identity(x))
            with tf.control_dependencies([g_x] if g_x is not None else []):
                tf.cond(selected[p], lambda: self._apply_update(spec, x, grad_z(spec, y, g_y)), lambda: tf.constant(0))
            return g_x

        done = False
        for kind, b, specs in reversed(self._units()):
            g_out = g
            for spec in reversed(specs):
                g = layer_back(spec, g)
                if spec.index == lowest:
                    done = True
                    break
            if done:
                break
            if kind == "block" and b in self.residual_blocks:
                g = g + g_out
        return loss, accuracy, fisher

    def _apply_update(self, spec: LayerSpec, x, g_z):
        """Optimizer step on the selected channels only: O(K) arithmetic, O(full) merge.

        The selected channels of the variable and its slots are gathered channel-major ([n, fan]),
        updated (Adam / SGD-momentum elementwise, as on dense tensors), scattered back and merged
        with SELECT, so unselected channels keep their exact bits and the full-size work is one
        scatter, one transpose and one select per tensor (no full-size optimizer arithmetic).
        """
        mask = self._vars[f"{spec.name}_mask"]
        sel = mask > 0.5
        idx = tf.cast(tf.reshape(tf.where(sel), [-1]), tf.int32)
        dw_sel, db_sel = self._weight_grad(spec, x, g_z, idx)
        cout = spec.out_channels
        fan = dw_sel.shape[1]
        sel_w = tf.reshape(sel, [1, 1, cout, 1]) if spec.is_depthwise else sel
        cfg = self.config
        lr = self._vars["learning_rate"]
        writes = []
        for param, grad, where in (("kernel", dw_sel, sel_w), ("bias", db_sel, sel)):
            names = [f"{spec.name}_{param}"] + [f"{spec.name}_{param}_{s}" for s in self._slots]
            variables = [self._vars[nm] for nm in names]
            values = [var.read_value() for var in variables]  # one READ_VARIABLE each
            if param == "kernel":
                def gather(v):  # [.., cout] (depthwise [k, k, C, 1]) -> [n, fan]
                    return tf.transpose(tf.gather(tf.reshape(v, [fan, cout]), idx, axis=1))

                def merge(v, new):
                    full = tf.transpose(tf.scatter_nd(idx[:, None], new, [cout, fan]))
                    return tf.where(where, tf.reshape(full, v.shape), v)
            else:
                def gather(v):
                    return tf.gather(v, idx)

                def merge(v, new):
                    return tf.where(where, tf.scatter_nd(idx[:, None], new, [cout]), v)
            cur = [gather(v) for v in values]
            if cfg.optimizer == "adam":
                t = self._vars["step"]
                m = cfg.beta1 * cur[1] + (1.0 - cfg.beta1) * grad
                v = cfg.beta2 * cur[2] + (1.0 - cfg.beta2) * grad * grad
                m_hat = m / (1.0 - tf.pow(cfg.beta1, t))
                v_hat = v / (1.0 - tf.pow(cfg.beta2, t))
                new = [cur[0] - lr * m_hat / (tf.sqrt(v_hat) + cfg.epsilon), m, v]
            else:
                mom = cfg.momentum * cur[1] + grad
                new = [cur[0] - lr * mom, mom]
            writes += [(var, merge(old, value)) for var, old, value in zip(variables, values, new)]
        for var, value in writes:
            var.assign(value)
        return tf.constant(0)

    # --------------------------------------------------------------- signatures
    def _build_functions(self) -> None:
        h, w = self.config.input_size
        c = self.config.in_channels
        images = tf.TensorSpec([None, h, w, c], tf.float32, name="images")
        labels = tf.TensorSpec([None], tf.int32, name="labels")
        k, d = self.config.class_capacity, self.feature_dim

        @tf.function(input_signature=[images])
        def infer(images):
            emb, _, _ = self._forward(images)
            logits, _ = self._head(emb)
            return {"embeddings": emb, "logits": logits}

        @tf.function(input_signature=[images, labels])
        def fisher(images, labels):
            _, _, deltas = self._backward(images, labels, "fisher")
            return {self.table.layers[i].name: deltas[self.table.layers[i].name] for i in self.candidates}

        @tf.function(input_signature=[images, labels])
        def train_step(images, labels):
            self._vars["step"].assign_add(1.0)
            loss, accuracy, _ = self._backward(images, labels, "train")
            return {"loss": loss, "accuracy": accuracy}

        @tf.function(input_signature=[tf.TensorSpec([k, d], tf.float32, name="prototypes"),
                                      tf.TensorSpec([], tf.int32, name="num_classes")])
        def set_head(prototypes, num_classes):
            self._vars["prototypes"].assign(prototypes)
            self._vars["num_classes"].assign(num_classes)
            return {"ok": tf.constant(1, tf.int32)}

        @tf.function(input_signature=[tf.TensorSpec([sum(self.mask_sizes)], tf.float32, name="channel_mask")])
        def set_selection(channel_mask):
            parts = tf.split(channel_mask, self.mask_sizes)
            for i, part in zip(self.candidates, parts):
                self._vars[f"{self.table.layers[i].name}_mask"].assign(part)
            return {"ok": tf.constant(1, tf.int32)}

        @tf.function(input_signature=[tf.TensorSpec([], tf.float32, name="learning_rate")])
        def set_hparams(learning_rate):
            self._vars["learning_rate"].assign(learning_rate)
            return {"ok": tf.constant(1, tf.int32)}

        @tf.function(input_signature=[])
        def get_state():
            return {n: tf.identity(self._vars[n]) for n in self.names}

        specs = [tf.TensorSpec(self._initial[n].shape, self._vars[n].dtype, name=n) for n in self.names]

        @tf.function(input_signature=specs)
        def set_state(*values):
            for n, value in zip(self.names, values):
                self._vars[n].assign(value)
            return {"ok": tf.constant(1, tf.int32)}

        @tf.function(input_signature=[])
        def reset_state():
            for n in self.names:
                self._vars[n].assign(tf.constant(self._initial[n]))
            return {"ok": tf.constant(1, tf.int32)}

        def variant(cut: int):
            @tf.function(input_signature=[images, labels])
            def train_step_cut(images, labels):
                self._vars["step"].assign_add(1.0)
                loss, accuracy, _ = self._backward(images, labels, "train", cut=cut)
                return {"loss": loss, "accuracy": accuracy}
            return train_step_cut

        self.train_variants = {train_variant_name(self.table, cut): variant(cut) for cut in self.train_cuts}
        self.infer, self.fisher, self.train_step = infer, fisher, train_step
        self.set_head, self.set_selection, self.set_hparams = set_head, set_selection, set_hparams
        self.get_state, self.set_state, self.reset_state = get_state, set_state, reset_state

    def signatures(self) -> dict:
        """Signature name -> concrete function, for ``tf.saved_model.save``."""
        out = {
            name: getattr(self, name).get_concrete_function()
            for name in ("infer", "fisher", "train_step", "set_head", "set_selection", "set_hparams",
                         "get_state", "set_state", "reset_state")
        }
        return {**out, **{name: fn.get_concrete_function() for name, fn in self.train_variants.items()}}
