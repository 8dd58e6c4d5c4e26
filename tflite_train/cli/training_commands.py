"""Commands that build the data cache and train backbone weights (TensorFlow): data, pretrain, meta-train,
train-weights, evaluate."""

from __future__ import annotations

import argparse
import dataclasses
import logging

from tflite_train.architectures import BACKBONES, PRETRAINED_BACKBONES
from tflite_train.cli.flag_types import MAX_BATCH, MAX_SEED, MAX_STEPS, ranged
from tflite_train.cli.parser import Command, common_flags

__all__ = ["register", "setup_tf"]


def _cmd_data_prepare(args: argparse.Namespace) -> int:
    from tflite_train.data.cache import default_datasets, image_folder_spec, prepare_cache, verify_cache

    extra = []
    for item in args.folder or []:
        name, sep, rest = item.partition("=")
        path, _, role = rest.partition(":")
        if not sep or not path:
            raise ValueError(f"--folder must be NAME=PATH[:source|target], got {item!r}")
        extra.append(image_folder_spec(name, path, role or "target"))
    manifest = prepare_cache(args.out, image_size=args.image_size, force=args.force,
                             datasets=default_datasets() + tuple(extra), downloads_root=args.downloads_from)
    verify_cache(args.out, deep=True)
    for name, entry in manifest["datasets"].items():
        splits = " ".join(f"{k}={len(v)}" for k, v in entry["splits"].items())
        print(f"{name:28s} {entry['role']:6s} {entry['num_images']:6d} images {entry['num_classes']:4d} classes ({splits}) sha256 {entry['sha256'][:12]}")
    return 0


def setup_tf(args: argparse.Namespace) -> None:
    import tensorflow as tf

    if args.threads:
        try:
            tf.config.threading.set_intra_op_parallelism_threads(args.threads)
            tf.config.threading.set_inter_op_parallelism_threads(1)
        except RuntimeError as err:  # TF already initialised in this process (e.g. under pytest)
            logging.getLogger(__name__).warning("--threads ignored: %s", err)


def _pretrain_config(args: argparse.Namespace):
    from tflite_train.meta.config import PretrainConfig, ScheduleConfig

    return PretrainConfig(backbone=args.backbone, image_size=args.image_size, dataset=args.dataset, steps=args.pretrain_steps,
                          batch_size=args.batch_size, schedule=ScheduleConfig(peak_lr=args.pretrain_lr), seed=args.seed)


def _meta_config(args: argparse.Namespace):
    from tflite_train.data.episodes import EpisodeConfig
    from tflite_train.meta.config import MetaTrainConfig, ScheduleConfig

    return MetaTrainConfig(backbone=args.backbone, image_size=args.image_size, dataset=args.dataset, episodes=args.episodes,
                           episode=EpisodeConfig(ways=args.ways, shots=args.shots, queries=args.queries),
                           schedule=ScheduleConfig(peak_lr=args.meta_lr), val_every=args.val_every, seed=args.seed,
                           episodes_per_step=args.episodes_per_step)


def _cmd_pretrain(args: argparse.Namespace) -> int:
    setup_tf(args)
    from tflite_train.data.cache import load_split
    from tflite_train.meta.pretrain import pretrain
    from tflite_train.meta.run_io import make_strategy

    pretrain(load_split(args.cache, args.dataset, "train"), _pretrain_config(args), args.out, strategy=make_strategy(args.strategy))
    return 0


def _train_lite0(args: argparse.Namespace) -> int:
    """Lite0: cache the frozen prefix's features, pick what trains, split point, LR, steps and WiSE-FT alpha by
    leave-one-domain-out selection, meta-train the upper blocks (``tflite_train.meta.lite0_weights``)."""
    import pathlib

    from tflite_train.meta.lite0_weights import Lite0WeightsConfig, train_lite0_weights
    from tflite_train.meta.run_io import make_strategy

    config = Lite0WeightsConfig()
    config = dataclasses.replace(config, sweep=dataclasses.replace(config.sweep, seed=args.seed,
                                                                   episodes_per_step=args.episodes_per_step or 2))
    train_lite0_weights(args.cache, args.out, config, features_dir=args.features_dir, strategy=make_strategy(args.strategy))
    print((pathlib.Path(args.out) / "evaluation.md").read_text())
    return 0


