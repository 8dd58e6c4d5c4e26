"""The self-test embedded in an exported model: its inputs and TensorFlow's goldens (format 2).

Stores what the device check needs and nothing it can regenerate (format described in
``tflite_train.runtime.model.selftest``, which replays it): the images are regenerated on the device from a
stored seed (``selftest_images``), and the candidate kernels after the train steps are stored as one
sketch value per output channel (``kernel_sketch``) instead of whole tensors; the unselected channels
are checked bit-identical on the device against the model's own initial state, which needs no golden.
On MCUNet@128 this takes the self-test from 1.57 MB (a third of the file) to a few KB.
"""

from __future__ import annotations

import io
import logging

import numpy as np
import tensorflow as tf

from tflite_train import contract as C
from tflite_train.converters.trainable_module import NO_INPUT, TrainableModule
from tflite_train.runtime.model.selftest import (EPISODE, SELFTEST_FORMAT_VERSION, group_deviations, kernel_sketch,
                                                 selftest_images, selftest_support_mask)

LOG = logging.getLogger(__name__)

SELFTEST_STEPS = 2
TOLERANCES = {C.INFER: 5e-4, C.FISHER: 2e-3, C.TRAIN_STEP: 5e-4, "state": 1e-3, "frozen": 0.0, EPISODE: 1e-3}
"""Floors of the relative deviations (max |a-b| / max |golden|, ``runtime.selftest.deviation``) allowed
between TFLite and TensorFlow; the stored tolerance of a group is the larger of its floor and
``NOISE_FACTOR`` times the model's measured sensitivity (``measured_tolerances``).

``infer`` and ``train_step``: a 50-layer net accumulates float32 rounding differences between the
XNNPACK and TF kernels of up to ~2e-4 (measured on keras.applications MobileNetV2/V3 with
calibrated BatchNorm statistics); a wrong op or gradient deviates by orders of magnitude more.

``state`` is looser: Adam divides by sqrt(v), so weights whose gradient is at float-noise level move
by up to lr per step in either runtime (measured 1.3e-4 on MCUNet@128, all layers candidates; the
self-test's labels and prototypes keep the gradients away from that level, ``selftest_prototypes``).
``frozen`` (unselected channels unchanged by the steps) is exact. ``episode`` (losses and state after the
episode steps, ``episode_step_from_<cut>``) holds weights after Adam steps, so it takes ``state``'s floor."""

PERTURBATION = 1e-6
"""Relative size of the input perturbation that measures the procedure's sensitivity to rounding: the
images move by PERTURBATION * (hi - lo) * U(-1, 1), ~16 float32 ulps of the input range."""
NOISE_FACTOR = 30.0
"""Tolerance / measured spread. The device's kernels round differently from TF's in every op (relative
2^-24 per operation, accumulated like an input error of a few ulps propagated through the same
Jacobians), so its deviation is of the order of the spread under a 16-ulp input perturbation (measured
0.3-2x on keras MobileNetV2/V1, Sequential CNNs, both runtimes); 30x leaves margin for deeper nets and
other kernels while a wrong op or weight deviates by >= 1e-2."""
INT8_NOISE_FACTOR = 10.0
"""Tolerance / measured spread of an int8 export (``converters.int8_prefix``). Its TensorFlow goldens run the
prefix through fake quantization, and the 1e-6 input perturbation flips roundings of the int8 grid as a
runtime's int8 kernels do. Measured on Lite0 @128 (deviation / spread): LiteRT 1.1-1.5x in every group,
tflite-runtime 2.14's builtin int8 kernels up to 4.7x (train_step loss), so 3x failed there; 10x leaves
margin and is still 3x tighter than the float factor (``docs/int8.md``)."""
INT8_TOLERANCES = {C.INFER: 2e-2, C.FISHER: 1e-1, C.TRAIN_STEP: 2e-2, "state": 2e-2, "frozen": 0.0, EPISODE: 1e-1}
"""Floors of an int8 export's groups: the 1e-6 perturbation may flip no rounding at all on a small model
(spread 0), while a runtime's int8 kernels still differ from TensorFlow's fake quantization by an LSB here
and there (measured on a LeakyReLU Keras CNN at 23 px, LiteRT: infer 8.9e-3, fisher 1.0e-2, train_step
3.7e-3, state 7.7e-4). ``episode``: its prototypes are single support rows' embeddings, so the int8 kernels'
rounding of the activations at the cut reaches its losses by 1.6e-2 and the biases (zero at export, ~2 lr after
the two Adam steps) by 4.6e-2 of their scale (same model), hence fisher's floor."""
WEAK_TOLERANCE = 0.05
"""A measured tolerance above this is logged as a warning: the group then detects only gross errors."""


