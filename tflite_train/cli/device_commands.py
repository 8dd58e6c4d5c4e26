"""The on-device commands (no TensorFlow): adapt, predict, show and bake."""

from __future__ import annotations

import argparse
import math
from typing import TYPE_CHECKING

from tflite_train import contract as C
from tflite_train.cli.flag_types import (MAX_BATCH, MAX_EPOCHS, MAX_ITERATIONS, MAX_SEED, MAX_STEPS, byte_budget,
                                         policy_name, ranged, rate_list, replay_budget)
from tflite_train.cli.parser import Command
from tflite_train.runtime.adaptation.protocol import DEFAULT_PROTOCOL
from tflite_train.runtime.adaptation.replay_memory import DEFAULT_REPLAY_BUDGET_BYTES
from tflite_train.runtime.text import printable

if TYPE_CHECKING:
    from tflite_train.runtime.adaptation.adapt_config import AdaptConfig

__all__ = ["register"]

ADAPT_HELP = """\
Fine-tunes an exported model (.tflite) to your own classes, on this device, with no TensorFlow.
Put a few example images of each class in a folder of its own:

  photos/cat/1.jpg  photos/cat/2.jpg ...  photos/dog/1.jpg ...

Images: PNG, JPEG, WebP, BMP, GIF (first frame), TIFF, or .npy; EXIF rotation applied, transparency
on white, centre-cropped to the model's aspect ratio and resized (bilinear); at most 50 megapixels and
64 MiB per file. Hidden files (.x, ._x) are skipped. Prints what was learned (--json: the full record)
and writes ONE file, the checkpoint OUT, which also holds the run's config and report (print them
with `tflite-train show OUT`). An earlier OUT stays untouched unless the run succeeds; while it
runs, OUT.lock keeps a second adapt into the same OUT from starting (it stops with an error).

Teach it more later: `--from OLD.ckpt` starts from an earlier checkpoint of the same model, with its
classes (matched by folder name), and adds the support folder's new classes and new images of known
ones; OLD.ckpt is only read, OUT must be another file. Each checkpoint keeps a replay memory of its
support images (their activations inside the network, under --replay-budget) that a later --from run
trains on, so the old classes are not forgotten.

Without flags it runs the default protocol: """ + DEFAULT_PROTOCOL.describe() + "."

PREDICT_HELP = """\
Classifies images with a model adapted by `adapt`; prints one row per image: file, class and the
confidence (softmax over the classes of the adapted head), as a table, --json or --csv."""

BAKE_HELP = f"""\
Ships what `adapt` learned as one plain classifier file: the exported model with the checkpoint's
trained weights and class prototypes written in as constants, and nothing else (no training
signatures, no variables). Runs on this device, with no TensorFlow.

The result maps images to class scores in one signature, '{C.CLASSIFY}': input '{C.IMAGES}' float32
[N, H, W, C] (the export's size and pixel range; the normalisation is inside the model), output
'{C.LOGITS}' float32 [N, classes] (softmax gives the confidences `predict` prints). Any TFLite runtime
runs it with its standard signature runner (Python: interpreter.get_signature_runner('{C.CLASSIFY}');
Android: Interpreter.runSignature), at least as fast as the export's {C.INFER}. The class names, the
input size and range, and the export and checkpoint it came from are in its metadata entry
'{C.BAKED_METADATA_NAME}' (JSON). OUT is written atomically: on any error nothing is written and an
earlier OUT stays as it was. A checkpoint of another model is refused."""


