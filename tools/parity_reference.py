"""TensorFlow references for the parity tests of the exported signatures (run where TF is installed).

* ``infer``: the Keras model itself (inference mode, BatchNorm unfolded) up to the embedding, then
  the cosine head in TF.
* ``fisher``: TF autodiff (``tf.GradientTape``) of the per-sample losses through the module's
  forward pass, Delta_o = 1/(2N) sum_n (sum_d y_nd dL_n/dy_nd)^2 (TinyTrain Eq. 1).
* ``train_step``: TF autodiff of the mean loss w.r.t. the candidate kernels and biases, then a
  masked, bias-corrected Adam (or SGD with momentum) on the selected output channels in numpy.
* ``infer`` after the train steps (``AFTER_STEPS``): the module's forward on the updated variables
  (the copy-on-write variable path of the changed layers, ``converters.copy_on_write``).
* ``episode_step_from_<layer>`` (``EPISODE``, at the lowest cached cut when the parity selection can use
  it): from TF's own activation at the cut, TF autodiff of the query rows' mean loss with each prototype
  the mean embedding of its class's support rows, taken per class with ``tf.gather`` (zero for a class
  without one) and differentiated through, then the same numpy optimizer; ``EPISODE_STEPS`` steps on an
  episode where class 1 has a single support row and class 2's query rows have none.

The vectors are saved beside each fixture (``<fixture>.parity.npz``) so that the same comparison
runs on tflite-runtime in the Pi environment, which has no TensorFlow.
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from tflite_train import contract as C
from tflite_train.converters.ops import dispatch, registry
from tflite_train.converters.trainable_module import NO_INPUT, TrainableModule

PARITY_STEPS = 3
AFTER_STEPS = "infer_after_steps"
"""Key prefix of ``infer``'s reference after the PARITY_STEPS train steps (the updated weights)."""
EPISODE = "episode"
"""Key prefix of the episode step's reference: ``episode/images``, ``/labels``, ``/support_mask``,
``/num_classes``, ``/<step>/loss`` and ``/accuracy``, ``/state/<var>`` (kernels, biases, their slots)."""
EPISODE_STEPS = 2
EPISODE_LABELS = np.array([0, 0, 1, 0, 1, 2, 2], np.int32)
EPISODE_SUPPORT = np.array([1, 1, 1, 0, 0, 0, 0], np.float32)
"""Class 0: two support rows, class 1: a single one, class 2: none (its query rows score against a zero
prototype)."""


def keras_embedding(model: keras.Model, module: TrainableModule, images: np.ndarray) -> np.ndarray:
    """The Keras model's embedding of raw ``images`` (the model's own preprocessing, or the export's)."""
    graph = module.graph
    by_name = graph.by_name
    node = by_name[graph.output]
    appended = None  # the pooling or Flatten the exporter appends to an [H, W, D] embedding (select_embedding)
    if node.name.endswith("_embedding") and registry.embedding_rule(node):
        appended, node = node, by_name[node.inputs[0]]
    layer = node.attrs.get("keras_output", node.name)
    sub = keras.Model(model.inputs, model.get_layer(layer).output)
    spec = graph.input_spec
    if module.config.channel_order == C.CHANNEL_ORDER_BGR:  # the export reverses the fed RGB channels
        images = images[..., ::-1]
    x = images if spec.source != "config" else (images - np.float32(spec.mean)) / np.float32(spec.std)
    out = np.asarray(sub(x.astype(np.float32), training=False))
    if appended is not None:  # its forward, as the registry computes it
        out = dispatch.forward(appended, [tf.constant(out)])[1].numpy()
    return out.reshape(out.shape[0], -1)


def _head(module: TrainableModule, emb, prototypes, k: int):
    e_hat = emb * tf.math.rsqrt(tf.reduce_sum(emb * emb, 1, keepdims=True) + 1e-12)
    p = tf.convert_to_tensor(prototypes)
    p_hat = p * tf.math.rsqrt(tf.reduce_sum(p * p, 1, keepdims=True) + 1e-12)
    valid = tf.cast(tf.range(module.config.class_capacity) < k, tf.float32)
    return module.config.cosine_scale * tf.matmul(e_hat, p_hat, transpose_b=True) * valid + (1 - valid) * -1e9


