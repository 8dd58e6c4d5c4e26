"""Side effects of a training run: output folder, resolved config JSON, checkpoints, strategy, images."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import pathlib

import numpy as np
import tensorflow as tf

log = logging.getLogger(__name__)


def make_strategy(name: str = "default") -> tf.distribute.Strategy:
    """The ``tf.distribute`` strategy a training run executes under.

    ``"default"``: one device. ``"mirrored"``: ``MirroredStrategy`` over all local GPUs (or the CPU
    when there is none). ``"multi_worker"``: ``MultiWorkerMirroredStrategy`` over the machines named
    in the ``TF_CONFIG`` environment variable (each worker runs the same command with its own task
    index), each worker's local GPUs being replicas. In every case each replica runs its share of a
    step's batch / episodes and the gradients are summed across replicas (synchronous training).

    Raises:
      ValueError: an unknown name, or ``"multi_worker"`` without ``TF_CONFIG``.
    """
    if name == "default":
        return tf.distribute.get_strategy()
    if name == "mirrored":
        return tf.distribute.MirroredStrategy()
    if name == "multi_worker":
        if not os.environ.get("TF_CONFIG"):
            raise ValueError("strategy 'multi_worker' needs the TF_CONFIG environment variable (cluster and task)")
        return tf.distribute.MultiWorkerMirroredStrategy()
    raise ValueError(f"strategy must be 'default', 'mirrored' or 'multi_worker', got {name!r}")


def write_resolved_config(out_dir: pathlib.Path, config, **extra) -> pathlib.Path:
    """Writes ``config.json`` (the dataclass, nested, plus ``extra``) in ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    payload = {"kind": type(config).__name__, **dataclasses.asdict(config), **extra}
    path = out_dir / "config.json"
    path.write_text(json.dumps(payload, indent=2, default=str) + "\n")
    return path


def to_model_input(images: np.ndarray) -> np.ndarray:
    """uint8 images -> float32 in [0, 1] (the models' input range)."""
    return np.asarray(images, np.float32) / 255.0


class CheckpointKeeper:
    """tf.train.Checkpoint over the given objects plus a step counter, kept in ``out_dir/checkpoints``."""

    def __init__(self, out_dir: pathlib.Path, max_to_keep: int = 2, **objects) -> None:
        self.step = tf.Variable(0, dtype=tf.int64, trainable=False, name="step")
        self.checkpoint = tf.train.Checkpoint(step=self.step, **objects)
        self.manager = tf.train.CheckpointManager(self.checkpoint, str(out_dir / "checkpoints"), max_to_keep=max_to_keep)

    def restore(self) -> int:
        """Restores the latest checkpoint if any; returns the step to resume from."""
        if self.manager.latest_checkpoint:
            self.checkpoint.restore(self.manager.latest_checkpoint).expect_partial()
            log.info("resumed from %s at step %d", self.manager.latest_checkpoint, int(self.step.numpy()))
        return int(self.step.numpy())

    def save(self, step: int) -> None:
        self.step.assign(step)
        self.manager.save(checkpoint_number=step)
