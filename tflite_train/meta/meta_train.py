"""Episodic ProtoNet meta-training of a (pre-trained) backbone with a cosine classifier (paper §4.1, A.3)."""

from __future__ import annotations

import json
import logging
import pathlib

import keras
import numpy as np
import tensorflow as tf
from tqdm import tqdm

from tflite_train.data.dataset import LabeledImages
from tflite_train.data.episodes import sample_episode
from tflite_train.meta.config import MetaTrainConfig
from tflite_train.meta.evaluate import evaluate_none_policy
from tflite_train.meta.protonet import CosineHead, prototypes, protonet_loss
from tflite_train.meta.run_io import CheckpointKeeper, make_strategy, to_model_input, write_resolved_config
from tflite_train.meta.schedule import WarmupCosine
from tflite_train.models.keras_backbone import Backbone, build_backbone
from tflite_train.runtime.adaptation.augmentation import augment

log = logging.getLogger(__name__)


def _episodes_per_replica(episodes_per_step: int, replicas: int) -> int:
    """Episodes each replica runs per step; the step's episodes are split evenly over the replicas."""
    if episodes_per_step % replicas:
        raise ValueError(
            f"episodes_per_step ({episodes_per_step}) must be a multiple of the strategy's {replicas} replicas"
        )
    return episodes_per_step // replicas