def _image_spec(module: TrainableModule, batch: int) -> tuple[tuple[int, ...], tuple[float, float]]:
    """(N, H, W, C) and the value range of the model's input images."""
    spec = module.graph.input_spec
    return (batch, *spec.shape), tuple(float(v) for v in spec.value_range)


def selftest_labels(batch: int, num_classes: int) -> np.ndarray:
    """Labels ``(n // 2) % num_classes``: [0], [0, 0, 1], [0, 0, 1, 1, 2], ... (unequal class counts).

    Why unequal: when the embeddings do not depend on the image (an untrained network whose signal
    dies before the embedding), every sample has the same softmax sigma, and the batch gradient at the
    embedding is proportional to sum_n (sigma - y_n) = N sigma - counts. With balanced labels and a
    near-uniform sigma that difference is ~0 and the gradient is rounding noise; with counts (2, 1, 0)
    it is (-1, 0, 1) + O(sigma - 1/K), far from zero.
    """
    return ((np.arange(batch) // 2) % num_classes).astype(np.int32)


def selftest_prototypes(seed: int, num_classes: int, feature_dim: int) -> np.ndarray:
    """Unit-norm prototypes drawn from ``default_rng([seed, *b"prototypes"])`` (standard normal rows).

    Why not the class means of the self-test embeddings: the head's loss gradient at an embedding is
    dL/d e_hat = (s / N) sum_c (sigma_c - y_c) p_hat_c. If the prototypes are (nearly) parallel, as the
    class means of an untrained network's collapsed embeddings are, this is p_hat sum_c (sigma_c - y_c)
    = 0 up to rounding, and Adam (step = lr m / (sqrt(v) + eps)) turns that rounding noise into a full
    step of +-lr whose sign differs between runtimes (measured: keras MobileNetV2(alpha 0.35) from its
    constructor, ``state`` deviation 1.98 on LiteRT, 1.75 on tflite-runtime 2.14). Independent random
    directions in D >= K dimensions are linearly independent, so the gradient vanishes only where
    sigma = onehot, which a softmax never reaches; random directions also make the logits of a
    collapsed embedding differ by ~s / sqrt(D) between classes, so ``accuracy`` (an argmax) has no
    near-ties that float noise could flip.
    """
    rng = np.random.default_rng([int(seed), *b"prototypes"])
    protos = rng.standard_normal((num_classes, feature_dim))
    return (protos / np.linalg.norm(protos, axis=1, keepdims=True)).astype(np.float32)


def selftest_inputs(module: TrainableModule, seed: int, batch: int) -> dict[str, np.ndarray]:
    """Deterministic self-test inputs: the image seed and spec, labels, prototypes and a selection.

    Labels (``selftest_labels``) and prototypes (``selftest_prototypes``) are chosen so that the loss
    gradient reaching the candidate layers is well above float noise on any model, trained or not.
    ``min(3, class_capacity)`` classes are used whatever the batch (one class would make the softmax
    exactly one-hot and every gradient exactly zero). The selection takes every other channel of the
    lowest and of the highest candidate layer, so the replay back-propagates through every candidate
    layer and exercises channel sparsity.
    """
    shape, value_range = _image_spec(module, batch)
    num_classes = min(3, module.config.class_capacity)  # the head holds at most class_capacity classes
    labels = selftest_labels(batch, num_classes)
    prototypes = selftest_prototypes(seed, num_classes, module.feature_dim)
    parts = []
    for p, size in enumerate(module.mask_sizes):
        mask = np.zeros(size, np.uint8)
        if p in (0, len(module.mask_sizes) - 1):
            mask[::2] = 1
        parts.append(mask)
    return {C.F_FORMAT_VERSION: np.array(SELFTEST_FORMAT_VERSION, np.int32), "seed": np.array(seed, np.int64),
            "image_shape": np.array(shape, np.int32), "image_range": np.array(value_range, np.float32),
            C.LABELS: labels, C.PROTOTYPES: prototypes, C.CHANNEL_MASK: np.concatenate(parts),
            "steps": np.array(SELFTEST_STEPS, np.int32)}


def tf_procedure(module: TrainableModule, vectors: dict[str, np.ndarray],
                 perturbation: float = 0.0) -> dict[str, np.ndarray]:
    """The self-test procedure run by TensorFlow on the module (mirrors runtime.selftest.run_procedure);
    returns the goldens (kernels after the steps as ``kernel_sketch``es).

    Args:
      module: The module, its state reset before and after.
      vectors: ``selftest_inputs``.
      perturbation: When > 0, the images move by ``perturbation * (hi - lo) * U(-1, 1)`` (seeded), for
        ``measured_tolerances``.
    """
    cfg = module.config
    out = {}
    value_range = tuple(float(v) for v in vectors["image_range"])
    images = selftest_images(int(vectors["seed"]), tuple(vectors["image_shape"]), value_range)
    if perturbation > 0:
        rng = np.random.default_rng([int(vectors["seed"]), *b"perturbation"])
        step = perturbation * (value_range[1] - value_range[0])
        images = (images + step * rng.uniform(-1.0, 1.0, images.shape)).astype(np.float32)
    module.reset_state(NO_INPUT)
    protos = np.zeros((cfg.class_capacity, module.feature_dim), np.float32)
    protos[: len(vectors[C.PROTOTYPES])] = vectors[C.PROTOTYPES]
    module.set_head(tf.constant(protos), tf.constant(len(vectors[C.PROTOTYPES]), tf.int32))
    images, labels = tf.constant(images), tf.constant(vectors[C.LABELS])
    for k, v in module.infer(images).items():
        out[f"{C.INFER}/{k}"] = v.numpy()[:, : len(vectors[C.PROTOTYPES])] if k == C.LOGITS else v.numpy()
    for k, v in module.fisher(images, labels).items():
        out[f"{C.FISHER}/{k}"] = v.numpy()
    module.set_selection(tf.constant(vectors[C.CHANNEL_MASK].astype(np.float32)))
    for i in range(int(vectors["steps"])):
        for k, v in module.train_step(images, labels).items():
            out[f"{C.TRAIN_STEP}/{i}/{k}"] = v.numpy()
    seed = int(vectors["seed"])
    out.update(_state_goldens(module, seed, "state/"))
    cut = module.lowest_episode_cut
    if cut is not None and labels.shape[0] > 1:  # the episode replay (runtime.selftest): the same head, selection and steps
        module.reset_state(NO_INPUT)
        module.set_head(tf.constant(protos), tf.constant(len(vectors[C.PROTOTYPES]), tf.int32))
        module.set_selection(tf.constant(vectors[C.CHANNEL_MASK].astype(np.float32)))
        activations = module.cache_functions[C.features_name(cut.layer)](images)[C.ACTIVATIONS]
        support = tf.constant(selftest_support_mask(int(labels.shape[0])))
        for i in range(int(vectors["steps"])):
            for k, v in module.cache_functions[C.episode_from_name(cut.layer)](activations, labels, support).items():
                out[f"{EPISODE}/{i}/{k}"] = v.numpy()
        out.update(_state_goldens(module, seed, f"{EPISODE}/state/"))
    module.reset_state(NO_INPUT)
    return out


def _state_goldens(module: TrainableModule, seed: int, prefix: str) -> dict[str, np.ndarray]:
    """``<prefix><bias>`` whole and ``<prefix><kernel>`` as ``kernel_sketch`` of every candidate, now."""
    state = module.get_state(NO_INPUT)
    out = {}
    for name, channels in zip(module.candidate_names, module.mask_sizes):
        bias, kernel = name + C.BIAS_SUFFIX, name + C.KERNEL_SUFFIX
        out[f"{prefix}{bias}"] = state[bias].numpy()
        out[f"{prefix}{kernel}"] = kernel_sketch(state[kernel].numpy(), channels, seed, kernel)
    return out


def measured_tolerances(module: TrainableModule, vectors: dict[str, np.ndarray],
                        goldens: dict[str, np.ndarray]) -> tuple[dict[str, float], dict[str, float]]:
    """(tolerance per group, measured spread per group): the procedure rerun on images perturbed by
    ``PERTURBATION``; tolerance = max(floor ``TOLERANCES[g]``, ``NOISE_FACTOR`` * spread), ``frozen`` 0
    (an int8 export: ``INT8_TOLERANCES`` and ``INT8_NOISE_FACTOR``).

    Why: the device's deviation is rounding error propagated through the model's own procedure, e
    ~ J delta with J the procedure's Jacobian and delta a few ulps per op. A 16-ulp input perturbation
    probes the same J, so the spread it produces scales with what a correct runtime can deviate by on
    this model (e.g. a BatchNorm-uncalibrated ResNet whose per-channel Fisher sums cancel): the
    tolerance follows the model instead of one constant for all models. The floors keep the
    historical tolerances where the model is well conditioned, so a model only ever gets a looser
    check, never a stricter one than before; a spread that makes a group weak (``WEAK_TOLERANCE``) is
    logged.
    """
    spread, _ = group_deviations(tf_procedure(module, vectors, PERTURBATION), goldens)
    int8 = getattr(module, "int8_prefix", None) is not None
    factor, floors = (INT8_NOISE_FACTOR, INT8_TOLERANCES) if int8 else (NOISE_FACTOR, TOLERANCES)
    tolerance = {g: max(floor, factor * spread.get(g, 0.0)) if g != "frozen" else 0.0
                 for g, floor in floors.items() if g != EPISODE or any(k.startswith(f"{EPISODE}/") for k in goldens)}
    for group, value in tolerance.items():
        if value > WEAK_TOLERANCE:
            LOG.warning("self-test group %r: the model is sensitive to float rounding (spread %.2e under a %.0e input "
                        "perturbation); tolerance %.2e detects only gross errors", group, spread[group],
                        PERTURBATION, value)
    return tolerance, spread


def build_selftest(module: TrainableModule, seed: int, batch: int) -> dict[str, np.ndarray]:
    """The whole self-test record: inputs, goldens and ``tolerance/<group>`` (``measured_tolerances``)."""
    vectors = selftest_inputs(module, seed, batch)
    goldens = tf_procedure(module, vectors)
    tolerance, spread = measured_tolerances(module, vectors, goldens)
    LOG.debug("self-test spread %s, tolerance %s", spread, tolerance)
    return {**vectors, **goldens, **{f"tolerance/{g}": np.array(t, np.float64) for g, t in tolerance.items()}}


def encode_selftest(selftest: dict[str, np.ndarray]) -> bytes:
    """The ``np.savez`` bytes stored in the model's ``tflite_train_selftest`` metadata entry."""
    buf = io.BytesIO()
    np.savez(buf, **selftest)
    return buf.getvalue()
