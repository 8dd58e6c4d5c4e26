import json
import math

import numpy as np
import pytest
import tensorflow as tf

from tflite_train.data.dataset import LabeledImages
from tflite_train.data.episodes import Episode, EpisodeConfig
from tflite_train.meta import (
    MetaTrainConfig,
    PretrainConfig,
    ScheduleConfig,
    WarmupCosine,
    cosine_logits,
    evaluate_none_policy,
    make_strategy,
    meta_train,
    paired_delta,
    pretrain,
    protonet_episode_accuracy,
    protonet_loss,
    prototypes,
    summarize,
    warmup_cosine,
)
from tflite_train.models import build_backbone
from tflite_train.runtime.adaptation.augmentation import AugmentConfig

NO_AUG = AugmentConfig(flip_prob=0, translate=0, brightness=0, saturation=0, contrast=0, cutout=0, value_range=(0, 1))


def _toy_data(num_classes=12, per_class=10, size=16, seed=0):
    """Each class: a fixed random colour pattern plus noise (learnable, not trivially separable at init)."""
    rng = np.random.default_rng(seed)
    patterns = rng.uniform(0, 255, size=(num_classes, size, size, 3))
    images = patterns[np.repeat(np.arange(num_classes), per_class)] + rng.normal(0, 60, size=(num_classes * per_class, size, size, 3))
    return LabeledImages(
        images=np.clip(images, 0, 255).astype(np.uint8),
        labels=np.repeat(np.arange(num_classes), per_class).astype(np.int32),
        class_names=tuple(str(i) for i in range(num_classes)),
    )


def test_warmup_cosine_by_hand():
    c = ScheduleConfig(peak_lr=1.0, min_lr=0.0 + 1e-6, warmup_fraction=0.1)
    assert warmup_cosine(0, 100, c) == pytest.approx(1e-6)
    assert warmup_cosine(5, 100, c) == pytest.approx(1e-6 + (1 - 1e-6) * 0.5)
    assert warmup_cosine(10, 100, c) == pytest.approx(1.0)
    assert warmup_cosine(55, 100, c) == pytest.approx(1e-6 + (1 - 1e-6) * 0.5)
    assert warmup_cosine(100, 100, c) == pytest.approx(1e-6)
    keras_schedule = WarmupCosine(100, c)
    for t in (0, 3, 10, 40, 99, 100):
        assert float(keras_schedule(t)) == pytest.approx(warmup_cosine(t, 100, c), rel=1e-5, abs=1e-7)


def test_prototypes_and_cosine_logits_by_hand():
    emb = tf.constant([[1.0, 0.0], [3.0, 0.0], [0.0, 2.0]])
    protos = prototypes(emb, tf.constant([0, 0, 1]), 2)
    np.testing.assert_allclose(protos.numpy(), [[2.0, 0.0], [0.0, 2.0]])
    q = tf.constant([[1.0, 1.0]])
    logits = cosine_logits(q, protos, tf.constant(10.0), tf.constant(0.5))
    np.testing.assert_allclose(logits.numpy(), [[10 * (1 / math.sqrt(2) + 0.5)] * 2], rtol=1e-6)
    loss, acc = protonet_loss(tf.constant([[2.0, 0.0]]), tf.constant([0]))
    assert float(loss) == pytest.approx(math.log(1 + math.exp(-2.0)), rel=1e-6)
    assert float(acc) == 1.0


def test_episode_accuracy_and_ci_by_hand():
    emb = np.array([[1, 0], [0, 1], [1, 0.1], [0.1, 1], [-1, 0.2]], np.float32)
    e = Episode(classes=np.array([0, 1]), support_indices=np.array([0, 1]), support_labels=np.array([0, 1], np.int32),
                query_indices=np.array([2, 3, 4]), query_labels=np.array([0, 1, 0], np.int32))
    assert protonet_episode_accuracy(emb, e) == pytest.approx(2 / 3)
    s = summarize([0.5, 0.7])
    assert s.mean == pytest.approx(0.6) and s.ci95 == pytest.approx(1.96 * np.std([0.5, 0.7], ddof=1) / math.sqrt(2))


