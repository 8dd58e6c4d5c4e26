"""Parity of the exported signatures (on ai-edge-litert) with Keras + TF autodiff references.

References: `infer` = the BN-folded Keras model + the cosine head in TF; `fisher` = per-sample
gradients dL_n/da of the Keras layer activations via tf.GradientTape; `train_step` = GradientTape
on the Keras model (mean CE) + a masked, bias-corrected Adam / SGD-momentum in numpy.
Tolerances: embeddings/logits 1e-4 relative, Fisher 1e-3 relative, losses 1e-5 relative,
weights after 3 steps 1e-4 relative to the largest weight of the layer.
"""

from __future__ import annotations

import json

import keras
import numpy as np
import pytest
import tensorflow as tf

from converters.build_module import folded_backbone, module_from_backbone
from converters.export import build_metadata, convert
from converters.export_config import ExportConfig
from converters.fixtures import MCUNET_WEIGHTS, trained_config
from converters.flatbuffer_metadata import add_metadata
from tflite_train.runtime import TrainableModel

CASES = {
    "tiny": ExportConfig(backbone="tiny", input_size=(33, 33), candidate_blocks=2, class_capacity=6),
    "tiny_sgd_full": ExportConfig(backbone="tiny", input_size=(19, 19), candidate_blocks=4, class_capacity=6,
                                  optimizer="sgd_momentum", learning_rate=0.01),
    # the shipped meta-trained weights: a random 14-block init has embeddings of norm ~5e-7, comparable
    # to the cosine head's eps, which would make the comparison weak
    "mcunet": trained_config(MCUNET_WEIGHTS, (35, 35), candidate_blocks=2, class_capacity=6),
}


@pytest.fixture(scope="module", params=sorted(CASES))
def case(request):
    config = CASES[request.param]
    folded = folded_backbone(config)
    module = module_from_backbone(config, folded)
    model_bytes = add_metadata(convert(module), {"tflite_train": json.dumps(build_metadata(module)).encode()})
    return config, folded, module, TrainableModel(model_bytes)


def _head(config, emb, protos, k):
    e_hat = emb * tf.math.rsqrt(tf.reduce_sum(emb * emb, 1, keepdims=True) + 1e-12)
    p = tf.constant(protos)
    p_hat = p * tf.math.rsqrt(tf.reduce_sum(p * p, 1, keepdims=True) + 1e-12)
    valid = tf.cast(tf.range(config.class_capacity) < k, tf.float32)
    return config.cosine_scale * tf.matmul(e_hat, p_hat, transpose_b=True) * valid + (1 - valid) * -1e9


def _data(config, n=4, k=3, seed=0):
    rng = np.random.default_rng(seed)
    images = rng.uniform(size=(n, *config.input_size, config.in_channels)).astype(np.float32)
    return images, (np.arange(n) % k).astype(np.int32)


def _setup_head(model, images, labels, k):
    emb = model.infer(images)["embeddings"]
    protos = np.stack([emb[labels == c].mean(0) for c in range(k)])
    model.set_head(protos)
    padded = np.zeros((model.capacity, model.feature_dim), np.float32)
    padded[:k] = protos
    return padded


def _normalise(config, images):
    """The exported graph's in-graph normalisation, (x - mean) / std."""
    return (images - np.asarray(config.mean, np.float32)) / np.asarray(config.std, np.float32)


def _rel(a, b):
    return float(np.max(np.abs(np.asarray(a, np.float64) - b)) / max(np.max(np.abs(b)), 1e-12))


def test_infer_matches_keras(case):
    config, folded, _, model = case
    images, labels = _data(config, n=3)
    model.reset_state()
    protos = _setup_head(model, images, labels, 3)
    out = model.infer(images)
    emb = folded.model(_normalise(config, images))
    assert _rel(out["embeddings"], emb.numpy()) < 1e-4
    if config.weights:  # trained weights: embeddings far above the cosine head's eps (1e-12 on |e|^2)
        assert np.linalg.norm(emb.numpy(), axis=1).min() > 1.0
    ref = _head(config, emb, protos, 3).numpy()
    assert _rel(out["logits"][:, :3], ref[:, :3]) < 1e-4
    assert (out["logits"][:, 3:] < -1e8).all()


