"""The ``tflite-train`` command line: parses flags and calls the library, nothing else.

Subcommands import what they need lazily, so the on-device ones run without TensorFlow.
"""

from __future__ import annotations

import argparse
import logging
import math
import sys
import traceback
from collections.abc import Sequence

from tflite_train import contract as C
from tflite_train.architectures import BACKBONES, PAPER_BACKBONES
from tflite_train.runtime.text import printable


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
    p.add_argument("--cache", default="build/data_cache", help="data cache folder made by `data prepare`")
    p.add_argument("--out", required=True, help="output folder (resolved config, log, checkpoints, weights)")
    p.add_argument("--backbone", choices=sorted(BACKBONES), default="mcunet", help="network architecture")
    p.add_argument("--image-size", type=int, default=64, help="input side in pixels")
    p.add_argument("--dataset", default="glyphs", help="source data set of the cache")
    p.add_argument("--seed", type=int, default=0, help="random seed")
    p.add_argument("--threads", type=int, default=0, help="TF intra-op threads (0: TF's default)")
    p.add_argument("--strategy", choices=("default", "mirrored", "multi_worker"), default="default",
                   help="tf.distribute strategy: 'mirrored' = all local GPUs (or the CPU); 'multi_worker' = the "
                        "machines in TF_CONFIG (run the same command on each)")
    p.add_argument("--episodes-per-step", type=int, default=1,
                   help="meta-train: episodes averaged per step, split over the strategy's replicas (a multiple of them)")
    p.add_argument("--pretrain-steps", type=int, default=1500, help="supervised pre-training steps")
    p.add_argument("--batch-size", type=int, default=64, help="pre-training batch, images")
    p.add_argument("--pretrain-lr", type=float, default=0.05, help="peak learning rate of pre-training")
    p.add_argument("--episodes", type=int, default=600, help="meta-training episodes")
    p.add_argument("--ways", type=int, default=10, help="classes per meta-training episode")
    p.add_argument("--shots", type=int, default=5, help="support images per class and episode")
    p.add_argument("--queries", type=int, default=10, help="query images per class and episode")
    p.add_argument("--meta-lr", type=float, default=0.005, help="peak learning rate of meta-training")
    p.add_argument("--val-every", type=int, default=100, help="validate every N episodes")
    p.add_argument("--init-weights", help="meta-train: start from these backbone weights (.weights.h5) (default: none)")
    p.add_argument("--eval-episodes", type=int, default=200, help="evaluation episodes per target")


def _cmd_adapt(args: argparse.Namespace) -> int:
    """Adapts an exported model to an image folder on the interpreter; prints the summary (or --json)."""
    from tflite_train.runtime.adapt_job import run_adaptation
    from tflite_train.runtime.progress import terminal_progress
    from tflite_train.runtime.summary import adapt_record, format_adapt_summary
    from tflite_train.runtime.trainer import AdaptConfig

    if args.plot:
        from tflite_train.runtime.plots import require_matplotlib

        require_matplotlib()
    layers = tuple(n.strip() for n in args.sparse_update_layers.split(",")) if args.sparse_update_layers else None
    criterion = "l2" if args.policy == "sparse_update" and layers is None else "tinytrain"  # a static ranking
    config = AdaptConfig(
        policy=args.policy, memory_bytes=math.inf if args.mem_budget is None else float(args.mem_budget),
        compute_fraction=args.compute_budget, compute_macs=args.compute_macs, channel_ratio=args.channel_ratio,
        criterion=criterion, sparse_update_layers=layers,
        iterations=args.iterations, epochs=args.epochs, batch_size=args.batch_size,
        learning_rate=args.learning_rate, seed=args.seed, on_empty=args.on_empty,
    )
    report = run_adaptation(args.model, args.support, args.out, config, query_dir=args.query,
                            include_optimizer=args.include_optimizer, runtime=args.runtime,
                            extra_outputs=(args.plot,) if args.plot else (), max_steps=MAX_STEPS,
                            progress=terminal_progress(not args.quiet and not args.json))
    if args.plot:
        from tflite_train.runtime.plots import plot_adaptation

        plot_adaptation(report, args.plot)
        report["plot"] = args.plot
    print(adapt_record(report) if args.json else format_adapt_summary(report))
    if args.plot and not args.json:
        print(f"  plot        {printable(args.plot)}")
    return 0


