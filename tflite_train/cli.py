"""The ``tflite-train`` command line: parses flags and calls the library, nothing else.

Subcommands import what they need lazily, so the on-device ones run without TensorFlow.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from tflite_train.architectures import BACKBONES, PAPER_BACKBONES


def _cmd_backbones(args: argparse.Namespace) -> int:
    from tflite_train.cost_report import backbone_summary

    for name in args.backbone or PAPER_BACKBONES:
        print(backbone_summary(name, args.input_size, args.in_channels, layers=not args.totals_only))
        print()
    return 0


def _cmd_cost_report(args: argparse.Namespace) -> int:
    from tflite_train.cost_report import backward_report, format_backward_report

    print(format_backward_report(backward_report(args.input_size), args.input_size))
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    """The end-to-end demo: export the shipped weights, adapt on a cross-domain task via TFLite."""
    from tflite_train.demo import DemoConfig, run_demo

    overrides = {k: v for k, v in (("target", args.target), ("seed", args.seed), ("out", args.out),
                                   ("cache", args.cache), ("policy", args.policy)) if v is not None}
    run_demo(DemoConfig(**overrides))
    return 0


def _cmd_golden(args: argparse.Namespace) -> int:
    """Writes the Java golden vectors (TensorFlow-free)."""
    from tflite_train.golden import write_vectors

    paths = write_vectors(args.out)
    print(f"wrote {len(paths)} golden files to {args.out}")
    return 0


def _cmd_bench(args: argparse.Namespace) -> int:
    """Runs the benchmarks (needs TensorFlow for the exports and the TF-recipe peer)."""
    import shlex

    from bench import BenchConfig, render_saved, run_benchmarks

    if args.render_only:
        print(f"wrote {render_saved(args.out)}")
        return 0
    _setup_tf(args)
    config = BenchConfig(
        cache_dir=args.cache, out_dir=args.out, model_dir=args.model_dir, backbone=args.backbone,
        input_size=args.input_size, weights=args.weights or None,
        meta_ablation_weights=tuple(args.meta_ablation_weights) if args.meta_ablation_weights else None,
        candidate_blocks=args.candidate_blocks, targets=tuple(args.target) if args.target else None,
        tasks=args.tasks, seed=args.seed, max_ways=args.max_ways, max_support_total=args.max_support_total,
        max_support_per_class=args.max_support_per_class, epochs=args.epochs or None, iterations=args.iterations,
        learning_rates=tuple(args.learning_rates), tuning_tasks=args.tuning_tasks,
        full_train_batch=args.full_train_batch, ablation_target=args.ablation_target,
        ablation_tasks=args.ablation_tasks, timing_runs=args.timing_runs, tf_recipe=not args.no_tf_recipe,
        threads=args.threads, workers=args.workers,
        sections=tuple(args.section) if args.section else BenchConfig.sections,
    )
    report = run_benchmarks(config, command="tflite-train " + shlex.join(args.argv), update=args.update)
    print(f"wrote {report}")
    return 0


def _cmd_data_prepare(args: argparse.Namespace) -> int:
    from tflite_train.data.cache import default_datasets, image_folder_spec, prepare_cache, verify_cache

    extra = []
    for item in args.folder or []:
        name, sep, rest = item.partition("=")
        path, _, role = rest.partition(":")
        if not sep or not path:
            raise ValueError(f"--folder must be NAME=PATH[:source|target], got {item!r}")
        extra.append(image_folder_spec(name, path, role or "target"))
    manifest = prepare_cache(args.out, image_size=args.image_size, force=args.force, datasets=default_datasets() + tuple(extra))
    verify_cache(args.out, deep=True)
    for name, entry in manifest["datasets"].items():
        splits = " ".join(f"{k}={len(v)}" for k, v in entry["splits"].items())
        print(f"{name:28s} {entry['role']:6s} {entry['num_images']:6d} images {entry['num_classes']:4d} classes ({splits}) sha256 {entry['sha256'][:12]}")
    return 0


def _setup_tf(args: argparse.Namespace) -> None:
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
    _setup_tf(args)
    from tflite_train.data.cache import load_split
    from tflite_train.meta.pretrain import pretrain
    from tflite_train.meta.run_io import make_strategy

    pretrain(load_split(args.cache, args.dataset, "train"), _pretrain_config(args), args.out, strategy=make_strategy(args.strategy))
    return 0


def _cmd_meta_train(args: argparse.Namespace) -> int:
    _setup_tf(args)
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
    _setup_tf(args)
    from tflite_train.meta.shipped_weights import train_shipped_weights

    train_shipped_weights(args.cache, args.out, pretrain_config=_pretrain_config(args), meta_config=_meta_config(args),
                          eval_episodes=args.eval_episodes)
    print((__import__("pathlib").Path(args.out) / "evaluation.md").read_text())
    return 0


def _cmd_evaluate(args: argparse.Namespace) -> int:
    _setup_tf(args)
    from tflite_train.meta.shipped_weights import evaluate_all
    from tflite_train.models.keras_backbone import build_backbone

    backbone = build_backbone(args.backbone, args.image_size)
    backbone.model.load_weights(args.weights)
    for name, acc in evaluate_all(backbone.model, __import__("pathlib").Path(args.cache), args.dataset, args.episodes, args.seed).items():
        print(f"{name:28s} {100 * acc['mean']:.2f} +- {100 * acc['ci95']:.2f} % ({acc['num_episodes']} episodes)")
    return 0


def _training_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cache", default="build/data_cache", help="folder made by `data prepare`")
    p.add_argument("--out", required=True, help="output folder (resolved config, log, checkpoints, weights)")
    p.add_argument("--backbone", choices=sorted(BACKBONES), default="mcunet")
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--dataset", default="glyphs", help="source data set of the cache")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=0, help="TF intra-op threads (0: TF default)")
    p.add_argument("--strategy", choices=("default", "mirrored", "multi_worker"), default="default",
                   help="tf.distribute strategy: 'mirrored' = all local GPUs (or the CPU); 'multi_worker' = the "
                        "machines in TF_CONFIG (run the same command on each)")
    p.add_argument("--episodes-per-step", type=int, default=1,
                   help="meta-train: episodes averaged per step, split over the strategy's replicas (a multiple of them)")
    p.add_argument("--pretrain-steps", type=int, default=1500)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--pretrain-lr", type=float, default=0.05)
    p.add_argument("--episodes", type=int, default=600)
    p.add_argument("--ways", type=int, default=10)
    p.add_argument("--shots", type=int, default=5)
    p.add_argument("--queries", type=int, default=10)
    p.add_argument("--meta-lr", type=float, default=0.005)
    p.add_argument("--val-every", type=int, default=100)
    p.add_argument("--init-weights", help="meta-train: start from these backbone weights (.weights.h5)")
    p.add_argument("--eval-episodes", type=int, default=200)


def _cmd_adapt(args: argparse.Namespace) -> int:
    """Adapts an exported model to an image folder on the interpreter; writes the checkpoint + JSON."""
    import json
    import math

    from tflite_train.runtime.adapt_job import run_adaptation
    from tflite_train.runtime.byte_size import parse_byte_size
    from tflite_train.runtime.trainer import AdaptConfig

    config = AdaptConfig(
        policy=args.policy,
        memory_bytes=math.inf if args.mem_budget is None else float(parse_byte_size(args.mem_budget)),
        compute_fraction=args.compute_budget, compute_macs=args.compute_macs, channel_ratio=args.channel_ratio,
        iterations=args.iterations, epochs=args.epochs, batch_size=args.batch_size,
        learning_rate=args.learning_rate, seed=args.seed, on_empty=args.on_empty,
    )
    report = run_adaptation(args.model, args.support, args.out, config, query_dir=args.query,
                            include_optimizer=args.include_optimizer)
    summary = {k: report[k] for k in ("memory_bytes", "backward_macs", "within_budget", "seconds", "checkpoint_bytes")}
    summary["selection"] = {n: len(c) for n, c in report["selection"]["channels"].items()}
    if "query_accuracy" in report:
        summary["query_accuracy"] = report["query_accuracy"]
    print(json.dumps(summary, indent=2))
    return 0


def _cmd_predict(args: argparse.Namespace) -> int:
    """Prints "image<TAB>class id<TAB>class name" per image for an adapted model."""
    from tflite_train.runtime.adapt_job import run_prediction

    for path, class_id, name in run_prediction(args.model, args.checkpoint, args.images):
        print(f"{path}\t{class_id}\t{name}")
    return 0


def _non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"expected a number; got {text!r}") from err
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be >= 0; got {text!r}")
    return value
def _cmd_export(args: argparse.Namespace) -> int:
    """Exports a trainable .tflite (needs TensorFlow: the converters package)."""
    from converters.export import write_export
    from converters.export_config import ExportConfig
    from converters.keras_io import load_keras_model
    from converters.weights_spec import resolve_export_config

    size = None if args.input_size is None else tuple(args.input_size) * (2 if len(args.input_size) == 1 else 1)
    if size is not None and len(size) != 2:
        raise ValueError(f"--input-size takes H or H W; got {args.input_size}")
    optimizer = {"sgd": "sgd_momentum"}.get(args.optimizer, args.optimizer)
    common = dict(class_capacity=args.capacity, optimizer=optimizer, learning_rate=args.learning_rate,
                  seed=args.seed, candidates=args.candidates or "", feature_layer=args.feature_layer)
    if args.keras_model:
        if args.backbone or args.weights:
            raise ValueError("--keras-model cannot be combined with --backbone or --weights")
        model = load_keras_model(args.keras_model)
        config = ExportConfig(backbone="keras", input_size=size, keras_model=str(args.keras_model),
                              candidate_blocks=args.candidate_blocks or 2,
                              cosine_scale=args.cosine_scale or 10.0,
                              mean=tuple(args.mean) if args.mean else None, std=tuple(args.std) if args.std else None,
                              **common)
    else:
        model = None
        if args.weights is None:  # no sidecar: the CLI's defaults are the paper's MCUNet at 128
            args.backbone, size = args.backbone or "mcunet", size or (128, 128)
        config = resolve_export_config(
            args.weights, backbone=args.backbone, input_size=size, in_channels=args.in_channels,
            candidate_blocks=args.candidate_blocks or 4, cosine_scale=args.cosine_scale,
            mean=tuple(args.mean) if args.mean else None, std=tuple(args.std) if args.std else None, **common,
        )
    result = write_export(config, args.out, model)
    print(f"wrote {args.out} ({len(result.model)} bytes, candidates: {', '.join(result.metadata['candidates'])})")
    return 0


def _cmd_verify(args: argparse.Namespace) -> int:
    """Replays the embedded self-test on the installed interpreter (TF-free)."""
    from tflite_train.runtime.selftest import verify

    result = verify(args.model, runtime=args.runtime)
    print(result.format())
    return 0 if result.passed else 1


def _cmd_ops(args: argparse.Namespace) -> int:
    """Lists the operators of a .tflite file; exit 1 on any custom/Flex op (TF-free)."""
    from tflite_train.runtime.metadata import read_operator_codes

    ops = read_operator_codes(args.model)
    bad = [op for op in ops if op.is_custom]
    for op in sorted(ops, key=lambda o: o.name):
        kind = f"CUSTOM {op.custom_code}" if op.is_custom else "builtin"
        print(f"{op.name:<24} v{op.version:<3} {kind}")
    print(f"{len(ops)} operator codes, {len(bad)} custom/Flex")
    return 1 if bad else 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tflite-train", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("backbones", help="print layer tables and cost summaries")
    p.add_argument("--backbone", action="append", choices=sorted(BACKBONES), help="repeatable; default: the paper's three")
    p.add_argument("--input-size", type=int, default=128)
    p.add_argument("--in-channels", type=int, default=3)
    p.add_argument("--totals-only", action="store_true")
    p.set_defaults(func=_cmd_backbones)

    p = sub.add_parser("bench", help="regenerate the paper's tables and figures: BENCHMARKS.md + PNGs")
    p.add_argument("--cache", default="build/data_cache", help="data cache (tflite-train data prepare)")
    p.add_argument("--out", default="bench/results", help="output folder (BENCHMARKS.md, PNGs, results/config JSON)")
    p.add_argument("--model-dir", default="build/bench/models", help="exported models (reused when up to date)")
    p.add_argument("--backbone", choices=sorted(BACKBONES), default="mcunet")
    p.add_argument("--input-size", type=int, default=64)
    p.add_argument("--weights", default="weights/mcunet_64_meta.weights.h5", help="'' = seeded init")
    p.add_argument("--meta-ablation-weights", nargs="*",
                   default=["weights/meta_ablation/pretrain.weights.h5", "weights/meta_ablation/mcunet_64_meta.weights.h5"],
                   help="pre-trained-only and meta-trained weights of one train-weights run (none given = skip)")
    p.add_argument("--candidate-blocks", type=int, default=7)
    p.add_argument("--target", action="append", help="repeatable; default: every target of the cache")
    p.add_argument("--tasks", type=int, default=50, help="N tasks per target")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--max-ways", type=int, default=10)
    p.add_argument("--max-support-total", type=int, default=50)
    p.add_argument("--max-support-per-class", type=int, default=10)
    p.add_argument("--epochs", type=int, default=40,
                   help="passes over each support set (the paper's protocol); 0 = --iterations steps instead")
    p.add_argument("--iterations", type=int, default=40, help="steps per task when --epochs 0")
    p.add_argument("--learning-rates", type=float, nargs="+", default=[3e-4, 1e-3, 3e-3, 1e-2],
                   help="candidate Adam rates, each method's chosen on tuning episodes (one rate = no tuning)")
    p.add_argument("--tuning-tasks", type=int, default=3,
                   help="tuning episodes per target for the learning-rate choice")
    p.add_argument("--full-train-batch", type=int, default=50)
    p.add_argument("--ablation-target", default=None)
    p.add_argument("--ablation-tasks", type=int, default=20)
    p.add_argument("--timing-runs", type=int, default=3)
    p.add_argument("--no-tf-recipe", action="store_true", help="skip the TF-recipe (Flex) timing peer")
    p.add_argument("--section", action="append", choices=("accuracy", "backward_cost", "timing", "ablations", "plots"),
                   help="repeatable; default: all")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--workers", type=int, default=1,
                   help="processes for the accuracy and ablation tasks (results do not depend on it)")
    p.add_argument("--update", action="store_true",
                   help="rerun only the --section(s) of --out's finished run, keeping its other sections (same settings)")
    p.add_argument("--render-only", action="store_true", help="re-render BENCHMARKS.md and the PNGs from --out's saved results")
    p.set_defaults(func=_cmd_bench)

    p = sub.add_parser("cost-report", help="MCUNet backward-pass costs beside the paper's Tables 2 and 6")
    p.add_argument("--input-size", type=int, default=128)
    p.set_defaults(func=_cmd_cost_report)

    p = sub.add_parser("demo", help="the README's main job: export the shipped weights, adapt on a new task")
    p.add_argument("--target", help="cross-domain data set of the cache (default fashion_mnist)")
    p.add_argument("--policy", help="adaptation policy (default tinytrain)")
    p.add_argument("--seed", type=int)
    p.add_argument("--cache")
    p.add_argument("--out")
    p.set_defaults(func=_cmd_demo)

    p = sub.add_parser("golden", help="write the golden vectors that pin the Java core to the Python cost model")
    p.add_argument("--out", default="android_demo/core/src/test/resources/golden", help="output folder")
    p.set_defaults(func=_cmd_golden)
    p = sub.add_parser("data", help="offline data sets")
    data_sub = p.add_subparsers(dest="data_command", required=True)
    q = data_sub.add_parser("prepare", help="build (or confirm) the verified data cache")
    q.add_argument("--out", default="build/data_cache")
    q.add_argument("--image-size", type=int, default=64)
    q.add_argument("--force", action="store_true", help="rebuild even when up to date")
    q.add_argument("--folder", action="append", metavar="NAME=PATH[:ROLE]", help="add your own root/class/*.png data set (repeatable)")
    q.set_defaults(func=_cmd_data_prepare)

    p = sub.add_parser("pretrain", help="supervised pre-training on the source's train classes")
    _training_flags(p)
    p.set_defaults(func=_cmd_pretrain)
    p = sub.add_parser("meta-train", help="episodic ProtoNet meta-training (cosine classifier)")
    _training_flags(p)
    p.set_defaults(func=_cmd_meta_train)
    p = sub.add_parser("train-weights", help="pre-train + meta-train + evaluate: the shipped weights")
    _training_flags(p)
    p.set_defaults(func=_cmd_train_weights)
    p = sub.add_parser("evaluate", help="None-policy ProtoNet accuracy of backbone weights on the cache")
    p.add_argument("--cache", default="build/data_cache")
    p.add_argument("--weights", required=True)
    p.add_argument("--backbone", choices=sorted(BACKBONES), default="mcunet")
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--dataset", default="glyphs")
    p.add_argument("--episodes", type=int, default=200)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--threads", type=int, default=0)
    p.set_defaults(func=_cmd_evaluate)

    p = sub.add_parser("adapt", help="on-device fine-tuning of an exported model on an image folder (no TF)")
    p.add_argument("--model", required=True, help="exported .tflite")
    p.add_argument("--support", required=True, help="DIR/<class>/*.png|npy|jpg")
    p.add_argument("--query", help="optional DIR/<class>/* to report the query accuracy")
    p.add_argument("--out", required=True, help="checkpoint path (config/report JSON written beside it)")
    p.add_argument("--policy", default="tinytrain", help="none | last_layer | full_train | sparse_update | tinytrain")
    p.add_argument("--mem-budget", help="B_mem, e.g. 1MiB, 512KiB, 1.5MB (default unlimited)")
    p.add_argument("--compute-budget", type=_non_negative_float,
                   help="B_compute as a fraction of the full backward pass, i.e. of FullTrain's backward MACs per "
                        "image (every layer updated); e.g. 0.15 = 15 %% of it, 1 = no compute limit")
    p.add_argument("--compute-macs", type=_non_negative_float, help="B_compute in MACs (instead of --compute-budget)")
    p.add_argument("--channel-ratio", type=float, default=0.25)
    p.add_argument("--iterations", type=int, default=40, help="optimizer steps (unless --epochs)")
    p.add_argument("--epochs", type=int, help="passes over the support set instead of --iterations "
                   "(the paper: 40 passes at batch 1)")
    p.add_argument("--batch-size", type=int, default=1)
    p.add_argument("--learning-rate", type=float, help="default: the model's")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--on-empty", choices=("raise", "empty"), default="raise", help="when the budget fits no layer")
    p.add_argument("--include-optimizer", action="store_true", help="store optimizer slots in the checkpoint")
    p.set_defaults(func=_cmd_adapt)

    p = sub.add_parser("predict", help="classify images with an adapted model (no TF)")
    p.add_argument("--model", required=True)
    p.add_argument("--checkpoint", required=True)
    p.add_argument("images", nargs="+")
    p.set_defaults(func=_cmd_predict)
    p = sub.add_parser("export", help="export a trainable builtins-only .tflite from a built-in backbone or your "
                       "own Keras model (needs TensorFlow)")
    p.add_argument("--keras-model", help="your Keras model (.keras or legacy .h5): its classifier head is dropped "
                   "and replaced by the cosine head; Rescaling/Normalization at its input become the input spec")
    p.add_argument("--backbone", choices=sorted(BACKBONES), help="a built-in backbone (default: the weights' "
                   "sidecar, else mcunet)")
    p.add_argument("--weights", default=None,
                   help="Keras X.weights.h5 of a built-in backbone; X.json beside it sets backbone, input, head scale")
    p.add_argument("--out", required=True, help="the .tflite file to write (its resolved config goes beside it)")
    p.add_argument("--input-size", type=int, nargs="+", metavar="H [W]",
                   help="input height and width in pixels (default: the Keras model's, the weights' sidecar, or 128)")
    p.add_argument("--in-channels", type=int, help="image channels of a built-in backbone (default 3)")
    p.add_argument("--mean", type=float, nargs="+", help="input normalisation (x - mean) / std, per channel or one "
                   "value; default: the model's own preprocessing layers, else 0 (identity)")
    p.add_argument("--std", type=float, nargs="+", help="see --mean; default 1")
    p.add_argument("--candidates", help="layers the device may train: blocks:K (last K blocks), layers:K (last K "
                   "layers with weights), from:LAYER (LAYER and everything after it) or all")
    p.add_argument("--candidate-blocks", type=int, help="shorthand for --candidates blocks:K (default 4 for a "
                   "built-in backbone, 2 for a Keras model)")
    p.add_argument("--feature-layer", help="layer whose output is the embedding (default: the global pooling or "
                   "Flatten that feeds the model's classifier)")
    p.add_argument("--capacity", type=int, default=64, help="most classes the on-device head holds (default 64)")
    p.add_argument("--optimizer", choices=("adam", "sgd", "sgd_momentum"), default="adam",
                   help="on-device optimizer (sgd = SGD with momentum; default adam)")
    p.add_argument("--learning-rate", type=float, default=1e-3, help="default on-device learning rate (1e-3)")
    p.add_argument("--cosine-scale", type=float, help="scale s of the cosine logits (default: the weights' "
                   "meta-trained scale, else 10)")
    p.add_argument("--seed", type=int, default=0, help="seed of a built-in backbone's initialisation and of the "
                   "self-test inputs")
    p.set_defaults(func=_cmd_export)

    p = sub.add_parser("verify", help="replay the self-test vectors embedded in a model")
    p.add_argument("model")
    p.add_argument("--runtime", default=None, help="interpreter module, e.g. tflite_runtime.interpreter")
    p.set_defaults(func=_cmd_verify)

    p = sub.add_parser("ops", help="list operators; fail on Flex/custom ops")
    p.add_argument("model")
    p.set_defaults(func=_cmd_ops)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        return args.func(args)
    except ValueError as err:
        print(f"tflite-train {args.command}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
