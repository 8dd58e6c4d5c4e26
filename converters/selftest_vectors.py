"""The self-test embedded in an exported model: its inputs and TensorFlow's goldens (format 2).

Stores what the device check needs and nothing it can regenerate (format described in
``tflite_train.runtime.selftest``, which replays it): the images are regenerated on the device from a
stored seed (``selftest_images``), and the candidate kernels after the train steps are stored as one
sketch value per output channel (``kernel_sketch``) instead of whole tensors; the unselected channels
are checked bit-identical on the device against the model's own initial state, which needs no golden.
On MCUNet@128 this takes the self-test from 1.57 MB (a third of the file) to a few KB.
"""

from __future__ import annotations

import io

import numpy as np
import tensorflow as tf

from converters.trainable_module import NO_INPUT, TrainableModule
from tflite_train import contract as C
from tflite_train.runtime.selftest import SELFTEST_FORMAT_VERSION, kernel_sketch, selftest_images

SELFTEST_STEPS = 2
TOLERANCES = {C.INFER: 5e-4, C.FISHER: 2e-3, C.TRAIN_STEP: 5e-4, "state": 1e-3, "frozen": 0.0}
"""Relative deviations (max |a-b| / max |golden|) allowed between TFLite and TensorFlow.

``infer`` and ``train_step``: a 50-layer net accumulates float32 rounding differences between the
XNNPACK and TF kernels of up to ~2e-4 (measured on keras.applications MobileNetV2/V3 with
calibrated BatchNorm statistics); a wrong op or gradient deviates by orders of magnitude more.

``state`` is looser: Adam divides by sqrt(v), so weights whose gradient is at float-noise level move
by up to lr per step in either runtime (measured 1.3e-4 on MCUNet@128, all layers candidates).
``frozen`` (unselected channels unchanged by the steps) is exact."""


def _image_spec(module: TrainableModule, batch: int) -> tuple[tuple[int, ...], tuple[float, float]]:
    """(N, H, W, C) and the value range of the model's input images."""
    spec = module.graph.input_spec
    return (batch, *spec.shape), tuple(float(v) for v in spec.value_range)


def selftest_inputs(module: TrainableModule, seed: int, batch: int) -> dict[str, np.ndarray]:
    """Deterministic self-test inputs: the image seed and spec, labels, prototypes (class means) and a
    selection.

    The selection takes every other channel of the lowest and of the highest candidate layer, so
    the replay back-propagates through every candidate layer and exercises channel sparsity.
    """
    shape, value_range = _image_spec(module, batch)
    images = selftest_images(seed, shape, value_range)
    num_classes = min(3, batch, module.config.class_capacity)  # the head holds at most class_capacity classes
    labels = (np.arange(batch) % num_classes).astype(np.int32)
    module.reset_state(NO_INPUT)
    emb = module.infer(tf.constant(images))[C.EMBEDDINGS].numpy()
    prototypes = np.stack([emb[labels == c].mean(axis=0) for c in range(num_classes)]).astype(np.float32)
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


def tf_procedure(module: TrainableModule, vectors: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The self-test procedure run by TensorFlow on the module (mirrors runtime.selftest.run_procedure);
    returns the goldens (kernels after the steps as ``kernel_sketch``es)."""
    cfg = module.config
    out = {}
    images = selftest_images(int(vectors["seed"]), tuple(vectors["image_shape"]), tuple(vectors["image_range"]))
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
    state = module.get_state(NO_INPUT)
    seed = int(vectors["seed"])
    for name, channels in zip(module.candidate_names, module.mask_sizes):
        bias, kernel = name + C.BIAS_SUFFIX, name + C.KERNEL_SUFFIX
        out[f"state/{bias}"] = state[bias].numpy()
        out[f"state/{kernel}"] = kernel_sketch(state[kernel].numpy(), channels, seed, kernel)
    module.reset_state(NO_INPUT)
    return out


def build_selftest(module: TrainableModule, seed: int, batch: int) -> dict[str, np.ndarray]:
    """The whole self-test record: inputs, goldens and ``tolerance/<group>``."""
    vectors = selftest_inputs(module, seed, batch)
    goldens = tf_procedure(module, vectors)
    return {**vectors, **goldens, **{f"tolerance/{g}": np.array(t, np.float64) for g, t in TOLERANCES.items()}}


def encode_selftest(selftest: dict[str, np.ndarray]) -> bytes:
    """The ``np.savez`` bytes stored in the model's ``tflite_train_selftest`` metadata entry."""
    buf = io.BytesIO()
    np.savez(buf, **selftest)
    return buf.getvalue()