def _activation_model(folded, names):
    outs = []
    for name in names:
        try:
            outs.append(folded.model.get_layer(f"{name}_relu6").output)
        except ValueError:
            outs.append(folded.model.get_layer(name).output)
    return keras.Model(folded.model.inputs, outs + [folded.model.output])


def test_fisher_matches_autodiff(case):
    config, folded, _, model = case
    images, labels = _data(config, n=4)
    model.reset_state()
    protos = _setup_head(model, images, labels, 3)
    out = model.fisher(images, labels)
    names = model.candidates
    act_model = _activation_model(folded, names)
    with tf.GradientTape() as tape:
        *acts, emb = act_model(_normalise(config, images))
        logits = _head(config, emb, protos, 3)
        losses = tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
        total = tf.reduce_sum(losses)
    grads = tape.gradient(total, acts)
    for name, a, g in zip(names, acts, grads):
        ref = np.sum(np.sum((a * g).numpy(), axis=(1, 2)) ** 2, axis=0) / (2 * len(images))
        assert _rel(out[name], ref) < 1e-3, name


def test_train_steps_match_tf_reference(case):
    config, folded, module, model = case
    images, labels = _data(config, n=4, seed=3)
    model.reset_state()
    protos = _setup_head(model, images, labels, 3)
    meta_channels = model.candidate_channels
    names = model.candidates
    selection = {names[-1]: list(range(0, meta_channels[names[-1]], 2)),
                 names[0]: list(range(0, meta_channels[names[0]], 3))}
    model.set_selection(selection)
    losses = [model.train_step(images, labels)["loss"] for _ in range(3)]
    state = model.get_state()

    keras_model = keras.models.clone_model(folded.model)
    keras_model.set_weights(folded.model.get_weights())
    variables = {f"{n}_{p}": w for n in names for p, w in zip(("kernel", "bias"), keras_model.get_layer(n).weights)}
    slots = {k: [np.zeros(v.shape, np.float32), np.zeros(v.shape, np.float32)] for k, v in variables.items()}
    gmax = {k: np.zeros(v.shape, np.float32) for k, v in variables.items()}
    ref_losses = []
    for t in range(1, 4):
        with tf.GradientTape() as tape:
            logits = _head(config, keras_model(_normalise(config, images)), protos, 3)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits))
        ref_losses.append(float(loss))
        grads = tape.gradient(loss, list(variables.values()))
        for (key, var), g in zip(variables.items(), grads):
            layer = key.rsplit("_", 1)[0]
            chosen = np.zeros(meta_channels[layer], bool)
            chosen[selection.get(layer, [])] = True
            sel = chosen.reshape(1, 1, -1, 1) if var.shape.rank == 4 and var.shape[-1] == 1 and layer.endswith("depthwise") else chosen
            g, w = g.numpy(), var.numpy()
            gmax[key] = np.maximum(gmax[key], np.abs(g))
            m, v = slots[key]
            if config.optimizer == "adam":
                m_new = config.beta1 * m + (1 - config.beta1) * g
                v_new = config.beta2 * v + (1 - config.beta2) * g * g
                w_new = w - config.learning_rate * (m_new / (1 - config.beta1 ** t)) / (
                    np.sqrt(v_new / (1 - config.beta2 ** t)) + config.epsilon)
            else:
                m_new = config.momentum * m + g
                v_new = v
                w_new = w - config.learning_rate * m_new
            slots[key] = [np.where(sel, m_new, m), np.where(sel, v_new, v)]
            var.assign(np.where(sel, w_new, w).astype(np.float32))
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-5)
    for key, var in variables.items():
        ref = var.numpy()
        diff = np.abs(state[key] - ref)
        off = diff > 1e-4 * np.abs(ref).max()
        # Adam divides by sqrt(v): entries with gradients near float noise move by up to lr per
        # step in either implementation. Only those may differ, and by at most steps * lr.
        tiny = gmax[key] < 1e-3 * gmax[key].max()
        assert not (off & ~tiny).any(), (key, float(diff[off & ~tiny].max()))
        assert (diff <= 3 * config.learning_rate * 1.01).all(), key
        assert off.mean() < 0.01, (key, float(off.mean()))