def adapt_config(args: argparse.Namespace) -> AdaptConfig:
    """The ``AdaptConfig`` of parsed ``adapt`` flags: the default protocol (``DEFAULT_PROTOCOL``) where a flag
    is not given."""
    from tflite_train.runtime.adaptation.adapt_config import AdaptConfig
    from tflite_train.sparse.policies import policy_spec

    layers = tuple(n.strip() for n in args.sparse_update_layers.split(",")) if args.sparse_update_layers else None
    policy = policy_spec(args.policy)
    # a static ranking without a fixed layer list: by weight norms (adapt has no meta-training Fisher tasks)
    criterion = "l2" if policy.static_ranking and layers is None else "tinytrain"
    if args.compute_budget is not None and args.compute_macs is not None:
        raise ValueError("--compute-budget and --compute-macs are two compute budgets: give one")
    if args.iterations is not None and args.epochs is not None:
        raise ValueError("--iterations and --epochs are two training lengths: give one")
    protocol = DEFAULT_PROTOCOL
    # the protocol's B_compute for the budgeted policies; the others ignore budgets (only given ones are said)
    compute_fraction = args.compute_budget if args.compute_budget is not None else (
        None if args.compute_macs is not None or not policy.budgeted else protocol.compute_fraction)
    return AdaptConfig(
        policy=args.policy, memory_bytes=math.inf if args.mem_budget is None else float(args.mem_budget),
        compute_fraction=compute_fraction, compute_macs=args.compute_macs, channel_ratio=args.channel_ratio,
        criterion=criterion, sparse_update_layers=layers,
        **(dict(iterations=args.iterations, epochs=None) if args.iterations is not None
           else dict(epochs=args.epochs or protocol.epochs)),
        batch_size=args.batch_size or protocol.batch_size,
        learning_rate=args.learning_rate if args.learning_rate is not None else protocol.learning_rate, seed=args.seed, on_empty=args.on_empty or "raise",
        augment_views=args.augment_views, cache=not args.no_cache,
        cache_memory_bytes=None if args.cache_memory is None else float(args.cache_memory),
        **{name: value for name, value in (("prototype_mode", args.prototypes), ("batch_mode", args.batch_mode),
                                           ("rate_choice", args.rate_choice), ("choice_updates", args.choice_updates),
                                           ("choice_score", args.choice_score))
           if value is not None},
    )


def _cmd_adapt(args: argparse.Namespace) -> int:
    """Adapts an exported model to an image folder on the interpreter; prints the summary (or --json)."""
    from tflite_train.runtime.adapt_job import run_adaptation
    from tflite_train.runtime.adaptation.progress import terminal_progress
    from tflite_train.runtime.adaptation.summary import adapt_record, format_adapt_summary

    if args.plot:
        from tflite_train.runtime.adaptation.plots import require_matplotlib

        require_matplotlib()
    config = adapt_config(args)
    report = run_adaptation(args.model, args.support, args.out, config, query_dir=args.query,
                            start_from=args.start_from, replay_budget=args.replay_budget,
                            include_optimizer=args.include_optimizer, runtime=args.runtime,
                            extra_outputs=(args.plot,) if args.plot else (), max_steps=MAX_STEPS,
                            progress=terminal_progress(not args.quiet and not args.json),
                            default_memory_budget=args.mem_budget is None,
                            default_compute_budget=args.compute_budget is None and args.compute_macs is None)
    if args.plot:
        from tflite_train.runtime.adaptation.plots import plot_adaptation

        plot_adaptation(report, args.plot)
        report["plot"] = args.plot
    print(adapt_record(report) if args.json else format_adapt_summary(report))
    if args.plot and not args.json:
        print(f"  plot        {printable(args.plot)}")
    return 0


def _cmd_predict(args: argparse.Namespace) -> int:
    """Prints file, class and confidence per image (a table, --json or --csv)."""
    from tflite_train.runtime.adapt_job import run_prediction
    from tflite_train.runtime.adaptation.progress import terminal_progress
    from tflite_train.runtime.adaptation.summary import format_predictions

    rows = run_prediction(args.model, args.checkpoint, args.images, runtime=args.runtime,
                          progress=terminal_progress(not args.quiet))
    print(format_predictions(rows, "json" if args.json else "csv" if args.csv else "table"))
    return 0


def _cmd_show(args: argparse.Namespace) -> int:
    """Prints the summary (or --json: config and report) stored in a checkpoint by `adapt`."""
    import json

    from tflite_train.runtime.adapt_job import run_record
    from tflite_train.runtime.adaptation.summary import format_adapt_summary

    record = run_record(args.checkpoint)
    if args.json:
        print(json.dumps(record, indent=2, sort_keys=True, ensure_ascii=True))
    else:
        print(format_adapt_summary(record["report"]))
    return 0


def _cmd_bake(args: argparse.Namespace) -> int:
    """Writes the baked classifier and prints what was written."""
    from tflite_train.runtime.baked.bake_job import run_bake

    print(run_bake(args.model, args.checkpoint, args.out).describe())
    return 0


