"""ProtoNet with a cosine classifier (paper Eq. 1; P>M>F's scale and bias), in TensorFlow.

Prototype of class k: c_k = mean of the support embeddings of class k.
Logits of query x for class k: s * (cos(f(x), c_k) + b), with learnable scale s and bias b.
Loss: cross-entropy of the query logits (Eq. 1).
"""

from __future__ import annotations

import keras
import tensorflow as tf


def prototypes(support_embeddings: tf.Tensor, support_labels: tf.Tensor, ways: int | tf.Tensor) -> tf.Tensor:
    """Class means (ways, D) of the support embeddings (N, D) with labels in 0..ways-1."""
    sums = tf.math.unsorted_segment_sum(support_embeddings, support_labels, ways)
    counts = tf.math.unsorted_segment_sum(tf.ones_like(support_labels, tf.float32), support_labels, ways)
    return sums / tf.maximum(counts, 1.0)[:, None]


def cosine_logits(query_embeddings: tf.Tensor, protos: tf.Tensor, scale: tf.Tensor, bias: tf.Tensor) -> tf.Tensor:
    """s * (cos(q_n, c_k) + b), shape (M, ways)."""
    q = tf.math.l2_normalize(query_embeddings, axis=-1, epsilon=1e-12)
    p = tf.math.l2_normalize(protos, axis=-1, epsilon=1e-12)
    return scale * (tf.matmul(q, p, transpose_b=True) + bias)


class CosineHead(keras.layers.Layer):
    """Holds the learnable scale s and bias b of the cosine classifier."""

    def __init__(self, init_scale: float = 10.0, init_bias: float = 0.0, **kwargs) -> None:
        super().__init__(**kwargs)
        self.init_scale, self.init_bias = float(init_scale), float(init_bias)
        self.scale = self.add_weight(name="scale", shape=(), initializer=keras.initializers.Constant(self.init_scale))
        self.bias = self.add_weight(name="bias", shape=(), initializer=keras.initializers.Constant(self.init_bias))

    def call(self, query_embeddings, protos):
        return cosine_logits(query_embeddings, protos, self.scale, self.bias)


def protonet_loss(logits: tf.Tensor, labels: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """(mean cross-entropy, accuracy) of query logits against labels."""
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
    acc = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, -1, output_type=labels.dtype), labels), tf.float32))
    return loss, acc