def _numpy_step(module: TrainableModule, masks: dict[str, np.ndarray], values: dict[str, np.ndarray],
                slots: dict[str, list[np.ndarray]], grads: dict[str, np.ndarray], step: int) -> None:
    """The masked, bias-corrected Adam (or SGD with momentum) step ``step`` in numpy, in place on ``values``
    and ``slots`` ([m, v]; SGD: [momentum, unused])."""
    cfg = module.config
    for name, value in values.items():
        layer, param = name.rsplit("_", 1)
        sel = masks[layer] > 0.5
        where = sel.reshape(1, 1, -1, 1) if value.ndim == 4 and value.shape[-1] == 1 and \
            registry.weighted_kind(module.graph.by_name[layer].op).channelwise else sel
        g = grads[name]
        m, v = slots[name]
        if cfg.optimizer == "adam":
            m_new = cfg.beta1 * m + (1 - cfg.beta1) * g
            v_new = cfg.beta2 * v + (1 - cfg.beta2) * g * g
            update = cfg.learning_rate * (m_new / (1 - cfg.beta1 ** step)) / (
                np.sqrt(v_new / (1 - cfg.beta2 ** step)) + cfg.epsilon)
        else:
            m_new, v_new = cfg.momentum * m + g, v
            update = cfg.learning_rate * m_new
        values[name] = np.where(where, value - update, value).astype(np.float32)
        slots[name] = [np.where(where, m_new, m), np.where(where, v_new, v)]


def _candidate_variables(module: TrainableModule) -> dict:
    """The candidate kernel and bias variables by state name."""
    return {c + p: module._vars[c + p] for c in module.candidate_names for p in (C.KERNEL_SUFFIX, C.BIAS_SUFFIX)}


def parity_selection(module: TrainableModule) -> np.ndarray:
    """Every other channel of the lowest and of the highest candidate, all of a middle one."""
    parts = []
    count = len(module.mask_sizes)
    for p, size in enumerate(module.mask_sizes):
        mask = np.zeros(size, np.float32)
        if p in (0, count - 1):
            mask[::2] = 1.0
        elif p == count // 2:
            mask[:] = 1.0
        parts.append(mask)
    return np.concatenate(parts)


def reference_vectors(model: keras.Model, module: TrainableModule, seed: int = 0, n: int = 4,
                      k: int = 3) -> dict[str, np.ndarray]:
    """Inputs and reference outputs of infer, fisher and PARITY_STEPS train steps (module docstring)."""
    rng = np.random.default_rng(seed)
    spec = module.graph.input_spec
    low, high = spec.value_range
    images = rng.uniform(low, high, (n, *spec.shape)).astype(np.float32)
    labels = (np.arange(n) % k).astype(np.int32)
    module.reset_state(NO_INPUT)
    emb = keras_embedding(model, module, images)
    prototypes = np.zeros((module.config.class_capacity, module.feature_dim), np.float32)
    prototypes[:k] = np.stack([emb[labels == c].mean(axis=0) for c in range(k)])
    out = {C.IMAGES: images, C.LABELS: labels, C.PROTOTYPES: prototypes, C.NUM_CLASSES: np.array(k, np.int32),
           f"{C.INFER}/{C.EMBEDDINGS}": emb, f"{C.INFER}/{C.LOGITS}": _head(module, emb, prototypes, k).numpy()[:, :k]}

    x = tf.constant(images)
    with tf.GradientTape() as tape:
        tape.watch(x)  # records the whole forward, so intermediate activations have gradients
        emb_t, saved = module._forward(x, from_variables=True)
        acts = [saved[name][2] for name in module.candidate_names]
        losses = tf.nn.sparse_softmax_cross_entropy_with_logits(labels, _head(module, emb_t, prototypes, k))
        total = tf.reduce_sum(losses)
    grads = tape.gradient(total, acts)
    for name, a, g in zip(module.candidate_names, acts, grads):
        axes = tuple(range(1, len(a.shape) - 1))
        per_sample = np.sum((a * g).numpy(), axis=axes) if axes else (a * g).numpy()
        out[f"{C.FISHER}/{name}"] = np.sum(per_sample ** 2, axis=0) / (2 * n)

    mask = parity_selection(module)
    out[C.CHANNEL_MASK] = mask
    masks = dict(zip(module.candidate_names, np.split(mask, np.cumsum(module.mask_sizes)[:-1])))
    variables = _candidate_variables(module)
    values = {name: v.numpy().copy() for name, v in variables.items()}
    slots = {name: [np.zeros_like(v) for _ in range(2)] for name, v in values.items()}
    for step in range(1, PARITY_STEPS + 1):
        with tf.GradientTape() as tape:
            tape.watch(list(variables.values()))  # state variables are not trainable
            emb_t, _ = module._forward(x, from_variables=True)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
                labels, _head(module, emb_t, prototypes, k)))
        grads = dict(zip(variables, tape.gradient(loss, list(variables.values()))))
        out[f"{C.TRAIN_STEP}/{step - 1}/{C.LOSS}"] = np.array(loss.numpy(), np.float32)
        _numpy_step(module, masks, values, slots, {n: g.numpy() for n, g in grads.items()}, step)
        for name, value in values.items():
            variables[name].assign(value)
    for name, value in values.items():
        out[f"state/{name}"] = value
    emb_t, _ = module._forward(x, from_variables=True)  # the forward with the updated weights
    out[f"{AFTER_STEPS}/{C.EMBEDDINGS}"] = emb_t.numpy()
    out[f"{AFTER_STEPS}/{C.LOGITS}"] = _head(module, emb_t, prototypes, k).numpy()[:, :k]
    module.reset_state(NO_INPUT)
    if module.lowest_episode_cut is not None:
        out.update(episode_reference(module, masks, rng))
    return out


