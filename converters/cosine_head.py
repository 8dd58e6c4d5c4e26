"""The cosine classifier head and its cross-entropy gradient, in builtin ops.

* cosine head:  e_hat = e r, r = (|e|^2 + eps)^-1/2, logits = s cos(e, p_c) for c < num_classes,
                -1e9 otherwise; g_e = r (g_ehat - e_hat <e_hat, g_ehat>).
* CE:           L_n = -log softmax(logits_n)[y_n];  dL_n/dlogits_n = softmax - onehot.

Episode loss with prototypes in the graph (``episode_loss_and_embedding_grad``; ProtoNet, Snell et al.
2017, as fine-tuned by P>M>F, Hu et al. CVPR 2022, TinyTrain appendix C): the rows of one batch are
support rows (u_n = 1) and pseudo-query rows (q_n = 1 - u_n = 1). With Y the one-hot labels [N, K],

* prototypes:   c_k = sum_n W_nk e_n, W_nk = u_n Y_nk / max(n_k, 1), n_k = sum_n u_n Y_nk (the mean
                embedding of class k's support rows; c_k = 0 when k has none, whose cosine is then 0);
* loss:         L = (1/Q) sum_n q_n L_n over the query rows' cosine logits against c, Q = max(sum_n q_n, 1);
* gradient:     G = dL/dlogits = q (softmax - Y) / Q, g_cos = s G (masked classes 0);
                dL/de_hat = g_cos p_hat, dL/dp_hat = g_cos^T e_hat, dL/dc = r_c (g_phat - p_hat <p_hat, g_phat>)
                (the normalisation's backward, as for e), and, since c = W^T e,
                dL/de = r (g_ehat - e_hat <e_hat, g_ehat>) + W dL/dc:
                a query row's gradient through its own embedding, a support row's through its prototype.
                A class without support rows has W[:, k] = 0, so its (finite: r_c = eps^-1/2, |g_phat| <= s)
                prototype gradient reaches no row, and nothing is NaN.
"""

from __future__ import annotations

import tensorflow as tf

from tflite_train.converters.export_config import ExportConfig

__all__ = ["MASKED_LOGIT", "NORM_EPS", "episode_loss_and_embedding_grad", "head_logits", "loss_and_embedding_grad"]

NORM_EPS = 1e-12
MASKED_LOGIT = -1e9


def _normalise(x):
    """(x_hat, r): the rows of ``x`` scaled to unit norm, x_hat = x r, r = (|x|^2 + eps)^-1/2 [N, 1]."""
    r = tf.math.rsqrt(tf.reduce_sum(x * x, axis=1, keepdims=True) + NORM_EPS)
    return x * r, r


def _normalise_backward(r, x_hat, g_xhat):
    """dL/dx of x_hat = x r (``_normalise``) from dL/dx_hat: r (g_xhat - x_hat <x_hat, g_xhat>), per row."""
    return r * (g_xhat - x_hat * tf.reduce_sum(x_hat * g_xhat, axis=1, keepdims=True))


def _cosine_logits(config: ExportConfig, e_hat, p_hat, num_classes):
    """(logits [N, K], valid [K]): s <e_hat, p_hat_c> for c < num_classes, MASKED_LOGIT otherwise."""
    cos = tf.matmul(e_hat, p_hat, transpose_b=True)
    valid = tf.cast(tf.range(config.class_capacity) < num_classes, tf.float32)
    scale = float(config.cosine_scale)
    return cos * (scale * valid) + (1.0 - valid) * MASKED_LOGIT, valid


def head_logits(config: ExportConfig, emb, prototypes, num_classes):
    """(logits [N, K], (r, e_hat, p_hat, valid)): the logits and the pieces the backward needs."""
    e_hat, r = _normalise(emb)
    p_hat, _ = _normalise(prototypes)
    logits, valid = _cosine_logits(config, e_hat, p_hat, num_classes)
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
    g_emb = _normalise_backward(r, e_hat, g_ehat)
    return loss, accuracy, g_emb


def episode_loss_and_embedding_grad(config: ExportConfig, emb, labels, support, num_classes):
    """(loss, accuracy, g_e = dL/de) of the episode loss with in-graph prototypes (module docstring).

    Args:
      config: The export configuration (class capacity K, cosine scale s).
      emb: Embeddings of every row [N, D], with the current weights.
      labels: int32 [N] class of each row (support and query).
      support: float32 [N], 1.0 = support row u_n, 0.0 = query row.
      num_classes: Classes in use (logits of classes >= num_classes are masked).

    Returns:
      The mean cross-entropy and the accuracy over the query rows (0 without query rows), and
      dL/de [N, D] through both the query embeddings and the prototypes.
    """
    onehot = tf.one_hot(labels, config.class_capacity, dtype=tf.float32)
    query = 1.0 - support
    members = onehot * tf.expand_dims(support, 1)
    weights = members / tf.maximum(tf.reduce_sum(members, axis=0), 1.0)  # W [N, K]
    prototypes = tf.matmul(weights, emb, transpose_a=True)  # c = W^T e [K, D]
    e_hat, r = _normalise(emb)
    p_hat, r_p = _normalise(prototypes)
    logits, valid = _cosine_logits(config, e_hat, p_hat, num_classes)
    log_p = tf.nn.log_softmax(logits)
    queries = tf.maximum(tf.reduce_sum(query), 1.0)
    loss = tf.reduce_sum(query * -tf.reduce_sum(onehot * log_p, axis=1)) / queries
    pred = tf.cast(tf.argmax(logits, axis=1, output_type=tf.int32), tf.int32)
    accuracy = tf.reduce_sum(query * tf.cast(tf.equal(pred, labels), tf.float32)) / queries
    g_logits = (tf.exp(log_p) - onehot) * tf.expand_dims(query / queries, 1)
    g_cos = g_logits * (float(config.cosine_scale) * valid)
    g_query = _normalise_backward(r, e_hat, tf.matmul(g_cos, p_hat))
    g_prototypes = _normalise_backward(r_p, p_hat, tf.matmul(g_cos, e_hat, transpose_a=True))
    return loss, accuracy, g_query + tf.matmul(weights, g_prototypes)
