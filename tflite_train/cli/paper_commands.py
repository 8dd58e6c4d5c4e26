"""Commands that reproduce the paper on a workstation: backbones, bench, cost-report, demo, golden."""

from __future__ import annotations

import argparse
import importlib
import types

from tflite_train.architectures import BACKBONES, PAPER_BACKBONES
from tflite_train.cli.parser import Command
from tflite_train.cli.tf_logging import quiet_tensorflow
from tflite_train.cli.training_commands import setup_tf

__all__ = ["register"]


def _repository_module(command: str, name: str) -> types.ModuleType:
    """Imports ``name`` (``bench``, ``tools.golden``): a folder of the repository that the installed package does
    not hold, importable where the checkout's root is on the path (``python -m tflite_train.cli`` run there).

    Raises:
      ImportError: ``name`` is not importable here; one line saying where ``command`` runs.
    """
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as err:
        top = name.partition(".")[0]
        if err.name not in (top, name):
            raise
        raise ImportError(f"{command} needs the repository's {top}/ folder, which is not installed with the package: run "
                          f"python -m tflite_train.cli {command} ... from the root of a checkout") from None


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
    quiet_tensorflow(args.verbose or args.debug)
    from tflite_train.demo import DemoConfig, run_demo

    overrides = {k: v for k, v in (("target", args.target), ("seed", args.seed), ("out", args.out),
                                   ("cache", args.cache), ("policy", args.policy)) if v is not None}
    run_demo(DemoConfig(**overrides))
    return 0


def _cmd_golden(args: argparse.Namespace) -> int:
    """Writes the Java golden vectors (TensorFlow-free)."""
    paths = _repository_module("golden", "tools.golden").write_vectors(args.out)
    print(f"wrote {len(paths)} golden files to {args.out}")
    return 0


def _cmd_bench(args: argparse.Namespace) -> int:
    """Runs the benchmarks (needs TensorFlow for the exports and the TF-recipe peer)."""
    import dataclasses
    import shlex

    _repository_module("bench", "bench")
    from bench import BenchConfig, render_saved, run_benchmarks
    from bench.config import LITE0_128, MCUNET_64, PRESETS, preset_config

    if args.render_only:
        print(f"wrote {render_saved(args.out)}")
        return 0
    if args.quick and args.preset not in (None, "quick"):
        raise ValueError(f"--quick and --preset {args.preset} are two presets: give one")
    setup_tf(args)
    preset = "quick" if args.quick else args.preset
    runs = {"mcunet": dataclasses.replace(MCUNET_64, weights=args.weights or None,
                                          baseline_weights=args.mcunet_baseline_weights or None),
            "lite0": dataclasses.replace(LITE0_128, weights=args.lite0_weights or LITE0_128.weights)}
    by_key = {MCUNET_64.key: "mcunet", LITE0_128.key: "lite0"}
    paired = args.paired or [by_key[b.key] for b in PRESETS.get(preset, {}).get("backbones", BenchConfig.backbones)]
    given = dict(
        cache_dir=args.cache, size_caches=tuple(args.size_cache) if args.size_cache else None, out_dir=args.out, model_dir=args.model_dir, backbone=args.backbone,
        input_size=args.input_size, weights=args.weights or None, candidate_blocks=args.candidate_blocks,
        targets=tuple(args.target) if args.target else None, tasks=args.tasks, seed=args.seed, max_ways=args.max_ways,
        max_support_total=args.max_support_total, max_support_per_class=args.max_support_per_class,
        epochs=None if args.epochs == 0 else args.epochs, iterations=args.iterations,
        learning_rates=tuple(args.learning_rates) if args.learning_rates else None,
        epochs_grid=tuple(args.epochs_grid) if args.epochs_grid else None, tuning_tasks=args.tuning_tasks,
        validation_fraction=args.validation_fraction, full_train_batch=args.full_train_batch,
        halving_rounds=tuple(args.halving_rounds) if args.halving_rounds is not None else None,
        halving_eta=args.halving_eta, procedure_tasks=args.procedure_tasks, continual_tasks=args.continual_tasks,
        continual_epochs=args.continual_epochs,
        ablation_target=args.ablation_target, ablation_tasks=args.ablation_tasks, timing_runs=args.timing_runs,
        tf_recipe=False if args.no_tf_recipe else None, threads=args.threads, workers=args.workers,
        sections=tuple(args.section) if args.section else None,
        backbones=tuple(runs[name] for name in dict.fromkeys(paired)),
    )
    fields = {k: v for k, v in given.items() if v is not None}
    config = preset_config(preset, **fields)
    report = run_benchmarks(config, command="tflite-train " + shlex.join(args.argv), update=args.update)
    print(f"wrote {report}")
    return 0