def _cmd_predict(args: argparse.Namespace) -> int:
    """Prints file, class and confidence per image (a table, --json or --csv)."""
    from tflite_train.runtime.adapt_job import run_prediction
    from tflite_train.runtime.progress import terminal_progress
    from tflite_train.runtime.summary import format_predictions

    rows = run_prediction(args.model, args.checkpoint, args.images, runtime=args.runtime,
                          progress=terminal_progress(not args.quiet))
    print(format_predictions(rows, "json" if args.json else "csv" if args.csv else "table"))
    return 0


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
    print(f"wrote {args.out} ({len(result.model)} bytes, candidates: {', '.join(result.metadata[C.F_CANDIDATES])})")
    return 0


def _cmd_verify(args: argparse.Namespace) -> int:
    """Replays the embedded self-test on the installed interpreter (TF-free)."""
    from tflite_train.runtime.selftest import verify

    from tflite_train.runtime.runtimes import resolve_runtime

    result = verify(args.model, runtime=resolve_runtime(args.runtime))
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


# ----------------------------------------------------------------------------- flag types
# Absurd values are refused while parsing, before any file is read.
MAX_ITERATIONS = 100_000
MAX_EPOCHS = 10_000
MAX_BATCH = 1024
MAX_STEPS = 1_000_000
MAX_SEED = 2**32 - 1
QUIET_COMMANDS = ("adapt", "predict")


def _number(text: str, kind: type, low: float, high: float, *, low_open: bool = False, unit: str = "") -> float | int:
    try:
        value = kind(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"expected {'an integer' if kind is int else 'a number'}; got {text!r}") from err
    if not (value > low if low_open else value >= low) or not value <= high or value != value:
        show = (lambda v: str(int(v))) if kind is int else (lambda v: f"{v:g}")
        bound = f"{'>' if low_open else '>='} {show(low)} and <= {show(high)}"
        raise argparse.ArgumentTypeError(f"must be {bound}{unit}; got {text!r}")
    return value


def _range(kind: type, low: float, high: float, *, low_open: bool = False, unit: str = ""):
    def parse(text: str):
        return _number(text, kind, low, high, low_open=low_open, unit=unit)

    parse.__name__ = kind.__name__  # argparse names the type in its messages
    return parse


