"""Supervised pre-training of a backbone on the source's train classes (linear head, cross-entropy)."""

from __future__ import annotations

import json
import logging
import pathlib

import keras
import numpy as np
import tensorflow as tf
from tqdm import tqdm

from tflite_train.data.dataset import LabeledImages
from tflite_train.meta.config import PretrainConfig
from tflite_train.meta.run_io import CheckpointKeeper, make_strategy, to_model_input, write_resolved_config
from tflite_train.meta.schedule import WarmupCosine
from tflite_train.models.keras_backbone import Backbone, build_backbone
from tflite_train.runtime.adaptation.augmentation import augment

log = logging.getLogger(__name__)


def pretrain(
    data: LabeledImages,
    config: PretrainConfig,
    out_dir: str | pathlib.Path,
    *,
    backbone: Backbone | None = None,
    strategy: tf.distribute.Strategy | None = None,
) -> tuple[Backbone, list[dict]]:
    """Trains backbone + linear head (C = data.num_classes) with SGD momentum and a warm-up/cosine LR.

    Loss: mean cross-entropy + ``weight_decay`` / 2 * sum of squared conv/dense kernels (L2).
    Each step draws ``batch_size`` images uniformly (seeded) and augments them (numpy).
    Writes ``out_dir/config.json``, ``out_dir/log.jsonl``, checkpoints (resumable) and
    ``out_dir/backbone.weights.h5``.

    Returns:
      (the trained backbone, the log records).
    """
    if len(data) < config.batch_size:
        raise ValueError(f"data has {len(data)} images < batch_size {config.batch_size}")
    out_dir = pathlib.Path(out_dir)
    strategy = strategy or make_strategy("default")
    write_resolved_config(out_dir, config, num_classes=data.num_classes, num_images=len(data))
    with strategy.scope():
        backbone = backbone or build_backbone(config.backbone, config.image_size, seed=config.seed)
        head = keras.layers.Dense(data.num_classes, name="pretrain_head")
        head.build((None, backbone.config.feature_dim))
        optimizer = keras.optimizers.SGD(WarmupCosine(config.steps, config.schedule), momentum=config.momentum)
        optimizer.build(backbone.model.trainable_variables + head.trainable_variables)
    keeper = CheckpointKeeper(out_dir, model=backbone.model, head=head, optimizer=optimizer)
    start = keeper.restore()
    replicas = strategy.num_replicas_in_sync
    decayed = [v for v in backbone.model.trainable_variables + head.trainable_variables if v.path.endswith("kernel")]

    @tf.function(reduce_retracing=True)
    def step_fn(x, y):
        def replica(x, y):
            with tf.GradientTape() as tape:
                logits = head(backbone.model(x, training=True))
                ce = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
                l2 = tf.add_n([tf.reduce_sum(tf.square(v)) for v in decayed]) * (config.weight_decay / 2)
                scaled = (ce + l2) / replicas  # the optimizer sums gradients over replicas
            variables = backbone.model.trainable_variables + head.trainable_variables
            grads = tape.gradient(scaled, variables)
            optimizer.apply_gradients(zip(grads, variables))
            acc = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, -1, output_type=y.dtype), y), tf.float32))
            return ce, acc
        ce, acc = strategy.run(replica, args=(x, y))
        return strategy.reduce("MEAN", ce, axis=None), strategy.reduce("MEAN", acc, axis=None)

    records: list[dict] = []
    log_path = out_dir / "log.jsonl"
    running = []
    with open(log_path, "a" if start else "w") as log_file, tqdm(range(start, config.steps), initial=start, total=config.steps, desc="pretrain", mininterval=5) as bar:
        for step in bar:
            rng = np.random.default_rng((config.seed, step))  # per-step seed: resumption replays the same batches
            idx = rng.integers(0, len(data), size=config.batch_size)
            x = augment(to_model_input(data.images[idx]), rng, config.augment)
            ce, acc = step_fn(tf.constant(x), tf.constant(data.labels[idx]))
            running.append((float(ce), float(acc)))
            if (step + 1) % config.log_every == 0 or step + 1 == config.steps:
                m = np.mean(running, axis=0)
                record = {"step": step + 1, "loss": float(m[0]), "acc": float(m[1]), "lr": float(optimizer.learning_rate)}
                records.append(record)
                log_file.write(json.dumps(record) + "\n")
                log_file.flush()
                bar.set_postfix(loss=f"{m[0]:.3f}", acc=f"{m[1]:.3f}")
                log.info("pretrain step %d: loss %.4f acc %.3f", step + 1, m[0], m[1])
                running = []
            if (step + 1) % config.checkpoint_every == 0 or step + 1 == config.steps:
                keeper.save(step + 1)
    backbone.model.save_weights(str(out_dir / "backbone.weights.h5"))
    return backbone, records
