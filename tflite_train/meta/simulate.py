"""TensorFlow simulation of the on-device adaptation (``tflite_train.runtime.adaptation.trainer.adapt``).

The reference the TFLite trainer is checked against (issue 4: same policy, same seed, same
selection -> the same query accuracy). It runs on the BN-folded Keras backbone with TF autodiff
instead of the exported hand-written backward, and repeats every step of ``adapt``:

1. head: prototypes c_k = mean of the support embeddings f(x) of class k; logits
   s * cos(f(x), c_k) for the K support classes (the exported head pads the other K_max - K
   classes with -1e9, which adds exp(-1e9) = 0 to the softmax);
2. Fisher (TinyTrain Eq. 1), from TF autodiff on the Keras model, independently of the
   exported ``fisher`` signature: Delta_o = 1/(2N) sum_n (sum_{h,w} a_nhwo g_nhwo)^2 with a the
   layer's output activation and g = dL_n/da the per-sample cross-entropy gradient;
3. selection with the same ``tflite_train.sparse.select`` and the same ``SelectionConfig``;
4. ``iterations`` steps on the same pseudo-queries (``draw_views`` then ``pseudo_query_batches``, from
   one ``numpy.random.Generator(seed)``; ``tflite_train.runtime.adaptation.pseudo_queries``), each step
   g = dL/dW of the mean cross-entropy (prototypes frozen), then the optimizer on the selected
   output channels only (unselected weights and slots unchanged):
   Adam (Kingma & Ba 2015, Alg. 1):  m <- b1 m + (1-b1) g,  v <- b2 v + (1-b2) g^2,
       W <- W - lr (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps),  t = steps so far;
   SGD with momentum:  u <- mu u + g,  W <- W - lr u;
5. the prototypes are recomputed from the adapted backbone (``refresh_head``), and the query
   accuracy is argmax_k cos(f(x), c_k) == y.

The folded backbone's weights are copied in and restored, so one model serves many tasks.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Mapping, Sequence
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from tflite_train import contract as C
from tflite_train.models import Backbone
from tflite_train.runtime.adaptation.adapt_config import AdaptConfig
from tflite_train.runtime.adaptation.pseudo_queries import draw_views, pseudo_query_batches
from tflite_train.runtime.adaptation.trainer import fisher_subset
from tflite_train.runtime.model.model_contract import check_metadata, input_range, layer_table
from tflite_train.sparse.policies import policy_spec, select
from tflite_train.sparse.selection import Selection


@dataclasses.dataclass(frozen=True)
class SimulationResult:
    """One simulated adaptation.

    Attributes:
      selection: The selected layers/channels (forward order).
      fisher: Delta_o per candidate layer (TF autodiff).
      losses, accuracies: Per-step mean cross-entropy and batch accuracy (before each update).
      query_accuracy: Accuracy on the query set after adaptation, in [0, 1].
      query_predictions: Predicted class per query image.
    """

    selection: Selection
    fisher: Mapping[str, np.ndarray]
    losses: tuple[float, ...]
    accuracies: tuple[float, ...]
    query_accuracy: float
    query_predictions: np.ndarray


class AdaptationSimulator:
    """TF twin of an exported model: the folded backbone plus the export's metadata.

    Args:
      folded: The BN-folded Keras backbone whose weights the ``.tflite`` was exported from.
      metadata: The exported model's ``tflite_train`` metadata (``read_metadata``): candidates,
        layer table, input normalisation, cosine scale, optimizer constants.

    Raises:
      ValueError: the backbone is not folded, or a candidate layer is missing from it.
    """

    def __init__(self, folded: Backbone, metadata: Mapping[str, Any]) -> None:
        if folded.batch_norm:
            raise ValueError("folded must be a BN-folded backbone (fold_batchnorm)")
        check_metadata(metadata)
        self.metadata = metadata
        self.table = layer_table(metadata)
        self.candidates: tuple[str, ...] = tuple(metadata[C.F_CANDIDATES])
        self.model = folded.model
        self.mean = np.asarray(metadata[C.F_INPUT][C.F_MEAN], np.float32)
        self.std = np.asarray(metadata[C.F_INPUT][C.F_STD], np.float32)
        self.scale = float(metadata[C.F_HEAD][C.F_SCALE])
        self.optimizer = dict(metadata[C.F_OPTIMIZER])
        outputs = []
        for name in self.candidates:
            try:
                outputs.append(self.model.get_layer(f"{name}_relu6").output)
            except ValueError:
                outputs.append(self.model.get_layer(name).output)
        self._activations = keras.Model(self.model.inputs, [*outputs, self.model.output])
        self._params = {name: self.model.get_layer(name).weights for name in self.candidates}
        self._initial = [w.numpy().copy() for w in self.model.weights]
        self._step_fn = tf.function(self._loss_and_grads, reduce_retracing=True)

    # ----------------------------------------------------------------- pieces
    def _normalise(self, images: np.ndarray) -> tf.Tensor:
        return tf.constant((np.asarray(images, np.float32) - self.mean) / self.std)

    def embed(self, images: np.ndarray, chunk_size: int = 64) -> np.ndarray:
        """Embeddings f32[N, D] of images in the model's input range."""
        return np.concatenate([self.model(self._normalise(images[i:i + chunk_size]), training=False).numpy()
                               for i in range(0, images.shape[0], chunk_size)])

    def _logits(self, embeddings: tf.Tensor, prototypes: tf.Tensor) -> tf.Tensor:
        e_hat = embeddings * tf.math.rsqrt(tf.reduce_sum(embeddings * embeddings, 1, keepdims=True) + 1e-12)
        p_hat = prototypes * tf.math.rsqrt(tf.reduce_sum(prototypes * prototypes, 1, keepdims=True) + 1e-12)
        return self.scale * tf.matmul(e_hat, p_hat, transpose_b=True)

    def fisher(self, images: np.ndarray, labels: np.ndarray, prototypes: np.ndarray) -> dict[str, np.ndarray]:
        """Delta_o per candidate layer (TinyTrain Eq. 1) by TF autodiff of the per-sample losses."""
        x = self._normalise(images)
        protos = tf.constant(prototypes, tf.float32)
        with tf.GradientTape() as tape:
            *acts, emb = self._activations(x, training=False)
            tape.watch(acts)
            losses = tf.nn.sparse_softmax_cross_entropy_with_logits(tf.constant(labels, tf.int32),
                                                                    self._logits(emb, protos))
            total = tf.reduce_sum(losses)  # samples are independent: d total / d a_n = dL_n / d a_n
        grads = tape.gradient(total, acts)
        n = float(images.shape[0])
        out = {}
        for name, a, g in zip(self.candidates, acts, grads):
            per_sample = tf.reduce_sum(tf.cast(a, tf.float64) * tf.cast(g, tf.float64), axis=[1, 2])
            out[name] = (tf.reduce_sum(per_sample * per_sample, axis=0) / (2.0 * n)).numpy().astype(np.float32)
        return out

    def _loss_and_grads(self, x, labels, prototypes):
        variables = [v for name in self.candidates for v in self._params[name]]
        with tf.GradientTape() as tape:
            logits = self._logits(self.model(x, training=False), prototypes)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits))
        accuracy = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, 1, output_type=tf.int32), labels), tf.float32))
        return loss, accuracy, tape.gradient(loss, variables)

    # ------------------------------------------------------------------ adapt
    def reset(self) -> None:
        """Restores the exported (initial) weights."""
        for var, value in zip(self.model.weights, self._initial):
            var.assign(value)

    def adapt(
        self,
        support_images: np.ndarray,
        support_labels: np.ndarray,
        query_images: np.ndarray,
        query_labels: np.ndarray,
        config: AdaptConfig = AdaptConfig(),
        *,
        augment: Any = None,
        fisher_tasks: Sequence[Mapping[str, np.ndarray]] | None = None,
    ) -> SimulationResult:
        """Simulates ``adapt`` + ``evaluate`` (module docstring) and restores the initial weights.

        Args:
          support_images, support_labels: f32 [N, H, W, C] in the input range; labels 0..K-1.
          query_images, query_labels: The query set.
          config: The same ``AdaptConfig`` the TFLite ``adapt`` gets.
          augment: ``augment(images, rng, config)``; default ``tflite_train.runtime.adaptation.augmentation.augment``.
          fisher_tasks: Meta-training Fisher dicts for ``sparse_update``.
        """
        if not isinstance(config, AdaptConfig):
            raise TypeError(f"config must be an AdaptConfig; got {type(config).__name__}")
        images = np.asarray(support_images, np.float32)
        labels = np.asarray(support_labels, np.int32)
        opt = self.optimizer
        augment_module = importlib.import_module("tflite_train.runtime.adaptation.augmentation")
        augment = augment_module.augment if augment is None else augment
        augment_config = augment_module.with_value_range(config.augment, input_range(self.metadata))
        self.reset()
        try:
            protos = _class_means(self.embed(images, config.chunk_size), labels)
            fisher = {}
            policy = policy_spec(config.policy)
            if policy.needs_fisher:
                subset = fisher_subset(labels, config.fisher_samples, config.seed)
                fisher = self.fisher(images[subset], labels[subset], protos)
            weights = None
            if policy.needs_weights(config.criterion, config.channel_method):
                weights = {n: _channel_last(self._params[n][0].numpy(), self.table[self.table.index_of(n)])
                           for n in self.candidates}
            selection = select(self.table, config.selection_config(opt[C.F_NAME]), candidates=self.candidates,
                               fisher=fisher or None, fisher_tasks=fisher_tasks, weights=weights).ordered(self.table)
            losses, accuracies = self._train(selection, images, labels, protos, config, augment, augment_config)
            if losses and config.refresh_head:
                protos = _class_means(self.embed(images, config.chunk_size), labels)
            query = self.embed(np.asarray(query_images, np.float32))
            predictions = np.argmax(self._logits(tf.constant(query), tf.constant(protos)).numpy(), axis=1)
            accuracy = float(np.mean(predictions == np.asarray(query_labels)))
        finally:
            self.reset()
        return SimulationResult(selection=selection, fisher=fisher, losses=tuple(losses),
                                accuracies=tuple(accuracies), query_accuracy=accuracy,
                                query_predictions=predictions.astype(np.int32))

    def _train(self, selection, images, labels, protos, config, augment, augment_config):
        losses: list[float] = []
        accuracies: list[float] = []
        steps = config.num_steps(images.shape[0])
        if selection.is_empty or steps == 0:
            return losses, accuracies
        opt = self.optimizer
        lr = float(opt[C.LEARNING_RATE] if config.learning_rate is None else config.learning_rate)
        order = [(name, p) for name in self.candidates for p in range(2)]
        masks, slots = {}, {}
        for name, p in order:
            var = self._params[name][p]
            chosen = np.zeros(self.table[self.table.index_of(name)].out_channels, bool)
            chosen[list(selection.channels.get(name, ()))] = True
            shape = var.shape
            if p == 0 and len(shape) == 4 and shape[-1] == 1 and shape[-2] == chosen.size and chosen.size > 1:
                chosen = chosen.reshape(1, 1, -1, 1)  # depthwise [k, k, C, 1]
            masks[(name, p)] = chosen
            slots[(name, p)] = [np.zeros(shape, np.float32), np.zeros(shape, np.float32)]
        protos_t = tf.constant(protos)
        rng = np.random.default_rng(config.seed)
        views = draw_views(rng, images, config.augment_views, augment, augment_config)
        view_labels = np.tile(labels, config.augment_views)
        batches = pseudo_query_batches(rng, images.shape[0], config.batch_size, steps, config.augment_views)
        for t, batch in enumerate(batches, start=1):
            loss, accuracy, grads = self._step_fn(self._normalise(views[batch]), tf.constant(view_labels[batch]), protos_t)
            losses.append(float(loss))
            accuracies.append(float(accuracy))
            for (name, p), grad in zip(order, grads):
                if name not in selection.channels:
                    continue
                var, sel, (m, v) = self._params[name][p], masks[(name, p)], slots[(name, p)]
                g, w = grad.numpy(), var.numpy()
                if opt[C.F_NAME] == "adam":
                    b1, b2, eps = float(opt[C.F_BETA1]), float(opt[C.F_BETA2]), float(opt[C.F_EPSILON])
                    m_new = b1 * m + (1 - b1) * g
                    v_new = b2 * v + (1 - b2) * g * g
                    w_new = w - lr * (m_new / (1 - b1 ** t)) / (np.sqrt(v_new / (1 - b2 ** t)) + eps)
                    slots[(name, p)] = [np.where(sel, m_new, m), np.where(sel, v_new, v)]
                else:
                    m_new = float(opt[C.F_MOMENTUM]) * m + g
                    w_new = w - lr * m_new
                    slots[(name, p)] = [np.where(sel, m_new, m), v]
                var.assign(np.where(sel, w_new, w).astype(np.float32))
        return losses, accuracies


def _class_means(embeddings: np.ndarray, labels: np.ndarray) -> np.ndarray:
    return np.stack([embeddings[labels == k].mean(axis=0) for k in range(int(labels.max()) + 1)]).astype(np.float32)


def _channel_last(kernel: np.ndarray, spec) -> np.ndarray:
    return kernel[..., 0] if spec.is_depthwise and kernel.shape[-1] == 1 else kernel