def test_paired_delta_by_hand():
    # deltas 0.1, 0.3, -0.1: mean 0.1, std (ddof=1) 0.2, CI 1.96 * 0.2 / sqrt(3).
    d = paired_delta([0.6, 0.8, 0.4], [0.5, 0.5, 0.5])
    assert d.mean == pytest.approx(0.1) and d.ci95 == pytest.approx(1.96 * 0.2 / math.sqrt(3)) and d.num_episodes == 3
    with pytest.raises(ValueError, match="same length"):
        paired_delta([0.1, 0.2], [0.1])


def test_meta_training_lowers_the_loss(tmp_path):
    data = _toy_data()
    config = MetaTrainConfig(backbone="tiny", image_size=16, episodes=40, episode=EpisodeConfig(ways=5, shots=2, queries=3),
                             schedule=ScheduleConfig(peak_lr=0.05, warmup_fraction=0.1), augment=NO_AUG,
                             val_every=40, val_episodes=5, val_episode=EpisodeConfig(ways=5, shots=2, queries=3),
                             log_every=10, checkpoint_every=20)
    backbone, head, records = meta_train(data, config, tmp_path, val=_toy_data(seed=1))
    losses = [r["loss"] for r in records if "loss" in r]
    assert len(losses) == 4
    assert losses[-1] < 0.8 * losses[0], losses
    assert "val_acc" in records[-1] and records[0]["episode"] == 0 and "val_acc" in records[0]
    resolved = json.loads((tmp_path / "config.json").read_text())
    assert resolved["kind"] == "MetaTrainConfig" and resolved["episodes"] == 40
    assert (tmp_path / "backbone.weights.h5").exists()
    assert set(json.loads((tmp_path / "head.json").read_text())) == {"scale", "bias"}


def test_pretrain_checkpoints_and_resumes(tmp_path):
    data = _toy_data()
    config = PretrainConfig(backbone="tiny", image_size=16, steps=6, batch_size=16, checkpoint_every=3, log_every=3, augment=NO_AUG)
    pretrain(data, config, tmp_path)
    reference = build_backbone("tiny", 16)
    reference.model.load_weights(str(tmp_path / "backbone.weights.h5"))
    # Resuming with more steps continues from step 6, not from scratch.
    longer = PretrainConfig(backbone="tiny", image_size=16, steps=9, batch_size=16, checkpoint_every=3, log_every=3, augment=NO_AUG)
    _, records = pretrain(data, longer, tmp_path)
    assert [r["step"] for r in records] == [9]
    acc = evaluate_none_policy(reference.model, data, num_episodes=5, episode_config=EpisodeConfig(ways=5, shots=2, queries=3))
    assert 0.0 <= acc.mean <= 1.0 and acc.num_episodes == 5


def test_mirrored_strategy_runs(tmp_path):
    strategy = make_strategy("mirrored")
    config = MetaTrainConfig(backbone="tiny", image_size=16, episodes=2, episode=EpisodeConfig(ways=5, shots=1, queries=2),
                             augment=NO_AUG, log_every=1)
    _, _, records = meta_train(_toy_data(), config, tmp_path, strategy=strategy)
    assert len(records) == 2 and np.isfinite(records[-1]["loss"])


def test_bad_strategy():
    with pytest.raises(ValueError, match="strategy"):
        make_strategy("tpu")


@pytest.mark.parametrize("backbone", ["mcunet", "mbv2", "proxyless"])
def test_meta_training_step_runs_for_every_paper_backbone(tmp_path, backbone):
    config = MetaTrainConfig(backbone=backbone, image_size=32, episodes=1, episode=EpisodeConfig(ways=5, shots=1, queries=1),
                             augment=NO_AUG, log_every=1)
    model, head, records = meta_train(_toy_data(size=32), config, tmp_path)
    assert np.isfinite(records[-1]["loss"]) and head.scale.numpy() > 0