def _byte_budget(text: str) -> int:
    from tflite_train.runtime.byte_size import parse_byte_size

    try:
        value = parse_byte_size(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from err
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1 byte (no layer fits 0); got {text!r}")
    return value


def _policy(text: str) -> str:
    from tflite_train.sparse.policies import canonical_policy_name

    try:
        return canonical_policy_name(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from err


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (``tflite-train adapt: error: ...``) and defaults in every help line."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        from tflite_train.runtime.text import printable

        self.exit(2, f"{self.prog}: error: {printable(message)} (see {self.prog} --help)\n")


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Appends "(default: X)" to a flag's help unless it has no default value or states its own."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "default" in text or any(action.default is v for v in (None, False, argparse.SUPPRESS)) or action.required:
            return text
        if action.option_strings or action.nargs in (argparse.OPTIONAL, argparse.ZERO_OR_MORE):
            return text + " (default: %(default)s)"
        return text


def _common_flags(p: argparse.ArgumentParser, top: bool) -> None:
    """--verbose/--debug/--quiet, accepted before or after the command."""
    default = {} if top else {"default": argparse.SUPPRESS}
    p.add_argument("-v", "--verbose", action="store_true", help="log what happens (INFO)", **default)
    p.add_argument("--debug", action="store_true", help="debug logging, and a traceback with any error", **default)
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars", **default)


def _version() -> str:
    from importlib import metadata

    from tflite_train import __version__

    parts = []
    for name in ("numpy", "pillow", "tflite-runtime", "ai-edge-litert", "tensorflow-cpu"):
        try:
            parts.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            continue
    return f"tflite-train {__version__} (Python {sys.version.split()[0]}; {'; '.join(parts)})"


ADAPT_HELP = """\
Fine-tunes an exported model (.tflite) to your own classes, on this device, with no TensorFlow.
Put a few example images of each class in a folder of its own:

  photos/cat/1.jpg  photos/cat/2.jpg ...  photos/dog/1.jpg ...

Images: PNG, JPEG, WebP, BMP, GIF (first frame), TIFF, or .npy; EXIF rotation applied, transparency
on white, centre-cropped to the model's aspect ratio and resized (bilinear); at most 50 megapixels and
64 MiB per file. Hidden files (.x, ._x) are skipped. Prints what was learned (--json: the full record)
and writes the checkpoint OUT with OUT.config.json and OUT.report.json beside it; any earlier files
there stay untouched unless the run succeeds."""

PREDICT_HELP = """\
Classifies images with a model adapted by `adapt`; prints one row per image: file, class and the
confidence (softmax over the classes of the adapted head), as a table, --json or --csv."""


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="tflite-train", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=_version(), help="print the versions and exit")
    _common_flags(parser, top=True)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, help_text: str, description: str | None = None) -> argparse.ArgumentParser:
        q = sub.add_parser(name, help=help_text, description=description or help_text)
        _common_flags(q, top=False)
        return q

    p = command("backbones", "print the layer tables and cost summaries of the backbones")
    p.add_argument("--backbone", action="append", choices=sorted(BACKBONES), help="repeatable (default: the paper's three)")
    p.add_argument("--input-size", type=int, default=128, help="input side in pixels")
    p.add_argument("--in-channels", type=int, default=3, help="input channels")
    p.add_argument("--totals-only", action="store_true", help="only the totals, no per-layer table")
    p.set_defaults(func=_cmd_backbones)

    p = command("bench", "regenerate the paper's tables and figures: BENCHMARKS.md + PNGs")
    p.add_argument("--cache", default="build/data_cache", help="data cache (tflite-train data prepare)")
    p.add_argument("--out", default="bench/results", help="output folder (BENCHMARKS.md, PNGs, results/config JSON)")
    p.add_argument("--model-dir", default="build/bench/models", help="exported models (reused when up to date)")
    p.add_argument("--backbone", choices=sorted(BACKBONES), default="mcunet", help="network architecture")
    p.add_argument("--input-size", type=int, default=64, help="input side in pixels")
    p.add_argument("--weights", default="weights/mcunet_64_meta.weights.h5", help="'' = seeded init")
    p.add_argument("--meta-ablation-weights", nargs="*",
                   default=["weights/meta_ablation/pretrain.weights.h5", "weights/meta_ablation/mcunet_64_meta.weights.h5"],
                   help="pre-trained-only and meta-trained weights of one train-weights run (none given = skip)")
    p.add_argument("--candidate-blocks", type=int, default=7, help="trainable blocks (from the end) of the export")
    p.add_argument("--target", action="append", help="repeatable (default: every target of the cache)")
    p.add_argument("--tasks", type=int, default=50, help="N tasks per target")
    p.add_argument("--seed", type=int, default=1234, help="random seed")
    p.add_argument("--max-ways", type=int, default=10, help="classes per task, at most")
    p.add_argument("--max-support-total", type=int, default=50, help="support images per task, at most")
    p.add_argument("--max-support-per-class", type=int, default=10, help="support images per class, at most")
    p.add_argument("--epochs", type=int, default=40,
                   help="passes over each support set (the paper's protocol); 0 = --iterations steps instead")
    p.add_argument("--iterations", type=int, default=40, help="steps per task when --epochs 0")
    p.add_argument("--learning-rates", type=float, nargs="+", default=[3e-4, 1e-3, 3e-3, 1e-2],
                   help="candidate Adam rates, each method's chosen on tuning episodes (one rate = no tuning)")
    p.add_argument("--tuning-tasks", type=int, default=3, help="tuning episodes per target for the learning-rate choice")
    p.add_argument("--full-train-batch", type=int, default=50, help="batch of the FullTrain baseline, images")
    p.add_argument("--ablation-target", default=None, help="target of the ablations (default: the first)")
    p.add_argument("--ablation-tasks", type=int, default=20, help="tasks per ablation")
    p.add_argument("--timing-runs", type=int, default=3, help="repetitions of each timing")
    p.add_argument("--no-tf-recipe", action="store_true", help="skip the TF-recipe (Flex) timing peer")
    p.add_argument("--section", action="append", choices=("accuracy", "backward_cost", "timing", "ablations", "plots"),
                   help="repeatable (default: all)")
    p.add_argument("--threads", type=int, default=1, help="interpreter/TF threads per worker")
    p.add_argument("--workers", type=int, default=1,
                   help="processes for the accuracy and ablation tasks (results do not depend on it)")
    p.add_argument("--update", action="store_true",
                   help="rerun only the --section(s) of --out's finished run, keeping its other sections (same settings)")
    p.add_argument("--render-only", action="store_true", help="re-render BENCHMARKS.md and the PNGs from --out's saved results")
    p.set_defaults(func=_cmd_bench)

    p = command("cost-report", "MCUNet backward-pass costs beside the paper's Tables 2 and 6")
    p.add_argument("--input-size", type=int, default=128, help="input side in pixels")
    p.set_defaults(func=_cmd_cost_report)

    p = command("demo", "the README's main job: export the shipped weights, adapt on a new task")
    p.add_argument("--target", help="cross-domain data set of the cache (default: fashion_mnist)")
    p.add_argument("--policy", help="adaptation policy (default: tinytrain)")
    p.add_argument("--seed", type=int, help="random seed (default: the demo's)")
    p.add_argument("--cache", help="data cache folder (default: build/data_cache)")
    p.add_argument("--out", help="output folder (default: build/demo)")
    p.set_defaults(func=_cmd_demo)

    p = command("golden", "write the golden vectors that pin the Java core to the Python cost model")
    p.add_argument("--out", default="android_demo/core/src/test/resources/golden", help="output folder")
    p.set_defaults(func=_cmd_golden)
    p = command("data", "offline data sets")
    data_sub = p.add_subparsers(dest="data_command", required=True, metavar="COMMAND")
    q = data_sub.add_parser("prepare", help="build (or confirm) the verified data cache",
                            description="build (or confirm) the verified data cache")
    _common_flags(q, top=False)
    q.add_argument("--out", default="build/data_cache", help="cache folder")
    q.add_argument("--image-size", type=int, default=64, help="image side in pixels")
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
    p.add_argument("--image-size", type=int, default=64, help="input side in pixels")
    p.add_argument("--dataset", default="glyphs", help="source data set of the cache")
    p.add_argument("--episodes", type=int, default=200, help="episodes per target")
    p.add_argument("--seed", type=int, default=1234, help="random seed")
    p.add_argument("--threads", type=int, default=0, help="TF intra-op threads (0: TF's default)")
    p.set_defaults(func=_cmd_evaluate)

    p = command("adapt", "fine-tune an exported model to your image folder, on this device (no TensorFlow)", ADAPT_HELP)
    p.add_argument("--model", required=True, metavar="FILE.tflite", help="the exported model")
    p.add_argument("--support", required=True, metavar="DIR", help="training images: DIR/<class>/<image>, 2 classes or more")
    p.add_argument("--query", metavar="DIR", help="optional test images DIR/<class>/<image> (support classes) to report accuracy on")
    p.add_argument("--out", required=True, help="checkpoint file to write (OUT.config.json and OUT.report.json go beside it)")
    p.add_argument("--policy", type=_policy, default="tinytrain",
                   help="which weights to update: none (prototypes only) | last_layer | full_train | sparse_update "
                        "(static: --sparse-update-layers, else layers ranked by weight norm) | tinytrain (this task's "
                        "Fisher information, under the budgets)")
    p.add_argument("--mem-budget", type=_byte_budget, metavar="SIZE",
                   help="B_mem, backward-pass memory in bytes with a unit: 1MiB, 512KiB, 1.5MB (default: unlimited)")
    p.add_argument("--compute-budget", type=_range(float, 0, 100, low_open=True), metavar="FRACTION",
                   help="B_compute as a fraction of the full backward pass, i.e. of FullTrain's backward MACs per "
                         "image (every layer updated); e.g. 0.15 = 15 %% of it, 1 = no compute limit (default: unlimited)")
    p.add_argument("--compute-macs", type=_range(float, 0, 1e18, low_open=True), metavar="MACS",
                   help="B_compute in multiply-accumulates, instead of --compute-budget (default: unlimited)")
    p.add_argument("--channel-ratio", type=_range(float, 0, 1, low_open=True), default=0.25, metavar="FRACTION",
                   help="fraction of each selected layer's output channels to update (sparse policies)")
    p.add_argument("--sparse-update-layers", metavar="L1,L2,...",
                   help="--policy sparse_update: layer priority list (default: rank by weight L2 norm)")
    p.add_argument("--iterations", type=_range(int, 0, MAX_ITERATIONS), default=40, metavar="STEPS",
                   help="optimizer steps (ignored with --epochs)")
    p.add_argument("--epochs", type=_range(int, 1, MAX_EPOCHS), metavar="PASSES",
                   help="passes over the support set instead of --iterations; the paper: 40 at batch 1 (default: off)")
    p.add_argument("--batch-size", type=_range(int, 1, MAX_BATCH), default=1, metavar="IMAGES",
                   help="images per optimizer step (at most the number of support images)")
    p.add_argument("--learning-rate", type=_range(float, 0, 10, low_open=True), metavar="RATE", help="optimizer step size (default: the model's)")
    p.add_argument("--seed", type=_range(int, 0, MAX_SEED), default=0, metavar="INT", help="seed of batch order and augmentation")
    p.add_argument("--on-empty", choices=("raise", "empty"), default="raise",
                   help="when the budget fits no layer: stop with an error, or keep the prototypes only")
    p.add_argument("--include-optimizer", action="store_true", help="store the optimizer state too (3x larger checkpoint)")
    p.add_argument("--runtime", choices=("litert", "tflite-runtime", "tensorflow"),
                   help="TFLite interpreter (default: the first installed of litert, tflite-runtime, tensorflow)")
    p.add_argument("--json", action="store_true", help="print the full machine-readable record instead of the summary")
    p.add_argument("--plot", metavar="FILE.png", help="also draw the selection, budgets and loss curve (needs matplotlib)")
    p.set_defaults(func=_cmd_adapt)

    p = command("predict", "classify images with an adapted model (no TensorFlow)", PREDICT_HELP)
    p.add_argument("--model", required=True, metavar="FILE.tflite", help="the exported model")
    p.add_argument("--checkpoint", required=True, help="checkpoint written by `adapt --out`")
    p.add_argument("--runtime", choices=("litert", "tflite-runtime", "tensorflow"),
                   help="TFLite interpreter (default: the first installed)")
    output = p.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="print a JSON list instead of the table")
    output.add_argument("--csv", action="store_true", help="print CSV (file,class_id,class,confidence) instead of the table")
    p.add_argument("images", nargs="+", metavar="IMAGE", help="image files to classify")
    p.set_defaults(func=_cmd_predict)

    p = command("export", "export a trainable builtins-only .tflite from a built-in backbone or your own Keras "
                "model (needs TensorFlow)")
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

    p = command("verify", "check that this device's interpreter computes what the exporter recorded (self-test)")
    p.add_argument("model", help="the exported model, a .tflite file")
    p.add_argument("--runtime", choices=("litert", "tflite-runtime", "tensorflow"),
                   help="TFLite interpreter (default: the first installed)")
    p.set_defaults(func=_cmd_verify)

    p = command("ops", "list a model's operators; exit 1 on Flex/custom ops")
    p.add_argument("model", help="a .tflite file")
    p.set_defaults(func=_cmd_ops)
    return parser