def register(command: Command) -> None:
    """Adds backbones, bench, cost-report, demo and golden."""
    p = command("backbones", "print the layer tables and cost summaries of the backbones")
    p.add_argument("--backbone", action="append", choices=sorted(BACKBONES), help="repeatable (default: the paper's three)")
    p.add_argument("--input-size", type=int, default=128, help="input side in pixels")
    p.add_argument("--in-channels", type=int, default=3, help="input channels")
    p.add_argument("--totals-only", action="store_true", help="only the totals, no per-layer table")
    p.set_defaults(func=_cmd_backbones)

    p = command("bench", "regenerate the paper's tables and figures: BENCHMARKS.md + PNGs (in a checkout of the "
                "repository)")
    p.add_argument("--quick", action="store_true",
                   help="a reduced run of every section, about an hour (N=3 tasks per target, 1 validation task "
                        "per target, rates 1e-4 1e-3, 3 epochs, 3 ablation tasks); other flags override it")
    p.add_argument("--preset", choices=("quick", "powered"), default=None,
                   help="'powered': the default backbone only (Lite0@128, meta-trained), N=60 test tasks on every "
                        "target of the cache (<= 25 support images), (lr, passes) by successive halving on 5 validation tasks "
                        "per target; "
                        "resumable (rerun the same command); other flags override it; 'quick' = --quick")
    p.add_argument("--cache", default="build/data_cache", help="data cache (tflite-train data prepare); its "
                   "'target' data sets are the targets, incl. any ImageFolder added with data prepare --folder NAME=PATH")
    p.add_argument("--size-cache", action="append", metavar="DIR",
                   help="the same data sets at another image size (data prepare --image-size), repeatable; each "
                        "backbone reads the smallest cache at or above its input size, never an upscaled one "
                        "(default: build/data_cache_128, made by `make data`)")
    p.add_argument("--out", default="bench/results", help="output folder (BENCHMARKS.md, PNGs, results/config JSON)")
    p.add_argument("--model-dir", default="build/bench/models", help="exported models (reused when up to date)")
    p.add_argument("--paired", action="append", choices=("mcunet", "lite0"),
                   help="backbones of the paired accuracy tables, repeatable (default: both: MCUNet@64 and "
                        "EfficientNet-Lite0@128)")
    p.add_argument("--lite0-weights", default=None,
                   help="meta-trained EfficientNet-Lite0 weights (.weights.h5) for the Lite0 table (default: the shipped "
                        "weights/efficientnet_lite0/lite0_128_meta.weights.h5); 'imagenet': every Lite0 row runs on the ImageNet weights and the meta-training "
                        "delta is not measured")
    p.add_argument("--weights", default="weights/mcunet_64_meta.weights.h5",
                   help="meta-trained MCUNet weights (the MCUNet table and the timing/ablation sections); '' = seeded init")
    p.add_argument("--mcunet-baseline-weights", default="weights/meta_ablation/pretrain.weights.h5",
                   help="MCUNet weights without meta-training (the 'TinyTrain without meta-training' row); '' = none")
    p.add_argument("--backbone", choices=sorted(BACKBONES), default="mcunet",
                   help="network of the timing and ablation sections")
    p.add_argument("--input-size", type=int, default=64, help="input side in pixels of the timing and ablation sections")
    p.add_argument("--candidate-blocks", type=int, default=7, help="trainable blocks (from the end) of the export")
    p.add_argument("--target", action="append", help="repeatable (default: every target of the cache)")
    p.add_argument("--tasks", type=int, default=None,
                   help="N test tasks per target (default 20; --quick 3; --preset powered 60)")
    p.add_argument("--seed", type=int, default=1234, help="random seed (tasks and the validation/test split)")
    p.add_argument("--max-ways", type=int, default=10, help="classes per task, at most")
    p.add_argument("--max-support-total", type=int, default=None,
                   help="support images per task, at most (default 50; --preset powered 25)")
    p.add_argument("--max-support-per-class", type=int, default=10, help="support images per class, at most")
    p.add_argument("--learning-rates", type=float, nargs="+", default=None,
                   help="candidate Adam rates (default 1e-4 3e-4 1e-3 3e-3); with --epochs-grid, each policy's pair is "
                        "chosen on validation-pool tasks")
    p.add_argument("--epochs-grid", type=int, nargs="+", default=None,
                   help="candidate passes over each support set (default 5 20 40)")
    p.add_argument("--tuning-tasks", type=int, default=None,
                   help="validation tasks per target of the last successive-halving round (default 5; --quick 1)")
    p.add_argument("--halving-rounds", type=int, nargs="*", default=None,
                   help="validation tasks per target of each successive-halving round before the last (default 2; "
                        "none: every setting on every validation task)")
    p.add_argument("--halving-eta", type=int, default=None,
                   help="each round but the last keeps the best 1/eta of its settings (default 3)")
    p.add_argument("--validation-fraction", type=float, default=None,
                   help="share of each target's images (or classes, for targets with >= 40) kept for validation "
                        "(default 0.3)")
    p.add_argument("--epochs", type=int, default=40,
                   help="passes over each support set in the timing and ablation sections; 0 = --iterations steps")
    p.add_argument("--iterations", type=int, default=40, help="steps per task when --epochs 0")
    p.add_argument("--full-train-batch", type=int, default=None,
                   help="batch of the FullTrain baseline, images (default 1, as the other policies)")
    p.add_argument("--ablation-target", default=None, help="target of the ablations (default: the first)")
    p.add_argument("--ablation-tasks", type=int, default=None, help="tasks per ablation (default 20; --quick 3)")
    p.add_argument("--timing-runs", type=int, default=None, help="repetitions of each timing (default 3; --quick 1)")
    p.add_argument("--no-tf-recipe", action="store_true", help="skip the TF-recipe (Flex) timing peer")
    p.add_argument("--section", action="append",
                   choices=("procedure", "accuracy", "int8", "continual", "backward_cost", "timing", "ablations",
                            "plots"),
                   help="repeatable (default: all but int8, which exports an int8 model per backbone run and pairs "
                        "it with the accuracy section's tasks: add it with --update --section int8, and continual); "
                        "procedure: TinyTrain under each fine-tuning procedure on validation tasks, which decides the "
                        "defaults; continual: adding classes to a checkpoint (adapt --from, with and without replay) "
                        "against adapting from scratch, on the test pool")
    p.add_argument("--procedure-tasks", type=int, default=None,
                   help="validation tasks per target of the procedure section (default 20; --quick 2)")
    p.add_argument("--continual-tasks", type=int, default=None,
                   help="tasks per target of the continual section (default 10; 7 adaptations and 2 prototype-only "
                        "additions each)")
    p.add_argument("--continual-epochs", type=int, default=None,
                   help="passes over each support set in the continual section (default: the adaptation protocol's)")
    p.add_argument("--threads", type=int, default=1, help="interpreter/TF threads per worker")
    p.add_argument("--workers", type=int, default=1,
                   help="processes for the accuracy and ablation tasks (results do not depend on it)")
    p.add_argument("--update", action="store_true",
                   help="rerun only the --section(s) of --out's finished run, keeping its other sections (same settings)")
    p.add_argument("--render-only", action="store_true",
                   help="re-render BENCHMARKS.md and the PNGs from --out's saved results (also of an unfinished run: "
                        "N done per cell)")
    p.set_defaults(func=_cmd_bench)

    p = command("cost-report", "MCUNet backward-pass costs beside the paper's Tables 2 and 6")
    p.add_argument("--input-size", type=int, default=128, help="input side in pixels")
    p.set_defaults(func=_cmd_cost_report)

    p = command("demo", "the README's main job: export the shipped weights, adapt on a new task")
    p.add_argument("--target", help="cross-domain data set of the cache (default: fashion_mnist)")
    p.add_argument("--policy", help="adaptation policy (default: tinytrain)")
    p.add_argument("--seed", type=int, help="random seed (default: the demo's)")
    p.add_argument("--cache", help="data cache folder, prepared at the model's input size if missing "
                   "(default: build/data_cache_128)")
    p.add_argument("--out", help="output folder (default: build/demo)")
    p.set_defaults(func=_cmd_demo)

    p = command("golden", "write the golden vectors that pin the Java core to the Python cost model (in a checkout "
                "of the repository)")
    p.add_argument("--out", default="android_demo/core/src/test/resources/golden", help="output folder")
    p.set_defaults(func=_cmd_golden)