def _cmd_meta_train(args: argparse.Namespace) -> int:
    setup_tf(args)
    if args.backbone == "lite0":
        return _train_lite0(args)
    from tflite_train.data.cache import load_split
    from tflite_train.meta.meta_train import meta_train
    from tflite_train.meta.run_io import make_strategy
    from tflite_train.models.keras_backbone import build_backbone

    strategy = make_strategy(args.strategy)
    backbone = None
    if args.init_weights:
        with strategy.scope():
            backbone = build_backbone(args.backbone, args.image_size)
            backbone.model.load_weights(args.init_weights)
    meta_train(load_split(args.cache, args.dataset, "train"), _meta_config(args), args.out,
               val=load_split(args.cache, args.dataset, "val"), backbone=backbone, strategy=strategy)
    return 0


def _cmd_train_weights(args: argparse.Namespace) -> int:
    setup_tf(args)
    if args.backbone == "lite0":
        return _train_lite0(args)
    from tflite_train.meta.shipped_weights import train_shipped_weights

    train_shipped_weights(args.cache, args.out, pretrain_config=_pretrain_config(args), meta_config=_meta_config(args),
                          eval_episodes=args.eval_episodes)
    print((__import__("pathlib").Path(args.out) / "evaluation.md").read_text())
    return 0


def _cmd_evaluate(args: argparse.Namespace) -> int:
    setup_tf(args)
    from tflite_train.meta.shipped_weights import evaluate_all
    from tflite_train.models.keras_backbone import build_backbone

    backbone = build_backbone(args.backbone, args.image_size)
    backbone.model.load_weights(args.weights)
    for name, acc in evaluate_all(backbone.model, __import__("pathlib").Path(args.cache), args.dataset, args.episodes, args.seed).items():
        print(f"{name:28s} {100 * acc['mean']:.2f} +- {100 * acc['ci95']:.2f} % ({acc['num_episodes']} episodes)")
    return 0


def _training_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cache", default="build/data_cache", help="data cache folder made by `data prepare`")
    p.add_argument("--out", required=True, help="output folder (resolved config, log, checkpoints, weights)")
    p.add_argument("--backbone", choices=sorted(set(BACKBONES) | set(PRETRAINED_BACKBONES)), default="mcunet",
                   help="network architecture; lite0 = EfficientNet-Lite0 from ImageNet at 128 px: its upper blocks are "
                   "meta-trained on cached prefix features of the emoji + glyphs_multiscript sources with the settings of "
                   "tflite_train.meta.lite0_weights (--image-size, --dataset and the step/LR flags do not apply)")
    p.add_argument("--features-dir", default="build/lite0_features", help="lite0: the prefix-feature cache folder")
    p.add_argument("--image-size", type=ranged(int, 8, 4096), default=64, help="input side in pixels")
    p.add_argument("--dataset", default="glyphs", help="source data set of the cache")
    p.add_argument("--seed", type=ranged(int, 0, MAX_SEED), default=0, help="random seed")
    p.add_argument("--threads", type=ranged(int, 0, 1024), default=0, help="TF intra-op threads (0: TF's default)")
    p.add_argument("--strategy", choices=("default", "mirrored", "multi_worker"), default="default",
                   help="tf.distribute strategy: 'mirrored' = all local GPUs (or the CPU); 'multi_worker' = the "
                        "machines in TF_CONFIG (run the same command on each)")
    p.add_argument("--episodes-per-step", type=ranged(int, 1, 10_000), default=1,
                   help="meta-train: episodes averaged per step, split over the strategy's replicas (a multiple of them)")
    p.add_argument("--pretrain-steps", type=ranged(int, 0, MAX_STEPS), default=1500, help="supervised pre-training steps")
    p.add_argument("--batch-size", type=ranged(int, 1, MAX_BATCH), default=64, help="pre-training batch, images")
    p.add_argument("--pretrain-lr", type=ranged(float, 0, 10, low_open=True), default=0.05, help="peak learning rate of pre-training")
    p.add_argument("--episodes", type=ranged(int, 0, MAX_STEPS), default=600, help="meta-training episodes")
    p.add_argument("--ways", type=ranged(int, 2, 10_000), default=10, help="classes per meta-training episode")
    p.add_argument("--shots", type=ranged(int, 1, 10_000), default=5, help="support images per class and episode")
    p.add_argument("--queries", type=ranged(int, 1, 10_000), default=10, help="query images per class and episode")
    p.add_argument("--meta-lr", type=ranged(float, 0, 10, low_open=True), default=0.005, help="peak learning rate of meta-training")
    p.add_argument("--val-every", type=ranged(int, 1, MAX_STEPS), default=100, help="validate every N episodes")
    p.add_argument("--init-weights", help="meta-train: start from these backbone weights (.weights.h5) (default: none)")
    p.add_argument("--eval-episodes", type=ranged(int, 1, MAX_STEPS), default=200, help="evaluation episodes per target")