def _error_message(err: BaseException) -> str:
    if isinstance(err, OSError) and err.strerror:
        return f"{err.filename}: {err.strerror}" if err.filename else err.strerror
    if isinstance(err, MemoryError):
        return "out of memory"
    return str(err) or type(err).__name__


def main(argv: Sequence[str] | None = None) -> int:
    """Runs one command; a user error becomes one line on stderr and exit code 2 (--debug: with a traceback)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    debug = args.debug
    # adapt/predict show progress bars and a summary: their INFO logs only with -v; the long
    # workstation commands (pre-training, bench, ...) keep logging their progress
    level = logging.DEBUG if debug else logging.INFO if args.verbose or args.command not in QUIET_COMMANDS \
        else logging.WARNING
    logging.basicConfig(level=level, format="tflite-train: %(levelname)s: %(message)s")
    try:
        return args.func(args)
    except KeyboardInterrupt:
        print(f"tflite-train {args.command}: interrupted", file=sys.stderr)
        return 130
    except (ValueError, OSError, ImportError, MemoryError) as err:
        from tflite_train.runtime.text import printable

        if debug:
            traceback.print_exc()
        # messages name files through text.printable already; this catches any other line break
        print(f"tflite-train {args.command}: error: {printable(_error_message(err), backslash=False)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