def register(command: Command) -> None:
    """Adds adapt, predict, show and bake."""
    p = command("adapt", "fine-tune an exported model to your image folder, on this device (no TensorFlow)", ADAPT_HELP)
    p.add_argument("--model", required=True, metavar="FILE.tflite", help="the exported model")
    p.add_argument("--support", required=True, metavar="DIR", help="training images: DIR/<class>/<image>, 2 classes or more")
    p.add_argument("--query", metavar="DIR", help="optional test images DIR/<class>/<image> (support classes) to report accuracy on")
    p.add_argument("--out", required=True, help="checkpoint file to write (it holds the run's config and report too)")
    p.add_argument("--from", dest="start_from", metavar="CKPT",
                   help="continue from this earlier checkpoint of the same model: keep its classes (matched by "
                        "folder name) and weights, add the support folder's new classes and images (one class "
                        "is enough), train on its replay memory too, and write --out (a different file; CKPT is "
                        "only read). With a replay memory, only the layers above the memory's cut can be "
                        "updated (the stored activations come from the layers below it)")
    p.add_argument("--replay-budget", type=replay_budget, default=DEFAULT_REPLAY_BUDGET_BYTES, metavar="SIZE",
                   help="most bytes of replay memory the checkpoint keeps: activations of support images at the "
                        "cached cut, chosen class-balanced, most recent first: each kept image's plain view, then "
                        "as many of the augmented views it was trained on as the budget holds; a later --from run "
                        "trains on them. 0 = none (a --from run then neither trains on the old memory nor keeps "
                        "one, and the old classes keep their stored prototypes while the network moves) (default: "
                        "1MiB, 85 activations on the default Lite0 @128: 17 images with 4 views each, or up to 85 "
                        "images with their plain views only)")
    p.add_argument("--policy", type=policy_name, default="tinytrain",
                   help="which weights to update: none (prototypes only) | last_layer | full_train | sparse_update "
                        "(static: --sparse-update-layers, else layers ranked by weight norm) | tinytrain (this task's "
                        "Fisher information, under the budgets)")
    p.add_argument("--mem-budget", type=byte_budget, metavar="SIZE",
                   help="B_mem: peak memory of the backward pass per image (paper appendix A.4: the weights being "
                        "updated, their optimizer state, and the inference buffer, which also holds the saved "
                        "activations; frozen weights not counted), in bytes with a unit: 1MiB, 512KiB, 1.5MB, or "
                        "'unlimited' (default: the paper's 1 MiB for MCUNet at 128 px, scaled by this model's "
                        "LastLayer backward memory; when that budget and the default --compute-budget admit none of "
                        "the model's candidate layers alone (at --channel-ratio, --batch-size), the bounds you did "
                        "not give are raised just enough to admit the candidate that needs the least raise, so the "
                        "defaults always train a layer: 1 MiB for MCUNet@128 and 4.005 MiB for the default "
                        "Lite0@128, as scaled; the tiny backbone at 128 px: 193.0 KiB and 1.13 M MACs raised to "
                        "384.6 KiB and 2.13 M MACs; tinytrain and sparse_update only)")
    p.add_argument("--compute-budget", type=ranged(float, 0, 100, low_open=True), metavar="FRACTION",
                   help="B_compute as a fraction of the full backward pass, i.e. of FullTrain's backward MACs per "
                         "image (every layer updated); e.g. 0.15 = 15 %% of it, 1 = no compute limit (default: the "
                         f"protocol's {DEFAULT_PROTOCOL.compute_fraction:g}, raised on a small model as --mem-budget "
                         "says; tinytrain and sparse_update only)")
    p.add_argument("--compute-macs", type=ranged(float, 0, 1e18, low_open=True), metavar="MACS",
                   help="B_compute in multiply-accumulates, instead of --compute-budget")
    p.add_argument("--channel-ratio", type=ranged(float, 0, 1, low_open=True), default=0.25, metavar="FRACTION",
                   help="fraction of each selected layer's output channels to update (sparse policies)")
    p.add_argument("--sparse-update-layers", metavar="L1,L2,...",
                   help="--policy sparse_update: layer priority list (default: rank by weight L2 norm)")
    p.add_argument("--epochs", type=ranged(int, 1, MAX_EPOCHS), metavar="PASSES",
                   help="passes over the support set: each image is seen PASSES times, augmented (default: the "
                        f"protocol's {DEFAULT_PROTOCOL.epochs}, the paper's appendix A.2)")
    p.add_argument("--iterations", type=ranged(int, 0, MAX_ITERATIONS), metavar="STEPS",
                   help="a fixed number of optimizer steps instead of --epochs")
    p.add_argument("--batch-size", type=ranged(int, 1, MAX_BATCH), metavar="IMAGES",
                   help="images per optimizer step, at most the number of support images (default: the protocol's "
                        f"{DEFAULT_PROTOCOL.batch_size})")
    p.add_argument("--learning-rate", type=ranged(float, 0, 10, low_open=True), metavar="RATE", help="optimizer step size (default: the model's)")
    p.add_argument("--seed", type=ranged(int, 0, MAX_SEED), default=0, metavar="INT", help="seed of batch order and augmentation")
    p.add_argument("--augment-views", type=ranged(int, 1, 10_000), default=4, metavar="V",
                   help="augmented views of each support image, drawn once before training; pass p over the "
                        "support set trains on view p mod V")
    p.add_argument("--prototypes", choices=("fixed", "refresh", "episode"),
                   help="class prototypes of each update: fixed (from the untrained model, set once), refresh (from "
                        "the current model before every update) or episode (inside the step, trained through as "
                        "well, P>M>F's fine-tuning; needs a model exported with episode steps and a batch within "
                        "B_mem, else refresh with a warning) (default: fixed)")
    p.add_argument("--batch-mode", choices=("batch", "accumulate"),
                   help="how --batch-size images make one update: one batched step (its backward memory counts "
                        "--batch-size images against B_mem) or their gradients accumulated image by image (the "
                        "memory of one image; needs a model exported with accumulation) (default: batch)")
    p.add_argument("--rate-choice", type=rate_list, metavar="R1,R2,...",
                   help="choose the learning rate per task: each rate fine-tunes on one support image per class "
                        "and is scored on the other support images; the best wins (0 = no update, listed first, "
                        "wins ties; tasks with one image per class get 0); 'off' = --learning-rate for every task "
                        "(default: off)")
    p.add_argument("--choice-updates", type=ranged(int, 1, MAX_ITERATIONS), metavar="N",
                   help="--rate-choice: updates per candidate rate (default: as many as the final run)")
    p.add_argument("--choice-score", choices=("accuracy", "accuracy_loss"),
                   help="--rate-choice: rank the rates by held-out accuracy (ties to the rate listed first), or "
                        "break accuracy ties by the held-out cross-entropy (default: accuracy)")
    p.add_argument("--no-cache", action="store_true",
                   help="run every step through the whole network instead of from the cached cut (the "
                        "activation below the selected layers, computed once per view; same results, slower)")
    p.add_argument("--cache-memory", type=byte_budget, metavar="SIZE",
                   help="most memory the cached cut may take, e.g. 8MiB (default: no more than the "
                        "augmented views as float32 images, which full steps read); over it, full steps")
    p.add_argument("--on-empty", choices=("raise", "empty"),
                   help="when a budget you give fits no layer: stop with an error (default), or keep the prototypes "
                        "only (the default budgets always fit a layer)")
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

    p = command("show", "print what an adapt run stored in its checkpoint: the summary, or its config and report")
    p.add_argument("checkpoint", help="checkpoint written by `adapt --out`")
    p.add_argument("--json", action="store_true", help="print the config and the full report as JSON")
    p.set_defaults(func=_cmd_show)

    p = command("bake", "write a plain classifier .tflite from a model and its checkpoint (no TensorFlow)", BAKE_HELP)
    p.add_argument("--model", required=True, metavar="FILE.tflite", help="the exported model the checkpoint was adapted from")
    p.add_argument("--checkpoint", required=True, help="checkpoint written by `adapt --out`")
    p.add_argument("--out", required=True, metavar="FILE.tflite", help="the classifier file to write")
    p.set_defaults(func=_cmd_bake)