def meta_train(
    train: LabeledImages,
    config: MetaTrainConfig,
    out_dir: str | pathlib.Path,
    *,
    val: LabeledImages | None = None,
    backbone: Backbone | None = None,
    strategy: tf.distribute.Strategy | None = None,
) -> tuple[Backbone, CosineHead, list[dict]]:
    """Meta-trains ``backbone`` as a ProtoNet on episodes of ``train``.

    Per step, ``config.episodes_per_step`` = E episodes drawn from (seed, step) only; for each episode
    e: prototypes from the support embeddings, logits s (cos(f(q), c_k) + b) for the (augmented)
    query, cross-entropy CE_e (paper Eq. 1); loss = (1/E) sum_e CE_e + weight_decay/2 * ||kernels||^2;
    one SGD-momentum step on the backbone, s and b (LR: warm-up then cosine). Each episode is one
    forward pass (BatchNorm batch statistics s_e per episode); the BatchNorm moving statistics take
    one update per step with their mean, m <- mu m + (1 - mu) (1/E) sum_e s_e.

    Distribution: under a ``tf.distribute`` strategy with R replicas (E a multiple of R) replica r
    runs episodes r E/R .. (r+1) E/R - 1 and the optimizer sums the replicas' gradients of
    loss / R, so the update is the same as on one device up to float summation order; the
    result does not depend on R (tests/meta/test_meta_distributed.py). Every ``val_every`` steps
    the None-policy accuracy on ``val`` episodes is logged. Writes ``config.json``, ``log.jsonl``,
    checkpoints (resumable), ``backbone.weights.h5`` and ``head.json`` (s, b) in ``out_dir``.

    Returns:
      (backbone, cosine head, log records).
    """
    out_dir = pathlib.Path(out_dir)
    strategy = strategy or make_strategy("default")
    replicas = strategy.num_replicas_in_sync
    per_replica = _episodes_per_replica(config.episodes_per_step, replicas)
    write_resolved_config(out_dir, config, num_train_classes=train.num_classes, replicas=replicas)
    with strategy.scope():
        backbone = backbone or build_backbone(config.backbone, config.image_size, seed=config.seed)
        head = CosineHead(config.init_scale, config.init_bias, name="cosine_head")
        optimizer = keras.optimizers.SGD(WarmupCosine(config.episodes, config.schedule), momentum=config.momentum)
        optimizer.build(backbone.model.trainable_variables + head.trainable_variables)
    keeper = CheckpointKeeper(out_dir, model=backbone.model, head=head, optimizer=optimizer)
    start = keeper.restore()
    decayed = [v for v in backbone.model.trainable_variables if v.path.endswith("kernel")]

    stats = list(backbone.model.non_trainable_variables)  # BatchNorm moving statistics

    @tf.function(reduce_retracing=True)
    def step_fn(sx, sy, qx, qy, ways):
        def replica(sx, sy, qx, qy):  # (per_replica, ...) episodes each
            variables = backbone.model.trainable_variables + head.trainable_variables
            start = [tf.identity(v.value) for v in stats]
            ends = []
            with tf.GradientTape() as tape:
                losses, accs = [], []
                for i in range(per_replica):  # one forward per episode: BatchNorm statistics per episode
                    for v, s0 in zip(stats, start):  # each episode's BN update starts from the step's value
                        v.assign(s0)
                    emb = backbone.model(tf.concat([sx[i], qx[i]], 0), training=True)
                    ends.append([tf.identity(v.value) for v in stats])
                    n = tf.shape(sx[i])[0]
                    protos = prototypes(emb[:n], sy[i], ways)
                    episode_loss, episode_acc = protonet_loss(head(emb[n:], protos), qy[i])
                    losses.append(episode_loss)
                    accs.append(episode_acc)
                loss, acc = tf.add_n(losses) / per_replica, tf.add_n(accs) / per_replica
                l2 = tf.add_n([tf.reduce_sum(tf.square(v)) for v in decayed]) * (config.weight_decay / 2)
                scaled = (loss + l2) / replicas  # the optimizer sums gradients over replicas
            means = [tf.add_n([e[j] for e in ends]) / per_replica for j in range(len(stats))]  # this replica's
            if replicas > 1 and means:  # mean over all replicas (and workers); every copy gets the same value
                means = tf.distribute.get_replica_context().all_reduce("MEAN", means)
            for v, mean in zip(stats, means):
                v.assign(mean)
            grads = tape.gradient(scaled, variables)
            optimizer.apply_gradients(zip(grads, variables))
            return loss, acc
        loss, acc = strategy.run(replica, args=(sx, sy, qx, qy))
        return strategy.reduce("MEAN", loss, axis=None), strategy.reduce("MEAN", acc, axis=None)

    def episode_tensors(step: int):
        # The step's episodes depend on (seed, step) only, never on the number of replicas.
        rng = np.random.default_rng((config.seed, step))
        episodes = [sample_episode(train.labels, rng, config.episode) for _ in range(config.episodes_per_step)]
        if len({(e.ways, len(e.support_indices), len(e.query_indices)) for e in episodes}) != 1:
            raise ValueError("episodes_per_step > 1 needs fixed-shape episodes (set config.episode ways/shots/queries)")
        parts = []
        for e in episodes:
            sx, sy, qx, qy = e.gather(train.images)
            parts.append((to_model_input(sx), sy, augment(to_model_input(qx), rng, config.augment), qy))
        stacked = [np.stack([p[k] for p in parts]) for k in range(4)]  # (episodes_per_step, ...)
        if replicas == 1:
            return tuple(tf.constant(a) for a in stacked), episodes[0].ways

        def shard(ctx, k):  # replica r takes episodes [r * per_replica, (r + 1) * per_replica)
            r = ctx.replica_id_in_sync_group
            return tf.constant(stacked[k][r * per_replica:(r + 1) * per_replica])

        values = [strategy.experimental_distribute_values_from_function(lambda ctx, k=k: shard(ctx, k)) for k in range(4)]
        return tuple(values), episodes[0].ways

    records: list[dict] = []
    running = []
    if start == 0:  # a fresh run starts a fresh log; a resumed one appends
        (out_dir / "log.jsonl").write_text("")
    if val is not None and start == 0:  # the starting point, for comparison with the later validations
        result = evaluate_none_policy(backbone.model, val, num_episodes=config.val_episodes, seed=config.seed + 1,
                                      episode_config=config.val_episode)
        records.append({"episode": 0, "val_acc": result.mean, "val_ci95": result.ci95})
        log.info("meta-train episode=0 val_acc=%.4g val_ci95=%.4g", result.mean, result.ci95)
        with open(out_dir / "log.jsonl", "a") as log_file:
            log_file.write(json.dumps(records[-1]) + "\n")
    with open(out_dir / "log.jsonl", "a") as log_file, tqdm(range(start, config.episodes), initial=start, total=config.episodes, desc="meta-train", mininterval=5) as bar:
        for step in bar:
            tensors, ways = episode_tensors(step)
            loss, acc = step_fn(*tensors, tf.constant(ways, tf.int32))
            running.append((float(loss), float(acc)))
            record = None
            if (step + 1) % config.log_every == 0 or step + 1 == config.episodes:
                m = np.mean(running, axis=0)
                record = {"episode": step + 1, "loss": float(m[0]), "acc": float(m[1]), "lr": float(optimizer.learning_rate),
                          "scale": float(head.scale.numpy()), "bias": float(head.bias.numpy())}
                running = []
            if val is not None and ((step + 1) % config.val_every == 0 or step + 1 == config.episodes):
                result = evaluate_none_policy(backbone.model, val, num_episodes=config.val_episodes, seed=config.seed + 1,
                                              episode_config=config.val_episode)
                record = {**(record or {"episode": step + 1}), "val_acc": result.mean, "val_ci95": result.ci95}
            if record is not None:
                records.append(record)
                log_file.write(json.dumps(record) + "\n")
                log_file.flush()
                bar.set_postfix({k: f"{v:.3f}" for k, v in record.items() if k in ("loss", "acc", "val_acc")})
                log.info("meta-train %s", " ".join(f"{k}={v:.4g}" for k, v in record.items()))
            if (step + 1) % config.checkpoint_every == 0 or step + 1 == config.episodes:
                keeper.save(step + 1)
    backbone.model.save_weights(str(out_dir / "backbone.weights.h5"))
    (out_dir / "head.json").write_text(json.dumps({"scale": float(head.scale.numpy()), "bias": float(head.bias.numpy())}) + "\n")
    return backbone, head, records