def episode_reference(module: TrainableModule, masks: dict[str, np.ndarray],
                      rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Inputs and TF references of ``EPISODE_STEPS`` episode steps from the lowest cached cut (module
    docstring), from the exported state with the selection ``masks``; the module is reset afterwards."""
    cut = module.lowest_episode_cut
    spec = module.graph.input_spec
    images = rng.uniform(*spec.value_range, (len(EPISODE_LABELS), *spec.shape)).astype(np.float32)
    k = int(EPISODE_LABELS.max()) + 1
    out = {f"{EPISODE}/{C.IMAGES}": images, f"{EPISODE}/{C.LABELS}": EPISODE_LABELS,
           f"{EPISODE}/{C.SUPPORT_MASK}": EPISODE_SUPPORT, f"{EPISODE}/{C.NUM_CLASSES}": np.array(k, np.int32)}
    module.reset_state(NO_INPUT)
    activations, _ = module._forward(tf.constant(images), stop=cut.frontier)
    support = np.flatnonzero(EPISODE_SUPPORT > 0.5)
    query = np.flatnonzero(EPISODE_SUPPORT < 0.5)
    d = module.feature_dim
    variables = _candidate_variables(module)
    values = {name: v.numpy().copy() for name, v in variables.items()}
    slots = {name: [np.zeros_like(v) for _ in range(2)] for name, v in values.items()}
    for step in range(1, EPISODE_STEPS + 1):
        with tf.GradientTape() as tape:
            tape.watch(list(variables.values()))
            emb, _ = module._forward(activations, from_variables=True, start=cut)
            rows = [support[EPISODE_LABELS[support] == c] for c in range(module.config.class_capacity)]
            protos = tf.stack([tf.reduce_mean(tf.gather(emb, r), axis=0) if len(r) else tf.zeros([d]) for r in rows])
            logits = _head(module, tf.gather(emb, query), protos, k)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(EPISODE_LABELS[query], logits))
        grads = dict(zip(variables, tape.gradient(loss, list(variables.values()))))
        correct = np.argmax(logits.numpy(), axis=1) == EPISODE_LABELS[query]
        out[f"{EPISODE}/{step - 1}/{C.LOSS}"] = np.array(loss.numpy(), np.float32)
        out[f"{EPISODE}/{step - 1}/{C.ACCURACY}"] = np.array(correct.mean(), np.float32)
        _numpy_step(module, masks, values, slots, {n: g.numpy() for n, g in grads.items()}, step)
        for name, value in values.items():
            variables[name].assign(value)
    slot_names = C.optimizer_slots(module.config.optimizer)
    for name, value in values.items():
        out[f"{EPISODE}/state/{name}"] = value
        for slot, slot_value in zip(slot_names, slots[name]):
            out[f"{EPISODE}/state/{name}_{slot}"] = slot_value.astype(np.float32)
    module.reset_state(NO_INPUT)
    return out
