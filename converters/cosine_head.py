"""The cosine classifier head and its cross-entropy gradient, in builtin ops.

* cosine head:  e_hat = e r, r = (|e|^2 + eps)^-1/2, logits = s cos(e, p_c) for c < num_classes,
                -1e9 otherwise; g_e = r (g_ehat - e_hat <e_hat, g_ehat>).
* CE:           L_n = -log softmax(logits_n)[y_n];  dL_n/dlogits_n = softmax - onehot.
"""

from __future__ import annotations

import tensorflow as tf

from converters.export_config import ExportConfig

__all__ = ["MASKED_LOGIT", "NORM_EPS", "head_logits", "loss_and_embedding_grad"]

NORM_EPS = 1e-12
MASKED_LOGIT = -1e9


def head_logits(config: ExportConfig, emb, prototypes, num_classes):
    """(logits [N, K], (r, e_hat, p_hat, valid)): the logits and the pieces the backward needs."""
    r = tf.math.rsqrt(tf.reduce_sum(emb * emb, axis=1, keepdims=True) + NORM_EPS)
    e_hat = emb * r
    p_hat = prototypes * tf.math.rsqrt(tf.reduce_sum(prototypes * prototypes, axis=1, keepdims=True) + NORM_EPS)
    cos = tf.matmul(e_hat, p_hat, transpose_b=True)
    valid = tf.cast(tf.range(config.class_capacity) < num_classes, tf.float32)
    scale = float(config.cosine_scale)
    logits = cos * (scale * valid) + (1.0 - valid) * MASKED_LOGIT
    return logits, (r, e_hat, p_hat, valid)


def loss_and_embedding_grad(config: ExportConfig, emb, prototypes, num_classes, labels, per_sample: bool):
    """(loss, accuracy, g_e = dL/de): the mean loss's gradient, or the per-sample losses' when ``per_sample``."""
    logits, (r, e_hat, p_hat, valid) = head_logits(config, emb, prototypes, num_classes)
    log_p = tf.nn.log_softmax(logits)
    onehot = tf.one_hot(labels, config.class_capacity, dtype=tf.float32)
    loss = tf.reduce_mean(-tf.reduce_sum(onehot * log_p, axis=1))
    pred = tf.cast(tf.argmax(logits, axis=1, output_type=tf.int32), tf.int32)
    accuracy = tf.reduce_mean(tf.cast(tf.equal(pred, labels), tf.float32))
    g_logits = tf.exp(log_p) - onehot
    if not per_sample:
        g_logits = g_logits / tf.cast(tf.shape(labels)[0], tf.float32)
    g_cos = g_logits * (float(config.cosine_scale) * valid)
    g_ehat = tf.matmul(g_cos, p_hat)
    g_emb = r * (g_ehat - e_hat * tf.reduce_sum(e_hat * g_ehat, axis=1, keepdims=True))
    return loss, accuracy, g_emb