def register(command: Command) -> None:
    """Adds data prepare, pretrain, meta-train, train-weights and evaluate."""
    p = command("data", "offline data sets")
    data_sub = p.add_subparsers(dest="data_command", required=True, metavar="COMMAND")
    q = data_sub.add_parser("prepare", help="build (or confirm) the verified data cache",
                            description="build (or confirm) the verified data cache")
    common_flags(q, top=False)
    q.add_argument("--out", default="build/data_cache", help="cache folder")
    q.add_argument("--image-size", type=ranged(int, 8, 4096), default=64,
                   help="image side in pixels: one cache per model input size (MCUNet 64, EfficientNet-Lite0 128)")
    q.add_argument("--downloads-from", metavar="DIR", default=None,
                   help="read the fetched npm/icon-theme files from DIR/downloads (another cache made by `make data`) "
                        "instead of OUT/downloads")
    q.add_argument("--force", action="store_true", help="rebuild even when up to date")
    q.add_argument("--folder", action="append", metavar="NAME=PATH[:ROLE]",
                   help="add your own root/class/*.png data set (repeatable; ROLE source or target, default target)")
    q.set_defaults(func=_cmd_data_prepare)

    p = command("pretrain", "supervised pre-training on the source's train classes (needs TensorFlow)")
    _training_flags(p)
    p.set_defaults(func=_cmd_pretrain)

    p = command("meta-train", "episodic ProtoNet meta-training with a cosine classifier (needs TensorFlow)")
    _training_flags(p)
    p.set_defaults(func=_cmd_meta_train)

    p = command("train-weights", "pre-train + meta-train + evaluate: the shipped weights (needs TensorFlow)")
    _training_flags(p)
    p.set_defaults(func=_cmd_train_weights)

    p = command("evaluate", "None-policy ProtoNet accuracy of backbone weights on the cache (needs TensorFlow)")
    p.add_argument("--cache", default="build/data_cache", help="data cache folder")
    p.add_argument("--weights", required=True, help="Keras .weights.h5 file")
    p.add_argument("--backbone", choices=sorted(BACKBONES), default="mcunet", help="network architecture")
    p.add_argument("--image-size", type=ranged(int, 8, 4096), default=64, help="input side in pixels")
    p.add_argument("--dataset", default="glyphs", help="source data set of the cache")
    p.add_argument("--episodes", type=ranged(int, 0, MAX_STEPS), default=200, help="episodes per target")
    p.add_argument("--seed", type=ranged(int, 0, MAX_SEED), default=1234, help="random seed")
    p.add_argument("--threads", type=ranged(int, 0, 1024), default=0, help="TF intra-op threads (0: TF's default)")
    p.set_defaults(func=_cmd_evaluate)
