"""The one command that produces the shipped meta-trained weights and their evaluation.

``train_shipped_weights(cache_dir, out_dir)``: pre-train on the source's train classes, meta-train,
then measure the None-policy ProtoNet accuracy (mean +- 95 % CI over ``eval_episodes`` Meta-Dataset
episodes) of the pre-trained-only and of the meta-trained backbone on the source's test classes and on
every cross-domain target. Output in ``out_dir``:

- ``<backbone>_<size>_meta.weights.h5``: backbone weights (BatchNorm form; load with
  ``build_backbone(backbone, size).model.load_weights(path)``);
- ``<backbone>_<size>_meta.json``: input spec, cosine head (scale, bias), data cache manifest
  checksums, configs, accuracies;
- ``pretrain/`` and ``meta/`` run folders (config.json, log.jsonl; checkpoints are not shipped);
- ``evaluation.md``: the accuracy table; ``training.png``: the training curves.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import pathlib
import time

import numpy as np

from tflite_train.data.cache import load_split, read_manifest
from tflite_train.data.episodes import EpisodeConfig
from tflite_train.meta.config import MetaTrainConfig, PretrainConfig
from tflite_train.meta.evaluate import episode_accuracies, paired_delta, summarize
from tflite_train.meta.meta_train import meta_train
from tflite_train.meta.plots import plot_training
from tflite_train.meta.pretrain import pretrain

log = logging.getLogger(__name__)


def episode_accuracies_all(model, cache_dir: pathlib.Path, source: str, num_episodes: int, seed: int) -> dict[str, np.ndarray]:
    """Per-episode None-policy accuracies on the source's test classes (key ``<source>/test``) and on each
    target data set of the cache; the episodes depend on ``seed`` only, so they are the same for every model."""
    manifest = read_manifest(cache_dir)
    names = [(source, "test")] + [(n, "test") for n, e in manifest["datasets"].items() if e["role"] == "target"]
    out = {}
    for name, split in names:
        data = load_split(cache_dir, name, split)
        key = f"{name}/{split}" if name == source else name
        out[key] = episode_accuracies(model, data, num_episodes=num_episodes, seed=seed, episode_config=EpisodeConfig())
        log.info("  %s: %s", key, summarize(out[key]))
    return out


def evaluate_all(model, cache_dir: pathlib.Path, source: str, num_episodes: int, seed: int) -> dict[str, dict]:
    """None-policy accuracy (mean, ci95, num_episodes) on the source's test classes and each target data set."""
    return {k: dataclasses.asdict(summarize(v)) for k, v in episode_accuracies_all(model, cache_dir, source, num_episodes, seed).items()}


def train_shipped_weights(
    cache_dir: str | pathlib.Path,
    out_dir: str | pathlib.Path,
    *,
    pretrain_config: PretrainConfig = PretrainConfig(),
    meta_config: MetaTrainConfig = MetaTrainConfig(),
    eval_episodes: int = 200,
    eval_seed: int = 1234,
) -> dict:
    """Runs pre-training, meta-training and the evaluation; returns the summary written to the JSON."""
    cache_dir, out_dir = pathlib.Path(cache_dir), pathlib.Path(out_dir)
    if pretrain_config.backbone != meta_config.backbone or pretrain_config.image_size != meta_config.image_size:
        raise ValueError("pretrain_config and meta_config must agree on backbone and image_size")
    manifest = read_manifest(cache_dir)
    if manifest["image_size"] != meta_config.image_size:
        raise ValueError(f"cache image_size {manifest['image_size']} != config image_size {meta_config.image_size}")
    source = meta_config.dataset
    train, val = load_split(cache_dir, source, "train"), load_split(cache_dir, source, "val")
    t0 = time.time()
    backbone, _ = pretrain(train, pretrain_config, out_dir / "pretrain")
    t_pre = time.time() - t0
    log.info("pre-trained only (None policy):")
    pre_episodes = episode_accuracies_all(backbone.model, cache_dir, source, eval_episodes, eval_seed)
    t1 = time.time()
    backbone, head, records = meta_train(train, meta_config, out_dir / "meta", val=val, backbone=backbone)
    t_meta = time.time() - t1
    log.info("meta-trained (None policy):")
    meta_episodes = episode_accuracies_all(backbone.model, cache_dir, source, eval_episodes, eval_seed)
    pre_acc = {k: dataclasses.asdict(summarize(v)) for k, v in pre_episodes.items()}
    meta_acc = {k: dataclasses.asdict(summarize(v)) for k, v in meta_episodes.items()}
    deltas = {k: dataclasses.asdict(paired_delta(meta_episodes[k], pre_episodes[k])) for k in pre_episodes}
    stem = f"{meta_config.backbone}_{meta_config.image_size}_meta"
    backbone.model.save_weights(str(out_dir / f"{stem}.weights.h5"))
    val_records = [r for r in records if "val_acc" in r]
    summary = {
        "weights": f"{stem}.weights.h5",
        "backbone": meta_config.backbone,
        "input": {"shape": [meta_config.image_size, meta_config.image_size, 3], "dtype": "float32", "range": [0.0, 1.0],
                  "layout": "NHWC RGB, uint8 / 255"},
        "embedding_dim": backbone.config.feature_dim,
        "cosine_head": {"scale": float(head.scale.numpy()), "bias": float(head.bias.numpy()),
                        "logits": "scale * (cos(embedding, prototype) + bias)"},
        "source": source,
        "cache": {n: e["sha256"] for n, e in manifest["datasets"].items()},
        "train_seconds": {"pretrain": round(t_pre, 1), "meta_train": round(t_meta, 1)},
        "final_val": val_records[-1] if val_records else None,
        "none_policy_accuracy": {"pretrained_only": pre_acc, "meta_trained": meta_acc, "paired_delta": deltas},
        "eval_episodes": eval_episodes,
        "eval_seed": eval_seed,
        "pretrain_config": dataclasses.asdict(pretrain_config),
        "meta_config": dataclasses.asdict(meta_config),
    }
    (out_dir / f"{stem}.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    lines = [f"# None-policy ProtoNet accuracy, {meta_config.backbone} @ {meta_config.image_size}px",
             "", f"Mean +- 95 % CI over {eval_episodes} Meta-Dataset various-way various-shot episodes (seed {eval_seed}).", "",
             "The delta is the mean of the per-episode differences (meta-trained - pre-trained only) +- its 95 % CI.", "",
             "| data set | pre-trained only | meta-trained | delta (pp), paired |", "|---|---|---|---|"]
    for name in pre_acc:
        a, b, d = pre_acc[name], meta_acc[name], deltas[name]
        lines.append(f"| {name} | {100 * a['mean']:.2f} +- {100 * a['ci95']:.2f} | {100 * b['mean']:.2f} +- {100 * b['ci95']:.2f} "
                     f"| {100 * d['mean']:+.2f} +- {100 * d['ci95']:.2f} |")
    (out_dir / "evaluation.md").write_text("\n".join(lines) + "\n")
    plot_training(out_dir)
    return summary
